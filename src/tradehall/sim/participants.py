"""The simulated participants: market makers and noise takers. Each is an ordinary user whose
orders are engine commands; each keeps counters and a state (``quoting``/``taking``, or
``out of funds``) that ``tradehall sim status`` shows."""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tradehall.codes import Reject
from tradehall.sim.ladder import BUY, SELL, Quote, Resting, keeping, reconcile, spacing
from tradehall.sim.ladder import ladder as quote_ladder
from tradehall.sim.profile import Profile
from tradehall.sim.settings import MakerSettings, TakerSettings
from tradehall.sim.venue import Venue

log = logging.getLogger("tradehall.sim")
MILLION = Decimal(1_000_000)

ACTIVE = "active"
OUT_OF_FUNDS = "out of funds"


@dataclass
class Counters:
    orders: int = 0
    cancels: int = 0
    rejected: int = 0
    last_reject: str = ""

    def view(self) -> dict[str, Any]:
        return {
            "orders": self.orders,
            "cancels": self.cancels,
            "rejected": self.rejected,
            "lastReject": self.last_reject,
        }


@dataclass
class Participant:
    role: str
    user: int
    name: str
    venue: Venue
    state: str = ACTIVE
    note: str = ""
    counters: Counters = field(default_factory=Counters)

    def _set_state(self, state: str, note: str) -> None:
        if state != self.state:
            if state == OUT_OF_FUNDS:
                log.warning("%s (user %d) stops: %s", self.name, self.user, note)
            else:
                log.info("%s (user %d) resumes", self.name, self.user)
        self.state, self.note = state, note

    def _rejected(self, exc: Reject) -> None:
        self.counters.rejected += 1
        self.counters.last_reject = f"{int(exc.code)} {exc.msg}"

    def view(self) -> dict[str, Any]:
        return {
            "userId": self.user,
            "name": self.name,
            "role": self.role,
            "symbol": self.venue.symbol,
            "state": self.state,
            "note": self.note,
            **self.counters.view(),
        }


class Maker(Participant):
    """Quotes a ladder around the reference; requotes only the levels that change. Its sizes
    and its inventory bound are worked out once, in lots or contracts, from the quote notional
    of ``settings.depth`` at ``start`` (the price the simulation starts from)."""

    def __init__(
        self,
        user: int,
        name: str,
        venue: Venue,
        settings: MakerSettings,
        base_target: int,
        *,
        start: int,
        key: str,
    ) -> None:
        super().__init__("maker", user, name, venue)
        if settings.depth is None:
            raise ValueError(f"{name}: the maker's depth is not resolved")
        self.settings = settings
        self.base_target = base_target
        """Spot: the base the maker starts from; its inventory is what it holds beyond it."""
        depth = max(venue.unit, venue.quantity(settings.depth, start))
        self.profile = Profile.for_depth(
            depth, settings.growth, settings.variation, venue.unit, key
        )
        self.max_inventory = max(venue.unit, round(depth * settings.inventory_limit))
        """The inventory bound, in lots or contracts."""
        self.step = 0
        """The ladder's spacing in ticks (0: not worked out yet)."""

    def capacity(self) -> int:
        """The most the maker ever quotes on one side, plus its inventory bound: what its
        funding must cover (lots or contracts)."""
        return self.profile.most(self.settings.levels) + self.max_inventory

    def wanted(
        self, ref: int, buy_room: int, sell_room: int, resting: list[Resting]
    ) -> list[Quote]:
        s, v = self.settings, self.venue
        self.step = spacing(ref, s.spacing_bps, self.step)
        return quote_ladder(
            ref,
            self.step,
            s.levels,
            keeping(self.profile.size, resting),
            v.inventory(self.user, self.base_target),
            self.max_inventory,
            s.skew,
            buy_room=buy_room,
            sell_room=sell_room,
            min_qty=v.unit,
        )

    def act(self, ref: int, ts: int) -> None:
        v = self.venue
        resting = v.resting(self.user)
        rooms = {side: v.funds_room(self.user, side, ref) for side in (BUY, SELL)}
        funds_short = [side for side, room in rooms.items() if room < v.unit]
        if funds_short:
            # Cannot hold a two-sided quote: stop quoting altogether, and say why.
            self._set_state(OUT_OF_FUNDS, f"not enough funds to quote {' and '.join(funds_short)}")
            quotes = []
        else:
            if self.state == OUT_OF_FUNDS:
                self._set_state(ACTIVE, "")
            quotes = self.wanted(ref, rooms[BUY], rooms[SELL], resting)
        cancel, place = reconcile(resting, quotes)
        try:
            v.cancel(self.user, cancel, ts)
            self.counters.cancels += len(cancel)
            self.counters.orders += v.quote(self.user, place, ts)
        except Reject as exc:
            self._rejected(exc)


