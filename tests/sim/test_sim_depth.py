"""The makers' books look like a mid-size venue's (docs/simulation.md, "The makers' books"):
after 30 simulated seconds of the default demo, each major book's first ten levels per side
hold 20 to 100 BTC-equivalent, the touch spread is a few basis points, and a 0.1 BTC market
order fills within a few levels; the depth profile's sizes, its configuration per market,
and the funding of a data folder from before the deeper books."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette

from sim_support import simulate
from support import BASE_URL, ClientClock, Env, make_exchange
from tradehall import operations as ops
from tradehall import sandbox
from tradehall.client import Client
from tradehall.config import ConfigError, load_config
from tradehall.engine import audit
from tradehall.engine.commands import Deposit
from tradehall.engine.contracts import ContractSpec
from tradehall.sim.accounts import funding_tx
from tradehall.sim.participants import ACTIVE
from tradehall.sim.profile import FIRST_LEVELS, Profile, step_of
from tradehall.sim.runner import Simulation
from tradehall.sim.settings import MakerSettings, SimulationSettings

# The documented band (docs/simulation.md, "The makers' books").
BAND_BTC = (20, 100)
"""Each side's first ten levels together, in BTC-equivalent."""
MAX_SPREAD_BPS = 5
MAX_LEVELS_FOR_A_TENTH_BTC = 5
SPOT_MAJORS = ("BTCUSDT", "ETHUSDT")
PERPETUALS = ("E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD")
TICKS_IN_30_S = 60  # of the default tick_ms, 500


def sides(depth: dict[str, Any]) -> dict[str, list[tuple[Decimal, Decimal]]]:
    return {
        side: [(Decimal(str(price)), Decimal(str(qty))) for price, qty in depth[side]]
        for side in ("bids", "asks")
    }


def spread_bps(book: dict[str, list[tuple[Decimal, Decimal]]]) -> Decimal:
    bid, ask = book["bids"][0][0], book["asks"][0][0]
    return (ask - bid) / ((ask + bid) / 2) * 10_000


def quote_value(contract: ContractSpec | None, price: Decimal, qty: Decimal) -> Decimal:
    """What ``qty`` at ``price`` is worth in the quote currency: base (spot) or contracts."""
    if contract is None:
        return price * qty
    return qty * contract.multiplier * (1 if contract.inverse else price)


def fill_levels(trades: list[dict[str, Any]]) -> int:
    return len({t["price"] for t in trades})


@pytest.mark.one_process  # drives the server's own simulation, tick by tick
def test_the_default_demo_after_30_seconds_has_a_mid_size_venues_books(env: Env) -> None:
    portal, app = env.http.portal, env.http.app
    assert portal is not None and isinstance(app, Starlette)
    demo = ops.ensure_demo(env.exchange, env.clock())  # as `serve --demo` does
    simulation: Simulation = app.state.tradehall.simulation  # the server's, not started
    assert simulation.settings == env.exchange.config.simulation  # the defaults
    portal.call(simulation.setup)
    for _ in range(TICKS_IN_30_S):
        env.clock.advance(simulation.settings.tick_ms)
        portal.call(simulation.tick)

    public = env.public()
    spot = {s: sides(public.depth(s, 100)) for s in SPOT_MAJORS}
    futures = {c: sides(public.futures_depth(c, 100)) for c in PERPETUALS}
    btc = (spot["BTCUSDT"]["bids"][0][0] + spot["BTCUSDT"]["asks"][0][0]) / 2
    contracts = env.exchange.config.markets.contracts
    for symbol, book in [*spot.items(), *futures.items()]:
        assert spread_bps(book) <= MAX_SPREAD_BPS, symbol
        for side, levels in book.items():
            assert len(levels) >= 20, (symbol, side)
            notional = sum(
                quote_value(contracts.get(symbol), p, q) for p, q in levels[:FIRST_LEVELS]
            )
            low, high = BAND_BTC
            assert low <= notional / btc <= high, (symbol, side, notional / btc)
            sizes = [q for _, q in levels[:FIRST_LEVELS]]
            assert len(set(sizes)) > FIRST_LEVELS // 2, (symbol, side)  # not one constant
            assert sizes[-1] > sizes[0], (symbol, side)  # growing away from the touch

    bot = Client(
        BASE_URL, demo["apiKey"], demo["secret"], http=env.http, clock=ClientClock(env.clock)
    )
    sold = bot.create_order("BTCUSDT", "SELL", "MARKET", "0.1")
    assert bot.get_order("BTCUSDT", sold["orderId"])["status"] == "FILLED"
    spend = str((btc / 10).quantize(Decimal("0.01")))  # about 0.1 BTC of USDT
    bought = bot.create_order("BTCUSDT", "BUY", "MARKET", spend)
    assert bot.get_order("BTCUSDT", bought["orderId"])["status"] == "FILLED"
    trades = bot.my_trades("BTCUSDT", 100)
    for order in (sold, bought):
        mine = [t for t in trades if str(order["orderId"]) in (str(t["bidId"]), str(t["askId"]))]
        assert mine and fill_levels(mine) <= MAX_LEVELS_FOR_A_TENTH_BTC, mine
    assert {p["state"] for p in simulation.status()["participants"]} == {ACTIVE}
    env.audit()


