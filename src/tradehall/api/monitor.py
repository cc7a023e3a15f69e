"""What the operator view shows of the traffic: requests and error answers per second over the
last minute, totals, and the most recent error answers. A request costs one increment (the
request path stays as fast as it was); the rates come from samples of the totals, taken every
second by the app (``run``) and at each look (``snapshot``)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

WINDOW_SECONDS = 60
RECENT_ERRORS = 50
"""Rows of recent errors kept: one per source, request method, status and code."""
MAX_TEXT = 200
"""Characters of a path or message kept (anyone can send a 64 KB path)."""
MAX_RECENT_BYTES = 32 * 1024
"""The most that the recent errors' paths and messages add to one snapshot, in bytes."""


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


@dataclass(slots=True)
class Monitor:
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], int] = lambda: time.time_ns() // 1_000_000
    requests_total: int = 0
    """Every request since start; the request path adds to it directly."""
    errors_total: int = 0
    _samples: deque[tuple[float, int, int]] = field(default_factory=deque)
    """(time, requests_total, errors_total), oldest first, none older than the window."""
    recent: dict[tuple[str, str, int, int], dict[str, Any]] = field(default_factory=dict)
    """The recent errors, oldest first, one row per (source, method, status, code): a repeat
    moves its row to the end, counted, so one client's flood takes one row, not the list."""

    def error(
        self, method: str, path: str, status: int, code: int, msg: str, source: str = ""
    ) -> None:
        """Counts an error answer (of a request already counted) and keeps it as recent;
        ``source`` is the client's address."""
        self.errors_total += 1
        recent = self.recent
        key = (source, method, status, code)
        previous = recent.pop(key, None)
        recent[key] = {
            "time": self.wall(),
            "method": clip(method, 20),
            "path": clip(path),
            "status": status,
            "code": code,
            "msg": clip(msg),
            "source": source,
            "count": previous["count"] + 1 if previous is not None else 1,
        }
        if len(recent) > RECENT_ERRORS:
            del recent[next(iter(recent))]

    def sample(self) -> None:
        now = self.clock()
        samples = self._samples
        samples.append((now, self.requests_total, self.errors_total))
        while now - samples[0][0] > WINDOW_SECONDS:
            samples.popleft()

    async def run(self, every: float = 1.0) -> None:
        """Samples the totals every second until cancelled (the app's lifespan runs it)."""
        while True:
            self.sample()
            await asyncio.sleep(every)

    def snapshot(self) -> dict[str, Any]:
        """Totals since start, per-second rates over the last minute (over the time since the
        oldest sample within it; 0 before there are two samples) and the recent errors,
        newest first."""
        self.sample()
        now, requests, errors = self._samples[-1]
        since, requests_then, errors_then = self._samples[0]
        span = now - since
        return {
            "requestsTotal": requests,
            "errorsTotal": errors,
            "requestsPerSecond": round((requests - requests_then) / span, 3) if span else 0.0,
            "errorsPerSecond": round((errors - errors_then) / span, 3) if span else 0.0,
            "windowSeconds": WINDOW_SECONDS,
            "recentErrors": within_budget(reversed(self.recent.values())),
        }


def within_budget(errors: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The errors, in their order, up to MAX_RECENT_BYTES of paths and messages (UTF-8)."""
    kept = []
    size = 0
    for error in errors:
        size += len(error["path"].encode()) + len(error["msg"].encode())
        if size > MAX_RECENT_BYTES:
            break
        kept.append(error)
    return kept
