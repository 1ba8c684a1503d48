"""The ``dprelease`` command line.

``dprelease release SPEC``   run a release on the embedded Prefect API and print where it went;
``dprelease plan SPEC``      print the budget plan (reads no data);
``dprelease check SCHEMA DATA``  validate a table against a schema (the CI data-quality gate):
exit 0 when the data passes, 1 when it fails the schema, 2 on a usage or schema error;
``dprelease verify RELEASE_DIR``  check every public file against the manifest (exit 1 on a mismatch);
``dprelease report RELEASE_DIR``  re-render ``audit.html`` and ``audit.md`` from ``audit.json``.

Exit codes of ``release`` (see :data:`EXIT_CODES`): 0 published (or already published and intact),
1 an unexpected failure, 2 a usage, spec, schema or input error (caught before anything is
reserved), 3 refused by the ledger (the budget does not allow it, or the ledger's state forbids it).
Every expected failure is one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import cast

from dprelease.flows.failures import (
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_REFUSED,
    EXIT_USAGE,
    describe_failure,
    exit_code,
    one_line,
)
from dprelease.flows.settings import (
    CHECK_DEFERRED_MODULES,
    DEFERRED_MODULES,
    client_needs_no_sql,
    configure,
    defer_imports,
    exit_now,
    hold_gc,
    state_dir,
    without_sql,
)

EXIT_CODES = {
    EXIT_PASS: "published (or already published and intact); for check: the data passes",
    EXIT_FAIL: "an unexpected failure (a stage failed; details in the steward-only area); for check: the data fails",
    EXIT_USAGE: "a usage, spec, schema or input error, caught before any budget is reserved",
    EXIT_REFUSED: "refused by the ledger: the budget does not allow it, or the ledger's state forbids it",
}
"""What each exit code of ``dprelease`` means (the same words are in README.md)."""

GATE_NOTE = ("note: this check is not differentially private (a rule's outcome says something about the rows); "
             "keep its output in the steward's CI, not in public logs")


class _Version(argparse.Action):
    """``--version``: the package version and the commit it was built from (asked of git only when used)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        import dprelease

        print(f"dprelease {dprelease.__version__} (commit {dprelease.commit()})")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dprelease", description="Differentially private synthetic-data releases.",
        epilog="exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items()))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of failures (steward's terminal only)")
    parser.add_argument("--version", action=_Version, help="print the version and the code commit, and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks of failures (steward's terminal only)")
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", parents=[common], help="run a release described by a spec")
    rel.add_argument("spec", help="release spec (YAML)")
    rel.add_argument("--out", default="releases", help="output folder (default: ./releases)")
    rel.add_argument("--ledger", default=None, help="privacy ledger (default: ./.dprelease/ledger.sqlite)")
    rel.add_argument("--release-id", default=None, type=_release_id,
                     help="release id: letters, digits, '_', '-', '.' (default: a fresh one)")
    rel.add_argument("--internal", default=None, metavar="DIR",
                     help="steward-only root, outside --out (default: the spec's internal:, else .dprelease/internal)")
    rel.add_argument("--dask", default=None, metavar="ADDRESS",
                     help="count row groups on the Dask cluster at this scheduler address (wins over the spec's dask)")
    plan = sub.add_parser("plan", parents=[common],
                          help="print the budget plan of a spec without reading data")
    plan.add_argument("spec", help="release spec (YAML); its schema is read, never the data")
    plan.add_argument("--ledger", default=None, help="show the dataset's position in this ledger too")
    check = sub.add_parser("check", parents=[common],
                           help="validate a table against a schema (exit 0 pass, 1 fail, 2 error); non-private: "
                                "its results belong in the steward's CI, not in public logs")
    check.add_argument("schema", help="table schema (YAML) written from public knowledge")
    check.add_argument("data", help="the table: a Parquet file or a folder of Parquet files")
    check.add_argument("--summary", default=None, help="write a JSON summary here (no data values)")
    check.add_argument("--junit", default=None, help="write a JUnit XML report here (no data values)")
    verify = sub.add_parser("verify", parents=[common],
                            help="check a release folder against its manifest (exit 1 on a mismatch)")
    verify.add_argument("release_dir", help="a published release folder (holding manifest.json)")
    report = sub.add_parser("report", parents=[common],
                            help="re-render audit.html (and audit.md) of a release from its audit.json")
    report.add_argument("release_dir", help="a published release folder (holding audit.json)")
    ldp = sub.add_parser("ldp-collect", parents=[common],
                         help="decode a local-DP collection's batches of randomised reports and publish estimates")
    ldp.add_argument("spec", help="collection spec (YAML): protocol, epsilon or RAPPOR parameters, values, batches")
    ldp.add_argument("--out", default="releases-ldp", help="output folder (default: ./releases-ldp)")
    ldp.add_argument("--registry", default=None,
                     help="registry of collections and their fixed parameters (default: ./.dprelease/ldp.sqlite)")
    ldp.add_argument("--run-id", default=None, type=_release_id, help="id of this run (default: the UTC time)")
    ledger = sub.add_parser("ledger", parents=[common], help="the steward's view of the privacy ledger")
    ledger.add_argument("action", choices=["show", "verify", "abandon"],
                        help="show: datasets and releases; verify: the hash chain and head; abandon: close an "
                             "open release as failed (what it drew stays booked)")
    ledger.add_argument("release_id", nargs="?", default=None, type=_release_id,
                        help="the release to abandon (abandon only)")
    ledger.add_argument("--ledger", default=None, help="privacy ledger (default: ./.dprelease/ledger.sqlite)")
    return parser


