"""The takers' order sizes: by default a power law in US dollars (most orders small, a few
large enough to walk the book), as a real venue's trade sizes are; ``uniform`` keeps the
older sizes in units. Funding covers the largest orders."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_support import simulate
from tradehall import operations as ops
from tradehall.sim.accounts import funding_tx
from tradehall.sim.runner import TAKER_LARGEST_FUNDED
from tradehall.sim.settings import SimulationSettings, TakerSettings

SETTINGS = SimulationSettings(seed=4, markets=("BTCUSDT", "E-BTC-USDT"))


@settings(max_examples=40, deadline=None)
@given(
    median=st.integers(5, 5_000),
    ratio=st.integers(3, 100_000),
    tail=st.floats(0.5, 5.0),
)
def test_the_power_law_has_the_median_the_bound_and_the_mean_it_says(
    median: int, ratio: int, tail: float
) -> None:
    law = TakerSettings(median_usd=Decimal(median), max_usd=Decimal(median * ratio), tail=tail)
    assert law.value_usd(0.5) == pytest.approx(median, rel=1e-9)
    assert law.value_usd(0.0) <= median <= law.value_usd(0.999999) <= median * ratio * (1 + 1e-9)
    rng = random.Random(median * 7 + ratio)
    draws = [law.value_usd(rng.random()) for _ in range(20_000)]
    assert statistics.median(draws) == pytest.approx(median, rel=0.05)
    # a heavy tail's sampled mean is noisy: check the formula against the integral of
    # x f(x) over a logarithmic grid (the density f is the law's, least to max_usd)
    least, top = law.value_usd(0.0), float(law.max_usd)
    cut = 1 - (least / top) ** tail
    steps = 20_000
    width = math.log(top / least) / steps
    integral = 0.0
    for i in range(steps):
        x = least * math.exp((i + 0.5) * width)
        integral += x * x * tail * least**tail * x ** (-tail - 1) / cut * width
    assert law.mean_usd() == pytest.approx(integral, rel=1e-3)


def test_order_sizes_on_a_running_market_follow_the_law_in_each_markets_units() -> None:
    ex, sim = simulate(SETTINGS, 0)
    for market in sim.markets:
        taker, venue = market.taker, market.venue
        rng = random.Random(1)
        sizes = [taker.size(rng, market.ref) for _ in range(20_000)]
        assert min(sizes) >= venue.unit
        per_million = venue.quantity(Decimal(1_000_000) * taker.quote_per_usd, market.ref)
        values = sorted(size / per_million * 1_000_000 for size in sizes)  # in dollars
        assert 135 < statistics.median(values) < 165  # the default median, 150 dollars
        assert values[-1] <= 250_000 * 1.01
        above = sum(1 for v in values if v > 10_000) / len(values)
        assert 0.001 < above < 0.004  # (88 / 10,000) ** 1.3 = 0.21 %: a few walk the book
    ex.store.close()


def test_uniform_sizes_are_whole_units_between_the_bounds() -> None:
    uniform = replace(SETTINGS.taker, size_model="uniform", min_size=2, max_size=5)
    ex, sim = simulate(replace(SETTINGS, taker=uniform), 0)
    for market in sim.markets:
        rng = random.Random(2)
        unit = market.venue.unit
        sizes = {market.taker.size(rng, market.ref) for _ in range(500)}
        assert sizes == {n * unit for n in range(2, 6)}
        assert market.taker.mean_size(market.ref) == round(3.5 * unit)
    ex.store.close()


def test_a_taker_is_funded_for_its_largest_orders_and_keeps_trading() -> None:
    ex, sim = simulate(SETTINGS, 400)
    btc = next(m for m in sim.markets if m.symbol == "BTCUSDT")
    pair = ex.config.markets.pairs["BTCUSDT"]
    usdt = ops.funded(ex, btc.taker.user, funding_tx(btc.taker.name, "USDT"))
    largest = pair.quote_amount(btc.ref, btc.taker.largest_size(btc.ref))
    assert usdt >= SETTINGS.funds * TAKER_LARGEST_FUNDED * largest * 0.99
    assert {p["state"] for p in sim.status()["participants"]} == {"active"}
    ex.store.close()
