"""Frames on the wire: every server frame is gzip-compressed JSON in a binary frame; clients
send plain JSON text (or, leniently, the same JSON in a binary frame)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import msgspec

from tradehall.api import wire
from tradehall.codes import Code

_encode = msgspec.json.Encoder(enc_hook=wire.enc_hook).encode
_decode = msgspec.json.Decoder().decode

GZIP_LEVEL = 5
"""Pushes are small (a few hundred bytes to a few KiB); level 5 compresses them nearly as
well as 9 at a fraction of the time, and each push is compressed once for all subscribers."""


def json_bytes(value: Any) -> bytes:
    """``value`` as the JSON a frame would hold (uncompressed)."""
    return _encode(value)


def gzip_json(message: Any) -> bytes:
    """One server frame: ``message`` as JSON (``wire.Num`` written as exact numbers),
    gzip-compressed (``mtime=0``, so equal messages give equal frames)."""
    return gzip.compress(_encode(message), compresslevel=GZIP_LEVEL, mtime=0)


def error_frame(code: Code, msg: str, **extra: Any) -> bytes:
    """Every error frame says ``event_rep: "error"``, also for a message too broken to name
    its channel (``extra``: the channel and cb_id when known)."""
    return gzip_json({"code": int(code), "msg": msg, "event_rep": "error", **extra})


def shown_event(event: object) -> str:
    """An ``event`` value as an error message names it: JSON's spelling, not Python's
    (``null``, not ``None``), cut short."""
    return json.dumps(event, default=str)[:60]


class BadMessage(Exception):
    """A client message that cannot be acted on; answered with one error frame."""

    def __init__(self, code: Code, msg: str) -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg


def parse_message(raw: str | bytes, max_bytes: int) -> dict[str, Any]:
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > max_bytes:
        raise BadMessage(Code.BAD_PARAM, f"message is larger than {max_bytes} bytes")
    try:
        message = _decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise BadMessage(Code.BAD_PARAM, "message is not valid JSON") from None
    if not isinstance(message, dict):
        raise BadMessage(Code.BAD_PARAM, "message must be a JSON object")
    return message


def reply(event_rep: str, channel: str, cb_id: Any, now: int) -> dict[str, Any]:
    """The answer to a client's event (``subed``, ``unsubed``, ``rep``)."""
    answer: dict[str, Any] = {"event_rep": event_rep, "channel": channel}
    if cb_id is not None:
        answer["cb_id"] = cb_id
    answer["status"] = "ok"
    answer["ts"] = now
    return answer
