"""A market's past before the simulation first ran on it: candles of every interval for the
``history_days`` before now, as its reference path would have drawn them, ending at the
price it starts from. A client's first kline request on a fresh venue then reads a chart
(enough bars for its indicators, a 24h ticker with a day behind it), as on a live venue,
instead of one bar.

The walk is drawn backwards from the start price: a geometric Brownian motion with the
path's drift, volatility, jumps and share of the common factor, in real time (a path's
``speed`` hurries the live walk only), kept within a ``band`` of the start. Its steps are a
minute long for the newest day, a quarter hour back to 301 hours, four hours before that
(``TIERS``). Each step's high and low are drawn exactly for a Brownian bridge between its
open and close, so ranges are a walk's, not invented. Volumes follow the takers' mean flow,
busier in the steps that moved more. Pure: seeded, no clock."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tradehall.marketdata import INTERVALS, Bar, keep_for
from tradehall.marketdata.intervals import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    Interval,
    bar_open,
    parse_interval,
)
from tradehall.sim.paths import YEAR_S
from tradehall.sim.settings import PathSettings

TIERS: tuple[tuple[int, int], ...] = (
    (MINUTE_MS, 1_505 * MINUTE_MS),
    (15 * MINUTE_MS, 301 * HOUR_MS),
    (4 * HOUR_MS, 0),
)
"""(step length, how far back it goes): minutes for the 1min and 5min windows (1,500 and
301 bars), quarter hours for the other minute intervals' and 60min's 301 bars, four hours
(six bridges a day) before that. Each tier starts where the next one's steps align."""
VOLUME_SPREAD = 0.6
"""Standard deviation of a minute's log volume around the flow (an hour's: a fifth of it)."""
BAND_MIN = math.log(20)
BAND_MAX = math.log(1_000_000)
BAND_SIGMAS = 5.0
"""The past stays within ``band`` of the start price in log terms (a walk reflected at its
edges): five of the walk's standard deviations over the whole past, at least a factor of 20
and at most a million. A walk rarely comes near five deviations, so a chart shows no flat
tops at the edge, while a path set far wilder (the settings allow 1,000 % a year and
thousands of jumps an hour) still draws prices a store keeps."""
DAY = parse_interval("1day")
_BRIDGE_MEAN = math.sqrt(math.pi / 2)
"""1 / E|Z|: scales |Z| to a mean of 1."""


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a drawn past: prices as floats, from ``start_ms`` for ``length_ms``."""

    start_ms: int
    length_ms: int
    open: float
    high: float
    low: float
    close: float
    activity: float
    """How busy the step was against an average one (mean 1): more trading when it moved."""


def step_times(now_ms: int, days: int) -> list[tuple[int, int]]:
    """(start, length) of every step, oldest first: the current minute up to ``now_ms``,
    then each tier's steps back to its depth and on to where the next tier's align, the
    last tier's back to ``days`` before ``now_ms``."""
    first = now_ms - days * 24 * HOUR_MS
    start = bar_open(INTERVALS[0], now_ms)
    times = [(start, max(1_000, now_ms - start))]
    for i, (length, depth) in enumerate(TIERS):
        last = i == len(TIERS) - 1
        align = 1 if last else TIERS[i + 1][0]
        while start - length >= first and (last or now_ms - start < depth or start % align):
            start -= length
            times.append((start, length))
    times.reverse()
    return times


def common_draws(seed: int, count: int) -> list[float]:
    """The draws every market's past shares step by step (newest first): the market moving
    as one, as the live walks' common factor makes it."""
    rng = random.Random(f"{seed}/common/history")
    return [rng.gauss(0.0, 1.0) for _ in range(count)]


def walk_back(
    settings: PathSettings,
    start: float,
    times: Sequence[tuple[int, int]],
    rng: random.Random,
    common: Sequence[float],
) -> list[Step]:
    """The steps of ``times`` (oldest first) of a walk that ends at ``start``."""
    s = settings
    rho = s.correlation if common else 0.0
    own_share, common_share = math.sqrt(1 - rho), math.sqrt(rho)
    close, log_close = start, math.log(start)
    width = band(s, (times[-1][0] + times[-1][1] - times[0][0]) / 1000)
    floor, ceiling = log_close - width, log_close + width
    steps: list[Step] = []
    for back, (start_ms, length_ms) in enumerate(reversed(times)):
        dt_s = length_ms / 1000
        t = dt_s / YEAR_S
        variance = s.volatility**2 * t
        shock = rng.gauss(0.0, 1.0)
        if rho > 0:
            shock = common_share * common[back] + own_share * shock
        log_move = (s.drift - s.volatility**2 / 2) * t + math.sqrt(variance) * shock
        if s.jump_rate > 0:
            jumps = _arrivals(rng, s.jump_rate * dt_s / 3600)
            if jumps:
                log_move += rng.gauss(0.0, s.jump_size * math.sqrt(jumps))
        log_open = _reflected(log_close - log_move, floor, ceiling)
        high, low = _bridge_extremes(log_open, log_close, variance, rng)
        high, low = min(high, ceiling), max(low, floor)
        activity = 0.5 + 0.5 * abs(shock) * _BRIDGE_MEAN
        open_ = math.exp(log_open)
        high_, low_ = max(open_, close, math.exp(high)), min(open_, close, math.exp(low))
        steps.append(Step(start_ms, length_ms, open_, high_, low_, close, activity))
        close, log_close = open_, log_open
    steps.reverse()
    return steps


