"""The simulation as a background task of the server: each tick advances every market's
reference path, drives the futures index prices, lets each maker requote and each taker
trade, then waits until all of it is committed, like any request. The engine stays pure:
randomness (seeded per market) and the clock live here.

Participants are found again by name on every start; their funding is idempotent (deposits
carry fixed transaction ids), and a maker reconciles its ladder with the orders the engine
holds for it, so a restart (kill -9 included) resumes without doubling anything."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tradehall import operations as ops
from tradehall.codes import Reject
from tradehall.engine.commands import (
    CancelBatch,
    FuturesCancelAll,
    FuturesTransfer,
    SetIndexPrice,
)
from tradehall.engine.contracts import ContractSpec
from tradehall.engine.index_sources import OPERATOR
from tradehall.engine.markets import PairSpec
from tradehall.exchange import Exchange
from tradehall.sim.accounts import funding_tx, participant_name
from tradehall.sim.history import Step, bars_of, common_draws, cross_steps, step_times, walk_back
from tradehall.sim.participants import Maker, Participant, Taker
from tradehall.sim.paths import CommonFactor, CrossPath, GbmPath, Path, ReplayPath, make_path
from tradehall.sim.replay import with_histories
from tradehall.sim.settings import MakerSettings, PathSettings, SimulationSettings
from tradehall.sim.venue import FuturesVenue, SpotVenue, Venue
from tradehall.store.writer import GroupCommitter

log = logging.getLogger("tradehall.sim")

USD_PRICES = {asset: float(price) for asset, price in ops.DEMO_PRICES.items()}
"""Start prices of the demo assets, for a market that has traded nothing yet and whose
[[simulation.market]] table names no price."""
INDEX_EVERY_MS = 1_000
SIM_FEED = "sim"
"""The name of the simulation's index feed (``SetIndexPrice.feed``)."""
SET_UP_WAIT_S = 30.0
"""How long ``sim start`` waits for the markets to be built before it answers."""
TAKER_ORDERS_FUNDED = 250
TAKER_LARGEST_FUNDED = 20
"""A taker is funded, on each side, for ``funds`` times this many average orders or this
many of its largest, whichever is more (a power law's few large orders move its holdings
far more than its many small ones)."""


def taker_funded(taker: Taker, ref: int) -> int:
    """Lots (or contracts) a taker is funded for on each side, before ``funds``."""
    return max(
        TAKER_ORDERS_FUNDED * taker.mean_size(ref), TAKER_LARGEST_FUNDED * taker.largest_size(ref)
    )


class SimulationError(Exception):
    """The simulation cannot start (one line)."""


@dataclass
class Market:
    symbol: str
    venue: Venue
    path: Path
    model: str
    rng: random.Random
    """The takers' dice for this market (the path has its own)."""
    maker: Maker
    taker: Taker
    ref: int = 0

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "symbol": self.symbol,
            "model": self.model,
            "reference": f"{self.venue.price_of(self.ref):.10g}",
        }
        if isinstance(self.path, ReplayPath):
            out["replay"] = self.path.view()
        return out


