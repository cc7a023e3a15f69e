"""Price bands on orders: how far from a reference price (the mark for futures, the
smoothed last trade price for spot and margin) an order may trade.

A LIMIT BUY above ``reference x (1 + band)`` or a LIMIT SELL below ``reference x (1 - band)``
is refused (-1138): it would trade, now or against any order that later meets it, at a price
one account could print far from the market. A BUY below the band or a SELL above it is
accepted: it waits where it can trade only once the market comes to it. A MARKET order
sweeps the book at most to the band's edge on its side; what it could not fill there is
canceled (the order ends CANCELED with what it got).
"""

from __future__ import annotations

from tradehall.codes import Code, Reject
from tradehall.engine.contracts import RATE_ONE
from tradehall.engine.orders import BUY
from tradehall.units import format_units, format_units_trimmed


def edge(reference: int, band: int, side: str) -> int:
    """The worst price an order on ``side`` may trade at (0: no band or no reference)."""
    if not band or reference <= 0:
        return 0
    width = reference * band // RATE_ONE
    return reference + width if side == BUY else max(1, reference - width)


def check(
    side: str, price: int, reference: int, band: int, places: int, reference_name: str
) -> None:
    """Refuse a LIMIT price beyond the band's edge on its side."""
    worst = edge(reference, band, side)
    if not worst or (price <= worst if side == BUY else price >= worst):
        return
    where = "above" if side == BUY else "below"
    raise Reject(
        Code.PRICE_RANGE,
        f"{side} price {format_units(price, places)} is {where} the price band: at most"
        f" {format_units_trimmed(band * 100, 8)} % {where} the {reference_name}"
        f" {format_units(reference, places)}, {format_units(worst, places)}",
    )
