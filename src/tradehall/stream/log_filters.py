"""Keeping the server's log readable under hostile WebSocket clients: uvicorn logs a full
traceback for every text frame that is not UTF-8 (it closes the connection with 1007, which
is right), so any client could fill the log at the cost of one frame per connection."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

INVALID_UTF8 = "Invalid UTF-8 sequence received from client."
"""What uvicorn's WebSocket protocol logs (with the traceback) for such a frame."""
EVERY_SECONDS = 60.0


class InvalidUtf8Lines(logging.Filter):
    """Turns uvicorn's traceback for a non-UTF-8 text frame into one line, at most one per
    ``every`` seconds, counting the frames it did not log."""

    def __init__(
        self, every: float = EVERY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self.last: float | None = None
        self.unlogged = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != INVALID_UTF8:
            return True
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            self.unlogged += 1
            return False
        more = f" ({self.unlogged} more since the last such line)" if self.unlogged else ""
        record.msg = (
            "WebSocket: a client sent a text frame that is not UTF-8; closed with 1007"
            f"{more}; logged at most once a minute"
        )
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self.last = now
        self.unlogged = 0
        return True


def quiet_invalid_utf8(logger: logging.Logger | None = None) -> None:
    """Installs the filter on uvicorn's error logger (once)."""
    target = logger or logging.getLogger("uvicorn.error")
    if not any(isinstance(f, InvalidUtf8Lines) for f in target.filters):
        target.addFilter(InvalidUtf8Lines())
