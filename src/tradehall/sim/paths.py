"""Reference price paths: where a market's price "should" be at each step of the simulation.
Every path is driven by its own seeded random generator and by simulated time (steps of
``dt`` seconds), never by the wall clock, so the same seed gives the same sequence of prices."""

from __future__ import annotations

import math
import random
from typing import Protocol

from tradehall.sim.settings import PathSettings, ReplayPoint

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
    """A recorded history played at ``speed`` times real time, scaled so that it starts at
    ``start`` (the history's shape, around the market's own price), and looped when it
    ends."""

    def __init__(self, points: tuple[ReplayPoint, ...], speed: float, start: float) -> None:
        self.points = points
        self.speed = speed
        self.scale = start / points[0].price
        self.elapsed_ms = 0.0
        self.index = 0
        self.price = start

    def step(self, dt_s: float) -> float:
        self.elapsed_ms += dt_s * 1000 * self.speed
        last = self.points[-1].ms
        if last > 0 and self.elapsed_ms > last:
            # Loop: the next round starts where this one ended, rescaled to go on from it.
            self.elapsed_ms -= last
            self.scale = self.price / self.points[0].price
            self.index = 0
        while self.index + 1 < len(self.points) and self.points[self.index + 1].ms <= (
            self.elapsed_ms
        ):
            self.index += 1
        self.price = self.points[self.index].price * self.scale
        return self.price


def make_path(settings: PathSettings, start: float, rng: random.Random) -> Path:
    if settings.model == "replay":
        return ReplayPath(settings.points, settings.speed, start)
    return GbmPath(settings, start, rng)
