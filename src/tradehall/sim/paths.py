"""Reference price paths: where a market's price "should" be at each step of the simulation.
Every path is driven by its own seeded random generator and by simulated time (steps of
``dt`` seconds), never by the wall clock, so the same seed gives the same sequence of prices."""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from typing import Any, Protocol

from tradehall.sim.settings import History, PathSettings

YEAR_S = 365 * 24 * 3600.0
HOUR_S = 3600.0


class Path(Protocol):
    price: float

    def step(self, dt_s: float) -> float:
        """Advance ``dt_s`` simulated seconds; the new price."""


class CommonFactor:
    """The draw the whole simulation's random walks share at each of their steps (the market
    moving as one), from its own seeded generator: the n-th step of every walk reads the
    same number."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.draws: dict[int, float] = {}

    def draw(self, step: int) -> float:
        draw = self.draws.get(step)
        if draw is None:
            draw = self.draws[step] = self.rng.gauss(0.0, 1.0)
            self.draws.pop(step - 2, None)  # walks step together: only the latest are read
        return draw


class GbmPath:
    """Geometric Brownian motion with drift and volatility (annual), plus optional jumps
    (Poisson arrivals, normally distributed log sizes), at ``speed`` simulated seconds per
    second. With a ``factor``, a share ``correlation`` of each move's variance is the
    factor's draw, the rest the path's own."""

    def __init__(
        self,
        settings: PathSettings,
        start: float,
        rng: random.Random,
        factor: CommonFactor | None = None,
    ) -> None:
        self.settings = settings
        self.price = start
        self.rng = rng
        self.factor = factor
        self.steps = 0

    def step(self, dt_s: float) -> float:
        s = self.settings
        dt_s *= s.speed
        t = dt_s / YEAR_S
        shock = self.rng.gauss(0.0, 1.0)
        if self.factor is not None and s.correlation > 0:
            common = self.factor.draw(self.steps)
            shock = math.sqrt(s.correlation) * common + math.sqrt(1 - s.correlation) * shock
        self.steps += 1
        log_move = (s.drift - s.volatility**2 / 2) * t + s.volatility * math.sqrt(t) * shock
        if s.jump_rate > 0 and self.rng.random() < s.jump_rate * dt_s / HOUR_S:
            log_move += self.rng.gauss(0.0, s.jump_size)
        self.price *= math.exp(log_move)
        return self.price


class ReplayPath:
    """A recorded history played at ``speed`` times real time, from ``start`` (the history's
    own first price on a market that has not traded; else the market's last price, the
    history scaled to go on from it), and looped when it ends: each new round goes on from
    where the last ended."""

    def __init__(self, history: History, speed: float, start: float, name: str = "") -> None:
        self.history = history
        self.speed = speed
        self.name = name
        self.scale = start / history.prices[0]
        self.elapsed_ms = 0.0
        self.index = 0
        self.rounds = 0
        self.price = start

    def step(self, dt_s: float) -> float:
        h = self.history
        self.elapsed_ms += dt_s * 1000 * self.speed
        if h.end_ms > 0 and self.elapsed_ms >= h.end_ms:
            rounds = int(self.elapsed_ms // h.end_ms)
            self.elapsed_ms -= rounds * h.end_ms
            self.scale *= (h.prices[-1] / h.prices[0]) ** rounds
            self.rounds += rounds
            self.index = 0
        self.index = bisect_right(h.times, self.elapsed_ms, lo=self.index) - 1
        self.price = h.prices[self.index] * self.scale
        return self.price

    def view(self) -> dict[str, Any]:
        """Where the replay is, for ``sim status``: the history's own time (UNIX ms), the
        round (1: the first time through) and the scale of its prices."""
        h = self.history
        return {
            "file": self.name,
            "format": h.format,
            "historyTime": h.start_ms + int(self.elapsed_ms),
            "round": self.rounds + 1,
            "scale": round(self.scale, 12),
        }


CROSS_BASIS_HALF_LIFE_S = 600.0
"""How fast a cross pair's reference returns to the ratio of its legs after starting away
from it (a restart from its last traded price): half the gap in ten simulated minutes."""


class CrossPath:
    """The reference of a pair whose two assets both have a simulated path against one
    currency (ETHBTC beside ETHUSDT and BTCUSDT): the ratio of theirs, as arbitrage holds it
    on a real venue, so that a triangle of trades (ETH for USDT, ETH for BTC, BTC for USDT)
    earns nothing beyond the spreads and fees, and the cross moves with its legs. It starts at
    ``start`` and the gap to the legs' ratio (its basis) halves every
    ``CROSS_BASIS_HALF_LIFE_S`` simulated seconds. Its legs are stepped before it."""

    def __init__(self, base: Path, quote: Path, start: float, speed: float) -> None:
        self.base = base
        self.quote = quote
        self.speed = speed
        self.basis = start / (base.price / quote.price)
        self.price = start

    def step(self, dt_s: float) -> float:
        self.basis = 1 + (self.basis - 1) * 0.5 ** (dt_s * self.speed / CROSS_BASIS_HALF_LIFE_S)
        self.price = self.base.price / self.quote.price * self.basis
        return self.price


def make_path(
    settings: PathSettings,
    start: float,
    rng: random.Random,
    factor: CommonFactor | None = None,
) -> Path:
    if settings.model == "replay" and settings.history is not None:
        return ReplayPath(settings.history, settings.speed, start, settings.replay)
    return GbmPath(settings, start, rng, factor)
