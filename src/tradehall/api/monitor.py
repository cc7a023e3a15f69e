"""What the operator view shows of the traffic: requests and error answers per second over the
last minute, totals, and the most recent error answers. A request costs one increment (the
request path stays as fast as it was); the rates come from samples of the totals, taken every
second by the app (``run``) and at each look (``snapshot``)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WINDOW_SECONDS = 60
RECENT_ERRORS = 50


@dataclass(slots=True)
class Monitor:
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], int] = lambda: time.time_ns() // 1_000_000
    requests_total: int = 0
    """Every request since start; the request path adds to it directly."""
    errors_total: int = 0
    _samples: deque[tuple[float, int, int]] = field(default_factory=deque)
    """(time, requests_total, errors_total), oldest first, none older than the window."""
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_ERRORS))

    def error(self, method: str, path: str, status: int, code: int, msg: str) -> None:
        """Counts an error answer (of a request already counted) and keeps it as recent."""
        self.errors_total += 1
        self.recent.append(
            {
                "time": self.wall(),
                "method": method,
                "path": path,
                "status": status,
                "code": code,
                "msg": msg,
            }
        )

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
            "recentErrors": list(reversed(self.recent)),
        }
