"""The makers' ladder and its reconciliation with the book, as pure functions: the inventory
bound holds for any reference, inventory and funds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tradehall.sim.ladder import BUY, SELL, Quote, Resting, ladder, reconcile, spacing


@given(
    ref=st.integers(1, 10**9),
    bps=st.floats(0.01, 500),
    levels=st.integers(1, 60),
    size=st.integers(1, 10_000),
    max_inventory=st.integers(1, 10**6),
    inventory_share=st.floats(-1.5, 1.5),
    skew=st.floats(0, 5),
    buy_room=st.integers(0, 10**7),
    sell_room=st.integers(0, 10**7),
    min_qty=st.integers(1, 100),
)
def test_ladder_never_quotes_past_the_inventory_bound_or_the_funds(
    ref: int,
    bps: float,
    levels: int,
    size: int,
    max_inventory: int,
    inventory_share: float,
    skew: float,
    buy_room: int,
    sell_room: int,
    min_qty: int,
) -> None:
    inventory = round(max_inventory * inventory_share)
    step = spacing(ref, bps)
    quotes = ladder(
        ref,
        step,
        levels,
        size,
        inventory,
        max_inventory,
        skew,
        buy_room=buy_room,
        sell_room=sell_room,
        min_qty=min_qty,
    )
    bids = [q for q in quotes if q.side == BUY]
    asks = [q for q in quotes if q.side == SELL]
    assert sum(q.qty for q in bids) <= max(0, min(buy_room, max_inventory - inventory))
    assert sum(q.qty for q in asks) <= max(0, min(sell_room, max_inventory + inventory))
    assert len(bids) <= levels and len(asks) <= levels
    assert all(q.price > 0 and min_qty <= q.qty <= size for q in quotes)
    if bids and asks:
        assert max(q.price for q in bids) < min(q.price for q in asks)  # never crossed
    for side in (bids, asks):
        prices = [q.price for q in side]
        assert len(set(prices)) == len(prices)
        assert all(p % step == 0 for p in prices)  # on the grid: small moves change nothing


def test_a_full_ladder_when_the_bound_and_funds_allow() -> None:
    quotes = ladder(30_000_00, 6_00, 25, 4, 0, 300, 1.0, buy_room=10**6, sell_room=10**6, min_qty=1)
    assert [q.side for q in quotes].count(BUY) == 25 == [q.side for q in quotes].count(SELL)


def test_inventory_shifts_the_ladder_away_from_what_the_maker_holds() -> None:
    def best(inventory: int) -> tuple[int, int]:
        quotes = ladder(1000, 10, 5, 1, inventory, 100, 2.0, buy_room=99, sell_room=99, min_qty=1)
        return (
            max(q.price for q in quotes if q.side == BUY),
            min(q.price for q in quotes if q.side == SELL),
        )

    assert best(90)[1] < best(0)[1]  # long: asks come closer, to sell
    assert best(-90)[0] > best(0)[0]  # short: bids come closer, to buy


@given(
    resting=st.lists(
        st.tuples(st.sampled_from([BUY, SELL]), st.integers(1, 20), st.integers(1, 10)),
        max_size=30,
    ),
    wanted=st.lists(
        st.tuples(st.sampled_from([BUY, SELL]), st.integers(1, 20), st.integers(1, 10)),
        max_size=30,
        unique_by=lambda t: (t[0], t[1]),
    ),
)
def test_reconcile_ends_with_at_most_one_order_per_level_never_above_the_wanted_size(
    resting: list[tuple[str, int, int]], wanted: list[tuple[str, int, int]]
) -> None:
    orders = [Resting(i, side, price, qty) for i, (side, price, qty) in enumerate(resting)]
    quotes = [Quote(side, price, qty) for side, price, qty in wanted]
    cancel, place = reconcile(orders, quotes)
    kept = [o for o in orders if o.id not in set(cancel)]
    levels = [(o.side, o.price) for o in kept] + [(q.side, q.price) for q in place]
    assert len(levels) == len(set(levels))  # a restart's leftovers never double a level
    by_level = {(q.side, q.price): q.qty for q in quotes}
    assert set(levels) == set(by_level)
    assert all(o.remaining <= by_level[(o.side, o.price)] for o in kept)
