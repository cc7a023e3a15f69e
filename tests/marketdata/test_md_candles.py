from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tradehall.marketdata import (
    INTERVALS,
    KEEP,
    KEEP_OTHER,
    Bar,
    Candles,
    Ticker,
    bar_open,
    parse_interval,
    rose_percent,
)

MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
T0 = 1_717_372_800_000  # 2024-06-03 00:00 UTC, a Monday
M1 = parse_interval("1min")
M5 = parse_interval("5min")
H1 = parse_interval("60min")
D1 = parse_interval("1day")


def flat(t: int, price: int) -> Bar:
    return Bar(t, price, price, price, price, 0)


def test_ohlcv_aggregation() -> None:
    c = Candles()
    c.on_trade(T0 + 1_000, 100, 2)
    c.on_trade(T0 + 2_000, 105, 1)
    c.on_trade(T0 + 3_000, 98, 4)
    c.on_trade(T0 + 59_999, 101, 3)
    assert c.query(M1, 10, T0 + 59_999) == [Bar(T0, 100, 105, 98, 101, 10)]
    c.on_trade(T0 + MIN, 102, 5)
    assert c.query(M1, 10, T0 + MIN) == [
        Bar(T0, 100, 105, 98, 101, 10),
        Bar(T0 + MIN, 102, 102, 102, 102, 5),
    ]
    for iv in (M5, H1, D1, parse_interval("1week"), parse_interval("1month")):
        [bar] = c.query(iv, 10, T0 + MIN)
        assert (bar.open, bar.high, bar.low, bar.close, bar.volume) == (100, 105, 98, 102, 15)
        assert bar.open_time == bar_open(iv, T0)


def test_no_trade_gives_nothing() -> None:
    c = Candles()
    for iv in INTERVALS:
        assert c.query(iv, 100, T0) == []
    assert c.ticker(T0) == Ticker(0, 0, 0, 0, 0)


def test_gap_filling_oldest_first_and_limit() -> None:
    c = Candles()
    c.on_trade(T0 + 10, 100, 1)
    c.on_trade(T0 + 3 * MIN + 10, 110, 2)
    now = T0 + 5 * MIN + 30_000
    bars = c.query(M1, 100, now)
    assert bars == [
        Bar(T0, 100, 100, 100, 100, 1),
        flat(T0 + MIN, 100),
        flat(T0 + 2 * MIN, 100),
        Bar(T0 + 3 * MIN, 110, 110, 110, 110, 2),
        flat(T0 + 4 * MIN, 110),
        flat(T0 + 5 * MIN, 110),
    ]
    assert c.query(M1, 3, now) == bars[-3:]
    assert c.query(M1, 1, now) == [flat(T0 + 5 * MIN, 110)]
    assert c.query(M1, 0, now) == []
    # The series ends with the bar containing now_ms; later stored bars are left out.
    assert c.query(M1, 100, T0 + 2 * MIN) == bars[:3]
    # Nothing is invented before the first known bar.
    assert c.query(M1, 100, T0 - 1) == []
    # Hour bars: one stored, then flat hours up to now.
    assert c.query(H1, 3, T0 + 5 * HOUR) == [
        flat(T0 + 3 * HOUR, 110),
        flat(T0 + 4 * HOUR, 110),
        flat(T0 + 5 * HOUR, 110),
    ]


def test_gap_filling_months() -> None:
    month = parse_interval("1month")
    c = Candles()
    c.on_trade(1_701_388_800_000 + 5, 50, 1)  # 2023-12-01
    bars = c.query(month, 10, 1_709_251_200_000 + 1)  # 2024-03-01
    assert [b.open_time for b in bars] == [
        1_701_388_800_000,  # 2023-12-01
        1_704_067_200_000,  # 2024-01-01
        1_706_745_600_000,  # 2024-02-01
        1_709_251_200_000,  # 2024-03-01
    ]
    assert [b.volume for b in bars] == [1, 0, 0, 0]


def test_query_does_not_mutate() -> None:
    c = Candles()
    c.on_trade(T0, 100, 1)
    bars = c.query(M1, 10, T0 + 3 * MIN)
    for b in bars:
        b.close = 1
        b.volume = 99
    assert c.query(M1, 10, T0 + 3 * MIN) == [
        Bar(T0, 100, 100, 100, 100, 1),
        flat(T0 + MIN, 100),
        flat(T0 + 2 * MIN, 100),
        flat(T0 + 3 * MIN, 100),
    ]
    assert c.take_changed() == [
        (iv.name, Bar(bar_open(iv, T0), 100, 100, 100, 100, 1)) for iv in INTERVALS
    ]


