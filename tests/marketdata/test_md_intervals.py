from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tradehall.marketdata import INTERVALS, bar_open, next_open, parse_interval, prev_open
from tradehall.marketdata.intervals import civil_from_days, days_from_civil


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * 1000


def test_canonical_names() -> None:
    assert [iv.name for iv in INTERVALS] == [
        "1min",
        "5min",
        "15min",
        "30min",
        "60min",
        "1day",
        "1week",
        "1month",
    ]
    for iv in INTERVALS:
        assert parse_interval(iv.name) is iv


def test_1h_alias_is_60min() -> None:
    assert parse_interval("1h") is parse_interval("60min")
    assert parse_interval("1h").name == "60min"


@pytest.mark.parametrize("name", ["4h", "1H", "1Min", "60MIN", "", " 1min", "1min ", "1d", "1w"])
def test_unsupported(name: str) -> None:
    with pytest.raises(ValueError):
        parse_interval(name)


def test_minute_hour_day_alignment() -> None:
    ts = ms(2024, 3, 5, 13, 47, 31) + 123
    assert bar_open(parse_interval("1min"), ts) == ms(2024, 3, 5, 13, 47)
    assert bar_open(parse_interval("5min"), ts) == ms(2024, 3, 5, 13, 45)
    assert bar_open(parse_interval("15min"), ts) == ms(2024, 3, 5, 13, 45)
    assert bar_open(parse_interval("30min"), ts) == ms(2024, 3, 5, 13, 30)
    assert bar_open(parse_interval("1h"), ts) == ms(2024, 3, 5, 13)
    assert bar_open(parse_interval("1day"), ts) == ms(2024, 3, 5)
    assert next_open(parse_interval("60min"), ms(2024, 3, 5, 23)) == ms(2024, 3, 6)


def test_bar_open_of_a_boundary_is_itself() -> None:
    for iv in INTERVALS:
        o = bar_open(iv, ms(2024, 1, 1))  # a Monday and a month start
        assert o == ms(2024, 1, 1)
        assert bar_open(iv, o - 1) < o
        assert bar_open(iv, next_open(iv, o) - 1) == o


def test_week_starts_monday() -> None:
    week = parse_interval("1week")
    monday = ms(2024, 6, 3)  # Monday
    assert datetime.fromtimestamp(monday / 1000, UTC).weekday() == 0
    assert bar_open(week, monday) == monday
    assert bar_open(week, monday - 1) == ms(2024, 5, 27)
    assert bar_open(week, ms(2024, 6, 9, 23, 59, 59) + 999) == monday  # Sunday night
    assert bar_open(week, ms(2024, 6, 5, 12)) == monday
    assert next_open(week, monday) == ms(2024, 6, 10)
    # Around the epoch (a Thursday): the week began Monday 1969-12-29.
    assert bar_open(week, 0) == ms(1969, 12, 29)


def test_month_ends() -> None:
    month = parse_interval("1month")
    assert bar_open(month, ms(2023, 12, 31, 23, 59, 59) + 999) == ms(2023, 12, 1)
    assert bar_open(month, ms(2024, 1, 1)) == ms(2024, 1, 1)
    assert next_open(month, ms(2023, 12, 1)) == ms(2024, 1, 1)
    assert prev_open(month, ms(2024, 1, 1)) == ms(2023, 12, 1)
    # February of a leap year has 29 days.
    assert bar_open(month, ms(2024, 2, 29, 18)) == ms(2024, 2, 1)
    assert next_open(month, ms(2024, 2, 1)) == ms(2024, 3, 1)
    assert next_open(month, ms(2024, 2, 1)) - ms(2024, 2, 1) == 29 * 86_400_000
    assert next_open(month, ms(2023, 2, 1)) - ms(2023, 2, 1) == 28 * 86_400_000
    assert bar_open(month, ms(2024, 3, 1) - 1) == ms(2024, 2, 1)
    assert next_open(month, ms(2024, 1, 31, 12)) == ms(2024, 2, 1)


def test_prev_open() -> None:
    for iv in INTERVALS:
        o = ms(2024, 1, 1)  # a Monday and a month start
        assert next_open(iv, prev_open(iv, o)) == o


@given(st.integers(min_value=-(10**12), max_value=10**13))
def test_against_datetime(ts: int) -> None:
    dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ts)
    day = dt.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = day - timedelta(days=day.weekday())
    first = day.replace(day=1)
    nxt = (
        first.replace(year=first.year + 1, month=1)
        if first.month == 12
        else first.replace(month=first.month + 1)
    )

    def to_ms(d: datetime) -> int:
        return (d - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)

    assert bar_open(parse_interval("1day"), ts) == to_ms(day)
    assert bar_open(parse_interval("1week"), ts) == to_ms(monday)
    assert bar_open(parse_interval("1month"), ts) == to_ms(first)
    assert next_open(parse_interval("1month"), to_ms(first)) == to_ms(nxt)
    days = ts // 86_400_000
    assert civil_from_days(days) == (day.year, day.month, day.day)
    assert days_from_civil(day.year, day.month, day.day) == days
