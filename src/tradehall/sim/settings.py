"""The ``[simulation]`` section of the configuration, as validated values (config.py parses
it). The makers' sizes are in quote notional (``MakerSettings``); the takers' in multiples of a
market's *unit*: the smallest order that meets the market's minimums at the price the
simulation starts from, times 1.5 (see ``venue.Venue.unit``)."""

from __future__ import annotations

import dataclasses
import math
from array import array
from dataclasses import dataclass, field
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class History:
    """A price history to replay (sim/replay.py reads it from a file): the steps of the
    reference, at times in ms after the first, and the length of one round."""

    times: array[int]
    """Non-decreasing; the first is 0."""
    prices: array[float]
    """The price from each time on (until the next)."""
    start_ms: int
    """UNIX ms of the first step (the history's own clock, shown by ``sim status``)."""
    end_ms: int
    """One round's length: a replay loops after it (0: it holds its only price)."""
    kind: str
    """``candles`` or ``trades``."""
    format: str
    """The format it was read as (``replay_format``)."""
    rows: int
    """Candles or trades read from the file."""


@dataclass(frozen=True, slots=True)
class PathSettings:
    """How a market's reference price moves."""

    model: str = "gbm"
    """``gbm`` (geometric Brownian motion) or ``replay`` (a history file)."""
    price: Decimal | None = None
    """Start price of a market that has not traded (one that has goes on from its last
    price); None: a replay's first price, else a built-in demo price."""
    drift: float = 0.0
    """Annual drift of the log price (0.1 = +10 % a year on average)."""
    volatility: float = 0.6
    """Annual volatility of the log price (0.6 = 60 %)."""
    jump_rate: float = 0.0
    """Expected jumps per hour (0: none)."""
    jump_size: float = 0.01
    """Standard deviation of a jump's log size."""
    correlation: float = 0.7
    """Correlation of this random walk's moves with every other walking market's of the same
    setting: each move is part a draw common to the whole simulation (the market moving as
    one, as BTC and ETH do), part its own. 0: independent walks."""
    replay: str = ""
    """History file (model ``replay``): a path or ``builtin:<name>``."""
    replay_format: str = "auto"
    """How ``replay`` is read (docs/simulation.md): ``auto``, ``csv``, ``binance-klines``,
    ``binance-aggtrades`` or ``klines-json``."""
    speed: float = 1.0
    """Simulated seconds per real second: 10 replays ten seconds of history a second, or
    moves a random walk as far as it would in ten seconds."""
    replay_file: str = ""
    """``replay`` found: the file's path (relative names are the configuration file's)."""
    history: History | None = None
    """The replayed history, read from ``replay_file`` only by what runs the simulation
    (``replay.with_histories``: a day of trades takes seconds, which no other command
    should pay); the configuration checks that the file opens and shows its format."""


@dataclass(frozen=True, slots=True)
class MakerSettings:
    """A market maker's ladder (docs/simulation.md, "The makers' books"). Its sizes are set in
    quote notional: ``depth`` is what each side's first ten levels hold together."""

    levels: int = 25
    """Orders on each side."""
    spacing_bps: float = 2.0
    """Distance between levels, in basis points of the reference price; the touch spread is
    one step."""
    depth: Decimal | None = None
    """Each side's first ten levels together, in the market's quote currency (a
    ``[[simulation.market]]`` key); None: ``depth_usd``."""
    depth_usd: Decimal = Decimal(1_200_000)
    """``depth`` in US dollars, for every market whose table names no ``depth``: converted to
    the market's quote at the demo prices (``runner.USD_PRICES``)."""
    growth: float = 0.5
    """How the sizes grow away from the touch: the levels come in steps (the first level, the
    next two, the next three, ...), each step's levels this many times the first level's size
    larger than the step before."""
    variation: float = 0.3
    """Each level's size is scaled by a factor between ``1 - variation`` and
    ``1 + variation``, drawn (seeded) for its price: sizes vary level to level, and a level
    keeps its size while the ladder moves."""
    inventory_limit: float = 5.0
    """Largest position (base held above or below the start, or net futures contracts) the
    maker may take on, in multiples of ``depth``: it never quotes more on a side than this
    bound allows."""
    skew: float = 1.0
    """How far (in levels) the ladder shifts away from the side it holds too much of, at full
    inventory."""