def _release_id(value: str) -> str:
    """The argparse type of ``--release-id``: an identifier, refused before anything starts (exit 2)."""
    from dprelease.schemas.identifiers import IdentifierError, check_identifier

    try:
        return check_identifier("release id", value)
    except IdentifierError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _default_ledger(value: str | None) -> str:
    return value or str(state_dir() / "ledger.sqlite")


def _preload() -> threading.Thread:
    """Import the later stages' heavy libraries in a thread while Prefect starts its embedded API.

    Great Expectations (validation) takes about two seconds to import,
    inside the flow; the embedded API's start keeps this process waiting for several seconds first.
    A stage that imports one of them waits for the import under way (Python's per-module import
    lock); a failed preload costs nothing but the time it meant to save.
    """

    def work() -> None:
        try:
            from dprelease.quality.validation import preload_great_expectations

            preload_great_expectations()
            # What Prefect imports only once the flow run is created (its parameters' encoder, its flow
            # graphs, the flow and task engines): imported here while the embedded API boots, not after.
            import fastapi.encoders  # noqa: F401
            import prefect.flow_engine
            import prefect.task_engine
            import prefect.utilities.visualization  # noqa: F401
        except Exception:
            pass

    thread = threading.Thread(target=work, name="dprelease-preload", daemon=True)
    thread.start()
    return thread


