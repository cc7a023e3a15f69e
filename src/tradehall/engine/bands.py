"""Keys that are each known to be safe while one price stays within a range, and which of them
a new price has left: what lets a liquidation sweep after a price move look only at the
accounts or positions near their liquidation (``risk_bands`` for futures, ``margin`` for
spot margin accounts), not at all of them.

Two heaps: the lower edges (highest first) and the upper edges (lowest first). Drawing a key
again leaves its old entries behind, dead; they are dropped when they reach the top, and
swept out when they outnumber the live ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

FAR = 2**62
"""Beyond any price (MAX_PRICE is 2**40): an upper edge here is no edge."""
COMPACT_SLACK = 64
"""Dead entries tolerated beyond twice the keys before the heaps are rebuilt."""
RESIZE_AFTER = 1024
"""Drawings after which an owner copies its set of stale keys to a table of its present
size: a set keeps the table of its largest size, and iterating it walks the whole table, so
after a sweep drained thousands of keys every later sweep would pay for them."""


class Bands(Generic[K]):
    __slots__ = ("_seq", "above", "below", "drawing")

    def __init__(self) -> None:
        self.below: list[tuple[int, int, K]] = []
        """(-low, drawing, key): the key is to be looked at when the price falls below low."""
        self.above: list[tuple[int, int, K]] = []
        """(high, drawing, key): the key is to be looked at when the price rises above high."""
        self.drawing: dict[K, int] = {}
        """Each key's current drawing (a number that only grows); entries of others are dead."""
        self._seq = 0

    def draw(self, key: K, low: int, high: int) -> None:
        """``key`` is safe while the price is within [low, high] (low <= 1: no lower edge;
        high >= FAR: no upper edge)."""
        self._seq += 1
        drawing = self.drawing[key] = self._seq
        if low > 1:
            heapq.heappush(self.below, (-low, drawing, key))
        if high < FAR:
            heapq.heappush(self.above, (high, drawing, key))
        if len(self.below) + len(self.above) > 2 * len(self.drawing) + COMPACT_SLACK:
            self._compact()

    def left(self, price: int) -> list[K]:
        """The keys whose range ``price`` is outside of; their entries are taken out (the
        caller keeps them to look at until it draws them again)."""
        out = []
        drawing = self.drawing
        below = self.below
        while below and -below[0][0] > price:
            _, drawn, key = heapq.heappop(below)
            if drawing.get(key) == drawn:
                out.append(key)
        above = self.above
        while above and above[0][0] < price:
            _, drawn, key = heapq.heappop(above)
            if drawing.get(key) == drawn:
                out.append(key)
        return out

    def forget(self, key: K) -> None:
        """``key`` is gone: its entries are dead."""
        self.drawing.pop(key, None)

    def _compact(self) -> None:
        drawing = self.drawing
        for heap in (self.below, self.above):
            heap[:] = [e for e in heap if drawing.get(e[2]) == e[1]]
            heapq.heapify(heap)


class Watch(Generic[K]):
    """What a liquidation sweep keeps besides the bands: per symbol (a pair, a contract) the
    bands of its keys, the keys to look at whatever the price (changed since their bands were
    drawn), and the symbols where every key has bands or is stale (after one sweep of all)."""

    __slots__ = ("_drawn", "banded", "bands", "stale")

    def __init__(self, symbols: Iterable[str]) -> None:
        self.bands: dict[str, Bands[K]] = {symbol: Bands() for symbol in symbols}
        self.stale: set[K] = set()
        self.banded: set[str] = set()
        self._drawn = 0

    def flag_left(self, symbol: str, price: int) -> set[K]:
        """Make stale the keys whose band on ``symbol`` ``price`` has left; the stale keys."""
        if self._drawn > RESIZE_AFTER:
            self.stale = set(self.stale)
            self._drawn = 0
        self.stale.update(self.bands[symbol].left(price))
        return self.stale

    def draw(self, symbol: str, key: K, low: int, high: int) -> None:
        """``key`` is safe on ``symbol`` within [low, high] (see ``Bands.draw``)."""
        self.stale.discard(key)
        self._drawn += 1
        self.bands[symbol].draw(key, low, high)

    def forget(self, key: K) -> None:
        """``key`` is gone (its positions or account closed)."""
        self.stale.discard(key)
        for bands in self.bands.values():
            bands.forget(key)