@given(
    depth=st.integers(1, 10**9),
    growth=st.floats(0, 10),
    variation=st.floats(0, 0.9),
    prices=st.lists(st.integers(1, 10**12), min_size=25, max_size=25),
)
def test_a_profile_holds_its_depth_grows_by_steps_and_never_exceeds_its_most(
    depth: int, growth: float, variation: float, prices: list[int]
) -> None:
    profile = Profile.for_depth(depth, growth, variation, 1, "1/BTCUSDT/maker")
    sizes = [profile.size(level, price) for level, price in enumerate(prices)]
    assert sum(sizes) <= profile.most(25)
    first_ten = sum(sizes[:FIRST_LEVELS])
    assert (1 - variation) * depth - FIRST_LEVELS <= first_ten <= (1 + variation) * depth + 10
    flat = Profile.for_depth(depth, growth, 0.0, 1, "key")
    same_step = [
        flat.size(a, 1) == flat.size(b, 1)
        for a, b in zip(range(24), range(1, 25), strict=True)
        if step_of(a) == step_of(b)
    ]
    assert all(same_step)  # within a step, only the variation tells levels apart
    assert profile.size(7, prices[7]) == profile.size(7, prices[7])  # a function of its price


def test_a_data_folder_funded_for_the_old_unit_sized_ladders_is_topped_up_once(
    tmp_path: Path,
) -> None:
    """Before the books were set in quote notional, a maker was funded with a few hundred
    dollars under its fixed tx ids: the next start tops it up (under a new fixed id) so it
    quotes its whole depth, a later start funds nothing, and a reset gives it both back."""
    db = tmp_path / "t.db"
    exchange = make_exchange(db)
    settings = SimulationSettings(seed=3, markets=("BTCUSDT", "E-BTC-USDT"))
    ts = 1_700_000_000_000
    old = {"BTCUSDT": {"BTC": 30_000_000, "USDT": 9_000 * 10**8}, "E-BTC-USDT": {"USDT": 10**11}}
    for symbol, funds in old.items():
        name = f"sim-maker-{symbol}"
        user = exchange.create_user(name, ts).id
        for asset, units in funds.items():
            exchange.apply(Deposit(ts, user, asset, units, funding_tx(name, asset)))
    exchange.commit_now()
    exchange.store.close()

    funded, sim = simulate(settings, 3, db)
    transfers = funded.engine.transfers
    for market in sim.markets:
        maker = market.maker
        for asset in old[market.symbol]:
            tx = funding_tx(maker.name, asset)
            topup = transfers[f"{tx}/topup-1"]
            assert topup.account == maker.user and topup.amount > 100 * old[market.symbol][asset]
        assert maker.state == ACTIVE
        assert len(maker.venue.resting(maker.user)) == 2 * settings.maker.levels  # whole
    funded.commit_now()
    before = dict(transfers)
    funded.store.close()

    again, resumed = simulate(settings, 2, db)
    assert again.engine.transfers.keys() == before.keys()  # nothing funded twice
    spot_maker = resumed.markets[0].maker
    spot, _ = sandbox.starting_balances(again, spot_maker.user)
    assert spot["BTC"] == sum(
        r.amount for tx, r in before.items() if tx.startswith(funding_tx(spot_maker.name, "BTC"))
    )
    assert audit.check(again.engine) == []
    again.store.close()


BASE = (Path(__file__).resolve().parents[2] / "src/tradehall/default_config.toml").read_text()


def config(extra: str, tmp_path: Path) -> Any:
    source = tmp_path / "tradehall.toml"
    source.write_text(BASE + extra)
    return load_config(source)


def test_maker_settings_per_market_and_the_replaced_unit_keys(tmp_path: Path) -> None:
    loaded = config(
        "\n[simulation.maker]\ndepth_usd = 600000\ngrowth = 1\n"
        '\n[[simulation.market]]\nsymbol = "ETHBTC"\ndepth = "8"\nspacing_bps = 5\n'
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nvolatility = 0.3\n',
        tmp_path,
    ).simulation
    assert loaded.maker == MakerSettings(depth_usd=Decimal(600000), growth=1.0)
    assert loaded.makers == {
        "ETHBTC": replace(loaded.maker, depth=Decimal(8), spacing_bps=5.0)
    }  # BTCUSDT's table names no maker key: the [simulation.maker] settings
    assert loaded.overrides["BTCUSDT"].volatility == 0.3

    exchange, sim = simulate(replace(loaded, markets=("ETHBTC", "BTCUSDT")), 1)
    ethbtc, btcusdt = (m.maker for m in sim.markets)
    assert ethbtc.settings.depth == Decimal(8)  # in its quote, BTC
    assert btcusdt.settings.depth == Decimal(600000)  # depth_usd in USDT
    exchange.store.close()

    cases = {
        "\n[simulation.maker]\nsize = 4\n": "simulation.maker.size: replaced by depth_usd",
        "\n[simulation.maker]\nmax_inventory = 300\n": (
            "simulation.maker.max_inventory: replaced by inventory_limit"
        ),
        "\n[simulation.maker]\ndepth = 5\n": "simulation.maker.depth: unknown key",
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\ndepth = "-1"\n': (
            "simulation.market[0].depth: must be positive, got -1"
        ),
        "\n[simulation.maker]\nvariation = 1\n": (
            "simulation.maker.variation: must be between 0 and 0.9, got 1"
        ),
    }
    for extra, expected in cases.items():
        with pytest.raises(ConfigError) as caught:
            config(extra, tmp_path)
        assert expected in str(caught.value), str(caught.value)
        assert ":" in str(caught.value).split(" ")[0]  # file:line
