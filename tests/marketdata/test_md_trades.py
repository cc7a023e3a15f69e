from __future__ import annotations

import pytest

from tradehall.marketdata import (
    RECENT_TRADES,
    Bar,
    MarketData,
    PublicTrade,
    RecentTrades,
    Ticker,
    parse_interval,
)

T0 = 1_717_372_800_000  # 2024-06-03 00:00 UTC


def trade(i: int) -> PublicTrade:
    return PublicTrade(i, T0 + i, 100 + i, 1, "BUY" if i % 2 else "SELL")


def test_latest_newest_first() -> None:
    r = RecentTrades()
    assert r.latest(10) == []
    for i in range(5):
        r.add(trade(i))
    assert [t.id for t in r.latest(3)] == [4, 3, 2]
    assert [t.id for t in r.latest(100)] == [4, 3, 2, 1, 0]
    assert r.latest(0) == []
    assert r.latest(-1) == []


def test_bound() -> None:
    r = RecentTrades()
    for i in range(RECENT_TRADES + 25):
        r.add(trade(i))
    assert RECENT_TRADES == 1000
    assert len(r) == 1000
    latest = r.latest(5000)
    assert len(latest) == 1000
    assert latest[0].id == RECENT_TRADES + 24
    assert latest[-1].id == 25


def test_restore() -> None:
    r = RecentTrades()
    r.add(trade(999_999))
    r.restore([trade(i) for i in range(1200)])  # oldest first
    assert len(r) == 1000
    assert [t.id for t in r.latest(2)] == [1199, 1198]
    r.add(trade(1200))
    assert [t.id for t in r.latest(2)] == [1200, 1199]
    assert r.latest(1000)[-1].id == 201


def test_market_data() -> None:
    md = MarketData(["BTCUSDT", "ETHUSDT"])
    assert md.symbols == ("BTCUSDT", "ETHUSDT")
    md.on_trade("BTCUSDT", 1, T0 + 5, 100, 2, "BUY")
    md.on_trade("BTCUSDT", 2, T0 + 6, 110, 1, "SELL")
    md.on_trade("ETHUSDT", 3, T0 + 7, 50, 4, "SELL")
    assert md.recent_trades("BTCUSDT", 10) == [
        PublicTrade(2, T0 + 6, 110, 1, "SELL"),
        PublicTrade(1, T0 + 5, 100, 2, "BUY"),
    ]
    assert md.klines("BTCUSDT", parse_interval("1h"), 5, T0 + 60_000) == [
        Bar(T0, 100, 110, 100, 110, 3)
    ]
    assert md.ticker("ETHUSDT", T0 + 60_000) == Ticker(50, 50, 50, 4, 50)
    changed = md.take_changed_bars()
    assert len(changed) == 16
    assert ("BTCUSDT", "60min", Bar(T0, 100, 110, 100, 110, 3)) in changed
    assert ("ETHUSDT", "1min", Bar(T0, 50, 50, 50, 50, 4)) in changed
    assert md.take_changed_bars() == []


def test_market_data_restore() -> None:
    md = MarketData(["BTCUSDT"])
    md.restore_bars("BTCUSDT", "1min", [Bar(T0, 1, 2, 1, 2, 3)])
    md.restore_bars("BTCUSDT", "1h", [Bar(T0, 1, 2, 1, 2, 3)])
    md.restore_trades("BTCUSDT", [trade(1), trade(2)])
    assert md.take_changed_bars() == []
    assert md.ticker("BTCUSDT", T0) == Ticker(2, 1, 2, 3, 1)
    assert [t.id for t in md.recent_trades("BTCUSDT", 5)] == [2, 1]
    md.on_trade("BTCUSDT", 3, T0 + 1, 5, 1, "BUY")
    assert md.klines("BTCUSDT", parse_interval("60min"), 5, T0) == [Bar(T0, 1, 5, 1, 5, 4)]


def test_market_data_errors() -> None:
    md = MarketData(["BTCUSDT"])
    with pytest.raises(KeyError):
        md.on_trade("NOPE", 1, T0, 1, 1, "BUY")
    with pytest.raises(KeyError):
        md.klines("NOPE", parse_interval("1min"), 1, T0)
    with pytest.raises(KeyError):
        md.ticker("NOPE", T0)
    with pytest.raises(KeyError):
        md.recent_trades("NOPE", 1)
    with pytest.raises(KeyError):
        md.restore_bars("NOPE", "1min", [])
    with pytest.raises(KeyError):
        md.restore_trades("NOPE", [])
    with pytest.raises(ValueError):
        md.on_trade("BTCUSDT", 1, T0, 1, 1, "buy")
    # A rejected trade changes nothing.
    assert md.recent_trades("BTCUSDT", 5) == []
    assert md.take_changed_bars() == []
