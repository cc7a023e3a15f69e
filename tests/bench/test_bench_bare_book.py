"""The bare-book reference of the engine benchmark must go through the engine's book states:
otherwise the ratio between the two compares different work."""

from __future__ import annotations

import pytest
from bench.bare_book import bare_pass
from bench.common import SYMBOL
from bench.engine_bench import EngineSpec, build_stream

from tradehall.config import load_config


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bare_book_ends_where_the_engine_ends(seed: int) -> None:
    markets = load_config().markets
    spec = EngineSpec(commands=4000, accounts=50, depth=300, seed=seed)
    seed_cmds, cmds, _, engine = build_stream(markets, spec)
    figures, live = bare_pass(seed_cmds, cmds, markets.pairs[SYMBOL].quote_per_tick_lot, 1)
    assert live == set(engine.spot.books[SYMBOL].orders)
    assert figures["trades"] == engine.spot.next_trade_id - 1
    assert figures["trades"] > 0 and figures["commands"] == len(cmds)
