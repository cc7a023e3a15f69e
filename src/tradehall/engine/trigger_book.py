"""The waiting conditional orders of one contract, ordered for the price check.

A stop-loss or take-profit trigger fires when the last price reaches a fixed price, from
below (it is *rising*: the last price must be >= the trigger) or from above (<=): two heaps
give the reached ones without looking at the others. A trailing trigger's price follows the
market, so those are kept apart and all looked at on each price.

Cancelled and fired triggers leave their heap entries behind; an entry whose trigger is no
longer waiting is dropped when it comes to the top, and the heaps are rebuilt once such
entries outnumber the live ones.
"""

from __future__ import annotations

import heapq

from tradehall.engine.futures_model import STOP_LOSS, TRAILING_BUY, TRAILING_SELL, Trigger
from tradehall.engine.orders import BUY

COMPACT_SLACK = 64
"""Dead heap entries tolerated beyond the live ones before the heaps are rebuilt."""


def rising(trigger_type: int, side: str) -> bool:
    """Whether a fixed-price trigger fires when the price is at or above it (else at or
    below): a BUY stop-loss and a SELL take-profit rise."""
    return (trigger_type == STOP_LOSS) == (side == BUY)


def reached(trigger_type: int, side: str, trigger_price: int, price: int) -> bool:
    return price >= trigger_price if rising(trigger_type, side) else price <= trigger_price


def is_trailing(trigger: Trigger) -> bool:
    return trigger.trigger_type in (TRAILING_BUY, TRAILING_SELL)


class TriggerBook:
    __slots__ = ("falling", "fixed", "rising", "trailing")

    def __init__(self) -> None:
        self.rising: list[tuple[int, int]] = []
        """(trigger price, id): fires when the price is >= it; lowest first."""
        self.falling: list[tuple[int, int]] = []
        """(-trigger price, id): fires when the price is <= it; highest first."""
        self.trailing: dict[int, Trigger] = {}
        self.fixed: dict[int, Trigger] = {}
        """The waiting fixed-price triggers (what the heap entries are checked against)."""

    def add(self, trigger: Trigger) -> None:
        if is_trailing(trigger):
            self.trailing[trigger.id] = trigger
            return
        self.fixed[trigger.id] = trigger
        if rising(trigger.trigger_type, trigger.side):
            heapq.heappush(self.rising, (trigger.trigger_price, trigger.id))
        else:
            heapq.heappush(self.falling, (-trigger.trigger_price, trigger.id))
        if len(self.rising) + len(self.falling) > 2 * len(self.fixed) + COMPACT_SLACK:
            self._compact()

    def remove(self, trigger: Trigger) -> None:
        if self.trailing.pop(trigger.id, None) is None:
            self.fixed.pop(trigger.id, None)

    def reached_fixed(self, high: int, low: int) -> list[Trigger]:
        """The fixed-price triggers that prices between ``low`` and ``high`` reach (those
        that fire when the price rises to them: ``high``; falls to them: ``low``), taken out
        of the heaps (the caller fires every one of them)."""
        out = []
        fixed = self.fixed
        heap = self.rising
        while heap and heap[0][0] <= high:
            trigger = fixed.get(heapq.heappop(heap)[1])
            if trigger is not None:
                out.append(trigger)
        heap = self.falling
        while heap and -heap[0][0] >= low:
            trigger = fixed.get(heapq.heappop(heap)[1])
            if trigger is not None:
                out.append(trigger)
        return out

    def _compact(self) -> None:
        self.rising = [e for e in self.rising if e[1] in self.fixed]
        self.falling = [e for e in self.falling if e[1] in self.fixed]
        heapq.heapify(self.rising)
        heapq.heapify(self.falling)
