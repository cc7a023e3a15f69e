"""A maker's depth profile, as pure functions: how much each level of its ladder holds.

The profile is set by what each side's first ten levels hold together (``depth``, worked out
in lots or contracts at the price the maker starts from). Sizes grow away from the touch in
steps: the first level, then two levels, then three, ...; each step's levels are ``growth``
times the first level's size larger than the step before's. Each level's size is then scaled
by a factor in ``[1 - variation, 1 + variation]`` drawn for its *price* from a seeded hash:
sizes vary level to level, deterministically, and a level keeps its size while the ladder
moves along the grid. A moving reference then re-places only the levels that cross from one
step to the next (``ladder.reconcile`` keeps an order whose wanted size is unchanged), not
every level of the side."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

FIRST_LEVELS = 10
"""``depth`` is what this many levels on each side hold together."""


def step_of(level: int) -> int:
    """The step of ``level`` (0 at the touch): 0 for level 0, 1 for levels 1-2, 2 for 3-5,
    3 for 6-9, ..."""
    return (math.isqrt(8 * level + 1) - 1) // 2


def shape(level: int, growth: float) -> float:
    """The size of ``level`` relative to the touch's, before the variation."""
    return 1.0 + growth * step_of(level)


def variation_factor(key: str, price: int, variation: float) -> float:
    """A factor in ``[1 - variation, 1 + variation]``, a function of ``key`` and ``price``
    only (the same in every process and on every run)."""
    digest = hashlib.blake2b(f"{key}/{price}".encode(), digest_size=8).digest()
    uniform = int.from_bytes(digest, "big") / 2**64
    return 1.0 + variation * (2.0 * uniform - 1.0)


@dataclass(frozen=True, slots=True)
class Profile:
    first: float
    """The touch level's size (lots or contracts) before the variation."""
    growth: float
    variation: float
    min_qty: int
    """No level is smaller (the market's smallest order the maker quotes)."""
    key: str
    """Seeds the variation (``seed/symbol/maker``)."""

    @classmethod
    def for_depth(
        cls, depth: int, growth: float, variation: float, min_qty: int, key: str
    ) -> Profile:
        """The profile whose first ten levels on a side hold ``depth`` (before the
        variation, which averages out)."""
        total = sum(shape(level, growth) for level in range(FIRST_LEVELS))
        return cls(depth / total, growth, variation, min_qty, key)

    def size(self, level: int, price: int) -> int:
        """What ``level`` (0 at the touch) holds when it sits at ``price``."""
        factor = shape(level, self.growth) * variation_factor(self.key, price, self.variation)
        return max(self.min_qty, round(self.first * factor))

    def most(self, levels: int) -> int:
        """The most ``levels`` levels of one side can hold, whatever their prices."""
        top = 1.0 + self.variation
        return sum(
            max(self.min_qty, math.ceil(self.first * shape(level, self.growth) * top))
            for level in range(levels)
        )