class _QuietFailures(logging.Filter):
    """Keep Prefect's console free of tracebacks: the command prints one line per failure itself.

    Error records of the engine (a task or flow run that failed) are dropped from the terminal and
    every other record loses its traceback; the records still reach Prefect's API as they are.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.name.startswith("prefect"):
            return False
        record.exc_info = None
        record.exc_text = None
        return True


def _quiet_prefect_console() -> None:
    """Attach :class:`_QuietFailures` to every console handler (Prefect's is the root logger's)."""
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in logging.root.manager.loggerDict
                                        if n.startswith("prefect"))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler) \
                    and not any(isinstance(f, _QuietFailures) for f in handler.filters):
                handler.addFilter(_QuietFailures())


def cmd_release(args: argparse.Namespace) -> int:
    """Run the release flow on the embedded Prefect API.

    The embedded API is spawned first and boots while the preflight (spec, schema, data files, folders, ledger,
    Dask scheduler) runs: a mistake the preflight catches stops it, costs no budget and takes seconds.
    """
    from dprelease.flows.settings import settle_gc, spawn_embedded_server, without_heartbeats

    started = time.monotonic()
    server = spawn_embedded_server()  # boots while the inputs are checked and the stages imported
    try:
        from dprelease.tasks.preflight import preflight

        ledger = _default_ledger(args.ledger)
        spec = preflight(args.spec, args.out, ledger, args.dask, args.release_id, args.internal)
    except BaseException:
        if server is not None:
            server.stop()
        raise
    preload = _preload()
    try:
        from dprelease.flows.release import release

        if not args.debug:
            _quiet_prefect_console()
        if server is not None:
            server.wait()
        settle_gc()
        with without_heartbeats(server is not None):
            target = release(spec=args.spec, out=args.out, ledger=ledger, release_id=args.release_id,
                             dask=args.dask, internal=args.internal)
    finally:
        preload.join()
    print(f"\nRelease published in {time.monotonic() - started:.1f} s: {target}")
    for name in ("synthetic", "marginals", "audit.html", "audit.md", "audit.json", "manifest.json"):
        suffix = {"audit.html": "   (the privacy audit report: open it in a browser)"}.get(name, "")
        print(f"  {Path(target) / name}{suffix}")
    from dprelease.tasks.preflight import steward_root

    steward = steward_root(spec, args.internal) / spec.dataset / Path(target).name
    print(f"  {steward}   (steward only, outside the public folder: validation, row handling, internal report)")
    return EXIT_PASS


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan; reads the spec and schema only."""
    from dprelease.dp.accounting.ledger import Ledger
    from dprelease.dp.errors import LedgerError
    from dprelease.schemas.plan import plan_release
    from dprelease.schemas.spec import load_spec

    spec = load_spec(args.spec)
    plan = plan_release(spec, "<new>", spec.seed or 0)
    print("\n".join(plan.lines()))
    ledger_path = Path(_default_ledger(args.ledger))
    if ledger_path.exists():
        with Ledger.open(ledger_path) as ledger:
            try:
                status = ledger.status(spec.dataset)
            except LedgerError:
                print(f"ledger {ledger_path}: no releases of {spec.dataset!r} yet")
                return EXIT_PASS
        fits = "fits" if plan.total.amount <= status.remaining else "does NOT fit"
        print(f"ledger {ledger_path}: {status.unit} cap {float(status.cap):.6g}, spent {float(status.spent):.6g}, "
              f"remaining {float(status.remaining):.6g}: this release {fits}")
    return EXIT_PASS


