"""What every history format is read into: candles or trades, checked, then laid out as the
steps of the replayed reference (``settings.History``). The readers of the formats
(``replay_csv``, ``replay_binance``, ``replay_json``) share the checks and the errors here.

A candle is walked within its own interval, a quarter of it at each of four prices: the open,
then the low and the high in the order that makes the shortest way through the four prices
(low first for a candle that closes up, high first for one that closes down, the extreme
nearer the open first for one that closes where it opened), then the close. If the next candle
opens later than this one's interval ends (a gap in the file), the close holds until then.

Trades are each a step at its own time; trades in the same millisecond make one step (the
last one's price), and a trade at the price already held makes none.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from tradehall.sim.settings import History

SECONDS_BELOW = 10**11
"""A UNIX time below this is in seconds (10**11 s is the year 5138)..."""
MILLIS_BELOW = 10**14
"""...below this in milliseconds (10**14 ms is the year 5138), below ``MICROS_BELOW`` in
microseconds (data.binance.vision's spot files from 2025 on)."""
MICROS_BELOW = 10**17
DEFAULT_INTERVAL_MS = 60_000
"""The interval of a file's candles when neither the file says it nor two candles show it."""


class ReplayError(Exception):
    """A problem with a replay file: ``<file>:<line>: <field>: <problem>``."""

    def __init__(self, source: str, line: int, field: str, problem: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(f"{source}:{line}: {field}: {problem}")


@dataclass(frozen=True, slots=True)
class Candle:
    line: int
    """Where it is in the file (for messages)."""
    open_ms: int
    interval_ms: int
    """0: the file does not say (the spacing of its candles is taken)."""
    open: float
    high: float
    low: float
    close: float


def unix_ms(source: str, line: int, field: str, value: int) -> int:
    """``value`` (UNIX time in seconds, milliseconds or microseconds, told apart by its
    magnitude) in milliseconds."""
    if value < 0:
        raise ReplayError(source, line, field, f"must not be negative, got {value}")
    if value < SECONDS_BELOW:
        return value * 1000
    if value < MILLIS_BELOW:
        return value
    if value < MICROS_BELOW:
        return value // 1000
    raise ReplayError(source, line, field, f"{value} is not UNIX time in s, ms or us")


def integer(source: str, line: int, field: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ReplayError(source, line, field, f"{text!r} is not an integer") from None


def number(source: str, line: int, field: str, text: str, *, positive: bool = True) -> float:
    """A decimal number, positive (a price) or not negative (a volume)."""
    try:
        value = float(text)
    except ValueError:
        raise ReplayError(source, line, field, f"{text!r} is not a number") from None
    if value == float("inf") or not (value > 0 if positive else value >= 0):
        wanted = "a positive number" if positive else "a number, not negative"
        raise ReplayError(source, line, field, f"must be {wanted}, got {text}")
    return value


def walk(c: Candle) -> tuple[float, float, float, float]:
    """The four prices a candle is walked through (module docstring)."""
    if c.close > c.open or (c.close == c.open and c.open - c.low <= c.high - c.open):
        return (c.open, c.low, c.high, c.close)
    return (c.open, c.high, c.low, c.close)


def candles_history(source: str, candles: Iterable[Candle], fmt: str) -> History:
    """The steps of ``candles`` (in time order, each checked here)."""
    rows: list[Candle] = []
    for c in candles:
        if c.low > min(c.open, c.close) or c.high < max(c.open, c.close):
            field = "high" if c.high < max(c.open, c.close) else "low"
            raise ReplayError(source, c.line, field, "high/low do not contain open/close")
        if rows and c.open_ms <= rows[-1].open_ms:
            problem = (
                "rows must be in time order"
                if c.open_ms < rows[-1].open_ms
                else (f"a second candle opening at {c.open_ms} (line {rows[-1].line})")
            )
            raise ReplayError(source, c.line, "time", problem)
        rows.append(c)
    if not rows:
        raise ReplayError(source, 1, "rows", "no candles in the file")
    spacing = min(
        (b.open_ms - a.open_ms for a, b in pairwise(rows)),
        default=DEFAULT_INTERVAL_MS,
    )
    start = rows[0].open_ms
    times: array[int] = array("q")
    prices: array[float] = array("d")
    end = 0
    for i, c in enumerate(rows):
        interval = c.interval_ms or spacing
        span = min(interval, rows[i + 1].open_ms - c.open_ms) if i + 1 < len(rows) else interval
        for k, price in enumerate(walk(c)):
            _step(times, prices, c.open_ms - start + span * k // 4, price)
        end = c.open_ms - start + interval
    return History(times, prices, start, end, "candles", fmt, len(rows))


def trades_history(source: str, trades: Iterable[tuple[int, int, float]], fmt: str) -> History:
    """The steps of ``trades``: (line, UNIX ms, price), in time order (checked here)."""
    times: array[int] = array("q")
    prices: array[float] = array("d")
    start = held_ms = -1
    held = 0.0
    count = 0
    for line, ms, price in trades:
        if ms < held_ms:
            raise ReplayError(source, line, "time", "rows must be in time order")
        if count == 0:
            start = ms
        elif ms != held_ms:
            _step(times, prices, held_ms - start, held)
        count += 1
        held_ms, held = ms, price  # one step per millisecond: its last trade's price
    if not count:
        raise ReplayError(source, 1, "rows", "no trades in the file")
    _step(times, prices, held_ms - start, held)
    return History(times, prices, start, held_ms - start, "trades", fmt, count)


def _step(times: array[int], prices: array[float], ms: int, price: float) -> None:
    if not prices or prices[-1] != price:
        times.append(ms)
        prices.append(price)
