"""Thin Prefect tasks: one unit of work each, with the settings that keep DP safe.

A task that reads raw data or draws noise is declared with :func:`sensitive_task`: the options of
:data:`SENSITIVE` (no retries: a retry would draw fresh noise; no cache and no persisted result:
Prefect's result storage would keep whatever the task returns), and the mark ``dp_sensitive`` so
that a test can walk every task and check its settings. Raw data never crosses a task boundary:
tasks pass paths, plans and noisy results.

The mark is an attribute of the task object, not a Prefect tag: Prefect acquires a concurrency
slot lease from its API for every tag of every task run, a round trip that took up to 2 s per task
on the embedded server (a quarter of an Adult release), with no concurrency limit to enforce.
"""

from __future__ import annotations

import functools
import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from dprelease.dp.accounting.processes import fault_point
from dprelease.dp.errors import DPReleaseError, StageFailed

if TYPE_CHECKING:
    from prefect import Task

__all__ = ["PUBLIC", "SENSITIVE", "DPReleaseError", "StageFailed", "guard_raw_errors", "is_sensitive", "mark_sensitive",
           "public_task", "sensitive_task", "steward_area"]

SENSITIVE_MARK = "dp_sensitive"
"""The attribute set to True on every task that reads raw data, draws noise or writes the ledger."""

SENSITIVE: dict[str, Any]
"""Task options for anything that reads raw data, draws noise or writes the ledger: no retries, Prefect's
``NO_CACHE`` policy, no persisted result."""

PUBLIC: dict[str, Any]
"""Task options for post-processing: no caching either (results are cheap and release-specific)."""


def __getattr__(name: str) -> dict[str, Any]:
    """:data:`SENSITIVE` and :data:`PUBLIC`, made on first use: importing the package imports no Prefect.

    Reading a file (``tasks.tables``, the preflight, ``dprelease check``) then costs no Prefect import;
    declaring a task does.
    """
    if name in ("SENSITIVE", "PUBLIC"):
        from prefect.cache_policies import NO_CACHE

        options = {"retries": 0, "cache_policy": NO_CACHE, "persist_result": False}
        globals()[name] = options
        return options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


T = TypeVar("T", bound="Task[Any, Any]")
P = ParamSpec("P")
R = TypeVar("R")


def mark_sensitive(made: T) -> T:
    """Mark a task as reading raw data or drawing noise (see :func:`is_sensitive`); returns it."""
    setattr(made, SENSITIVE_MARK, True)
    return made


def is_sensitive(candidate: object) -> bool:
    """Whether a task carries the ``dp_sensitive`` mark."""
    return getattr(candidate, SENSITIVE_MARK, False) is True


_STEWARD_AREA: list[Path] = []
"""The steward-only folder of the release under way (innermost last), where stage failures are written."""


@contextmanager
def steward_area(path: Path) -> Iterator[Path]:
    """Route the full text of stage failures to ``path`` (steward-only) while the block runs."""
    _STEWARD_AREA.append(path)
    try:
        yield path
    finally:
        _STEWARD_AREA.remove(path)


def _failure_folder() -> Path:
    if _STEWARD_AREA:
        return _STEWARD_AREA[-1]
    return Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve() / "steward" / "failures"


def record_failure(stage: str, text: str) -> Path | None:
    """Write a stage failure's full text, owner-only, to the steward-only area; its path, or None."""
    folder = _failure_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = folder / f"failure-{stage}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(text)
        return target
    except OSError:  # the record is a courtesy to the steward; the message-free error still stands
        return None


def _is_control_flow(err: BaseException) -> bool:
    """Prefect's own signals (cancellation, pause, abort) pass through untouched."""
    return type(err).__module__.split(".")[0] == "prefect"


def guard_raw_errors(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a function that handles raw rows so that nothing it raises carries a message out.

    An expected :class:`DPReleaseError` (a message built from public values) is re-raised without its
    cause or context (a library's exception chained to it could hold a value). Any other exception,
    the project's own or a library's (pyarrow, numpy, pandas, Great Expectations), is written in full
    to the steward-only area and replaced by a message-free :class:`StageFailed` naming the stage and
    the exception type, raised outside the handler so that it has no context to print or pickle.
    """

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        kind = ""
        try:
            return function(*args, **kwargs)
        except DPReleaseError as err:
            err.__cause__ = None
            err.__context__ = None
            err.__suppress_context__ = True
            raise
        except StageFailed:
            raise
        except Exception as err:
            if _is_control_flow(err):
                raise
            kind = type(err).__name__
            record_failure(stage, "".join(traceback.format_exception(err)))
        raise StageFailed(stage, kind)

    return guarded


def announce(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Log one line when a stage starts and one when it ends (with its duration): signs of life."""

    @functools.wraps(function)
    def announced(*args: Any, **kwargs: Any) -> Any:
        from prefect import get_run_logger
        from prefect.exceptions import MissingContextError

        try:
            logger: Any = get_run_logger()
        except MissingContextError:
            return function(*args, **kwargs)
        logger.info("stage %s started", stage)
        start = time.monotonic()
        outcome = function(*args, **kwargs)
        logger.info("stage %s finished in %.1f s", stage, time.monotonic() - start)
        fault_point(f"after_stage:{stage}")
        return outcome

    return announced


def public_task(name: str) -> Callable[[Callable[P, R]], Task[P, R]]:
    """``@task(name=name, **PUBLIC)`` with start and end lines: the decorator of post-processing tasks."""

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        from prefect import task

        from dprelease.tasks import PUBLIC

        return cast("Task[P, R]", task(name=name, **PUBLIC)(announce(name, function)))

    return decorate


def sensitive_task(name: str) -> Callable[[Callable[P, R]], Task[P, R]]:
    """``@task(name=name, **SENSITIVE)``, marked as sensitive: the decorator of every raw-data task.

    The task's function is wrapped by :func:`guard_raw_errors`: what it raises reaches Prefect's
    logs, states and result storage as a message-free error (or a public :class:`DPReleaseError`).
    """

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        from prefect import task

        from dprelease.tasks import SENSITIVE

        made = task(name=name, **SENSITIVE)(announce(name, guard_raw_errors(name, function)))
        return cast("Task[P, R]", mark_sensitive(made))

    return decorate