def test_late_trade_folds_into_current_bar() -> None:
    c = Candles()
    c.on_trade(T0 + 10, 100, 1)
    c.on_trade(T0 + MIN + 10, 110, 1)
    c.on_trade(T0 + 20, 90, 3)  # older than the current 1min bar
    assert c.query(M1, 10, T0 + MIN) == [
        Bar(T0, 100, 100, 100, 100, 1),
        Bar(T0 + MIN, 110, 110, 90, 90, 4),
    ]


def test_bounds() -> None:
    c = Candles()
    n = KEEP + 50
    step = 25 * HOUR
    for i in range(n):
        c.on_trade(T0 + i * step, 100 + i, 1)
    assert len(c.bars(M1)) == KEEP
    assert len(c.bars(H1)) == KEEP_OTHER
    assert len(c.bars(D1)) == KEEP_OTHER
    assert len(c.bars(parse_interval("1week"))) == (n - 1) * step // (7 * DAY) + 1
    assert c.bars(M1)[-1].close == 100 + n - 1
    assert c.bars(M1)[0].open_time == T0 + 50 * step
    assert c.bars(H1)[0].open_time == T0 + (n - KEEP_OTHER) * step
    # Queries never reach before what is kept.
    assert c.query(D1, 10**6, T0 + n * step)[0].open_time == bar_open(
        D1, T0 + (n - KEEP_OTHER) * step
    )
    # 1min only fills up when trades span enough minutes.
    c2 = Candles()
    for i in range(KEEP + 10):
        c2.on_trade(T0 + i * MIN, 7, 1)
    assert len(c2.bars(M1)) == KEEP
    assert len(c2.query(M1, 10**6, T0 + (KEEP + 9) * MIN)) == KEEP
    assert c2.query(M1, 10**6, T0 + (KEEP + 9) * MIN)[0].open_time == T0 + 10 * MIN
    assert len(c2.bars(parse_interval("5min"))) == KEEP_OTHER
    assert len(c2.bars(D1)) == 2
    assert c2.bars(D1)[0].volume + c2.bars(D1)[1].volume == KEEP + 10


def test_take_changed() -> None:
    c = Candles()
    assert c.take_changed() == []
    c.on_trade(T0, 100, 1)
    c.on_trade(T0 + 1, 101, 1)
    c.on_trade(T0 + MIN, 102, 1)
    changed = c.take_changed()
    assert [name for name, _ in changed] == [
        "1min",
        "1min",
        "5min",
        "15min",
        "30min",
        "60min",
        "1day",
        "1week",
        "1month",
    ]
    assert changed[0] == ("1min", Bar(T0, 100, 101, 100, 101, 2))
    assert changed[1] == ("1min", Bar(T0 + MIN, 102, 102, 102, 102, 1))
    assert changed[-1] == ("1month", Bar(T0 - 2 * DAY, 100, 102, 100, 102, 3))  # June 1st
    assert c.take_changed() == []
    # The taken bars are copies.
    changed[1][1].volume = 1000
    c.on_trade(T0 + MIN + 5, 99, 2)
    again = dict(c.take_changed())
    assert again["1min"] == Bar(T0 + MIN, 102, 102, 99, 99, 3)
    assert again["60min"] == Bar(T0, 100, 102, 99, 99, 5)
    assert c.take_changed() == []


def test_take_changed_bar_evicted_from_memory() -> None:
    c = Candles()
    for i in range(KEEP + 5):
        c.on_trade(T0 + i * MIN, 1, 1)
    ones = [bar for name, bar in c.take_changed() if name == "1min"]
    assert len(ones) == KEEP + 5
    assert [b.open_time for b in ones] == [T0 + i * MIN for i in range(KEEP + 5)]


