"""The Store interface every backend implements, and the snapshot recovery loads."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from tradehall.engine.engine import TransferRecord
from tradehall.engine.events import Trade
from tradehall.engine.futures_model import (
    AccountTransfer,
    FuturesDoc,
    FuturesOrderState,
    Trigger,
)
from tradehall.engine.orders import Order, OrderState
from tradehall.marketdata import Bar, PublicTrade
from tradehall.store.batch import Batch, KeyRow, UserRow
from tradehall.store.prune import Cutoffs, Keep, Step

__all__ = ["FuturesDoc", "Snapshot", "Store", "StoreError", "collector_paused"]


class StoreError(Exception):
    """The store could not do what was asked (the write's outcome is unknown)."""


class StoreRefused(StoreError):
    """The store will not do what was asked as it stands (an import into a store that is not
    empty, say): the caller's mistake, and nothing was changed."""


class ProjectionMoved(StoreError):
    """A projector's commit found the projections already past where it started (another
    projector wrote those journal records): nothing was written; reload and go on."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector off for the block (then as it was before). Loading a store
    builds millions of objects that all stay alive: with the collector on, each few hundred of
    them would start a collection, and the full ones would traverse everything built so far."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(slots=True)
class Snapshot:
    """Everything a fresh engine and the API need to continue where the store left off."""

    users: list[UserRow] = field(default_factory=list)
    keys: list[KeyRow] = field(default_factory=list)
    balances: list[tuple[int, str, int, int]] = field(default_factory=list)
    transfers: list[tuple[str, TransferRecord]] = field(default_factory=list)
    open_orders: list[Order] = field(default_factory=list)
    """Ascending id: the order they arrived in, which is their queue priority."""
    next_order_id: int = 1
    next_trade_id: int = 1
    bars: list[tuple[str, str, list[Bar]]] = field(default_factory=list)
    recent_trades: list[tuple[str, list[PublicTrade]]] = field(default_factory=list)
    """Per symbol, the latest public trades, oldest first (the last one gives the last price)."""
    margin_accounts: list[tuple[int, int, str]] = field(default_factory=list)
    """(id, user, symbol)."""
    debts: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(account, asset, principal, interest), non-zero only."""
    engine_state: dict[str, int] = field(default_factory=dict)
    futures_docs: list[object] = field(default_factory=list)
    """Every live futures document decoded to its Struct: contract states, settings,
    positions, triggers, then orders, each kind in ascending id (orders: queue priority)."""
    futures_max_ids: dict[str, int] = field(default_factory=dict)
    """Per kind, the highest id of any stored document (live or not)."""


class Store(Protocol):
    def identity(self) -> dict[str, str]:
        """Which store this is, comparable between processes and never holding a password:
        what ``server.json`` records (``factory.store_identity``), plus a SQLite file's
        absolute path (every SQLite store has the same ``store_identity``)."""
        ...

    def migrate(self) -> int:
        """Create or upgrade the schema; return the version now in force."""
        ...

    def schema_version(self) -> int:
        """The schema version in force, 0 for a store never migrated (creates nothing)."""
        ...

    def commit(self, batch: Batch) -> None:
        """Write the whole batch in one transaction, or raise StoreError and write nothing."""
        ...

    def load(self, symbols: list[str], bars_to_keep: dict[str, int]) -> Snapshot: ...

    def find_order(
        self, account: int, symbol: str, order_id: int | None, client_id: str | None
    ) -> OrderState | None: ...

    def account_trades(
        self, account: int, symbol: str, limit: int, from_id: int | None
    ) -> list[Trade]:
        """Trades of ``account`` on ``symbol``, newest first (see the contract's fromId rule)."""
        ...

    def account_orders(
        self, account: int, symbol: str | None, start: int, end: int, limit: int
    ) -> list[OrderState]:
        """Orders of ``account`` placed within [start, end], newest first."""
        ...

    def account_trades_between(
        self, account: int, symbol: str | None, start: int, end: int, limit: int
    ) -> list[Trade]:
        """Trades of ``account`` within [start, end], newest first."""
        ...

    def futures_history(
        self,
        kind: str,
        user: int,
        contract: str | None,
        from_id: int | None,
        limit: int,
        live: bool | None,
    ) -> list[FuturesDoc]:
        """Documents of ``kind`` of ``user`` (on ``contract``, or on every contract if None;
        only live or only closed ones if ``live`` is given), newest first, paged by the
        contract's fromId rule."""
        ...

    def account_transfers(
        self,
        user: int,
        asset: str | None,
        into_futures: bool | None,
        start: int,
        end: int,
        skip: int,
        limit: int,
    ) -> list[AccountTransfer]:
        """The user's spot <-> futures transfers within [start, end], newest first."""
        ...

    def account_transfer(self, user: int, transfer_id: int) -> AccountTransfer | None: ...

    def futures_doc(self, kind: str, user: int, contract: str, id: int) -> FuturesDoc | None:
        """One document by its key, live or not."""
        ...

    def futures_by_client_id(
        self, user: int, contract: str, client_id: str
    ) -> FuturesOrderState | Trigger | None:
        """The most recent futures order or conditional order of ``user`` on ``contract``
        with ``client_id`` (they share one id space: the highest id is the most recent)."""
        ...

    def admin_log(self, limit: int, before: int | None = None) -> list[tuple[Any, ...]]:
        """The admin audit trail, newest first (``TABLES["admin_log"]``'s columns)."""
        ...

    def admin_log_span(self) -> tuple[int, int, int]:
        """(rows, lowest id, highest id) of the admin audit trail."""
        ...

    def ledger_mismatches(self) -> list[tuple[int, str, int, int, int, int]]:
        """Stored balances that differ from the sum of their ledger entries (one snapshot)."""
        ...

    def ledger_sums(self) -> dict[tuple[int, str], tuple[int, int]]:
        """Per (account, asset), the sums of the ledger's free and locked deltas."""
        ...

    def prune_keep(self, symbols: Iterable[str]) -> Keep:
        """What a pruning pass leaves for recovery: the newest row of each table, the latest
        trades of each of ``symbols``."""
        ...

    def prune_step(
        self, kind: str, cut: Cutoffs, keep: Keep, after: int, limit: int, stop_at: int
    ) -> Step:
        """One short transaction of pruning ``kind`` (``prune.KINDS``) past id ``after``, up
        to the first row placed at or after ``stop_at``."""
        ...

    def reclaim_space(self) -> int:
        """Give freed space back to the disk where the backend needs telling; pages given."""
        ...

    def vacuum(self) -> None:
        """Offline maintenance: SQLite VACUUM (and incremental auto_vacuum from then on),
        PostgreSQL VACUUM ANALYZE."""
        ...

    def table_stats(self) -> dict[str, tuple[int, int | None]]:
        """Per table: (rows, bytes with its indexes, or None where unknown)."""
        ...

    def storage_stats(self) -> dict[str, object]:
        """The backend's own figures about its space (files, pages, autovacuum)."""
        ...

    def export_to(self, out: TextIO) -> dict[str, int]:
        """Write every table to ``out`` in the export format (see ``dump``); rows per table."""
        ...

    def import_from(self, source: TextIO) -> dict[str, int]:
        """Load an export into this store, which must be empty, in one transaction (all or
        nothing); rows per table."""
        ...

    def close(self) -> None: ...
