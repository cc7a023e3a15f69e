"""A WebSocket text frame that is not UTF-8 closes its connection (1007) and costs the log one
line at most a minute, not a traceback each: any unauthenticated client could send them."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from support import start_server
from tradehall.stream.log_filters import INVALID_UTF8, InvalidUtf8Lines


def test_invalid_utf8_frames_are_closed_with_1007_and_logged_once(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    url = server.url.replace("http", "ws") + "/kline-api/ws"

    async def hostile() -> list[int | None]:
        codes = []
        for _ in range(20):
            async with connect(url, compression=None) as ws:
                await ws.send(b'\xff\xfe{"event"', text=True)
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), 5)
                codes.append(closed.value.rcvd.code if closed.value.rcvd else None)
        return codes

    try:
        assert asyncio.run(hostile()) == [1007] * 20
    finally:
        server.stop()
    assert server.proc.stderr is not None
    log = server.proc.stderr.read()
    assert "Traceback" not in log and "UnicodeDecodeError" not in log
    lines = [line for line in log.splitlines() if "not UTF-8" in line]
    assert len(lines) == 1, log


def test_the_line_comes_at_most_once_per_period_and_counts_the_rest() -> None:
    now = [0.0]
    quiet = InvalidUtf8Lines(every=60, clock=lambda: now[0])

    def record() -> logging.LogRecord:
        try:
            b"\xff".decode()
        except UnicodeDecodeError:
            exc_info = sys.exc_info()
        return logging.LogRecord(
            "uvicorn.error", logging.ERROR, "", 0, INVALID_UTF8, None, exc_info
        )

    first = record()
    assert quiet.filter(first) and first.exc_info is None and first.levelno == logging.WARNING
    assert [quiet.filter(record()) for _ in range(5)] == [False] * 5
    now[0] = 61
    later = record()
    assert quiet.filter(later) and "5 more" in later.getMessage()
    other = logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, "other", None, None)
    assert quiet.filter(other) and other.msg == "other"
