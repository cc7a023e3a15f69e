"""A price-time priority order book: sorted price levels, FIFO queues, O(1) cancel by id.

Each level is an intrusive doubly-linked list of orders, so removing any order is O(1).
Prices of each side sit in a sorted list with the best price at the end, so the best level
is found in O(1) and a new level is placed with one bisect.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from tradehall.engine.orders import BUY, Order


class Level:
    __slots__ = ("head", "price", "tail", "total")

    def __init__(self, price: int) -> None:
        self.price = price
        self.head: Order | None = None
        self.tail: Order | None = None
        self.total = 0
        """Remaining lots resting at this price."""

    def append(self, order: Order) -> None:
        order.prev = self.tail
        order.next = None
        if self.tail is None:
            self.head = order
        else:
            self.tail.next = order
        self.tail = order
        self.total += order.qty - order.filled

    def unlink(self, order: Order) -> None:
        if order.prev is None:
            self.head = order.next
        else:
            order.prev.next = order.next
        if order.next is None:
            self.tail = order.prev
        else:
            order.next.prev = order.prev
        order.prev = order.next = None

    def orders(self) -> list[Order]:
        out = []
        node = self.head
        while node is not None:
            out.append(node)
            node = node.next
        return out


class BookSide:
    """One side of a book. ``keys`` is sorted ascending with the best price last:
    bids store the price, asks store the negated price."""

    __slots__ = ("is_bid", "keys", "levels")

    def __init__(self, is_bid: bool) -> None:
        self.is_bid = is_bid
        self.keys: list[int] = []
        self.levels: dict[int, Level] = {}

    def best(self) -> Level | None:
        if not self.keys:
            return None
        key = self.keys[-1]
        return self.levels[key if self.is_bid else -key]

    def level_for(self, price: int) -> Level:
        level = self.levels.get(price)
        if level is None:
            level = self.levels[price] = Level(price)
            insort(self.keys, price if self.is_bid else -price)
        return level

    def drop(self, level: Level) -> None:
        del self.levels[level.price]
        key = level.price if self.is_bid else -level.price
        keys = self.keys
        if keys[-1] == key:
            keys.pop()
        else:
            del keys[bisect_left(keys, key)]

    def depth(self, limit: int) -> list[tuple[int, int]]:
        """Aggregated (price, lots) from the best level outwards."""
        if limit <= 0:
            return []
        out = []
        levels = self.levels
        sign = 1 if self.is_bid else -1
        for key in reversed(self.keys[-limit:] if limit < len(self.keys) else self.keys):
            price = key * sign
            out.append((price, levels[price].total))
        return out

    def iter_levels(self) -> list[Level]:
        sign = 1 if self.is_bid else -1
        return [self.levels[key * sign] for key in reversed(self.keys)]


class OrderBook:
    __slots__ = ("asks", "bids", "orders", "symbol")

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        self.bids = BookSide(is_bid=True)
        self.asks = BookSide(is_bid=False)
        self.orders: dict[int, Order] = {}

    def side_of(self, side: str) -> BookSide:
        return self.bids if side == BUY else self.asks

    def opposite(self, side: str) -> BookSide:
        return self.asks if side == BUY else self.bids

    def rest(self, order: Order) -> None:
        """Put ``order`` at the back of its price level (a new level if there is none)."""
        side = self.bids if order.side == BUY else self.asks
        price = order.price
        level = side.levels.get(price)
        if level is None:
            level = side.level_for(price)
        # Level.append, inlined: resting is half of all commands.
        tail = level.tail
        order.prev = tail
        order.next = None
        if tail is None:
            level.head = order
        else:
            tail.next = order
        level.tail = order
        level.total += order.qty - order.filled
        self.orders[order.id] = order

    def remove(self, order: Order) -> None:
        """Take a resting order off the book (cancel, or fully filled)."""
        side = self.bids if order.side == BUY else self.asks
        level = side.levels[order.price]
        level.total -= order.qty - order.filled
        # Level.unlink, inlined: every cancel and every filled maker comes here.
        prev = order.prev
        following = order.next
        if prev is None:
            level.head = following
        else:
            prev.next = following
        if following is None:
            level.tail = prev
        else:
            following.prev = prev
        order.prev = order.next = None
        if level.head is None:
            side.drop(level)
        del self.orders[order.id]

    def crossed(self) -> bool:
        bid, ask = self.bids.best(), self.asks.best()
        return bid is not None and ask is not None and bid.price >= ask.price
