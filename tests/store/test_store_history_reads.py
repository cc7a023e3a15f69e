"""The store's windowed history reads on both backends: an account's orders and trades within
a time window (``/sapi/v3``), and its spot <-> futures transfers (``/asset/transferQuery``)."""

from __future__ import annotations

from pathlib import Path

from support import Backend
from tradehall import operations as ops
from tradehall.engine.commands import PlaceOrder

T0 = 1_700_000_000_000


def test_windowed_reads(backend: Backend, tmp_path: Path) -> None:
    ex = backend.exchange(tmp_path / "data")
    try:
        alice = ops.create_user(ex, "alice", T0)["id"]
        bob = ops.create_user(ex, "bob", T0)["id"]
        for user in (alice, bob):
            ops.transfer(ex, "deposit", user, "USDT", "100000", None, T0)
            ops.transfer(ex, "deposit", user, "BTC", "10", None, T0)
        # alice: a resting bid at T0+10, a bid bob fills at T0+20, an ETHBTC bid at T0+30.
        ex.apply(PlaceOrder(T0 + 10, alice, "BTCUSDT", "BUY", "LIMIT", 2_000_000, 10_000))
        ex.apply(PlaceOrder(T0 + 20, alice, "BTCUSDT", "BUY", "LIMIT", 3_000_000, 10_000))
        ex.apply(PlaceOrder(T0 + 20, bob, "BTCUSDT", "SELL", "LIMIT", 3_000_000, 10_000))
        ex.apply(PlaceOrder(T0 + 30, alice, "ETHBTC", "BUY", "LIMIT", 5_000, 1_000))
        for ts, amount, into in ((T0 + 40, "1", True), (T0 + 50, "2", True), (T0 + 60, "3", False)):
            source, target = ("spot", "futures") if into else ("futures", "spot")
            ops.futures_transfer(ex, alice, "USDT", amount, source, target, ts)
        ex.commit_now()
        store = ex.store

        orders = store.account_orders(alice, None, T0, T0 + 100, 10)
        assert [(o.symbol, o.time, o.status) for o in orders] == [
            ("ETHBTC", T0 + 30, "NEW"),
            ("BTCUSDT", T0 + 20, "FILLED"),
            ("BTCUSDT", T0 + 10, "NEW"),
        ]
        assert [o.time for o in store.account_orders(alice, "BTCUSDT", T0, T0 + 100, 1)] == [
            T0 + 20
        ]
        assert [o.time for o in store.account_orders(alice, None, T0 + 11, T0 + 29, 10)] == [
            T0 + 20
        ]
        (trade,) = store.account_trades_between(alice, None, T0, T0 + 100, 10)
        assert (trade.symbol, trade.bid_account, trade.ask_account) == ("BTCUSDT", alice, bob)
        assert store.account_trades_between(bob, "BTCUSDT", T0, T0 + 100, 10) == [trade]
        assert store.account_trades_between(alice, "ETHBTC", T0, T0 + 100, 10) == []
        assert store.account_trades_between(alice, None, T0 + 21, T0 + 100, 10) == []

        moves = store.account_transfers(alice, None, None, T0, T0 + 100, 0, 10)
        assert [(m.amount, m.into_futures, m.time) for m in moves] == [
            (300_000_000, False, T0 + 60),
            (200_000_000, True, T0 + 50),
            (100_000_000, True, T0 + 40),
        ]
        paged = store.account_transfers(alice, "USDT", True, T0, T0 + 100, 1, 10)
        assert [m.time for m in paged] == [T0 + 40]
        assert [
            m.time for m in store.account_transfers(alice, None, None, T0 + 45, T0 + 55, 0, 10)
        ] == [T0 + 50]
        assert store.account_transfers(alice, "BTC", None, T0, T0 + 100, 0, 10) == []
        assert store.account_transfers(bob, None, None, T0, T0 + 100, 0, 10) == []
        assert store.account_transfer(alice, moves[1].id) == moves[1]
        assert store.account_transfer(bob, moves[1].id) is None
    finally:
        ex.store.close()