def cmd_check(args: argparse.Namespace) -> int:
    """Validate DATA against SCHEMA; print failed rules (column and rule, never values).

    ``--summary`` writes the outcome as JSON, ``--junit`` as JUnit XML with one testcase per
    column and rule (the column's structure, then each value check of the schema's suite).
    """
    # Nothing here imports Prefect (the gate runs no flow): about a second saved on every check.
    from dprelease.flows.settings import settle_gc
    from dprelease.quality.validation import preload_great_expectations, structural_problems, validate_batches
    from dprelease.reports.junit import junit_report
    from dprelease.schemas.model import SchemaError
    from dprelease.schemas.table import load_schema
    from dprelease.tasks.tables import InputError, check_writable, dataset_schema, row_groups

    data = Path(args.data)
    suite_name = f"{data.name} against {Path(args.schema).name}"
    inputs = {Path(args.schema).resolve(): "the schema", data.resolve(): "the data"}
    for option, target in (("--summary", args.summary), ("--junit", args.junit)):
        if target is not None:  # before validating: a report that cannot be written must not read as "fails"
            if (found := Path(target).resolve()) in inputs or data.resolve() in found.parents:
                raise InputError(f"{option} {target}: is {inputs.get(found, 'inside the data folder')}; a report "
                                 "never overwrites an input or another report")
            inputs[found] = f"the {option} report"
            if Path(target).is_dir():
                raise InputError(f"{option} {target}: is a folder, not a file")
            if not Path(target).resolve().parent.is_dir():
                raise InputError(f"{option} folder {Path(target).parent}: does not exist")
            check_writable(Path(target).resolve().parent, f"{option} folder")
    if data.exists() and not (data.is_file() or data.is_dir()):
        raise InputError(f"data {data.name}: must be a regular Parquet file or a folder of them (not a pipe)")
    try:
        schema = load_schema(args.schema)
        problems = structural_problems(schema, dataset_schema(data))
        if not problems:  # the value checks when the structure fits
            preload_great_expectations()
            settle_gc()  # the collector back on, the imported modules out of its scans, before any row is read
            report = validate_batches(row_groups(data, schema.names), schema, dataset_schema(data))
    except (SchemaError, InputError) as err:  # a bad schema; an unreadable file or row group: the file is bad
        if args.junit:
            stage = "schema" if isinstance(err, SchemaError) else "input"
            Path(args.junit).write_bytes(junit_report(suite_name, [(stage, "must be readable", str(err), True)]))
        if args.summary:
            summary = {"schema": str(args.schema), "data": data.name, "passed": False, "error": one_line(err)}
            Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        if isinstance(err, SchemaError):
            raise
        print(f"dprelease check: {err}", file=sys.stderr)
        return EXIT_USAGE
    # One structure testcase per declared column, then the value checks.
    unsound = {p.column: str(p) for p in problems}
    cases: list[tuple[str, str, str | None, bool]] = [
        (f"column {c.name}", "must be present once with its declared type", unsound.get(c.name), False)
        for c in schema.columns
    ]
    if problems:
        failed = [str(p) for p in problems]
    else:
        failed = report.failed_rules()
        cases += [(f"column {o.column}", o.rule, None if o.success else o.line(), o.errored)
                  for o in report.expectations
                  if o.expectation_type != "expect_column_to_exist"]  # the structure testcase covers it
    summary = {"schema": str(args.schema), "data": data.name, "passed": not failed, "failed_rules": failed}
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if args.junit:
        Path(args.junit).write_bytes(junit_report(suite_name, cases))
    if failed:
        print(f"FAIL: {data.name} does not match {Path(args.schema).name}:")
        for line in failed:
            print(f"  - {line}")
        print(GATE_NOTE)
        return EXIT_FAIL
    print(f"PASS: {data.name} matches {Path(args.schema).name} ({len(schema.columns)} columns)")
    print(GATE_NOTE)
    return EXIT_PASS


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify every public file of a release against its manifest."""
    from dprelease.tasks.staging import verify_release

    root = Path(args.release_dir)
    if not root.is_dir():
        print(f"dprelease verify: {root} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    problems = verify_release(root)
    if problems:
        print(f"FAIL: {root} does not match its manifest:")
        for line in problems:
            print(f"  - {line}")
        return EXIT_FAIL
    print(f"OK: every public file of {root} matches its manifest")
    return EXIT_PASS


def cmd_ldp_collect(args: argparse.Namespace) -> int:
    """Run the ldp-collect flow on the embedded Prefect API; print where the estimates went."""
    from dprelease.flows.settings import spawn_embedded_server, without_heartbeats
    from dprelease.tasks.ldp_registry import preflight, published_run

    server = spawn_embedded_server()
    registry = args.registry or str(state_dir() / "ldp.sqlite")
    try:  # a bad spec, folder or registry, or a published run id (verified), is one line, and stops the server
        collection = preflight(args.spec, Path(args.out).resolve(), Path(registry).resolve(), args.run_id)
        done = None if args.run_id is None else published_run(Path(args.out).resolve(), collection, args.run_id)
    except BaseException:
        if server is not None:
            server.stop()
        raise
    if done is not None:
        if server is not None:
            server.stop()
        print(f"{collection.name} run {args.run_id} is already published and verifies: {done} (nothing was run)")
        return EXIT_PASS
    from dprelease.flows.ldp_collect import ldp_collect

    if not args.debug:
        _quiet_prefect_console()
    if server is not None:
        server.wait()
    with without_heartbeats(server is not None):
        target = ldp_collect(spec=args.spec, out=args.out, registry=registry, run_id=args.run_id)
    audit = json.loads((Path(target) / "audit.json").read_text(encoding="utf-8"))
    batches = audit["batches"]
    print(f"\n{collection.name} ({collection.protocol}): {batches['reports_used']} reports from "
          f"{len(batches['accepted'])} batch(es); {len(batches['refused'])} batch(es) refused "
          f"({batches['reports_refused']} reports)")
    for name, problems in batches["refused"].items():
        print(f"  refused {name}: {problems[0]}")
    print(f"  {Path(target) / 'estimates.csv'}   (estimates with 95 % intervals)")
    print(f"  {Path(target) / 'chart.svg'}")
    print(f"  {Path(target) / 'audit.json'}   (the local guarantee per person, batches used and refused)")
    return EXIT_PASS


def cmd_ledger(args: argparse.Namespace) -> int:
    """``ledger show|verify|abandon``: the ledger's datasets and releases, its integrity, a steward's close.

    Opening the ledger verifies its hash chain and its head file, so ``verify`` exits 3 with one line
    when rows were altered or deleted.
    """
    from dprelease.dp.accounting.ledger import Ledger
    from dprelease.tasks.tables import InputError

    path = Path(_default_ledger(args.ledger))
    if not path.exists():
        raise InputError(f"ledger {path}: no such file")
    with Ledger.open(path) as book:
        if args.action == "abandon":
            if args.release_id is None:
                raise InputError("ledger abandon: name the release id to close")
            book.abandon(args.release_id)
            print(f"release {args.release_id} closed as failed; what it drew stays booked, the rest is free again")
            return EXIT_PASS
        head = book.head()
        if args.action == "verify":
            print(f"OK: ledger {path}: {head.rows} charges, hash chain and head file intact")
            return EXIT_PASS
        for dataset in book.datasets():
            status = book.status(dataset)
            print(f"dataset {dataset}: {status.unit} cap {float(status.cap):.6g}, spent {float(status.spent):.6g}, "
                  f"reserved {float(status.reserved):.6g}, remaining {float(status.remaining):.6g}")
            for release in book.releases(dataset):
                lost = f", {release['lost_draws']} lost draw(s)" if release["lost_draws"] else ""
                holder = f", held by {release['holder']}" if release["holder"] else ""
                drawn, reserved = cast(Fraction, release["drawn"]), cast(Fraction, release["reserved"])
                print(f"  {release['release_id']:<32} {release['status']:<10} drawn "
                      f"{float(drawn):.6g} of {float(reserved):.6g}{lost}{holder}")
        print(f"{head.rows} charges; head {head.last_hash[:16]}")
    return EXIT_PASS


def cmd_report(args: argparse.Namespace) -> int:
    """Re-render the human-readable reports from ``audit.json`` (a pure function of it)."""
    from dprelease.reports.audit import render_markdown
    from dprelease.reports.audit_json import audit_from_json
    from dprelease.reports.html import render_html

    root = Path(args.release_dir)
    audit_path = root / "audit.json"
    if not audit_path.is_file():
        print(f"dprelease report: {audit_path} not found", file=sys.stderr)
        return EXIT_USAGE
    audit = audit_from_json(audit_path.read_text(encoding="utf-8"))
    (root / "audit.html").write_text(render_html(audit), encoding="utf-8")
    (root / "audit.md").write_text(render_markdown(audit), encoding="utf-8")
    print(f"wrote {root / 'audit.html'} and {root / 'audit.md'}")
    return EXIT_PASS


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dprelease`` console script.

    Called without ``argv`` (the console script, ``python -m dprelease``) this process is the
    command, and it ends as soon as the command has: see :func:`flows.settings.exit_now`.
    """
    code = _main(argv, standalone=argv is None)
    if argv is None:
        exit_now(code)
    return code


