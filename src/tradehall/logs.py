"""The servers' logs (``--log-format text|json``, ``--access-log``) and request ids.

In JSON, each record is one object on one line: ``time`` (UTC, ISO 8601, ms), ``level``,
``logger``, ``message``, and where known ``request_id``, ``user_id``, ``endpoint``,
``method``, ``code`` (the HTTP status) and ``duration_ms``; ``exception`` holds a traceback.

Every HTTP answer carries an ``X-Request-Id``: the client's own (``X-Request-Id``, when it is
1 to 64 characters of ``A-Za-z0-9._:-``) or one made here (this process's random prefix and a
counter: unique across processes, cheaper than a UUID on every request). A gateway carries it
to the engine over NATS (``Forwarded.request_id``), whose records about that request bear
the same id: one request can be followed across processes.

The access log (logger ``tradehall.access``: one record per answered request) is off unless
``--access-log``: a record costs more than the rest of a fast request's handling."""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import sys
import time
from typing import Any

ACCESS = logging.getLogger("tradehall.access")
FIELDS = ("request_id", "user_id", "endpoint", "method", "code", "duration_ms")
REQUEST_ID_HEADER = b"x-request-id"
_VALID_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
_PREFIX = os.urandom(4).hex()
_counter = itertools.count(1)


def new_request_id() -> str:
    return f"{_PREFIX}-{next(_counter):x}"


def request_id(given: bytes | None) -> str:
    """The client's ``X-Request-Id`` when it is a usable one, else a new id."""
    if given is not None and _VALID_ID.fullmatch(given):
        return given.decode("ascii")
    return new_request_id()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = [f"{n}={record.__dict__[n]}" for n in FIELDS if record.__dict__.get(n) is not None]
        return f"{text} [{' '.join(extra)}]" if extra else text


current_format = "text"
"""The format ``configure`` set (a child process, the projector, logs in the same one)."""


def configure(fmt: str = "text", access_log: bool = False, level: int = logging.INFO) -> None:
    """The process's logging: ``fmt`` ``text`` or ``json`` on stderr; the access log on or
    off. Replaces whatever handlers the root logger had."""
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r}: text or json")
    global current_format
    current_format = fmt
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    ACCESS.setLevel(logging.INFO if access_log else logging.WARNING)
    # uvicorn's own loggers go through the same handler and format.
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
