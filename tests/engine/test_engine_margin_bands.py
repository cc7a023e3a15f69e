"""Margin accounts' safe price ranges: after a trade only the accounts whose range the new
price has left are looked at, and that finds exactly what looking at every account finds.

Longs and shorts at many leverages sit on BTCUSDT while two spot accounts walk the price down
and then up by trading with each other (the margin accounts take no part, so only the ranges
can bring them to a sweep's attention). The walk runs twice, on an engine as it is and on one
whose every sweep looks at every account, and both must go through the same states.
"""

from __future__ import annotations

from typing import Any

import pytest

from tradehall.config import load_config
from tradehall.engine.commands import CancelOrder, Deposit, MarginTransfer, PlaceOrder
from tradehall.engine.engine import Engine
from tradehall.engine.events import Liquidated
from tradehall.engine.margin import POOL_ACCOUNT, Margin
from tradehall.engine.orders import BUY, IOC, LIMIT, SELL

SYMBOL = "BTCUSDT"
UNIT = 10**8
START = 5_000_000
"""50,000.00 USDT in ticks."""
BORROWERS = 24
MAKER = 99
"""Rests a bid 2 % below and an ask 2 % above each trade: what liquidations trade with."""


class Venue:
    def __init__(self) -> None:
        self.engine = Engine(load_config().markets, check_invariants=True)
        self.ts = 1_000
        self.liquidated = 0
        self.hashes: list[str] = []
        self.quotes: list[int] = []
        for account in (1, 2, MAKER):
            self.deposit(account, "BTC", 1_000 * UNIT)
            self.deposit(account, "USDT", 100_000_000 * UNIT)
        self.deposit(POOL_ACCOUNT, "BTC", 1_000 * UNIT)
        self.deposit(POOL_ACCOUNT, "USDT", 100_000_000 * UNIT)

    def apply(self, cmd: Any) -> Any:
        result = self.engine.apply(cmd)
        self.liquidated += sum(1 for e in result.events if type(e) is Liquidated)
        self.hashes.append(self.engine.state_hash())
        return result

    def deposit(self, account: int, asset: str, amount: int) -> None:
        self.apply(Deposit(self.ts, account, asset, amount, f"t{len(self.hashes)}"))

    def order(self, account: int, side: str, price: int, qty: int, tif: str = "GTC") -> Any:
        return self.apply(PlaceOrder(self.ts, account, SYMBOL, side, LIMIT, price, qty, tif=tif))

    def trade_at(self, price: int) -> None:
        self.ts += 1_000
        for order_id in self.quotes:
            state = self.engine.spot.books[SYMBOL].orders.get(order_id)
            if state is not None:
                self.apply(CancelOrder(self.ts, MAKER, SYMBOL, order_id))
        self.order(1, SELL, price, 1_000)
        self.order(2, BUY, price, 1_000, tif=IOC)
        bid = self.order(MAKER, BUY, price * 98 // 100, 10_000_000).reply.id
        ask = self.order(MAKER, SELL, price * 102 // 100, 10_000_000).reply.id
        self.quotes = [bid, ask]

    def borrower(self, user: int, long: bool, tenths_of_leverage: int) -> None:
        """1,000 USDT of margin and a position of 1.0x to 3.9x that, bought from (or sold to)
        account 1 or 2 at the start price with borrowed funds."""
        self.deposit(user, "USDT", 1_000 * UNIT)
        result = self.apply(MarginTransfer(self.ts, user, SYMBOL, "USDT", 1_000 * UNIT, True))
        account = result.reply.id
        qty = 20_000 * tenths_of_leverage // 10 // 1_000 * 1_000  # lots of 1e-6 BTC
        assert qty > 0
        if long:
            self.order(1, SELL, START, qty)
            self.order(account, BUY, START, qty)
        else:
            self.order(2, BUY, START, qty)
            self.order(account, SELL, START, qty)


def walk(venue: Venue) -> None:
    venue.trade_at(START)
    for i in range(BORROWERS):
        venue.borrower(3 + i, long=i % 2 == 0, tenths_of_leverage=10 + i * 29 // BORROWERS)
    price = START
    for _ in range(25):  # down 1 % a trade
        price -= START // 100
        venue.trade_at(price)
    for _ in range(45):  # then up 2 %
        price += START // 50
        venue.trade_at(price)


def test_ranges_find_what_a_whole_sweep_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_at: list[int] = []
    candidates = Margin._candidates

    def counted(self: Margin, symbol: str, price: int) -> Any:
        found = candidates(self, symbol, price)
        if found is not None:
            looked_at.append(len(found))
        return found

    monkeypatch.setattr(Margin, "_candidates", counted)
    ranged = Venue()
    walk(ranged)
    assert ranged.liquidated >= 4, ranged.liquidated  # longs on the way down, shorts up
    assert sorted(looked_at)[len(looked_at) // 2] <= 2, looked_at  # most trades: next to none

    monkeypatch.setattr(Margin, "_candidates", lambda self, symbol, price: None)
    whole = Venue()
    walk(whole)
    assert whole.hashes == ranged.hashes
