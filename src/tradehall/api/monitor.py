"""What the operator view shows of the traffic: requests and error answers per second over the
last minute, totals, and the most recent error answers. A request costs one increment (the
request path stays as fast as it was); the rates come from samples of the totals, taken every
second by the app (``run``) and at each look (``snapshot``).

The same object keeps what ``/metrics`` shows of the front half (``tradehall.metrics``):
requests by endpoint, method and status with their latency, refusals by reason, and the
event loop's lag, measured by ``run`` at each of its wake-ups."""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tradehall.codes import Code
from tradehall.metrics.histogram import Histogram

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


UNMATCHED = "unmatched"
"""The endpoint label of a request no route serves (404, 405): label values stay bounded."""
_AUTH_REASONS: dict[int, str] = {
    Code.APIKEY_MISSING: "missing_header",
    Code.TS_MISSING: "missing_header",
    Code.SIGN_MISSING: "missing_header",
    Code.BAD_KEY: "api_key",
    Code.TIMESTAMP_WINDOW: "timestamp",
    Code.BAD_SIGNATURE: "signature",
}


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
    detailed: bool = True
    """Keep the per-endpoint counts and latencies (off: the bench's baseline)."""
    answers: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """Answers other than 200 by (endpoint, method, HTTP status) (``answered``: all)."""
    latency: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    """Seconds from the request's arrival to its answer, by (endpoint, method)."""
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)
    """(kind, reason): ("rate_limit", "limit" | "banned"), ("auth", reason), ("replay", "")."""
    loop_lag: Histogram = field(default_factory=Histogram)
    """How late the event loop woke ``run`` up (seconds)."""

    def observe(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        """One answer: its latency kept by endpoint and method, its status counted unless
        200 (the histogram's count is every answer: the 200s are what the others leave).
        Written out rather than through ``count`` and ``Histogram.observe``: this runs for
        every request, and each call or dict update saved is ~80 ns of a few hundred."""
        where = (endpoint, method)
        hist = self.latency.get(where)
        if hist is None:
            hist = self.latency[where] = Histogram()
        hist.counts[bisect_left(hist.bounds, seconds)] += 1
        hist.total += seconds
        if status != 200:
            key = (endpoint, method, status)
            answers = self.answers
            answers[key] = answers.get(key, 0) + 1

    def count(self, endpoint: str, method: str, status: int) -> None:
        """An answer whose latency is not kept (no route served it)."""
        key = (endpoint, method, status)
        answers = self.answers
        answers[key] = answers.get(key, 0) + 1

    def answered(self) -> dict[tuple[str, str, int], int]:
        """Answers by (endpoint, method, status), 200s included (a copy). The histograms
        are copied first: an answer landing between the two copies is then missing from
        the 200s for this look, never counted as a 200 it is not (counters only grow)."""
        latency = dict(self.latency)
        out = dict(self.answers)
        for (endpoint, method), hist in latency.items():
            others = sum(n for (e, m, _), n in out.items() if e == endpoint and m == method)
            ok = sum(hist.counts) - others
            if ok > 0:
                out[(endpoint, method, 200)] = ok
        return out

    def refused(self, kind: str, reason: str) -> None:
        key = (kind, reason)
        self.refusals[key] = self.refusals.get(key, 0) + 1

    def auth_refused(self, code: int) -> None:
        """A signed request's authentication failed with ``code``."""
        self.refused("auth", _AUTH_REASONS.get(code, "other"))

    def error(
        self, method: str, path: str, status: int, code: int, msg: str, source: str = ""
    ) -> None:
        """Counts an error answer (of a request already counted) and keeps it as recent;
        ``source`` is the client's address."""
        self.errors_total += 1
        if code == Code.TOO_MANY_REQUESTS:
            self.refused("rate_limit", "banned" if status == 418 else "limit")
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
        """Samples the totals every second until cancelled (the app's lifespan runs it), and
        measures how much later than asked the event loop wakes it up: what every request
        waits on top of its own work when the loop is busy or blocked."""
        loop = asyncio.get_running_loop()
        while True:
            self.sample()
            due = loop.time() + every
            await asyncio.sleep(every)
            self.loop_lag.observe(max(0.0, loop.time() - due))

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