def test_restore_then_continue() -> None:
    c = Candles()
    c.restore("1min", [Bar(T0, 100, 120, 90, 110, 5), Bar(T0 + 2 * MIN, 111, 115, 105, 112, 3)])
    c.restore("1h", [Bar(T0, 100, 120, 90, 112, 8)])
    assert c.take_changed() == []
    c.on_trade(T0 + 2 * MIN + 30_000, 130, 1)
    assert c.query(M1, 10, T0 + 3 * MIN) == [
        Bar(T0, 100, 120, 90, 110, 5),
        flat(T0 + MIN, 110),
        Bar(T0 + 2 * MIN, 111, 130, 105, 130, 4),
        flat(T0 + 3 * MIN, 130),
    ]
    assert c.query(H1, 10, T0 + 3 * MIN) == [Bar(T0, 100, 130, 90, 130, 9)]
    changed = dict(c.take_changed())
    assert changed["1min"] == Bar(T0 + 2 * MIN, 111, 130, 105, 130, 4)
    assert changed["60min"] == Bar(T0, 100, 130, 90, 130, 9)
    assert changed["5min"] == Bar(T0, 130, 130, 130, 130, 1)  # nothing restored for 5min


def test_restore_keeps_newest_and_copies() -> None:
    c = Candles()
    bars = [Bar(T0 + i * HOUR, 1, 1, 1, 1, 1) for i in range(KEEP_OTHER + 10)]
    c.restore("60min", bars)
    kept = c.bars(H1)
    assert len(kept) == KEEP_OTHER
    assert kept[0].open_time == T0 + 10 * HOUR
    bars[-1].volume = 50
    assert c.bars(H1)[-1].volume == 1


def test_seed_puts_a_past_before_the_stored_bars_and_never_rewrites_them() -> None:
    c = Candles()
    c.on_trade(T0 + 3 * MIN + 5, 200, 2)
    c.take_changed()
    drawn = [Bar(T0 + i * MIN, 100 + i, 110 + i, 90 + i, 101 + i, 1) for i in range(5)]
    assert c.seed("1min", drawn) == 3  # the bars at 3 and 4 minutes would rewrite history
    assert c.bars(M1) == [*drawn[:3], Bar(T0 + 3 * MIN, 200, 200, 200, 200, 2)]
    changed = [bar for name, bar in c.take_changed() if name == "1min"]
    assert changed == drawn[:3]  # written by the store, oldest first
    assert c.seed("1min", drawn) == 0  # nothing older than the first stored bar is left
    c.on_trade(T0 + 3 * MIN + 10, 210, 1)  # the live bar goes on where it was
    assert c.bars(M1)[-1] == Bar(T0 + 3 * MIN, 200, 210, 200, 210, 3)


def test_seed_on_an_empty_series_makes_its_last_bar_the_live_one() -> None:
    c = Candles()
    assert c.seed("60min", [Bar(T0, 10, 12, 9, 11, 4), Bar(T0 + HOUR, 11, 11, 11, 11, 1)]) == 2
    c.on_trade(T0 + HOUR + 5 * MIN, 15, 1)
    assert c.bars(H1)[-1] == Bar(T0 + HOUR, 11, 15, 11, 15, 2)
    assert c.has_bars()
    assert not Candles().has_bars()


def test_seed_takes_only_what_the_interval_keeps() -> None:
    c = Candles()
    c.on_trade(T0 + (KEEP_OTHER + 20) * HOUR, 5, 1)
    drawn = [Bar(T0 + i * HOUR, 1, 1, 1, 1, 1) for i in range(KEEP_OTHER + 20)]
    assert c.seed("60min", drawn) == KEEP_OTHER - 1
    kept = c.bars(H1)
    assert len(kept) == KEEP_OTHER
    assert kept[0].open_time == T0 + 21 * HOUR
    assert kept[-1].close == 5


@pytest.mark.parametrize(
    ("name", "bars"),
    [
        ("4h", []),
        ("1min", [Bar(T0 + 1, 1, 1, 1, 1, 1)]),
        ("1min", [Bar(T0 + MIN, 1, 1, 1, 1, 1), Bar(T0, 1, 1, 1, 1, 1)]),
        ("1min", [Bar(T0, 1, 1, 1, 1, 1), Bar(T0, 1, 1, 1, 1, 1)]),
        ("1week", [Bar(T0 + DAY, 1, 1, 1, 1, 1)]),
    ],
)
def test_restore_and_seed_reject(name: str, bars: list[Bar]) -> None:
    with pytest.raises(ValueError):
        Candles().restore(name, bars)
    with pytest.raises(ValueError):
        Candles().seed(name, bars)


