"""``Batch.symbols()``: the markets whose public data a committed batch changed. Gateways'
read caches rely on it (docs/deployment.md, "Public reads on gateways"): a market missing
here would keep a stale public answer."""

from __future__ import annotations

from pathlib import Path

from support import make_exchange
from tradehall.engine.commands import CancelOrder, Deposit, PlaceOrder, SetIndexPrice

TS = 1_700_000_000_000
PRICE = 2_000_000  # 20,000.00 in BTCUSDT's ticks
LOTS = 10_000  # 0.010000 BTC


def test_only_the_markets_a_batch_touched_are_named(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")
    try:
        for account, asset, amount in ((1, "USDT", 10**14), (2, "BTC", 10**10)):
            exchange.apply(Deposit(TS, account, asset, amount, f"fund-{account}"))
        assert exchange.take_pending().symbols() == set()  # balances only: no market

        resting = exchange.apply(PlaceOrder(TS, 1, "BTCUSDT", "BUY", "LIMIT", PRICE, LOTS))
        assert exchange.take_pending().symbols() == {"BTCUSDT"}

        exchange.apply(PlaceOrder(TS, 2, "BTCUSDT", "SELL", "LIMIT", PRICE, LOTS // 2))
        traded = exchange.take_pending()
        assert traded.trades and traded.bars  # a trade, and the candles it moved
        assert traded.symbols() == {"BTCUSDT"}

        exchange.apply(CancelOrder(TS, 1, "BTCUSDT", resting.id))
        assert exchange.take_pending().symbols() == {"BTCUSDT"}

        exchange.apply(SetIndexPrice(TS, "E-BTC-USDT", 300_000))
        assert exchange.take_pending().symbols() == {"E-BTC-USDT"}  # index and mark
    finally:
        exchange.store.close()
