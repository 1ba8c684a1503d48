"""Log messages a logger handles while a test runs (for loggers pytest's ``caplog`` does not see, or a
module-scoped fixture, where ``caplog`` cannot be used)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class Messages(logging.Handler):
    """Every message handled at DEBUG and above, as ``record.getMessage()`` gives it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def messages_of(logger: logging.Logger) -> Iterator[Messages]:
    """``logger`` at DEBUG with a :class:`Messages` attached inside the block; its level restored after."""
    handler, level = Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
