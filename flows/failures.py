"""How a command that ended with an exception says so: its exit code and its one line on stderr.

Codes (the words are :data:`flows.cli.EXIT_CODES` and README.md's table): 0 passed or published, 1 an unexpected
failure, 2 a usage, spec, schema or input error (caught before anything is reserved), 3 refused by the ledger.
"""

from __future__ import annotations

import errno
import os

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3

SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                           errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EFBIG})
"""The operating system's refusals a steward can act on (a full disk or quota, a read-only or unwritable folder,
an input/output error, too many open files, no memory, a file too large): named with their path, not as
\"unexpected\"."""


def one_line(err: BaseException) -> str:
    """An expected error's message on one line (messages are built from public values)."""
    return " ".join(str(err).split())


def exit_code(err: BaseException) -> int:
    """The exit code for an exception that ended a command (see :data:`flows.cli.EXIT_CODES`)."""
    from dprelease.dp.errors import BudgetExceededError, DPReleaseError, InternalError, LedgerError, ReleaseError

    if isinstance(err, (BudgetExceededError, LedgerError)):
        return EXIT_REFUSED
    if isinstance(err, DPReleaseError):
        return EXIT_FAIL if isinstance(err, ReleaseError | InternalError) else EXIT_USAGE
    return EXIT_FAIL


def describe_failure(err: BaseException, command: str = "") -> str:
    """One line for the terminal: the public message of an expected error, else only the exception's type.

    An unexpected exception may come from code that handled raw rows, so its text is never printed
    here (``--debug`` prints the traceback for a steward at their own terminal). An operating system's
    refusal (:data:`SYSTEM_ERRNOS`) is told by its code's standard wording and the path it names, never by
    the exception's text; a stage that handles raw rows wraps whatever it raises (``StageFailed``) first.
    """
    from dprelease.dp.errors import BudgetExceededError, DPReleaseError, LedgerError, StageFailed

    if isinstance(err, BudgetExceededError):
        return f"refused by the budget: {one_line(err)}"
    if isinstance(err, LedgerError):
        return f"refused by the ledger: {one_line(err)}"
    if isinstance(err, (DPReleaseError, StageFailed)):
        return one_line(err)
    if isinstance(err, OSError) and err.errno in SYSTEM_ERRNOS:
        where = f" at {err.filename}" if isinstance(err.filename, str) else ""
        again = ("; whatever this release drew stays booked: run it again with the same --release-id and it is "
                 "replayed, not drawn again") if command == "release" else ""
        return f"the system refused{where}: {os.strerror(err.errno)}{again}"
    return f"unexpected failure ({type(err).__name__}); run with --debug for the traceback"