@dataclass(frozen=True, slots=True)
class TakerSettings:
    rate: float = 3.0
    """Orders per second per market (Poisson arrivals)."""
    size_model: str = "pareto"
    """``pareto``: each order's value drawn in US dollars from a power law (``median_usd``,
    ``tail``, ``max_usd``), as a real venue's trade sizes are: most small, a few large
    enough to walk the book. ``uniform``: ``min_size``..``max_size`` units."""
    median_usd: Decimal = Decimal(150)
    """Half the orders are worth less than this (``pareto``)."""
    tail: float = 1.3
    """The power law's exponent: P(value > x) falls as x ** -tail (``pareto``; the smaller,
    the more large orders)."""
    max_usd: Decimal = Decimal(250_000)
    """The largest order (``pareto``)."""
    min_size: int = 1
    max_size: int = 6
    """Order sizes, in units, uniform between the two (``uniform``)."""
    limit_share: float = 0.3
    """Share of marketable LIMIT (IOC) orders; the rest are MARKET orders."""
    limit_slippage_bps: float = 20.0
    """How far through the reference a marketable limit order's price goes."""

    def mean_size(self) -> float:
        """An order's mean size, in units (``uniform``)."""
        return (self.min_size + self.max_size) / 2

    def _scale(self) -> float:
        """The power law's least value: ``median_usd`` is its median below ``max_usd``."""
        a, top, median = self.tail, float(self.max_usd), float(self.median_usd)
        # F(median) = 1/2 for the law truncated at top, F(x) = (1 - (m/x)^a) / (1 - (m/top)^a)
        return median * math.pow(2 - math.pow(median / top, a), -1 / a)

    def value_usd(self, u: float) -> float:
        """The order value whose share of smaller orders is ``u`` (0..1; ``pareto``)."""
        a, least = self.tail, self._scale()
        cut = math.pow(least / float(self.max_usd), a)
        return least * math.pow(1 - u * (1 - cut), -1 / a)

    def mean_usd(self) -> float:
        """An order's mean value (``pareto``)."""
        a, least, top = self.tail, self._scale(), float(self.max_usd)
        cut = 1 - math.pow(least / top, a)
        if abs(a - 1) < 1e-9:
            return least * math.log(top / least) / cut
        spread = math.pow(least, 1 - a) - math.pow(top, 1 - a)
        return a * math.pow(least, a) * spread / ((a - 1) * cut)


@dataclass(frozen=True, slots=True)
class FaultRule:
    """Faults injected into requests whose path starts with ``path`` (``*``: every API
    request; the admin API is never touched), of ``method`` when given. The first rule that
    matches a request applies."""

    path: str = "*"
    method: str = ""
    """Only requests of this HTTP method (``POST``); empty: every method."""
    latency_share: float = 0.0
    """Share of requests delayed."""
    latency_ms_min: int = 0
    latency_ms_max: int = 0
    """A delay is uniform between the two."""
    error_before_share: float = 0.0
    """Share answered 503 without reaching the exchange (nothing applied)."""
    error_after_share: float = 0.0
    """Share answered 504 after the exchange applied the request (its outcome unknown to
    the client)."""
    burst_share: float = 0.0
    """Share of requests that start a burst of 429 answers."""
    burst_seconds: float = 2.0
    drop_share: float = 0.0
    """Share of WebSocket connections the server drops (closes with 1001)."""
    drop_after_ms_min: int = 1000
    drop_after_ms_max: int = 10000
    """A dropped connection is closed a uniform delay between the two after it opened."""


@dataclass(frozen=True, slots=True)
class FaultSettings:
    enabled: bool = False
    seed: int = 0
    rules: tuple[FaultRule, ...] = ()


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    enabled: bool = False
    """Run without ``--demo`` too (``serve --demo`` runs it unless ``--no-sim``)."""
    seed: int = 1
    tick_ms: int = 500
    """How often the participants act (ms)."""
    markets: tuple[str, ...] = ()
    """Symbols (spot pairs and contracts) to simulate; empty: every one configured."""
    path: PathSettings = PathSettings()
    overrides: dict[str, PathSettings] = field(default_factory=dict)
    """Per-market path settings (a ``[[simulation.market]]`` table that sets a path key)."""
    maker: MakerSettings = MakerSettings()
    makers: dict[str, MakerSettings] = field(default_factory=dict)
    """Per-market maker settings (``[[simulation.market]]``); a market not listed: ``maker``."""
    taker: TakerSettings = TakerSettings()
    history_days: int = 365
    """Days of candles drawn for a market the simulation first runs on (one that has no
    bars yet), ending at its start price (``sim.history``); 0: its chart starts empty. A
    replayed market gets none (its history is the file's)."""
    funds: int = 4
    """Each participant is funded with this many times what it can trade (a maker: both
    ladders and its inventory bound; a taker: a thousand average orders)."""
    faults: FaultSettings = FaultSettings()
    reset_spot: dict[str, Decimal] = field(default_factory=dict)
    reset_futures: dict[str, Decimal] = field(default_factory=dict)
    """``tradehall account reset``'s starting balances (``[simulation.reset]``); empty: the
    demo account's."""
    source: str = ""
    """The configuration file, for messages."""


def with_speed(settings: SimulationSettings, speed: float) -> SimulationSettings:
    """``settings`` with every market's path at ``speed`` (``serve --speed``)."""
    return dataclasses.replace(
        settings,
        path=dataclasses.replace(settings.path, speed=speed),
        overrides={
            symbol: dataclasses.replace(path, speed=speed)
            for symbol, path in settings.overrides.items()
        },
    )
