"""OHLCV bars of one symbol for every interval, kept in memory and bounded.

Only bars that saw a trade are stored; :meth:`Candles.query` fills the gaps with flat bars so
that the series it returns is continuous. Trades are expected in non-decreasing time order; a
trade older than the current bar is folded into the current bar (history is not rewritten).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from tradehall.marketdata.intervals import (
    DAY_MS,
    INTERVALS,
    Interval,
    bar_open,
    next_open,
    parse_interval,
    prev_open,
)
from tradehall.marketdata.ticker import Ticker, rose_percent

__all__ = ["KEEP", "KEEP_OTHER", "Bar", "Candles", "Ticker", "keep_for", "rose_percent"]

KEEP: Final = 1500
"""Bars kept for 1min (the 24h ticker needs 1440)."""
KEEP_OTHER: Final = 301
"""Bars kept for every other interval."""

_ONE_MIN: Final = INTERVALS[0]


def keep_for(interval: Interval) -> int:
    """How many bars of ``interval`` are kept in memory."""
    return KEEP if interval.name == _ONE_MIN.name else KEEP_OTHER


@dataclass(slots=True)
class Bar:
    """One OHLCV bar: prices in ticks, volume in lots, amount (the traded value) in units of
    the market's value asset (a spot pair's quote asset, a contract's margin coin)."""

    open_time: int
    open: int
    high: int
    low: int
    close: int
    volume: int
    amount: int = 0

    def copy(self) -> Bar:
        return Bar(
            self.open_time, self.open, self.high, self.low, self.close, self.volume, self.amount
        )


class _Series:
    """The stored bars of one interval (only bars that saw a trade), oldest first."""

    __slots__ = ("bars", "changed", "current", "end", "interval")

    def __init__(self, interval: Interval) -> None:
        self.interval = interval
        self.bars: deque[Bar] = deque(maxlen=keep_for(interval))
        self.current: Bar | None = None
        """The last stored bar, the only one trades still change."""
        self.end = 0
        """Open time of the bar after ``current`` (meaningless while ``current`` is None)."""
        self.changed: list[Bar] = []
        """Bars changed since the last take, each once, in time order (live references)."""