def _main(argv: list[str] | None, standalone: bool = False) -> int:
    configure()
    args = _parser().parse_args(argv)
    if standalone and args.command == "release":
        defer_imports()  # what Great Expectations imports and never calls here: loaded only if used
    if standalone and args.command == "check":
        defer_imports(DEFERRED_MODULES + CHECK_DEFERRED_MODULES)
        without_sql()
        hold_gc()  # resumed once Great Expectations is imported (cmd_check)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no linear algebra: no OpenBLAS thread per core
    if standalone and args.command == "release":
        hold_gc()  # resumed before the flow starts (cmd_release)
        if not os.environ.get("PREFECT_API_URL") and client_needs_no_sql():  # its API is a process of its own
            without_sql()
    commands = {"release": cmd_release, "plan": cmd_plan, "check": cmd_check, "verify": cmd_verify,
                "report": cmd_report, "ledger": cmd_ledger, "ldp-collect": cmd_ldp_collect}
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("dprelease: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if args.debug:
            import traceback

            traceback.print_exception(err, file=sys.stderr)
        print(f"dprelease {args.command}: {describe_failure(err, args.command)}", file=sys.stderr)
        code = exit_code(err)
        # For the gate, 1 means "the data fails its schema": a crash must not read as that.
        return EXIT_USAGE if args.command == "check" and code == EXIT_FAIL else code


if __name__ == "__main__":
    sys.exit(main())
