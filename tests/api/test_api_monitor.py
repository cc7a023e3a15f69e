"""The traffic counters behind GET /admin/v1/activity: rates over the last minute from samples
of the totals, recent errors newest first and bounded."""

from __future__ import annotations

from pathlib import Path

import httpx2._urlparse
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, make_exchange
from tradehall.api.app import create_app
from tradehall.api.monitor import MAX_RECENT_BYTES, RECENT_ERRORS, WINDOW_SECONDS, Monitor


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
        monitor.error("POST", f"/p{i}", 401, -2015, f"no {i}", f"10.0.0.{i}")
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
        "source": f"10.0.0.{last}",
        "count": 1,
    }
    assert recent[-1]["path"] == "/p5"


def test_repeats_of_one_source_share_a_row_and_long_texts_are_cut() -> None:
    monitor = Monitor(clock=Seconds(), wall=lambda: 7)
    monitor.error("GET", "/real", 400, -1121, "unknown symbol", "10.0.0.1")
    for i in range(1000):
        monitor.error("GET", f"/{i}" + "x" * 70_000, 404, -1020, "y" * 70_000, "203.0.113.7")
    recent = monitor.snapshot()["recentErrors"]
    assert [(e["source"], e["count"]) for e in recent] == [("203.0.113.7", 1000), ("10.0.0.1", 1)]
    assert recent[0]["path"].startswith("/999xxx")
    assert recent[0]["path"].endswith("… (69804 more characters)")
    assert len(recent[0]["path"]) < 230 and len(recent[0]["msg"]) < 230
    assert recent[1]["path"] == "/real"


def test_the_recent_errors_stay_within_their_byte_budget() -> None:
    monitor = Monitor(clock=Seconds(), wall=lambda: 7)
    for i in range(RECENT_ERRORS):  # 50 sources, 4-byte characters: 1.6 KB a row
        monitor.error("GET", "/" + "\U0001f4a5" * 300, 404, -1020, "\U0001f4a5" * 300, str(i))
    recent = monitor.snapshot()["recentErrors"]
    size = sum(len(e["path"].encode()) + len(e["msg"].encode()) for e in recent)
    assert 0 < size <= MAX_RECENT_BYTES and len(recent) < RECENT_ERRORS
    assert recent[0]["source"] == str(RECENT_ERRORS - 1)  # the newest kept


def test_a_flood_of_huge_paths_cannot_fill_the_operators_error_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fifty unauthenticated requests for 64 KB paths made /admin/v1/activity 6 MB of the
    attacker's text and pushed every real error out of it."""
    monkeypatch.setattr(httpx2._urlparse, "MAX_URL_LENGTH", 1 << 20)
    exchange = make_exchange(tmp_path / "tradehall.db")
    app = create_app(exchange, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app, client=("127.0.0.1", 40000)) as local:
        user = TestClient(app, client=("192.0.2.10", 40000))
        assert user.get("/spot/open/sapi/v1/depth?symbol=NOPE").status_code == 400
        attacker = TestClient(app, client=("203.0.113.7", 40000))
        for i in range(50):
            answer = attacker.get(f"/spot/open/sapi/v1/{i}" + "a" * 64 * 1024)
            assert answer.status_code == 404
        activity = local.get(
            "/admin/v1/activity", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
    assert len(activity.content) < 4096
    recent = activity.json()["recentErrors"]
    assert [(e["source"], e["count"], e["status"]) for e in recent] == [
        ("203.0.113.7", 50, 404),
        ("192.0.2.10", 1, 400),
    ]
    assert recent[0]["path"].startswith("/spot/open/sapi/v1/49aaa")
    assert len(recent[0]["path"]) < 230 and len(recent[0]["msg"]) < 230
    exchange.store.close()