class Candles:
    """The bars of one symbol for every interval in :data:`INTERVALS`."""

    __slots__ = ("_by_name", "_series")

    def __init__(self) -> None:
        self._series: tuple[_Series, ...] = tuple(_Series(iv) for iv in INTERVALS)
        self._by_name: dict[str, _Series] = {s.interval.name: s for s in self._series}

    def has_bars(self) -> bool:
        return any(s.bars for s in self._series)

    def on_trade(self, ts_ms: int, price: int, qty: int, amount: int = 0) -> None:
        """Add one trade (``price`` in ticks, ``qty`` in lots, ``amount`` its value) to the bar
        of every interval."""
        for s in self._series:
            bar = s.current
            if bar is None or ts_ms >= s.end:
                # A new period (the stream is non-decreasing, so never an older one).
                open_ms = bar_open(s.interval, ts_ms)
                bar = Bar(open_ms, price, price, price, price, qty, amount)
                s.bars.append(bar)
                s.current = bar
                s.end = next_open(s.interval, open_ms)
                s.changed.append(bar)
                continue
            # Same period, or an older trade folded into the current bar.
            if price > bar.high:
                bar.high = price
            elif price < bar.low:
                bar.low = price
            bar.close = price
            bar.volume += qty
            bar.amount += amount
            changed = s.changed
            if not changed or changed[-1] is not bar:
                changed.append(bar)

    def query(self, interval: Interval, limit: int, now_ms: int) -> list[Bar]:
        """At most ``limit`` bars, oldest first, ending with the bar containing ``now_ms``.

        Periods without trades are flat bars at the previous close with volume 0. Nothing is
        invented before the first stored bar; stored bars opening after ``now_ms`` are left out.
        The returned bars are copies.
        """
        s = self._by_name[interval.name]
        if limit <= 0 or not s.bars:
            return []
        t = bar_open(interval, now_ms)
        stored = reversed(s.bars)
        cur = next(stored, None)
        while cur is not None and cur.open_time > t:
            cur = next(stored, None)
        out: list[Bar] = []
        while cur is not None and len(out) < limit:
            if cur.open_time == t:
                out.append(cur.copy())
                cur = next(stored, None)
            else:
                c = cur.close
                out.append(Bar(t, c, c, c, c, 0))
            t = prev_open(interval, t)
            while cur is not None and cur.open_time > t:  # only if stored bars are misaligned
                cur = next(stored, None)
        out.reverse()
        return out

    def take_changed(self) -> list[tuple[str, Bar]]:
        """(canonical interval name, copy of the bar) for every bar changed since the last call,
        each once in its latest state; clears the record."""
        out: list[tuple[str, Bar]] = []
        for s in self._series:
            if s.changed:
                name = s.interval.name
                out.extend((name, bar.copy()) for bar in s.changed)
                s.changed = []
        return out

    def restore(self, interval_name: str, bars: list[Bar]) -> None:
        """Replace the bars of one interval with persisted ``bars`` (oldest first), at startup.

        Only the newest bars that fit are kept; they are copied. Pending changes of that interval
        are dropped. Raises ValueError for an unknown interval, a bar whose open time is not a bar
        boundary, or open times that are not strictly increasing.
        """
        interval = parse_interval(interval_name)
        _check_series(interval, bars)
        s = self._by_name[interval.name]
        s.bars.clear()
        s.bars.extend(bar.copy() for bar in bars)
        s.changed = []
        if s.bars:
            s.current = s.bars[-1]
            s.end = next_open(interval, s.current.open_time)
        else:
            s.current = None
            s.end = 0

    def seed(self, interval_name: str, bars: list[Bar]) -> int:
        """Put ``bars`` (oldest first) before the stored bars of one interval: a past drawn
        for a market (``sim.history``). Only the bars opening before the first stored one
        are taken (history is not rewritten), as many as the interval keeps; they count as
        changed, so the store writes them. How many were taken. Raises ValueError as
        :meth:`restore` does."""
        interval = parse_interval(interval_name)
        _check_series(interval, bars)
        s = self._by_name[interval.name]
        first = s.bars[0].open_time if s.bars else None
        older = [bar.copy() for bar in bars if first is None or bar.open_time < first]
        room = keep_for(interval) - len(s.bars)
        taken = older[max(0, len(older) - room) :] if room > 0 else []
        if not taken:
            return 0
        s.bars.extendleft(reversed(taken))
        s.changed = [*taken, *s.changed]
        if s.current is None:
            s.current = s.bars[-1]
            s.end = next_open(interval, s.current.open_time)
        return len(taken)

    def bars(self, interval: Interval) -> list[Bar]:
        """Copies of the stored bars of ``interval`` (only those that saw a trade), oldest first."""
        return [bar.copy() for bar in self._by_name[interval.name].bars]

    def ticker(self, now_ms: int) -> Ticker:
        """24h rolling statistics from the 1min bars with ``now_ms - 24h < open_time <= now_ms``."""
        bars = self._series[0].bars
        if not bars:
            return Ticker(0, 0, 0, 0, 0)
        last = bars[-1].close
        since = now_ms - DAY_MS
        window = [bar for bar in _newest_first_until(bars, since) if bar.open_time <= now_ms]
        if not window:
            return Ticker(last, last, last, 0, last)
        return Ticker(
            high=max(bar.high for bar in window),
            low=min(bar.low for bar in window),
            last=last,
            volume=sum(bar.volume for bar in window),
            open=window[-1].open,
            amount=sum(bar.amount for bar in window),
        )


def _check_series(interval: Interval, bars: list[Bar]) -> None:
    previous: int | None = None
    for bar in bars:
        if bar_open(interval, bar.open_time) != bar.open_time:
            raise ValueError(f"{interval.name} bar open time {bar.open_time} is not aligned")
        if previous is not None and bar.open_time <= previous:
            raise ValueError(f"{interval.name} bars are not in increasing time order")
        previous = bar.open_time


def _newest_first_until(bars: deque[Bar], since: int) -> Iterator[Bar]:
    """The bars opening after ``since``, newest first (``bars`` is in time order)."""
    for bar in reversed(bars):
        if bar.open_time <= since:
            return
        yield bar