def test_ticker_window() -> None:
    c = Candles()
    c.on_trade(T0, 100, 1)  # exactly on a minute boundary
    c.on_trade(T0 + 10 * MIN, 150, 2)
    c.on_trade(T0 + 10 * MIN + 1, 80, 3)
    c.on_trade(T0 + 20 * MIN, 120, 4)
    assert c.ticker(T0 + 20 * MIN) == Ticker(high=150, low=80, last=120, volume=10, open=100)
    # 1ms before 24h have passed, the first trade is still in the window...
    assert c.ticker(T0 + DAY - 1) == Ticker(150, 80, 120, 10, 100)
    # ... and exactly 24h later it drops out.
    assert c.ticker(T0 + DAY) == Ticker(150, 80, 120, 9, 150)
    assert c.ticker(T0 + DAY + 10 * MIN) == Ticker(120, 120, 120, 4, 120)
    # No bar in the window: everything is the last price, volume 0.
    assert c.ticker(T0 + DAY + 20 * MIN) == Ticker(120, 120, 120, 0, 120)
    assert c.ticker(T0 + 100 * DAY).rose == "0.00"


def test_ticker_ignores_bars_after_now() -> None:
    c = Candles()
    c.on_trade(T0, 100, 1)
    c.on_trade(T0 + 5 * MIN, 200, 1)
    assert c.ticker(T0 + MIN) == Ticker(100, 100, 200, 1, 100)


@pytest.mark.parametrize(
    ("open_", "last", "expected"),
    [
        (10000, 9525, "-4.75"),
        (10000, 10475, "4.75"),
        (100, 100, "0.00"),
        (0, 123, "0.00"),
        (0, 0, "0.00"),
        (3, 4, "33.33"),
        (3, 2, "-33.33"),
        (3, 5, "66.67"),
        (3, 1, "-66.67"),
        (200000, 200001, "0.00"),  # +0.0005% -> 0.001 hundredths, rounds to 0
        (20000, 20001, "0.01"),  # +0.005% exactly: half rounds away from zero
        (20000, 19999, "-0.01"),
        (40000, 40001, "0.00"),  # +0.0025%
        (40000, 39999, "0.00"),  # never "-0.00"
        (1, 1000, "99900.00"),
        (100, 0, "-100.00"),
    ],
)
def test_rose_percent(open_: int, last: int, expected: str) -> None:
    assert rose_percent(open_, last) == expected


@st.composite
def trade_streams(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    start = draw(st.integers(min_value=1_600_000_000_000, max_value=1_800_000_000_000))
    steps = draw(
        st.lists(
            st.one_of(
                st.just(0),
                st.integers(min_value=0, max_value=90_000),
                st.integers(min_value=0, max_value=40 * HOUR),
            ),
            min_size=1,
            max_size=200,
        )
    )
    trades = []
    t = start
    for step in steps:
        t += step
        price = draw(st.integers(min_value=1, max_value=10**12))
        qty = draw(st.integers(min_value=1, max_value=10**9))
        trades.append((t, price, qty))
    return trades


@settings(max_examples=200, deadline=None)
@given(trade_streams())
def test_property_bars_consistent(trades: list[tuple[int, int, int]]) -> None:
    c = Candles()
    for ts, price, qty in trades:
        c.on_trade(ts, price, qty)
    ones = c.bars(M1)
    for bar in ones:
        assert bar.high >= max(bar.open, bar.close)
        assert bar.low <= min(bar.open, bar.close)
    span_minutes = (bar_open(M1, trades[-1][0]) - bar_open(M1, trades[0][0])) // MIN + 1
    if span_minutes < KEEP:
        assert sum(bar.volume for bar in ones) == sum(qty for _, _, qty in trades)
    for day in c.bars(D1):
        in_day = [p for ts, p, _ in trades if bar_open(D1, ts) == day.open_time]
        assert day.high == max(in_day)
        assert day.low == min(in_day)
    # Gap-filled queries are continuous and never mutate the stored bars.
    for iv in INTERVALS:
        before = c.bars(iv)
        series = c.query(iv, 400, trades[-1][0])
        assert series[-1].open_time == bar_open(iv, trades[-1][0])
        for a, b in pairwise(series):
            assert bar_open(iv, b.open_time - 1) == a.open_time
            if b.volume == 0:
                assert b.open == b.close == a.close
        assert c.bars(iv) == before
