"""The reference price of each spot pair's price band: the time-weighted median of its last
trade price over ``WINDOW_MS``, sampled on the price tick. A trade far from the market moves
it only as long as that price holds for half the window, so one account cannot walk the band
with a few small trades.
"""

from __future__ import annotations

from tradehall.engine.futures_model import KIND_REFERENCE, FuturesChanged, PriceReference
from tradehall.engine.index_sources import sample_points, smoothed
from tradehall.engine.spot import SpotMarkets

WINDOW_MS = 60_000


def tick(spot: SpotMarkets, ts: int) -> None:
    """Sample every banded pair's last price and emit the references that changed."""
    start = ts - WINDOW_MS
    for symbol, pair in spot.pairs.items():
        if not pair.price_band:
            continue
        last = spot.last_price.get(symbol, 0)
        reference = spot.references.get(symbol)
        if reference is None:
            if not last:
                continue
            reference = PriceReference(symbol)
        changed = sample_points(reference.samples, last, ts, start)
        value = smoothed(reference.samples, start, ts, True)
        if changed or value != reference.value:
            reference.value = value
            spot.set_reference(reference)
            copy = PriceReference(symbol, list(reference.samples), value)
            spot.events.append(FuturesChanged(KIND_REFERENCE, 0, symbol, 0, True, copy))
