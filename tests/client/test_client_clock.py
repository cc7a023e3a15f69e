"""The bundled clients sign every call with a timestamp of its own: the server accepts a
signature once, so identical calls made within one millisecond must not share one, while
different calls must not be pushed ahead of the clock."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tradehall.client import Client
from tradehall.client import _requests as r

ACCOUNT = ("GET", "/sapi/v1/account", b"")


def test_an_identical_request_never_repeats_a_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([1_000, 1_000, 1_000, 999, 1_005, 1_005, 2_000])
    monkeypatch.setattr(r, "wall_clock_ms", lambda: next(readings))
    clock = r.SigningClock()
    stamps = [clock.stamp(ACCOUNT) for _ in range(7)]
    assert stamps == [1_000, 1_001, 1_002, 1_003, 1_005, 1_006, 2_000]


def test_different_requests_keep_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of 3,000 different orders signed within one millisecond: all at that
    millisecond (the server refuses stamps 1 s ahead of its clock)."""
    monkeypatch.setattr(r, "wall_clock_ms", lambda: 5_000)
    clock = r.SigningClock()
    bodies = [f'{{"price":"{i}"}}'.encode() for i in range(3_000)]
    assert {clock.stamp(("POST", "/sapi/v1/order", body)) for body in bodies} == {5_000}
    assert clock.stamp(("POST", "/sapi/v1/order", bodies[0])) == 5_001


def test_identical_requests_are_unique_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "wall_clock_ms", lambda: 5_000)
    clock = r.SigningClock()
    with ThreadPoolExecutor(8) as pool:
        stamps = list(pool.map(lambda _: clock.stamp(ACCOUNT), range(2_000)))
    assert sorted(stamps) == list(range(5_000, 7_000))


def test_identical_calls_in_a_burst_are_all_answered(server_factory: Any) -> None:
    """Against a real server, with the default clock: back-to-back and concurrent identical
    signed calls (several land in the same millisecond) are never refused as replays."""
    server = server_factory(None, "--demo", "--no-sim")
    demo = server.demo
    with Client(server.url, demo["apiKey"], demo["secret"]) as client:
        for _ in range(100):
            client.account()
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: client.open_orders("BTCUSDT"), range(200)))
    assert all(isinstance(answer, list) for answer in answers)
