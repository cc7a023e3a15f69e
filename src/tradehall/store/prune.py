"""Retention: which stored history is past its horizon, decided row by row in Python (the
same rules on every backend), and the statements the store prunes with.

Each kind is walked in id order, one short transaction per ``limit`` rows looked at, once per
horizon that applies to it (``CLASSES``), each walk stopping at the first row placed after
that horizon's cutoff: ids follow time, so no row of that class further on can be due. A
walk's cursor (where it stopped) is where its next pass starts; rows a walk passed over that
become due for some other reason than age (an order that ends later than it was placed) wait
for the next walk from the start (``FULL_WALK_EVERY``).

What is never pruned: open orders, live futures documents, and the rows recovery derives
something from (the newest row of each table or kind, whose id the id counters continue from;
the latest ``RECENT_TRADES`` trades of each symbol, which give the last price and the public
trades).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from tradehall.engine.orders import OPEN_STATUSES

ORDERS, FUTURES_ORDERS, TRADES, LEDGER = "orders", "futures_orders", "trades", "ledger"
KINDS = (ORDERS, FUTURES_ORDERS, TRADES, LEDGER)
"""What a pass prunes, in that order (``futures_orders``: ended futures orders and
conditional orders, kept by the orders' horizon)."""

CLASSES: dict[str, tuple[str, ...]] = {
    ORDERS: ("orders", "simulation"),
    FUTURES_ORDERS: ("orders", "simulation"),
    TRADES: ("trades", "simulation"),
    LEDGER: ("ledger", "system_ledger", "simulation"),
}
"""Per kind, the horizons (``Cutoffs`` fields) its rows may fall under: one walk each."""

FULL_WALK_EVERY = 60
"""Passes between two walks from each kind's first row (an hour at the default interval)."""

RECENT_TRADES = 1000
"""Per symbol, the trades recovery loads (the last price, the public trades)."""

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

FUTURES_ENDED = "live = 0 AND kind IN ('order', 'trigger')"
"""The ended futures orders, in the very words of the ``futures_ended`` partial index."""


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """Absolute times in ms: a row of that kind older than its cutoff may go; 0 keeps every
    row of that kind. ``simulation`` applies to ``simulation_accounts`` in every kind."""

    orders: int = 0
    trades: int = 0
    ledger: int = 0
    system_ledger: int = 0
    simulation: int = 0
    simulation_accounts: frozenset[int] = frozenset()

    def of(self, horizon: str) -> int:
        """The cutoff of one of ``CLASSES``' horizons."""
        cutoff: int = getattr(self, horizon)
        return cutoff

    def order(self, account: int) -> int:
        return self.simulation if account in self.simulation_accounts else self.orders

    def trade(self, bid_account: int, ask_account: int) -> int:
        """A trade stays as long as either side's history needs it."""
        mine = self.simulation_accounts
        bid = self.simulation if bid_account in mine else self.trades
        ask = self.simulation if ask_account in mine else self.trades
        return min(bid, ask)

    def ledger_entry(self, account: int) -> int:
        if account in self.simulation_accounts:
            return self.simulation
        return self.system_ledger if account <= 0 else self.ledger


def cutoffs(
    now: int,
    *,
    orders_days: int,
    trades_days: int,
    ledger_days: int,
    system_ledger_hours: int,
    simulation_minutes: int,
    simulation_accounts: Iterable[int] = (),
) -> Cutoffs:
    """The cutoffs at ``now`` of horizons in days, hours or minutes (0: keep forever). A simulation
    horizon of 0 keeps the participants' rows as long as users'."""

    def before(span_ms: int) -> int:
        return max(0, now - span_ms) if span_ms else 0

    users = Cutoffs(
        orders=before(orders_days * DAY_MS),
        trades=before(trades_days * DAY_MS),
        ledger=before(ledger_days * DAY_MS),
        system_ledger=before(system_ledger_hours * HOUR_MS),
    )
    accounts = frozenset(simulation_accounts)
    if not simulation_minutes:
        return Cutoffs(
            users.orders, users.trades, users.ledger, users.system_ledger, 0, frozenset()
        )
    return Cutoffs(
        users.orders,
        users.trades,
        users.ledger,
        users.system_ledger,
        before(simulation_minutes * MINUTE_MS),
        accounts,
    )


@dataclass(slots=True)
class Keep:
    """Rows recovery derives something from, read at the start of a pass."""

    max_order: int = 0
    max_trade: int = 0
    max_ledger: int = 0
    max_futures: dict[str, int] = field(default_factory=dict)
    """Per futures kind, its highest id (the order id counter continues from it)."""
    recent_trades: dict[str, int] = field(default_factory=dict)
    """Per symbol, the lowest id of its ``RECENT_TRADES`` newest trades."""


@dataclass(frozen=True, slots=True)
class Step:
    """One transaction's work: rows deleted, the id the walk goes on after, and whether the
    walk is done for this pass."""

    deleted: int
    last_id: int
    done: bool


class _Times(msgspec.Struct):
    time: int
    updated: int


_TIMES = msgspec.json.Decoder(_Times)


def doc_times(doc: str | bytes) -> tuple[int, int]:
    """(time, updated) of a futures order or conditional order document."""
    times = _TIMES.decode(doc)
    return times.time, times.updated


Stop = int | None
"""The id of the first row placed at or after the walk's cutoff, if the rows reached one."""


def due_orders(
    rows: list[tuple[int, int, str, int, int]], cut: Cutoffs, keep: Keep, stop_at: int
) -> tuple[list[int], Stop]:
    """Of (id, account, status, time, updated) rows in id order, up to the first placed at or
    after ``stop_at``: the ids to delete (ended before their cutoff), and that first id."""
    due: list[int] = []
    for id, account, status, time, updated in rows:
        if time >= stop_at:
            return due, id
        if status not in OPEN_STATUSES and updated < cut.order(account) and id != keep.max_order:
            due.append(id)
    return due, None


def due_trades(
    rows: list[tuple[int, str, int, int, int]], cut: Cutoffs, keep: Keep, stop_at: int
) -> tuple[list[int], Stop]:
    """Of (id, symbol, time, bid_account, ask_account) rows in id order: the ids to delete."""
    due: list[int] = []
    for id, symbol, time, bid, ask in rows:
        if time >= stop_at:
            return due, id
        if (
            time < cut.trade(bid, ask)
            and id != keep.max_trade
            and id < keep.recent_trades.get(symbol, 0)
        ):
            due.append(id)
    return due, None


LedgerRow = tuple[int, int, str, int, int, int]
"""(id, account, asset, d_free, d_locked, time)."""
Fold = dict[tuple[int, str], list[int]]
"""Per (account, asset): [sum of d_free, sum of d_locked, entries, highest id]."""


def due_ledger(
    rows: list[LedgerRow], cut: Cutoffs, keep: Keep, stop_at: int
) -> tuple[list[int], Fold, Stop]:
    """Of ledger rows in id order: the ids to delete, what they add to each checkpoint, and
    the first id at or after ``stop_at``."""
    due: list[int] = []
    fold: Fold = {}
    for id, account, asset, d_free, d_locked, time in rows:
        if time >= stop_at:
            return due, fold, id
        if time < cut.ledger_entry(account) and id != keep.max_ledger:
            due.append(id)
            sums = fold.get((account, asset))
            if sums is None:
                fold[(account, asset)] = [d_free, d_locked, 1, id]
            else:
                sums[0] += d_free
                sums[1] += d_locked
                sums[2] += 1
                sums[3] = id
    return due, fold, None


def due_futures(
    rows: list[tuple[str, int, str, int, str]], cut: Cutoffs, keep: Keep, stop_at: int
) -> tuple[list[tuple[str, int, str, int]], Stop]:
    """Of ended futures (kind, user, contract, id, doc) rows in id order: the keys to delete.
    A futures order belongs to the user's futures account, which is a simulation account
    exactly when the user is a participant: ``simulation_accounts`` holds both."""
    due: list[tuple[str, int, str, int]] = []
    for kind, user, contract, id, doc in rows:
        time, updated = doc_times(doc)
        if time >= stop_at:
            return due, id
        if updated < cut.order(user) and id != keep.max_futures.get(kind):
            due.append((kind, user, contract, id))
    return due, None
