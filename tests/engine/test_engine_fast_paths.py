"""The engine's fast paths against its general ones: the same random streams applied to an engine
with ``fast_paths`` on and one with it off must give, command by command, the same reply or the
same refusal, the same events in the same order, and in the end the same state hash.

The streams (tests/engine/test_engine_properties.py) mix every order type and time in force,
client ids, prices on both sides of the book, dry runs, cancels, batches and transfers, so that
orders reach the fast paths and every reason to leave them (crossing, a client id, a short
balance, a full open-order list, an invalid field).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_properties import DrawRand, Rand, Stream, odd_markets

from tradehall.codes import Reject
from tradehall.engine.commands import Command, PlaceOrder
from tradehall.engine.engine import Engine
from tradehall.engine.markets import MarketsSpec
from tradehall.engine.orders import LIMIT


def outcome(engine: Engine, cmd: Command) -> tuple[Any, ...]:
    try:
        result = engine.apply(cmd)
    except Reject as err:
        return ("reject", err.code, str(err))
    return ("ok", result.reply, result.events)


def run_both(markets: MarketsSpec, r: Rand, length: int) -> int:
    """Apply one stream to both engines; returns how many orders rested at once."""
    fast = Engine(markets, check_invariants=True)
    general = Engine(markets, check_invariants=True)
    general.fast_paths = False
    stream = Stream(
        r,
        lambda: fast.spot.next_order_id,
        lambda account, symbol: [
            o.id for o in fast.spot.by_account.get(account, {}).values() if o.symbol == symbol
        ],
    )
    rested = 0
    commands = [*stream.funding(), *(stream.command() for _ in range(length))]
    for cmd in commands:
        got = outcome(fast, cmd)
        assert got == outcome(general, cmd), cmd
        if isinstance(cmd, PlaceOrder) and got[0] == "ok" and cmd.type == LIMIT:
            rested += len(got[2]) == 2  # a hold and the order: it rested without trading
    assert fast.state_hash() == general.state_hash()
    return rested


@settings(
    max_examples=150,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), odd=st.booleans())
def test_random_streams_give_the_same_results_on_both_paths(
    markets: MarketsSpec, data: st.DataObject, odd: bool
) -> None:
    length = data.draw(st.integers(1, 80), label="length")
    run_both(odd_markets(markets) if odd else markets, DrawRand(data), length)


@pytest.mark.parametrize("seed", range(4))
def test_long_streams_give_the_same_results_on_both_paths(markets: MarketsSpec, seed: int) -> None:
    rested = run_both(markets, random.Random(seed), 800)
    assert rested > 50  # the fast path really was taken
