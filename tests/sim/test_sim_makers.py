"""Makers trading through a real exchange (every invariant audited after every command):
whatever the takers do and wherever the reference goes, a maker's inventory stays within its
bound, and every asset is conserved."""

from __future__ import annotations

import contextlib
import tempfile
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import make_exchange
from tradehall.codes import Reject
from tradehall.engine import audit
from tradehall.engine.commands import Deposit, FuturesTransfer, SetIndexPrice
from tradehall.exchange import Exchange
from tradehall.sim.ladder import BUY, SELL
from tradehall.sim.participants import Maker
from tradehall.sim.settings import MakerSettings
from tradehall.sim.venue import FuturesVenue, SpotVenue, Venue

MAKER, TAKER = 1, 2
SETTINGS = MakerSettings(
    levels=6, spacing_bps=10, depth=Decimal(600), growth=0.5, variation=0.3, inventory_limit=0.25
)
"""A small ladder (its first level about 0.001 BTC) whose inventory bound the takes below reach."""

step = st.one_of(
    st.tuples(st.just("move"), st.floats(-0.02, 0.02)),
    st.tuples(
        st.just("take"),
        st.sampled_from([BUY, SELL]),
        st.integers(1, 12),
        st.booleans(),
    ),
)


def funded(symbol: str) -> tuple[Exchange, Venue, int]:
    ex = make_exchange(Path(tempfile.mkdtemp()) / "t.db")
    ts = 1_000
    for user in (MAKER, TAKER):
        ex.create_user(f"u{user}", ts)
        for asset, amount in (("BTC", 100 * 10**8), ("USDT", 10**7 * 10**8)):
            ex.apply(Deposit(ts, user, asset, amount, f"fund-{user}-{asset}"))
    start = 30_000.0
    if symbol == "BTCUSDT":
        pair = ex.config.markets.pairs[symbol]
        venue: Venue = SpotVenue(ex, pair, round(start * 10**pair.price_precision))
        return ex, venue, 100 * 10**8
    contract = ex.config.markets.contracts[symbol]
    for user in (MAKER, TAKER):
        ex.apply(FuturesTransfer(ts, user, contract.margin_coin, 50 * 10**8, True))
    return ex, FuturesVenue(ex, contract, round(start * 10**contract.price_precision)), 0


def run(symbol: str, steps: list[tuple[object, ...]]) -> None:
    ex, venue, base = funded(symbol)
    price = 30_000.0
    maker = Maker(MAKER, "maker", venue, SETTINGS, base, start=venue.ticks(price), key="1/maker")
    bound = maker.max_inventory
    ts = 2_000
    maker.act(venue.ticks(price), ts)
    for item in steps:
        ts += 1
        ref = venue.ticks(price)
        if item[0] == "move":
            price *= 1 + float(item[1])  # type: ignore[arg-type]
            if isinstance(venue, FuturesVenue):
                ex.apply(SetIndexPrice(ts, symbol, venue.ticks(price)))
        else:
            _, side, units, marketable = item
            slip = 0.01 if side == BUY else -0.01
            limit = round(ref * (1 + slip)) if marketable else 0
            # A refusal (a market order meeting an empty side) changes nothing.
            with contextlib.suppress(Reject):
                venue.take(TAKER, str(side), int(units) * venue.unit, limit, ts)  # type: ignore[call-overload]
        inventory = venue.inventory(MAKER, base)
        assert -bound <= inventory <= bound
        maker.act(venue.ticks(price), ts)
        assert -bound <= venue.inventory(MAKER, base) <= bound
    assert audit.check(ex.engine) == []
    totals = ex.engine.ledger.totals()
    for asset, external in ex.engine.ledger.external.items():
        assert totals.get(asset, 0) == external  # nothing created or destroyed
    ex.store.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=25))
def test_spot_maker_inventory_stays_bounded_and_assets_are_conserved(
    steps: list[tuple[object, ...]],
) -> None:
    run("BTCUSDT", steps)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=25))
def test_futures_maker_net_position_stays_bounded_and_assets_are_conserved(
    steps: list[tuple[object, ...]],
) -> None:
    run("E-BTC-USDT", steps)


def test_a_maker_bought_out_of_one_side_stops_at_its_bound_and_still_quotes_the_other() -> None:
    ex, venue, base = funded("BTCUSDT")
    ref = venue.ticks(30_000.0)
    maker = Maker(MAKER, "maker", venue, SETTINGS, base, start=ref, key="1/maker")
    maker.act(ref, 2_000)
    for ts in range(2_001, 2_040):
        with contextlib.suppress(Reject):
            venue.take(TAKER, BUY, 12 * venue.unit, 0, ts)
        maker.act(ref, ts)
    assert venue.inventory(MAKER, base) == -maker.max_inventory  # sold all it may
    sides = {r.side for r in venue.resting(MAKER)}
    assert sides == {BUY}  # nothing left to sell; still bidding to come back
    ex.store.close()
