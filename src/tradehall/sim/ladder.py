"""What a market maker quotes, as pure functions: the ladder around a reference price, bounded
by the maker's inventory, and which resting orders to keep, cancel or add to reach it.

The inventory bound holds by construction: the bids on the book never add up to more than
``max_inventory - inventory`` (buying is what raises the inventory), nor the asks to more than
``max_inventory + inventory``. A fill moves the inventory by exactly what it takes off the
book, so between two requotes ``inventory + resting bids`` and ``inventory - resting asks``
cannot grow, and the inventory stays within ``[-max_inventory, max_inventory]``."""

from __future__ import annotations

from dataclasses import dataclass

BUY = "BUY"
SELL = "SELL"


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


def spacing(ref: int, bps: float) -> int:
    """The distance between levels in ticks: ``bps`` of the reference, at least one tick."""
    return max(1, round(ref * bps / 10_000))


def ladder(
    ref: int,
    step: int,
    levels: int,
    size: int,
    inventory: int,
    max_inventory: int,
    skew: float,
    *,
    buy_room: int,
    sell_room: int,
    min_qty: int,
) -> list[Quote]:
    """Up to ``levels`` bids and asks on a grid of ``step`` ticks around ``ref``, shifted away
    from the side the maker holds too much of (by ``skew`` levels at full inventory). Each
    level holds ``size``; a side stops where the inventory bound or ``*_room`` (what the
    maker's funds allow) leaves less than ``min_qty``."""
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
            qty = min(size, room)
            if price <= 0 or qty < min_qty or qty <= 0:
                break
            quotes.append(Quote(side, price, qty))
            room -= qty
    return quotes


def reconcile(resting: list[Resting], wanted: list[Quote]) -> tuple[list[int], list[Quote]]:
    """(ids to cancel, quotes to place) to turn ``resting`` into ``wanted``. A resting order
    stays when it sits at a wanted side and price with no more than the wanted size left and at
    least half of it (so a level eaten into is refreshed, and nothing is re-placed that needs
    no change: most ticks move no level)."""
    by_level = {(q.side, q.price): q for q in wanted}
    cancel: list[int] = []
    for order in resting:
        quote = by_level.get((order.side, order.price))
        if quote is not None and quote.qty // 2 <= order.remaining <= quote.qty:
            del by_level[(order.side, order.price)]
        else:
            cancel.append(order.id)
    return cancel, list(by_level.values())
