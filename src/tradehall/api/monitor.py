"""What the operator view shows of the traffic: requests and error answers per second over the
last minute, and the most recent error answers. Counting costs one comparison and two
increments per request; nothing is stored beyond the window."""

from __future__ import annotations

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
    errors_total: int = 0
    _second: int = 0
    _requests: int = 0
    _errors: int = 0
    _history: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=WINDOW_SECONDS)
    )
    """(second, requests, errors) of the last full seconds that saw any request."""
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_ERRORS))

    def _roll(self) -> None:
        second = int(self.clock())
        if second != self._second:
            if self._requests:
                self._history.append((self._second, self._requests, self._errors))
            self._second, self._requests, self._errors = second, 0, 0

    def request(self) -> None:
        self._roll()
        self._requests += 1
        self.requests_total += 1

    def error(self, method: str, path: str, status: int, code: int, msg: str) -> None:
        """Counts an error answer (of a request already counted) and keeps it as recent."""
        self._roll()
        self._errors += 1
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

    def snapshot(self) -> dict[str, Any]:
        """Totals since start, per-second averages over the last minute (the current, partial
        second left out) and the recent errors, newest first."""
        self._roll()
        since = self._second - WINDOW_SECONDS
        window = [(r, e) for s, r, e in self._history if s >= since]
        return {
            "requestsTotal": self.requests_total,
            "errorsTotal": self.errors_total,
            "requestsPerSecond": round(sum(r for r, _ in window) / WINDOW_SECONDS, 3),
            "errorsPerSecond": round(sum(e for _, e in window) / WINDOW_SECONDS, 3),
            "windowSeconds": WINDOW_SECONDS,
            "recentErrors": list(reversed(self.recent)),
        }
