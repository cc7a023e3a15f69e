"""The makers' ladder and its reconciliation with the book, as pure functions: the inventory
bound holds for any reference, inventory and funds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tradehall.sim.ladder import (
    BUY,
    SELL,
    STICKY,
    Quote,
    Resting,
    keeping,
    ladder,
    reconcile,
    spacing,
)
from tradehall.sim.profile import Profile


@given(
    ref=st.integers(1, 10**9),
    bps=st.floats(0.01, 500),
    levels=st.integers(1, 60),
    depth=st.integers(1, 100_000),
    growth=st.floats(0, 3),
    variation=st.floats(0, 0.9),
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
    depth: int,
    growth: float,
    variation: float,
    max_inventory: int,
    inventory_share: float,
    skew: float,
    buy_room: int,
    sell_room: int,
    min_qty: int,
) -> None:
    inventory = round(max_inventory * inventory_share)
    step = spacing(ref, bps)
    profile = Profile.for_depth(depth, growth, variation, min_qty, "key")
    quotes = ladder(
        ref,
        step,
        levels,
        lambda side, i, p: profile.size(i, p),
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
    assert all(q.price > 0 and min_qty <= q.qty for q in quotes)
    if bids and asks:
        assert max(q.price for q in bids) < min(q.price for q in asks)  # never crossed
    for side in (bids, asks):
        prices = [q.price for q in side]
        assert len(set(prices)) == len(prices)
        assert all(p % step == 0 for p in prices)  # on the grid: small moves change nothing
        # Each level holds its profile's size at its price (the last one may be cut short).
        assert all(q.qty == profile.size(i, q.price) for i, q in enumerate(side[:-1]))
        assert all(q.qty <= profile.size(i, q.price) for i, q in enumerate(side))


def test_the_spacing_stays_while_the_reference_hovers_where_its_rounding_turns() -> None:
    assert spacing(2_997_400, 2.0) == 599 and spacing(2_997_600, 2.0) == 600
    assert spacing(2_997_600, 2.0, 599) == 599  # no new grid for a hair's move
    assert spacing(3_300_000, 2.0, 599) == 599  # within a tenth
    assert spacing(3_400_000, 2.0, 599) == 680  # beyond: the grid follows the price
    assert spacing(6_667, 2.0, 1) == 1 and spacing(100, 2.0) == 1  # at least a tick


def test_a_full_ladder_when_the_bound_and_funds_allow() -> None:
    quotes = ladder(
        30_000_00,
        6_00,
        25,
        lambda side, i, p: 4,
        0,
        300,
        1.0,
        buy_room=10**6,
        sell_room=10**6,
        min_qty=1,
    )
    assert [q.side for q in quotes].count(BUY) == 25 == [q.side for q in quotes].count(SELL)


def test_inventory_shifts_the_ladder_away_from_what_the_maker_holds() -> None:
    def best(inventory: int) -> tuple[int, int]:
        quotes = ladder(
            1000,
            10,
            5,
            lambda side, i, p: 1,
            inventory,
            100,
            2.0,
            buy_room=99,
            sell_room=99,
            min_qty=1,
        )
        return (
            max(q.price for q in quotes if q.side == BUY),
            min(q.price for q in quotes if q.side == SELL),
        )

    assert best(90)[1] < best(0)[1]  # long: asks come closer, to sell
    assert best(-90)[0] > best(0)[0]  # short: bids come closer, to buy


@given(
    resting=st.lists(
        st.tuples(
            st.sampled_from([BUY, SELL]), st.integers(1, 20), st.integers(1, 10), st.integers(0, 9)
        ),
        max_size=30,
    ),
    wanted=st.lists(
        st.tuples(st.sampled_from([BUY, SELL]), st.integers(1, 20), st.integers(1, 10)),
        max_size=30,
        unique_by=lambda t: (t[0], t[1]),
    ),
)
def test_reconcile_ends_with_at_most_one_order_per_level_never_above_the_wanted_size(
    resting: list[tuple[str, int, int, int]], wanted: list[tuple[str, int, int]]
) -> None:
    orders = [
        Resting(i, side, price, max(1, placed - eaten), placed)
        for i, (side, price, placed, eaten) in enumerate(resting)
    ]
    quotes = [Quote(side, price, qty) for side, price, qty in wanted]
    cancel, place = reconcile(orders, quotes)
    kept = [o for o in orders if o.id not in set(cancel)]
    levels = [(o.side, o.price) for o in kept] + [(q.side, q.price) for q in place]
    assert len(levels) == len(set(levels))  # a restart's leftovers never double a level
    by_level = {(q.side, q.price): q.qty for q in quotes}
    assert set(levels) == set(by_level)
    assert all(o.remaining <= by_level[(o.side, o.price)] for o in kept)
    # A kept order is the wanted quote as placed, eaten into by at most half.
    assert all(o.qty == by_level[(o.side, o.price)] and o.qty // 2 <= o.remaining for o in kept)


def test_a_reference_moving_a_step_and_back_re_places_only_the_levels_crossing_the_touch() -> None:
    profile = Profile.for_depth(2_000, 0.5, 0.3, 1, "key")

    def churn(keep: bool) -> list[tuple[int, int]]:
        """(cancelled, placed) of each requote as the reference moves a step and back,
        the maker's orders on a pretend book."""
        book: list[Resting] = []
        moves = []
        for ref in (10_000, 10_010, 10_000, 10_010, 10_000):
            size = keeping(profile.size, book) if keep else lambda s, i, p: profile.size(i, p)
            wanted = ladder(
                ref, 10, 25, size, 0, 10**6, 0.0, buy_room=10**6, sell_room=10**6, min_qty=1
            )
            cancel, place = reconcile(book, wanted)
            start = max((o.id for o in book), default=0) + 1
            book = [o for o in book if o.id not in cancel] + [
                Resting(start + n, q.side, q.price, q.qty, q.qty) for n, q in enumerate(place)
            ]
            moves.append((len(cancel), len(place)))
        return moves[1:]

    # The new touch on one side, the old touch of the other, one level at each far end, and
    # a level whose size the profile changes by half again (touch to level 1) at most.
    assert all(c <= 3 and p <= 3 for c, p in churn(keep=True)), churn(keep=True)
    # Re-placing each level at its new step's size would re-place every step's edge.
    assert all(c >= 8 for c, _ in churn(keep=False)), churn(keep=False)


@given(
    moves=st.lists(st.integers(-3, 3), max_size=30),
    variation=st.floats(0, 0.9),
)
def test_kept_sizes_stay_within_sticky_of_the_profile(moves: list[int], variation: float) -> None:
    profile = Profile.for_depth(5_000, 0.5, variation, 1, "key")
    book: list[Resting] = []
    ref = 100_000
    for move in [0, *moves]:
        ref += move * 10
        wanted = ladder(
            ref,
            10,
            25,
            keeping(profile.size, book),
            0,
            10**6,
            0.0,
            buy_room=10**6,
            sell_room=10**6,
            min_qty=1,
        )
        cancel, place = reconcile(book, wanted)
        start = max((o.id for o in book), default=0) + 1
        book = [o for o in book if o.id not in cancel] + [
            Resting(start + n, q.side, q.price, q.qty, q.qty) for n, q in enumerate(place)
        ]
        for side in (BUY, SELL):
            quotes = sorted(
                (q for q in wanted if q.side == side), key=lambda q: q.price, reverse=side == BUY
            )
            for level, q in enumerate(quotes):
                want, (num, den) = profile.size(level, q.price), STICKY
                assert den * want <= num * q.qty and den * q.qty <= num * want
