"""What a market maker quotes, as pure functions: the ladder around a reference price, bounded
by the maker's inventory, and which resting orders to keep, cancel or add to reach it.

The inventory bound holds by construction: the bids on the book never add up to more than
``max_inventory - inventory`` (buying is what raises the inventory), nor the asks to more than
``max_inventory + inventory``. A fill moves the inventory by exactly what it takes off the
book, so between two requotes ``inventory + resting bids`` and ``inventory - resting asks``
cannot grow, and the inventory stays within ``[-max_inventory, max_inventory]``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

BUY = "BUY"
SELL = "SELL"
STICKY = 3, 2
"""A resting order keeps the size it was placed with while the profile's size for the level
it now sits at is within this ratio of it, either way (``keeping``)."""


@dataclass(frozen=True, slots=True)
class Quote:
    side: str
    price: int
    """Ticks."""
    qty: int
    """Lots (spot) or contracts (futures)."""


@dataclass(frozen=True, slots=True)
class Resting:
    """One of the maker's orders on the book."""

    id: int
    side: str
    price: int
    remaining: int
    qty: int
    """What it was placed with."""


def spacing(ref: int, bps: float, current: int = 0) -> int:
    """The distance between levels in ticks: ``bps`` of the reference, at least one tick. A
    ``current`` spacing within a tenth of that stays: a reference hovering where the rounding
    turns (599.5 ticks) would otherwise move the whole grid, every level of the ladder, each
    time it crossed."""
    exact = ref * bps / 10_000
    if current and abs(current - exact) <= exact / 10:
        return current
    return max(1, round(exact))


def ladder(
    ref: int,
    step: int,
    levels: int,
    size: Callable[[str, int, int], int],
    inventory: int,
    max_inventory: int,
    skew: float,
    *,
    buy_room: int,
    sell_room: int,
    min_qty: int,
) -> list[Quote]:
    """Up to ``levels`` bids and asks on a grid of ``step`` ticks around ``ref``, shifted away
    from the side the maker holds too much of (by ``skew`` levels at full inventory). Level
    ``i`` of a side (0 at the touch) at ``price`` holds ``size(side, i, price)`` (the depth
    profile, ``keeping`` what rests); a side stops where the inventory bound or ``*_room``
    (what the maker's funds allow) leaves less than ``min_qty``."""
    ratio = max(-1.0, min(1.0, inventory / max_inventory)) if max_inventory > 0 else 0.0
    center = ref - round(skew * ratio * step)
    best_bid = center // step * step  # the grid line at or below the centre: a one-step spread
    best_ask = best_bid + step
    quotes: list[Quote] = []
    rooms = (
        (BUY, min(buy_room, max_inventory - inventory), best_bid, -step),
        (SELL, min(sell_room, max_inventory + inventory), best_ask, step),
    )
    for side, room, first, direction in rooms:
        for i in range(levels):
            price = first + i * direction
            qty = min(size(side, i, price), room) if price > 0 else 0
            if price <= 0 or qty < min_qty or qty <= 0:
                break
            quotes.append(Quote(side, price, qty))
            room -= qty
    return quotes


def keeping(
    size: Callable[[int, int], int], resting: Sequence[Resting]
) -> Callable[[str, int, int], int]:
    """``size(level, price)`` (the profile), except that a level where an order rests, placed
    with a size within ``STICKY`` of the profile's, keeps that size: as the reference moves,
    the levels of a side move through the profile's steps, and re-placing each of them at its
    new step's size would cancel and place most of the ladder on every move. The ladder counts
    the kept sizes against its rooms, so the inventory bound holds all the same."""
    placed = {(r.side, r.price): r.qty for r in resting}
    num, den = STICKY

    def sized(side: str, level: int, price: int) -> int:
        want = size(level, price)
        have = placed.get((side, price))
        if have is not None and want * den <= have * num and have * den <= want * num:
            return have
        return want

    return sized


def reconcile(resting: list[Resting], wanted: list[Quote]) -> tuple[list[int], list[Quote]]:
    """(ids to cancel, quotes to place) to turn ``resting`` into ``wanted``. A resting order
    stays when it is the wanted quote (side, price and the size it was placed with) and has
    at least half of it left (so a level eaten into is refreshed, one that moved to a larger
    or smaller step of the profile is re-placed at its new size, and nothing is re-placed
    that needs no change: most ticks move no level)."""
    by_level = {(q.side, q.price): q for q in wanted}
    cancel: list[int] = []
    for order in resting:
        quote = by_level.get((order.side, order.price))
        if quote is not None and order.qty == quote.qty and quote.qty // 2 <= order.remaining:
            del by_level[(order.side, order.price)]
        else:
            cancel.append(order.id)
    return cancel, list(by_level.values())
