"""Signs of life for long stages: row-group counters in the log, a Prefect progress artifact, a terminal bar.

A pass over a large table (validation, each counting pass of the measure stage) logs
``measure: pass 2, row group 4/10`` at most every :data:`LOG_EVERY_SECONDS` seconds and at its last
row group, keeps a Prefect progress artifact of the stage up to date when it runs inside a Prefect
task, and draws a one-line bar on stderr when stderr is an interactive terminal (never under CI or on
a worker, whose stderr is not a terminal). Only positions are reported (row group i of n, a public
property of the file's layout), never a count of rows or any value.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar
from uuid import UUID

T = TypeVar("T")

LOG_EVERY_SECONDS = 5.0
"""The shortest interval between two progress lines of one pass."""


def _logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("dprelease.progress")


def _interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


class StageProgress:
    """The progress of one stage's passes over row groups (one Prefect progress artifact per stage run).

    Attributes:
        stage: The stage's name, as in the log (``validate``, ``measure``).
    """

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.passes = 0
        self._artifact: UUID | None = None
        self._artifact_tried = False

    def _update_artifact(self, fraction: float) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact
        from prefect.context import TaskRunContext

        if TaskRunContext.get() is None:
            return
        try:
            if self._artifact is None and not self._artifact_tried:
                self._artifact_tried = True
                made: Any = create_progress_artifact(progress=100 * fraction,
                                                     description=f"{self.stage}: row groups of the current pass")
                self._artifact = made if isinstance(made, UUID) else None
            elif self._artifact is not None:
                update_progress_artifact(self._artifact, progress=100 * fraction)
        except Exception:  # progress is a courtesy: it never fails a stage
            self._artifact = None

    def track(self, items: Iterable[T], total: int, what: str = "row group") -> Iterator[T]:
        """Yield ``items`` (one per row group, ``total`` of them), reporting the position as they pass."""
        self.passes += 1
        logger = _logger()
        bar = _interactive()
        label = f"{self.stage}: pass {self.passes}" if self.stage == "measure" else self.stage
        last = time.monotonic()
        done = 0
        for item in items:
            yield item
            done += 1
            now = time.monotonic()
            final = done >= total
            if final or now - last >= LOG_EVERY_SECONDS:
                logger.info("%s, %s %d/%d", label, what, done, total)
                self._update_artifact(done / max(total, 1))
                last = now
            if bar:
                width = 30
                filled = width * done // max(total, 1)
                sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
                if final:
                    sys.stderr.write("\n")
                sys.stderr.flush()