class Simulation:
    def __init__(
        self,
        exchange: Exchange,
        committer: GroupCommitter,
        clock: Callable[[], int],
        settings: SimulationSettings,
    ) -> None:
        self.exchange = exchange
        self.committer = committer
        self.clock = clock
        self.settings = settings
        self.markets: list[Market] = []
        self.ticks = 0
        self.error = ""
        self.started_at: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._set_up = asyncio.Event()
        self._last_index = 0
        self._factor: CommonFactor | None = None
        """The draw every random walk shares at each step (built with the markets)."""
        self.busy_s = 0.0
        """Time spent applying the participants' commands (the event loop's, so requests'
        time): what the simulation costs the server."""
        self._began = 0.0

    # ----------------------------------------------------------------- control

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> bool:
        """Start the task; False when it runs already."""
        if self.running:
            return False
        self.error = ""
        self._set_up = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())
        return True

    async def set_up(self, timeout_s: float = SET_UP_WAIT_S) -> str:
        """Wait until a started simulation has built its markets (or failed doing so: its
        participants are funded then, which can fail); the error, or empty."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._set_up.wait(), timeout_s)
        return self.error

    async def stop(self, *, withdraw_quotes: bool = False) -> bool:
        """Stop the task; with ``withdraw_quotes`` also cancel every resting order of the
        participants (``sim stop``; a server shutting down leaves them for the restart)."""
        was = self.running
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if withdraw_quotes and self.exchange.failure is None:
            ts = self.clock()
            for participant in self.participants():
                self._cancel_all(participant, ts)
            await self.committer.durable_shielded()
        return was

    def _cancel_all(self, p: Participant, ts: int) -> None:
        if isinstance(p.venue, SpotVenue):
            ids = tuple(r.id for r in p.venue.resting(p.user))
            if ids:
                self.exchange.apply(CancelBatch(ts, p.user, p.venue.symbol, ids))
        else:
            self.exchange.apply(FuturesCancelAll(ts, p.user, p.venue.symbol))

    def participants(self) -> list[Participant]:
        return [p for m in self.markets for p in (m.maker, m.taker)]

    def busy_share(self) -> float:
        """The share of wall time since the start spent in the participants' commands."""
        elapsed = time.monotonic() - self._began if self._began else 0.0
        return round(self.busy_s / elapsed, 4) if elapsed > 0 else 0.0

    def status(self) -> dict[str, Any]:
        s = self.settings
        return {
            "running": self.running,
            "seed": s.seed,
            "tickMs": s.tick_ms,
            "ticks": self.ticks,
            "startedAt": self.started_at,
            "busySeconds": round(self.busy_s, 3),
            "busyShare": self.busy_share(),
            "error": self.error or None,
            "markets": [m.view() for m in self.markets],
            "participants": [p.view() for p in self.participants()],
        }

    # ----------------------------------------------------------------- the loop

    async def _run(self) -> None:
        try:
            if not self.markets:
                await self.setup()
            self.started_at = self.clock()
            self._began = time.monotonic()
            self.busy_s = 0.0
            self._set_up.set()
            log.info("simulation running on %d markets", len(self.markets))
            interval = self.settings.tick_ms / 1000
            while True:
                began = time.monotonic()
                try:
                    await self.tick()
                except Reject as exc:  # a command the sim should not have sent: keep going
                    log.warning("simulation step refused: %s", exc.msg)
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("simulation stopped")
        finally:
            self._set_up.set()

    async def tick(self) -> None:
        """One step: move the references, then let every participant act; durable on
        return."""
        if self.exchange.failure is not None:
            raise RuntimeError(f"the exchange is failed: {self.exchange.failure}")
        began = time.perf_counter()
        now = self.clock()
        dt = self.settings.tick_ms / 1000
        self.ticks += 1
        stepped: set[int] = set()
        for market in self.markets:
            if id(market.path) not in stepped:
                stepped.add(id(market.path))
                market.path.step(dt)
            market.ref = market.venue.ticks(market.path.price)
        if now - self._last_index >= INDEX_EVERY_MS:
            self._last_index = now
            for market in self.markets:
                if isinstance(market.venue, FuturesVenue):
                    # A feed among the index's sources, as an operator's feeder of other
                    # venues' prices would be; the very first price sets the index at once.
                    first = not self.exchange.engine.futures.states[market.symbol].index
                    feed = "" if first else SIM_FEED
                    self.exchange.apply(SetIndexPrice(now, market.symbol, market.ref, feed))
        # Takers first, makers last: between ticks every ladder is whole again.
        for market in self.markets:
            market.taker.act(market.rng, market.ref, now, dt)
        for market in self.markets:
            market.maker.act(market.ref, now)
        self.busy_s += time.perf_counter() - began
        await self.committer.durable_shielded()

    # ----------------------------------------------------------------- setup

    async def setup(self) -> None:
        """Build the markets and their participants (created and funded once), and draw the
        past of those that have none."""
        self.markets = self.build_markets()
        self.draw_history()
        await self.committer.durable_shielded()

    def draw_history(self) -> int:
        """Candles for the ``history_days`` before now on every market without a bar yet
        (``sim.history``), ending at its start price; bars taken."""
        s = self.settings
        fresh = [m for m in self.markets if not self.exchange.marketdata.has_bars(m.symbol)]
        if s.history_days <= 0 or not fresh:
            return 0
        times = step_times(self.clock(), s.history_days)
        common = common_draws(s.seed, len(times))
        drawn: dict[int, list[Step] | None] = {}
        taken, markets = 0, 0
        for market in fresh:
            steps = self._past(market.path, market.symbol, times, common, drawn)
            if steps is None:
                continue
            venue = market.venue
            flow = s.taker.rate * market.taker.mean_size(market.ref)
            rng = random.Random(f"{s.seed}/{market.symbol}/history/volume")
            bars = bars_of(steps, venue.ticks, flow, venue.amount, rng)
            took = self.exchange.seed_bars(market.symbol, bars)
            taken += took
            markets += took > 0
        if taken:
            log.info("simulation: drew %d days of candles for %d markets", s.history_days, markets)
        return taken

    def _past(
        self,
        path: Path,
        symbol: str,
        times: list[tuple[int, int]],
        common: list[float],
        drawn: dict[int, list[Step] | None],
    ) -> list[Step] | None:
        """The drawn past of ``path`` (once per path: a contract shares its index source's);
        None for a replay, whose history is its file's."""
        if id(path) in drawn:
            return drawn[id(path)]
        steps: list[Step] | None = None
        if isinstance(path, CrossPath):
            base = self._past(path.base, symbol, times, common, drawn)
            quote = self._past(path.quote, symbol, times, common, drawn)
            if base is not None and quote is not None:
                steps = cross_steps(base, quote, path.basis)
        elif isinstance(path, GbmPath):
            rng = random.Random(f"{self.settings.seed}/{symbol}/history")
            steps = walk_back(path.settings, path.price, times, rng, common)
        drawn[id(path)] = steps
        return steps

    def build_markets(self) -> list[Market]:
        self.settings = with_histories(self.settings)  # read already by serve and engine
        ex, s = self.exchange, self.settings
        spec = ex.config.markets
        symbols = list(s.markets) or [*spec.pairs, *spec.contracts]
        ts = self.clock()
        paths: dict[str, Path] = {}
        markets: list[Market] = []
        self._factor = CommonFactor(random.Random(f"{s.seed}/common/path"))
        spot = [symbol for symbol in symbols if symbol in spec.pairs]
        crosses = {symbol: self._cross_legs(symbol, spot) for symbol in spot}
        for symbol, legs in crosses.items():  # a cross of crosses: its own walk
            if legs is not None and any(crosses[leg] is not None for leg in legs):
                crosses[symbol] = None
        # A cross pair's legs first: their paths exist when it is built and step before it.
        for symbol in sorted(spot, key=lambda symbol: crosses[symbol] is not None):
            markets.append(self._spot_market(symbol, paths, ts, crosses[symbol]))
        for symbol in symbols:
            if symbol in spec.contracts:
                markets.append(self._futures_market(spec.contracts[symbol], paths, ts))
        return markets

    def _cross_legs(self, symbol: str, spot: list[str]) -> tuple[str, str] | None:
        """The two simulated pairs whose ratio is ``symbol``'s reference (ETHUSDT and BTCUSDT
        for ETHBTC), when its path is the common random walk (no path of its own in a
        [[simulation.market]] table, no replay); its legs follow any path (a replayed leg
        too). Else None."""
        if symbol in self.settings.overrides or self.settings.path.model != "gbm":
            return None
        pairs = self.exchange.config.markets.pairs
        pair = pairs[symbol]
        others = [s for s in spot if s != symbol]
        for via in sorted({pairs[s].quote for s in others}):
            base_leg = [s for s in others if (pairs[s].base, pairs[s].quote) == (pair.base, via)]
            quote_leg = [s for s in others if (pairs[s].base, pairs[s].quote) == (pair.quote, via)]
            if base_leg and quote_leg:
                return base_leg[0], quote_leg[0]
        return None

    def _path_settings(self, symbol: str) -> PathSettings:
        return self.settings.overrides.get(symbol, self.settings.path)

    def _new_path(self, symbol: str, start: float) -> Path:
        rng = random.Random(f"{self.settings.seed}/{symbol}/path")
        return make_path(self._path_settings(symbol), start, rng, self._factor)

    def _start_price(self, symbol: str, base: str, quote: str, last: float) -> float:
        if last > 0:
            return last
        settings = self._path_settings(symbol)
        if settings.price is not None:
            return float(settings.price)
        if settings.model == "replay" and settings.history is not None:
            return settings.history.prices[0]  # the file's own prices
        if base in USD_PRICES and quote in USD_PRICES:
            return USD_PRICES[base] / USD_PRICES[quote]
        raise SimulationError(
            f"simulation: no start price for {symbol}: name one with price in a"
            " [[simulation.market]] table"
        )

    def _maker_settings(self, symbol: str, base: str, quote: str, start: float) -> MakerSettings:
        """The market's maker settings, its ``depth`` in the quote currency resolved (from
        ``depth_usd`` at the demo prices when its table names none)."""
        settings = self.settings.makers.get(symbol, self.settings.maker)
        if settings.depth is not None:
            return settings
        if quote in USD_PRICES:
            depth = settings.depth_usd / Decimal(str(USD_PRICES[quote]))
        elif base in USD_PRICES:  # the base's dollar value, in the quote at the start price
            depth = settings.depth_usd / Decimal(str(USD_PRICES[base])) * Decimal(str(start))
        else:
            raise SimulationError(
                f"simulation: no depth for {symbol}: name one with depth in a"
                " [[simulation.market]] table"
            )
        return dataclasses.replace(settings, depth=depth)

    def _spot_market(
        self, symbol: str, paths: dict[str, Path], ts: int, cross: tuple[str, str] | None = None
    ) -> Market:
        pair = self.exchange.config.markets.pairs[symbol]
        last = self.exchange.engine.spot.last_price.get(symbol, 0) / 10**pair.price_precision
        path: Path
        if cross is not None:
            base_leg, quote_leg = paths[cross[0]], paths[cross[1]]
            start = last if last > 0 else base_leg.price / quote_leg.price
            speed = self._path_settings(symbol).speed
            path = paths[symbol] = CrossPath(base_leg, quote_leg, start, speed)
        else:
            start = self._start_price(symbol, pair.base, pair.quote, last)
            path = paths[symbol] = self._new_path(symbol, start)
        venue = SpotVenue(self.exchange, pair, round(start * 10**pair.price_precision))
        ref = venue.ticks(start)
        s = self.settings
        maker_name, taker_name = (
            participant_name("maker", symbol),
            participant_name("taker", symbol),
        )
        maker_id = self._user(maker_name, ts)
        taker_id = self._user(taker_name, ts)
        settings = self._maker_settings(symbol, pair.base, pair.quote, start)
        key = f"{s.seed}/{symbol}/maker"
        maker = Maker(maker_id, maker_name, venue, settings, 0, start=ref, key=key)
        taker = self._taker(taker_id, taker_name, venue, settings)
        maker.base_target = self._fund_spot(
            maker_id, maker_name, pair, s.funds * maker.capacity(), ref, ts
        )
        self._fund_spot(taker_id, taker_name, pair, s.funds * taker_funded(taker, ref), ref, ts)
        rng = random.Random(f"{s.seed}/{symbol}/taker")
        model = "cross" if cross is not None else self._path_settings(symbol).model
        return Market(symbol, venue, path, model, rng, maker, taker, ref)

    def _futures_market(self, c: ContractSpec, paths: dict[str, Path], ts: int) -> Market:
        state = self.exchange.engine.futures.states[c.symbol]
        shared = paths.get(c.index_source) if c.index_source != OPERATOR else None
        if shared is not None:
            path = shared  # the contract follows its index source's path
            start = shared.price
            model = self._path_settings(c.index_source).model
        else:
            last = (state.last or state.index) / 10**c.price_precision
            start = self._start_price(c.symbol, c.base, c.quote, last)
            path = paths[c.symbol] = self._new_path(c.symbol, start)
            model = self._path_settings(c.symbol).model
        venue = FuturesVenue(self.exchange, c, round(start * 10**c.price_precision))
        ref = venue.ticks(start)
        s = self.settings
        cost = c.value(1, ref) // c.default_leverage + 1
        maker_name = participant_name("maker", c.symbol)
        taker_name = participant_name("taker", c.symbol)
        maker_id = self._user(maker_name, ts)
        taker_id = self._user(taker_name, ts)
        settings = self._maker_settings(c.symbol, c.base, c.quote, start)
        key = f"{s.seed}/{c.symbol}/maker"
        maker = Maker(maker_id, maker_name, venue, settings, 0, start=ref, key=key)
        taker = self._taker(taker_id, taker_name, venue, settings)
        for user, name, contracts in (
            (maker_id, maker_name, 2 * maker.capacity()),
            (taker_id, taker_name, taker_funded(taker, ref)),
        ):
            self._fund_futures(user, name, c.margin_coin, s.funds * contracts * cost, ts)
        rng = random.Random(f"{s.seed}/{c.symbol}/taker")
        return Market(c.symbol, venue, path, model, rng, maker, taker, ref)

    def _taker(self, user: int, name: str, venue: Venue, maker: MakerSettings) -> Taker:
        """The market's taker; its sizes in dollars are converted as the maker's depth is
        (``depth`` over ``depth_usd``: the market's quote per dollar at the demo prices, or
        scaled with a depth its table sets)."""
        assert maker.depth is not None  # resolved by _maker_settings
        quote_per_usd = maker.depth / maker.depth_usd
        return Taker(user, name, venue, self.settings.taker, maker.spacing_bps, quote_per_usd)

    def _user(self, name: str, ts: int) -> int:
        for user in self.exchange.users.values():
            if user.name == name:
                return user.id
        return self.exchange.create_user(name, ts).id

    def _fund(self, user: int, name: str, asset: str, units: int, ts: int) -> int:
        """Fund once under the fixed tx id; top up when what was funded is under half of
        ``units`` (a data folder funded by an older, smaller profile). A restart at another
        price (which changes ``units``) funds nothing again. What was deposited now."""
        tx = funding_tx(name, asset)
        return ops.fund_up_to(self.exchange, user, asset, units, tx, ts, short_below=units // 2)

    def _fund_spot(self, user: int, name: str, pair: PairSpec, lots: int, ref: int, ts: int) -> int:
        """Both assets of ``pair`` for ``lots`` at ``ref``; the base funded in all."""
        self._fund(user, name, pair.base, lots * pair.base_per_lot, ts)
        self._fund(user, name, pair.quote, pair.quote_amount(ref, lots), ts)
        return ops.funded(self.exchange, user, funding_tx(name, pair.base))

    def _fund_futures(self, user: int, name: str, coin: str, units: int, ts: int) -> None:
        deposited = self._fund(user, name, coin, max(1, units), ts)
        if deposited:
            self.exchange.apply(FuturesTransfer(ts, user, coin, deposited, True))
