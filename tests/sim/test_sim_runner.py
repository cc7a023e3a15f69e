"""The simulation driven tick by tick on a real exchange and group committer, with a fake
clock: reproducible from its seed, every book quoted, participants that run out of funds stop
and say so, and a restart picks up the participants and their orders without doubling."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from sim_support import simulate
from support import TEST_SECRET_BOX, FakeClock, journaled_store, make_exchange
from tradehall import sandbox
from tradehall.config import load_config, parse_config
from tradehall.engine import audit
from tradehall.engine.commands import Withdraw
from tradehall.engine.futures_model import futures_account
from tradehall.marketdata import INTERVALS, parse_interval
from tradehall.projector import Projector
from tradehall.sim.participants import OUT_OF_FUNDS
from tradehall.sim.runner import Simulation
from tradehall.sim.settings import SimulationSettings
from tradehall.store.writer import GroupCommitter

SETTINGS = SimulationSettings(seed=7, markets=("BTCUSDT", "ETHUSDT", "E-BTC-USDT"))


def test_the_same_seed_gives_the_same_market_and_another_seed_another() -> None:
    first, _ = simulate(SETTINGS, 30)
    again, _ = simulate(SETTINGS, 30)
    other, _ = simulate(replace(SETTINGS, seed=8), 30)
    assert first.engine.state_hash() == again.engine.state_hash()
    assert first.engine.state_hash() != other.engine.state_hash()
    for ex in (first, again, other):
        assert audit.check(ex.engine) == []
        ex.store.close()


def test_every_simulated_book_is_quoted_deep_and_trades() -> None:
    ex, sim = simulate(SETTINGS, 20)
    engine = ex.engine
    for symbol in ("BTCUSDT", "ETHUSDT"):
        book = engine.spot.books[symbol]
        assert len(list(book.bids.iter_levels())) >= 20
        assert len(list(book.asks.iter_levels())) >= 20
        assert engine.spot.last_price.get(symbol)  # traded
    book = engine.futures.books["E-BTC-USDT"]
    assert len(list(book.bids.iter_levels())) >= 20
    assert len(list(book.asks.iter_levels())) >= 20
    assert engine.futures.states["E-BTC-USDT"].index > 0  # the sim drives the index
    view = sim.status()
    assert [m["symbol"] for m in view["markets"]] == ["BTCUSDT", "ETHUSDT", "E-BTC-USDT"]
    assert {p["state"] for p in view["participants"]} == {"active"}
    # takers wait for the makers' first quotes (no MARKET order refused on an empty book)
    assert [p["rejected"] for p in view["participants"]] == [0] * 6
    ex.store.close()


def test_a_cross_pair_follows_its_legs_so_a_triangle_earns_nothing() -> None:
    """ETHBTC beside ETHUSDT and BTCUSDT: its reference is their ratio at every tick, and its
    trades stay within the spreads of that ratio (no free triangular arbitrage)."""
    settings = SimulationSettings(seed=3, markets=("ETHBTC", "BTCUSDT", "ETHUSDT"))
    settings = replace(settings, path=replace(settings.path, volatility=3.0, speed=600.0))
    ex, sim = simulate(settings, 120)
    by_symbol = {market.symbol: market for market in sim.markets}
    assert list(by_symbol) == ["BTCUSDT", "ETHUSDT", "ETHBTC"]  # legs first
    cross, btc, eth = by_symbol["ETHBTC"], by_symbol["BTCUSDT"], by_symbol["ETHUSDT"]
    assert cross.path.price == pytest.approx(eth.path.price / btc.path.price, rel=1e-9)
    start, at_start = simulate(settings, 0)
    (eth_start,) = [m.path.price for m in at_start.markets if m.symbol == "ETHUSDT"]
    start.store.close()
    assert eth.path.price != pytest.approx(eth_start, rel=0.01)  # the legs did move
    last = ex.engine.spot.last_price
    pairs = ex.config.markets.pairs
    traded = {s: last[s] / 10 ** pairs[s].price_precision for s in ("ETHBTC", "BTCUSDT", "ETHUSDT")}
    implied = traded["ETHUSDT"] / traded["BTCUSDT"]
    assert abs(traded["ETHBTC"] / implied - 1) < 0.003  # within a few spreads and ticks
    models = {m["symbol"]: m["model"] for m in sim.status()["markets"]}
    assert models == {"BTCUSDT": "gbm", "ETHUSDT": "gbm", "ETHBTC": "cross"}
    assert audit.check(ex.engine) == []
    ex.store.close()


def test_a_maker_out_of_funds_stops_quoting_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    exchange = make_exchange(Path(tempfile.mkdtemp()) / "t.db")
    clock = FakeClock()
    settings = replace(SETTINGS, markets=("BTCUSDT",))

    async def main() -> Simulation:
        committer = GroupCommitter(exchange)
        sim = Simulation(exchange, committer, clock, settings)
        await sim.setup()
        await sim.tick()
        maker = sim.markets[0].maker
        # The operator takes the maker's quote funds away (its orders first).
        ids = [r.id for r in maker.venue.resting(maker.user)]
        maker.venue.cancel(maker.user, ids, clock())
        usdt = exchange.engine.ledger.free(maker.user, "USDT")
        exchange.apply(Withdraw(clock(), maker.user, "USDT", usdt, "drain"))
        with caplog.at_level(logging.WARNING, logger="tradehall.sim"):
            clock.advance(500)
            await sim.tick()
        committer.close()
        return sim

    sim = asyncio.run(main())
    maker = sim.markets[0].maker
    assert maker.state == OUT_OF_FUNDS and "BUY" in maker.note
    assert maker.venue.resting(maker.user) == []  # stopped quoting altogether
    assert any("sim-maker-BTCUSDT" in r.message and "stops" in r.message for r in caplog.records)
    view = {p["name"]: p for p in sim.status()["participants"]}
    assert view["sim-maker-BTCUSDT"]["state"] == OUT_OF_FUNDS
    exchange.store.close()


def test_a_restart_finds_its_participants_and_orders_again_without_doubling(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    ex, _ = simulate(SETTINGS, 5, db)
    ex.commit_now()
    users = dict(ex.users)
    ex.store.close()
    again, resumed = simulate(SETTINGS, 3, db)  # recovered from the store, as after kill -9
    assert again.users == users  # the same participants, no new ones, not funded again
    assert again.engine.transfers.keys() == ex.engine.transfers.keys()
    for market in resumed.markets:
        maker = market.maker
        levels = [(r.side, r.price) for r in maker.venue.resting(maker.user)]
        assert len(levels) == len(set(levels))
        assert len(levels) <= 2 * SETTINGS.maker.levels
    assert audit.check(again.engine) == []
    again.store.close()


def test_an_account_reset_gives_a_participant_its_own_starting_funds() -> None:
    """Not the demo account's balances: a maker holding 10 BTC more than it started with
    would be past its inventory bound and never bid again."""
    exchange = make_exchange(Path(tempfile.mkdtemp()) / "t.db")
    clock = FakeClock()
    after_reset: dict[str, dict[str, int]] = {}

    def holdings(user: int) -> dict[str, int]:
        """Every asset the user holds, spot and futures, free and locked."""
        engine = exchange.engine
        out: dict[str, int] = {}
        for account in (user, futures_account(user)):
            for asset in exchange.config.markets.assets:
                amount = sum(engine.ledger.get(account, asset))
                if amount:
                    out[asset] = out.get(asset, 0) + amount
        return out

    async def main() -> Simulation:
        committer = GroupCommitter(exchange)
        sim = Simulation(exchange, committer, clock, SETTINGS)
        await sim.setup()
        for _ in range(20):
            clock.advance(SETTINGS.tick_ms)
            await sim.tick()
        for market in sim.markets:
            for participant in (market.maker, market.taker):
                sandbox.reset_account(exchange, participant.user, clock())
                after_reset[participant.name] = holdings(participant.user)
        for _ in range(3):
            clock.advance(SETTINGS.tick_ms)
            await sim.tick()
        committer.close()
        return sim

    sim = asyncio.run(main())
    engine = exchange.engine
    for market in sim.markets:
        for participant in (market.maker, market.taker):
            funded = {
                asset: engine.transfers[tx].amount
                for asset in exchange.config.markets.assets
                if (tx := f"{participant.name}-{asset}") in engine.transfers
            }
            assert funded, participant.name
            assert after_reset[participant.name] == funded, participant.name
        maker = market.maker
        sides = {r.side for r in maker.venue.resting(maker.user)}
        assert sides == {"BUY", "SELL"}, (market.symbol, sides)  # quoting both sides again
    assert {p["state"] for p in sim.status()["participants"]} == {"active"}
    assert audit.check(engine) == []
    exchange.store.close()


def test_a_fresh_market_gets_a_drawn_past_that_a_restart_and_a_replay_keep(
    tmp_path: Path,
) -> None:
    """Before its first tick every simulated market has a year of candles ending at its
    start price (a contract shares its index source's walk); they are journaled, so the
    tables, a restart and a replay of the journal hold the same, and never drawn again."""
    db = tmp_path / "t.db"
    ex, sim = simulate(SETTINGS, 0, db)
    now = sim.clock()
    klines = {
        symbol: {iv.name: ex.marketdata.klines(symbol, iv, 300, now) for iv in INTERVALS}
        for symbol in SETTINGS.markets
    }
    for market in sim.markets:
        bars = klines[market.symbol]
        assert len(bars["1min"]) == len(bars["60min"]) == len(bars["1day"]) == 300
        assert bars["1min"][-1].close == market.ref  # the walk ends where the market starts
        assert all(bar.volume > 0 for bar in bars["1min"])  # drawn, not gap-filled
    btc = [bar.close / 100 for bar in klines["BTCUSDT"]["60min"]]
    contract = ex.config.markets.contracts["E-BTC-USDT"]
    scale = 10**contract.price_precision
    closes = [bar.close / scale for bar in klines["E-BTC-USDT"]["60min"]]
    assert closes == pytest.approx(btc, abs=1 / scale)  # the same walk, in its own ticks
    ex.commit_now()
    ex.store.close()
    again, _ = simulate(SETTINGS, 0, db)  # the tables (written inline here) hold them
    for symbol, by_interval in klines.items():
        for iv in INTERVALS:
            assert again.marketdata.klines(symbol, iv, 300, now) == by_interval[iv.name]
    assert again.pending.entries == []  # nothing drawn again
    again.store.close()
    # A projector building empty tables from the journal alone writes the same bars.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(tmp_path / "journal.db", fresh / "journal.db")
    store = journaled_store(fresh / "tradehall.db")
    store.migrate()
    Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX).catch_up()
    tables = make_exchange(store=store.projections)
    for symbol, by_interval in klines.items():
        for iv in INTERVALS:
            assert tables.marketdata.klines(symbol, iv, 300, now) == by_interval[iv.name]
    store.close()


def test_no_past_is_drawn_with_history_days_0_nor_for_a_replayed_market() -> None:
    ex, _sim = simulate(replace(SETTINGS, history_days=0), 0)
    assert not any(ex.marketdata.has_bars(symbol) for symbol in SETTINGS.markets)
    ex.store.close()


def test_a_cross_follows_a_replayed_leg_and_gets_no_past_of_its_own(tmp_path: Path) -> None:
    """ETHBTC beside a replayed BTCUSDT (and tables of maker keys only, its own too): still
    the ratio of its legs, live; no drawn past (one leg's history is its file), while
    the walking leg has one."""
    base = (Path(__file__).resolve().parents[2] / "src/tradehall/default_config.toml").read_text()
    extra = (
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\n'
        'replay = "builtin:binance-klines-btcusdt-1m.csv"\n'
        '\n[[simulation.market]]\nsymbol = "ETHUSDT"\ndepth = "1000000"\n'
        '\n[[simulation.market]]\nsymbol = "ETHBTC"\ndepth = "20"\nspacing_bps = 3\n'
    )
    cfg = parse_config(base + extra, str(tmp_path / "tradehall.toml"))
    settings = replace(cfg.simulation, markets=("ETHBTC", "BTCUSDT", "ETHUSDT"))
    ex, sim = simulate(settings, 20)
    by_symbol = {market.symbol: market for market in sim.markets}
    cross, btc, eth = by_symbol["ETHBTC"], by_symbol["BTCUSDT"], by_symbol["ETHUSDT"]
    assert {m["symbol"]: m["model"] for m in sim.status()["markets"]} == {
        "BTCUSDT": "replay",
        "ETHUSDT": "gbm",
        "ETHBTC": "cross",
    }
    assert cross.path.price == pytest.approx(eth.path.price / btc.path.price, rel=1e-9)
    day = parse_interval("1day")
    assert len(ex.marketdata.klines("ETHUSDT", day, 300, sim.clock())) == 300
    assert len(ex.marketdata.klines("ETHBTC", day, 300, sim.clock())) == 1  # its trades only
    ex.store.close()
