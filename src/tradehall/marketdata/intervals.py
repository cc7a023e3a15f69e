"""Candle intervals and their bar boundaries, in UNIX milliseconds (UTC).

Minute, hour and day bars align to the UNIX epoch; week bars start on Monday 00:00 UTC; month
bars are calendar months starting on the 1st at 00:00 UTC. Pure integer arithmetic throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MINUTE_MS: Final = 60_000
HOUR_MS: Final = 60 * MINUTE_MS
DAY_MS: Final = 24 * HOUR_MS
WEEK_MS: Final = 7 * DAY_MS
_MONDAY_OFFSET_MS: Final = 4 * DAY_MS
"""1970-01-01 was a Thursday; the first Monday, 1970-01-05, is 4 days after the epoch."""

IntervalKind = Literal["minute", "hour", "day", "week", "month"]


@dataclass(frozen=True, slots=True)
class Interval:
    name: str
    """Canonical name, e.g. ``"60min"`` (also reachable as ``"1h"``)."""
    kind: IntervalKind
    step_ms: int
    """Fixed bar length in milliseconds; 0 for months, whose length varies."""


INTERVALS: Final[tuple[Interval, ...]] = (
    Interval("1min", "minute", MINUTE_MS),
    Interval("5min", "minute", 5 * MINUTE_MS),
    Interval("15min", "minute", 15 * MINUTE_MS),
    Interval("30min", "minute", 30 * MINUTE_MS),
    Interval("60min", "hour", HOUR_MS),
    Interval("1day", "day", DAY_MS),
    Interval("1week", "week", WEEK_MS),
    Interval("1month", "month", 0),
)

ALIASES: Final[dict[str, str]] = {"1h": "60min"}
"""Accepted alternative names (futures clients send ``1h``) -> canonical name."""

_BY_NAME: Final[dict[str, Interval]] = {iv.name: iv for iv in INTERVALS}
_BY_NAME.update({alias: _BY_NAME[canonical] for alias, canonical in ALIASES.items()})


def parse_interval(name: str) -> Interval:
    """The interval called ``name`` (exact, case-sensitive; ``1h`` is ``60min``)."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported interval: {name!r}") from None


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the date ``days`` after 1970-01-01 (inverse of days_from_civil)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def _month_open(ts_ms: int, months_ahead: int) -> int:
    year, month, _ = civil_from_days(ts_ms // DAY_MS)
    index = year * 12 + (month - 1) + months_ahead
    return days_from_civil(index // 12, index % 12 + 1, 1) * DAY_MS


def bar_open(interval: Interval, ts_ms: int) -> int:
    """Open time (ms) of the ``interval`` bar containing ``ts_ms``."""
    step = interval.step_ms
    if interval.kind == "week":
        return ts_ms - (ts_ms - _MONDAY_OFFSET_MS) % step
    if step:
        return ts_ms - ts_ms % step
    return _month_open(ts_ms, 0)


def next_open(interval: Interval, open_ms: int) -> int:
    """Open time of the bar after the one containing ``open_ms`` (normally a bar open)."""
    if interval.step_ms:
        return bar_open(interval, open_ms) + interval.step_ms
    return _month_open(open_ms, 1)


def prev_open(interval: Interval, open_ms: int) -> int:
    """Open time of the bar before the one containing ``open_ms``."""
    return bar_open(interval, bar_open(interval, open_ms) - 1)
