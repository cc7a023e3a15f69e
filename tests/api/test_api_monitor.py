"""The traffic counters behind GET /admin/v1/activity: rates over the last minute from samples
of the totals, recent errors newest first and bounded."""

from __future__ import annotations

from tradehall.api.monitor import RECENT_ERRORS, WINDOW_SECONDS, Monitor


class Seconds:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_cover_the_samples_of_the_last_minute() -> None:
    clock = Seconds()
    monitor = Monitor(clock=clock, wall=lambda: 5)
    first = monitor.snapshot()
    assert (first["requestsPerSecond"], first["errorsPerSecond"]) == (0.0, 0.0)
    for _ in range(10):  # ten seconds of 30 requests, one an error, sampled each second
        clock.now += 1
        monitor.requests_total += 30
        monitor.error("GET", "/x", 400, -1102, "bad")
        monitor.sample()
    snapshot = monitor.snapshot()
    assert (snapshot["requestsPerSecond"], snapshot["errorsPerSecond"]) == (30.0, 1.0)
    assert (snapshot["requestsTotal"], snapshot["errorsTotal"]) == (300, 10)
    assert snapshot["windowSeconds"] == WINDOW_SECONDS
    clock.now += WINDOW_SECONDS - 5  # the first five busy seconds have left the window
    assert monitor.snapshot()["requestsPerSecond"] == round(150 / WINDOW_SECONDS, 3)
    clock.now += WINDOW_SECONDS
    quiet = monitor.snapshot()
    assert quiet["requestsPerSecond"] == 0 and quiet["requestsTotal"] == 300


def test_recent_errors_are_newest_first_and_bounded() -> None:
    monitor = Monitor(clock=Seconds(), wall=lambda: 7)
    for i in range(RECENT_ERRORS + 5):
        monitor.error("POST", f"/p{i}", 401, -2015, f"no {i}")
    recent = monitor.snapshot()["recentErrors"]
    assert len(recent) == RECENT_ERRORS
    last = RECENT_ERRORS + 4
    assert recent[0] == {
        "time": 7,
        "method": "POST",
        "path": f"/p{last}",
        "status": 401,
        "code": -2015,
        "msg": f"no {last}",
    }
    assert recent[-1]["path"] == "/p5"