def band(settings: PathSettings, seconds: float) -> float:
    """How far (log) a past of ``seconds`` may stray from its start price."""
    years = seconds / YEAR_S
    variance = settings.volatility**2 + settings.jump_rate * YEAR_S / 3600 * settings.jump_size**2
    return min(BAND_MAX, max(BAND_MIN, BAND_SIGMAS * math.sqrt(variance * years)))


def _arrivals(rng: random.Random, mean: float) -> int:
    """A Poisson count of ``mean`` (Knuth's method; its normal approximation from 30 on,
    where a four-hour step at thousands of jumps an hour would take too long)."""
    if mean >= 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, count, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        count += 1
        p *= rng.random()
    return count


def _reflected(log_price: float, floor: float, ceiling: float) -> float:
    """``log_price`` reflected back inside [floor, ceiling] (a walk bouncing off the band)."""
    if log_price > ceiling:
        log_price = 2 * ceiling - log_price
    elif log_price < floor:
        log_price = 2 * floor - log_price
    return min(ceiling, max(floor, log_price))


def _bridge_extremes(
    a: float, b: float, variance: float, rng: random.Random
) -> tuple[float, float]:
    """The highest and lowest points of a Brownian bridge from ``a`` to ``b`` with
    ``variance`` over its length (exact: P(max > m) = exp(-2 (m - a)(m - b) / variance))."""
    gap = (b - a) ** 2
    up = math.sqrt(gap - 2 * variance * math.log(1.0 - rng.random()))
    down = math.sqrt(gap - 2 * variance * math.log(1.0 - rng.random()))
    return (a + b + up) / 2, (a + b - down) / 2


def cross_steps(base: Sequence[Step], quote: Sequence[Step], basis: float) -> list[Step]:
    """A cross pair's past from its legs' (ETHBTC from ETHUSDT and BTCUSDT): the ratio of
    their prices times ``basis`` at every step; its range the legs' ranges beyond the open
    and close, half each (their moves partly cancel)."""
    out: list[Step] = []
    for b, q in zip(base, quote, strict=True):
        o = b.open / q.open * basis
        c = b.close / q.close * basis
        up = math.log(b.high / max(b.open, b.close)) + math.log(min(q.open, q.close) / q.low)
        down = math.log(min(b.open, b.close) / b.low) + math.log(q.high / max(q.open, q.close))
        out.append(
            Step(
                b.start_ms,
                b.length_ms,
                o,
                max(o, c) * math.exp(up / 2),
                min(o, c) * math.exp(-down / 2),
                c,
                (b.activity + q.activity) / 2,
            )
        )
    return out


def bars_of(
    steps: Sequence[Step],
    ticks: Callable[[float], int],
    lots_per_s: float,
    amount: Callable[[int, int], int],
    rng: random.Random,
) -> dict[str, list[Bar]]:
    """Every interval's bars (the newest ``keep_for`` of each, oldest first) of ``steps``:
    prices in the market's ticks, volumes in lots (``lots_per_s`` the takers' mean flow at
    the start price, the same value at every price, scaled by each step's activity and drawn
    around it), ``amount(price, lots)`` the value.
    An interval's bars are made of the steps no longer than it, which reach back as far as
    it keeps bars."""
    step_bars: list[Bar] = []
    start = steps[-1].close if steps else 1.0
    for step in steps:
        spread = VOLUME_SPREAD if step.length_ms <= MINUTE_MS else VOLUME_SPREAD / 5
        noise = math.exp(rng.gauss(-(spread**2) / 2, spread))
        typical = (step.high + step.low + step.close) / 3
        # the flow's value is the same at any price: more lots when the price was lower
        flow = lots_per_s * step.length_ms / 1000 * start / typical
        lots = max(1, round(flow * step.activity * noise))
        o, c = ticks(step.open), ticks(step.close)
        h = max(o, c, ticks(step.high))
        low = min(o, c, ticks(step.low))
        step_bars.append(Bar(step.start_ms, o, h, low, c, lots, amount((h + low + c) // 3, lots)))
    lengths = [step.length_ms for step in steps]
    days = _grouped(step_bars, lengths, DAY, len(step_bars))
    day_lengths = [DAY_MS] * len(days)
    out: dict[str, list[Bar]] = {}
    for interval in INTERVALS:
        keep = keep_for(interval)
        if interval.kind in ("week", "month"):  # both whole days
            out[interval.name] = _grouped(days, day_lengths, interval, keep)
        elif interval is DAY:
            out[interval.name] = days[-keep:]
        else:
            out[interval.name] = _grouped(step_bars, lengths, interval, keep)
    return out


def _grouped(
    bars: Sequence[Bar], lengths: Sequence[int], interval: Interval, keep: int
) -> list[Bar]:
    """The newest ``keep`` bars of ``interval`` (oldest first) merged from ``bars`` (the
    steps', oldest first), newest first until a step is longer than the interval."""
    out: list[Bar] = []
    current: Bar | None = None
    for i in range(len(bars) - 1, -1, -1):
        if interval.step_ms and lengths[i] > interval.step_ms:
            break
        bar = bars[i]
        opens = bar_open(interval, bar.open_time)
        if current is None or opens != current.open_time:
            if len(out) == keep:
                break
            current = Bar(opens, bar.open, bar.high, bar.low, bar.close, bar.volume, bar.amount)
            out.append(current)
            continue
        current.high = max(current.high, bar.high)
        current.low = min(current.low, bar.low)
        current.open = bar.open
        current.volume += bar.volume
        current.amount += bar.amount
    out.reverse()
    return out
