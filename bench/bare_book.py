"""The reference for part 1: the same command stream on a bare pure-Python order book.

Price-time priority, the same structure as the engine's book (a dict of levels per side, the
prices in a sorted list, each level a doubly-linked FIFO, an id index), the same matching rules
(limit and market orders, a MARKET BUY spending a quote budget, self-trade prevention by
cancelling the resting order) and the same order ids, so it goes through the same book states
as the engine. What it leaves out is everything else a command costs in the exchange:
validation, balances and holds, fees, ledger entries, events and order snapshots.

Its speed on the machine of a run is the yardstick for the engine's: the target is a ratio to
it in the same run (25 %, issue 18's decision; first 400,000 commands/s, 40 % of the
~1,000,000 such a book reached on the machine kind it was written for), since the ratio
travels between machines better than the absolute figure.
"""

from __future__ import annotations

import time
from bisect import bisect_left, insort
from typing import Any

from tradehall.engine.commands import CancelOrder, Command, PlaceOrder


class BareOrder:
    __slots__ = ("account", "filled", "id", "is_buy", "next", "prev", "price", "qty")

    def __init__(self, id: int, account: int, is_buy: bool, price: int, qty: int) -> None:
        self.id = id
        self.account = account
        self.is_buy = is_buy
        self.price = price
        self.qty = qty
        self.filled = 0
        self.prev: BareOrder | None = None
        self.next: BareOrder | None = None


class BareLevel:
    __slots__ = ("head", "price", "tail", "total")

    def __init__(self, price: int) -> None:
        self.price = price
        self.head: BareOrder | None = None
        self.tail: BareOrder | None = None
        self.total = 0


class BareSide:
    """Prices sorted ascending with the best last (asks store negated prices)."""

    __slots__ = ("is_bid", "keys", "levels")

    def __init__(self, is_bid: bool) -> None:
        self.is_bid = is_bid
        self.keys: list[int] = []
        self.levels: dict[int, BareLevel] = {}


class BareBook:
    def __init__(self, quote_per_tick_lot: int) -> None:
        self.bids = BareSide(True)
        self.asks = BareSide(False)
        self.orders: dict[int, BareOrder] = {}
        self.next_id = 1
        self.trades = 0
        self.lot_cost = quote_per_tick_lot

    def apply(self, cmd: Command) -> None:
        if type(cmd) is CancelOrder:
            order = self.orders.get(cmd.order_id or 0)
            if order is not None and order.account == cmd.account:
                self._remove(order)
        elif type(cmd) is PlaceOrder:
            self._place(cmd)

    def _place(self, cmd: PlaceOrder) -> None:
        order = BareOrder(self.next_id, cmd.account, cmd.side == "BUY", cmd.price, cmd.qty)
        self.next_id += 1
        is_buy = order.is_buy
        opposite = self.asks if is_buy else self.bids
        limit = cmd.price if cmd.type == "LIMIT" else 0
        by_budget = cmd.type == "MARKET" and is_buy
        budget = cmd.quote_qty
        affordable = 0
        while opposite.keys:
            key = opposite.keys[-1]
            level = opposite.levels[-key if is_buy else key]
            if limit and (level.price > limit if is_buy else level.price < limit):
                break
            if by_budget:
                affordable = budget // (level.price * self.lot_cost)
                if affordable == 0:
                    break
            maker = level.head
            while maker is not None:
                following = maker.next
                if maker.account == order.account:
                    self._remove(maker)  # self-trade prevention: the resting order goes
                    maker = following
                    continue
                available = maker.qty - maker.filled
                if by_budget:
                    qty = min(available, affordable)
                    affordable -= qty
                    budget -= qty * level.price * self.lot_cost
                else:
                    qty = min(available, order.qty - order.filled)
                    order.filled += qty
                self._fill(maker, qty)
                if by_budget:
                    if affordable == 0:
                        break
                elif order.filled == order.qty:
                    return
                maker = following
        if limit and cmd.tif == "GTC" and order.filled < order.qty:
            self._rest(order)

    def _fill(self, maker: BareOrder, qty: int) -> None:
        self.trades += 1
        maker.filled += qty
        if maker.filled == maker.qty:
            self._remove(maker)
        else:
            side = self.bids if maker.is_buy else self.asks
            side.levels[maker.price].total -= qty

    def _rest(self, order: BareOrder) -> None:
        side = self.bids if order.is_buy else self.asks
        level = side.levels.get(order.price)
        if level is None:
            level = side.levels[order.price] = BareLevel(order.price)
            insort(side.keys, order.price if side.is_bid else -order.price)
        order.prev = level.tail
        if level.tail is None:
            level.head = order
        else:
            level.tail.next = order
        level.tail = order
        level.total += order.qty - order.filled
        self.orders[order.id] = order

    def _remove(self, order: BareOrder) -> None:
        side = self.bids if order.is_buy else self.asks
        level = side.levels[order.price]
        level.total -= order.qty - order.filled
        if order.prev is None:
            level.head = order.next
        else:
            order.prev.next = order.next
        if order.next is None:
            level.tail = order.prev
        else:
            order.next.prev = order.prev
        if level.head is None:
            del side.levels[order.price]
            key = order.price if side.is_bid else -order.price
            if side.keys[-1] == key:
                side.keys.pop()
            else:
                del side.keys[bisect_left(side.keys, key)]
        del self.orders[order.id]


def bare_pass(
    seed: list[Command], cmds: list[Command], quote_per_tick_lot: int, first_order_id: int
) -> tuple[dict[str, Any], set[int]]:
    """Apply the seed, then time the stream; returns the figures and the ids left resting."""
    book = BareBook(quote_per_tick_lot)
    book.next_id = first_order_id
    for cmd in seed:
        book.apply(cmd)
    apply = book.apply
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    for cmd in cmds:
        apply(cmd)
    elapsed = (time.perf_counter_ns() - t0) / 1e9
    cpu = time.process_time() - cpu0
    figures = {
        "commands": len(cmds),
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "commands_per_s": len(cmds) / elapsed,
        "commands_per_cpu_s": len(cmds) / cpu if cpu > 0 else None,
        "trades": book.trades,
    }
    return figures, set(book.orders)
