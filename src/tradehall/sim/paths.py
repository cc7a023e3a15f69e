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


class GbmPath:
    """Geometric Brownian motion with drift and volatility (annual), plus optional jumps
    (Poisson arrivals, normally distributed log sizes), at ``speed`` simulated seconds per
    second."""

    def __init__(self, settings: PathSettings, start: float, rng: random.Random) -> None:
        self.settings = settings
        self.price = start
        self.rng = rng

    def step(self, dt_s: float) -> float:
        s = self.settings
        dt_s *= s.speed
        t = dt_s / YEAR_S
        log_move = (s.drift - s.volatility**2 / 2) * t + s.volatility * math.sqrt(
            t
        ) * self.rng.gauss(0.0, 1.0)
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


def make_path(settings: PathSettings, start: float, rng: random.Random) -> Path:
    if settings.model == "replay" and settings.history is not None:
        return ReplayPath(settings.history, settings.speed, start, settings.replay)
    return GbmPath(settings, start, rng)