class Taker(Participant):
    """Sends market and marketable limit orders at random (Poisson) times, random sides and
    sizes."""

    def __init__(
        self,
        user: int,
        name: str,
        venue: Venue,
        settings: TakerSettings,
        lean_bps: float,
        quote_per_usd: Decimal = Decimal(1),
    ) -> None:
        super().__init__("taker", user, name, venue)
        self.settings = settings
        self.lean_bps = lean_bps
        """How far (bps) the book's mid must sit from the reference for the taker to lean
        fully (80 %) to the cheap side: the makers' inventory skew then draws flow back."""
        self.quote_per_usd = quote_per_usd
        """The market's quote currency per US dollar (the ``pareto`` sizes' conversion)."""

    def size(self, rng: random.Random, ref: int) -> int:
        """An order's size in lots (spot) or contracts (futures), at least one unit."""
        s, v = self.settings, self.venue
        if s.size_model == "uniform":
            return rng.randint(s.min_size, s.max_size) * v.unit
        return self._lots(s.value_usd(rng.random()), ref, rng)

    def mean_size(self, ref: int) -> int:
        """An order's mean size at ``ref`` ticks (funding, a drawn past's volumes)."""
        s = self.settings
        if s.size_model == "uniform":
            return round(s.mean_size() * self.venue.unit)
        return self._lots(s.mean_usd(), ref)

    def largest_size(self, ref: int) -> int:
        s = self.settings
        if s.size_model == "uniform":
            return s.max_size * self.venue.unit
        return self._lots(float(s.max_usd), ref)

    def _lots(self, usd: float, ref: int, rng: random.Random | None = None) -> int:
        """``usd`` in lots at ``ref``, at least a unit: rounded down, or with ``rng`` up or
        down at random in proportion (so that whole contracts worth 30 dollars keep the law's
        mean and median instead of losing up to a contract an order)."""
        per_million = self.venue.quantity(MILLION * self.quote_per_usd, ref)
        exact = usd * per_million / 1_000_000
        lots = int(exact)
        if rng is not None and rng.random() < exact - lots:
            lots += 1
        return max(self.venue.unit, lots)

    def buy_chance(self, ref: int) -> float:
        """Even odds when the book is centred on the reference; more buying when it sits
        below (the makers hold too much), more selling when above."""
        mid = self.venue.mid()
        if not mid or not ref or self.lean_bps <= 0:
            return 0.5
        edge = (ref - mid) / ref * 10_000 / self.lean_bps
        return 0.5 + 0.3 * max(-1.0, min(1.0, edge))

    def orders_due(self, rng: random.Random, dt_s: float) -> int:
        """How many orders arrive in ``dt_s`` seconds (Poisson, by Knuth's method)."""
        mean = self.settings.rate * dt_s
        if mean <= 0:
            return 0
        limit, k, p = math.exp(-mean), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1

    def act(self, rng: random.Random, ref: int, ts: int, dt_s: float) -> None:
        s, v = self.settings, self.venue
        for _ in range(self.orders_due(rng, dt_s)):
            side = BUY if rng.random() < self.buy_chance(ref) else SELL
            qty = self.size(rng, ref)
            marketable = rng.random() < s.limit_share
            if v.funds_room(self.user, side, ref) < qty:
                side = SELL if side == BUY else BUY
                if v.funds_room(self.user, side, ref) < qty:
                    self._set_state(OUT_OF_FUNDS, "not enough funds for an order on either side")
                    continue
            if self.state == OUT_OF_FUNDS:
                self._set_state(ACTIVE, "")
            limit = 0
            if marketable:
                slip = s.limit_slippage_bps / 10_000
                limit = max(1, round(ref * (1 + slip if side == BUY else 1 - slip)))
            try:
                if v.take(self.user, side, qty, limit, ts):
                    self.counters.orders += 1
            except Reject as exc:
                self._rejected(exc)
