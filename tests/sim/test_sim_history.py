"""A market's drawn past (sim/history.py): continuous steps back to the asked day, a walk that
ends at the start price, bars of every interval that agree with each other, volumes around
the takers' flow, and the same past for the same seed."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tradehall.marketdata import INTERVALS, Bar, bar_open, keep_for, parse_interval
from tradehall.marketdata.intervals import DAY_MS, MINUTE_MS, Interval, next_open
from tradehall.sim.history import (
    TIERS,
    Step,
    band,
    bars_of,
    common_draws,
    cross_steps,
    step_times,
    walk_back,
)
from tradehall.sim.settings import PathSettings

NOW = 1_796_645_413_270  # 2026-12-07 12:10:13.270 UTC


def ticks(price: float) -> int:
    return max(1, round(price * 100))


def drawn(
    now: int = NOW,
    days: int = 365,
    seed: int = 1,
    start: float = 30_000.0,
    path: PathSettings | None = None,
) -> tuple[list[Step], dict[str, list[Bar]]]:
    times = step_times(now, days)
    steps = walk_back(
        path or PathSettings(), start, times, random.Random(seed), common_draws(seed, len(times))
    )
    bars = bars_of(steps, ticks, 2.5, lambda price, lots: price * lots, random.Random(seed + 1))
    return steps, bars


def test_steps_run_without_a_gap_from_the_asked_day_to_now() -> None:
    times = step_times(NOW, 365)
    assert all(start + length == after for (start, length), (after, _) in pairwise(times))
    assert times[-1][0] == bar_open(INTERVALS[0], NOW)
    assert times[-1][0] + times[-1][1] == NOW
    assert NOW - 365 * DAY_MS <= times[0][0] < NOW - 365 * DAY_MS + TIERS[-1][0]
    lengths = [length for _, length in times[:-1]]
    assert lengths == sorted(lengths, reverse=True)  # the coarse tiers come first
    assert {length for length in lengths} == {length for length, _ in TIERS}
    for start, length in times[:-1]:
        assert start % length == 0  # every step inside one bar of each longer interval
    minutes = sum(1 for _, length in times if length == MINUTE_MS)
    assert minutes >= 1_505  # the 1min and 5min windows in whole minutes


def test_a_short_past_is_all_minutes() -> None:
    times = step_times(NOW, 1)
    assert {length for _, length in times[:-1]} == {MINUTE_MS}
    assert times[0][0] >= NOW - DAY_MS


def test_the_walk_ends_at_the_start_price_and_every_interval_keeps_its_window() -> None:
    steps, bars = drawn()
    assert steps[-1].close == 30_000.0
    for interval in INTERVALS:
        series = bars[interval.name]
        assert series[-1].close == 3_000_000
        assert series[-1].open_time == bar_open(interval, NOW)
        if interval.kind in ("minute", "hour", "day"):
            assert len(series) == keep_for(interval)
    assert len(bars["1week"]) in (53, 54)
    assert len(bars["1month"]) in (12, 13)


@settings(max_examples=25, deadline=None)
@given(
    now=st.integers(1_600_000_000_000, 1_900_000_000_000),
    days=st.integers(1, 400),
    seed=st.integers(0, 2**32),
    volatility=st.floats(0.05, 3.0),
    jumps=st.floats(0.0, 2.0),
)
def test_bars_are_whole_candles_that_agree_across_intervals(
    now: int, days: int, seed: int, volatility: float, jumps: float
) -> None:
    path = PathSettings(volatility=volatility, jump_rate=jumps, jump_size=0.05)
    _, bars = drawn(now, days, seed, 2_000.0, path)
    for name, series in bars.items():
        interval = parse_interval(name)
        assert series, name
        for bar in series:
            assert bar.low <= min(bar.open, bar.close) <= max(bar.open, bar.close) <= bar.high
            assert bar.low >= 1 and bar.volume >= 1
            assert bar_open(interval, bar.open_time) == bar.open_time
        for before, after in pairwise(series):
            assert after.open_time == next_open(interval, before.open_time)  # no gap
            assert after.open == before.close  # the walk goes on from the last close
    for coarse, fine in (
        ("5min", "1min"),
        ("60min", "15min"),
        ("1day", "60min"),
        ("1week", "1day"),
    ):
        _check_made_of(bars[coarse], bars[fine], parse_interval(coarse))


def _check_made_of(coarse: list[Bar], fine: list[Bar], interval: Interval) -> None:
    """Each finished coarse bar whose first part is among ``fine`` is the sum of its parts
    (``fine`` has no gap and reaches now, so it holds all of them)."""
    by_open: dict[int, list[Bar]] = {}
    for bar in fine:
        by_open.setdefault(bar_open(interval, bar.open_time), []).append(bar)
    for bar in (bar for bar in coarse[:-1] if bar.open_time >= fine[0].open_time):
        parts = by_open[bar.open_time]
        assert parts[0].open_time == bar.open_time
        assert bar.open == parts[0].open and bar.close == parts[-1].close
        assert bar.high == max(p.high for p in parts) and bar.low == min(p.low for p in parts)
        assert bar.volume == sum(p.volume for p in parts)


def test_a_wild_path_stays_within_its_band_over_ten_years() -> None:
    path = PathSettings(volatility=10.0, drift=10.0, jump_rate=3_600.0, jump_size=1.0)
    _, bars = drawn(days=3_650, path=path)
    factor = math.exp(band(path, 3_650 * DAY_MS / 1000))
    assert factor == pytest.approx(1_000_000)
    for series in bars.values():
        for bar in series:
            assert 3_000_000 / factor * 0.999 <= bar.low <= bar.high <= 3_000_000 * factor * 1.001
            assert bar.amount < 2**63


def test_a_long_ordinary_past_does_not_meet_its_band() -> None:
    """Ten years at 60 %: the band is five deviations wide, so no bar sits flat at an edge
    (as a hard factor of 20 made it do)."""
    _, bars = drawn(days=3_650)
    factor = math.exp(band(PathSettings(), 3_650 * DAY_MS / 1000))
    assert factor > 10_000
    top, bottom = 3_000_000 * factor, 3_000_000 / factor
    for series in bars.values():
        assert all(bottom * 1.01 < bar.low and bar.high < top / 1.01 for bar in series)


def test_jumps_arrive_at_their_rate_in_long_steps_too() -> None:
    """Two jumps an hour of 1 %: a four-hour step moves by eight of them on average (its log
    variance 8 x 0.0001), not by at most one."""
    path = PathSettings(volatility=0.0, jump_rate=2.0, jump_size=0.01)
    times = step_times(NOW, 365)
    steps = walk_back(path, 30_000.0, times, random.Random(3), [])
    moves = [math.log(s.close / s.open) for s in steps if s.length_ms == 4 * 3_600_000]
    variance = sum(m * m for m in moves) / len(moves)
    assert variance == pytest.approx(8 * 0.0001, rel=0.15)


def test_the_same_seed_draws_the_same_past_and_another_seed_another() -> None:
    assert drawn(seed=5)[1] == drawn(seed=5)[1]
    assert drawn(seed=5)[1]["1min"] != drawn(seed=6)[1]["1min"]


def test_volumes_follow_the_takers_flow() -> None:
    _, bars = drawn()
    minutes = bars["1min"][:-1]
    mean = sum(bar.volume for bar in minutes) / len(minutes)
    assert 0.8 * 2.5 * 60 < mean < 1.25 * 2.5 * 60
    days = bars["1day"][:-1]  # the flow's value is the same at any price the past had
    mean_day = sum(bar.amount for bar in days) / len(days)
    assert 0.85 * 2.5 * 86_400 * 3_000_000 < mean_day < 1.15 * 2.5 * 86_400 * 3_000_000
    # busier when the price moved: the top tenth of minutes by range trade more than the rest
    by_range = sorted(minutes, key=lambda bar: (bar.high - bar.low) / bar.close)
    tenth = len(by_range) // 10
    busy = sum(bar.volume for bar in by_range[-tenth:]) / tenth
    calm = sum(bar.volume for bar in by_range[:tenth]) / tenth
    assert busy > 1.5 * calm


def test_walks_sharing_the_common_draws_move_together() -> None:
    times = step_times(NOW, 30)
    common = common_draws(1, len(times))
    path = PathSettings(correlation=0.7)
    a = walk_back(path, 100.0, times, random.Random(1), common)
    b = walk_back(path, 100.0, times, random.Random(2), common)
    moves_a = [s.close / s.open - 1 for s in a[:-1]]
    moves_b = [s.close / s.open - 1 for s in b[:-1]]
    assert _correlation(moves_a, moves_b) > 0.5
    alone = walk_back(PathSettings(correlation=0.0), 100.0, times, random.Random(2), common)
    assert abs(_correlation(moves_a, [s.close / s.open - 1 for s in alone[:-1]])) < 0.15


def _correlation(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    vx = sum((a - mx) ** 2 for a in x)
    vy = sum((b - my) ** 2 for b in y)
    return cov / math.sqrt(vx * vy)


def test_a_cross_is_the_ratio_of_its_legs() -> None:
    times = step_times(NOW, 10)
    common = common_draws(1, len(times))
    eth = walk_back(PathSettings(), 2_000.0, times, random.Random(1), common)
    btc = walk_back(PathSettings(), 30_000.0, times, random.Random(2), common)
    cross = cross_steps(eth, btc, 1.01)
    for step, e, b in zip(cross, eth, btc, strict=True):
        assert step.close == e.close / b.close * 1.01
        assert step.open == e.open / b.open * 1.01
        assert step.low <= min(step.open, step.close) <= max(step.open, step.close) <= step.high
    assert cross[-1].close == 2_000.0 / 30_000.0 * 1.01
