"""What every SQL store shares: the statements, the row mapping, and the migrate, commit, load,
query, export and import logic.

A backend (``sqlite.py``, ``postgres.py``) adds only its dialect: how to connect, its
placeholder, how a write transaction begins and ends, how executemany runs, which exceptions
mean the store failed, and how text sorts bytewise. The statements are written once with ``?``
placeholders in SQL both backends accept.

Connections: one per thread for reads (``_conn``); writes (migrations, commits, imports) go
through ``_write_conn``, which is the thread's connection unless a backend says otherwise.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterable, Iterator
from time import perf_counter
from typing import Any, ClassVar, Generic, Protocol, TextIO, TypeVar

import msgspec

from tradehall.engine.engine import TransferRecord
from tradehall.engine.events import Trade
from tradehall.engine.futures_model import (
    KIND_CONTRACT,
    KIND_FUNDING,
    KIND_ORDER,
    KIND_POSITION,
    KIND_REFERENCE,
    KIND_SETTING,
    KIND_TRANSFER,
    KIND_TRIGGER,
    AccountTransfer,
    ContractState,
    FundingRecord,
    FuturesChanged,
    FuturesOrderState,
    Position,
    PriceReference,
    Setting,
    Trigger,
)
from tradehall.engine.orders import (
    BUY,
    LIMIT,
    MARKET,
    OPEN_STATUSES,
    SELL,
    TIME_IN_FORCE,
    Order,
    OrderState,
)
from tradehall.marketdata import Bar, PublicTrade
from tradehall.store import dump, prune
from tradehall.store.base import FuturesDoc, ProjectionMoved, Snapshot, StoreError, StoreRefused
from tradehall.store.batch import PROJECTED, Batch, KeyRow, UserRow
from tradehall.store.schema import ADMIN_LOG_VERSION, MIGRATIONS, SQLITE, TABLES, Only, Table

Row = tuple[Any, ...]
_INT64_MAX = 2**63 - 1


class Cursor(Protocol):
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, params: Any = ..., /) -> Cursor: ...
    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


def _insert(table: Table) -> str:
    marks = ",".join("?" * len(table.columns))
    return f"INSERT INTO {table.name} ({table.column_list}) VALUES ({marks})"


def _upsert(table: Table, *updated: str) -> str:
    sets = ", ".join(f"{c} = excluded.{c}" for c in updated)
    return f"{_insert(table)} ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {sets}"


ORDERS, TRADES = TABLES["orders"], TABLES["trades"]
ORDER_COLUMNS = ORDERS.column_list
TRADE_COLUMNS = TRADES.column_list

INSERT_USER = _insert(TABLES["users"])
UPSERT_KEY = _upsert(TABLES["api_keys"], "secret", "revoked")
INSERT_TRANSFER = _insert(TABLES["transfers"])
UPSERT_ORDER = _upsert(ORDERS, "filled", "filled_quote", "held", "status", "updated")
INSERT_TRADE = _insert(TRADES)
INSERT_LEDGER = _insert(TABLES["ledger"])
INSERT_ADMIN_LOG = _insert(TABLES["admin_log"])
UPSERT_BALANCE = _upsert(TABLES["balances"], "free", "locked")
UPSERT_BAR = _upsert(TABLES["klines"], "high", "low", "close", "volume", "amount")
INSERT_MARGIN_ACCOUNT = _insert(TABLES["margin_accounts"])
UPSERT_DEBT = _upsert(TABLES["margin_debts"], "principal", "interest")
UPSERT_STATE = _upsert(TABLES["engine_state"], "value")
UPSERT_FUTURES = _upsert(TABLES["futures_docs"], "live", "doc")

_ALL_ENTRIES = (
    "(SELECT account, asset, d_free AS f, d_locked AS lk FROM ledger UNION ALL"
    " SELECT account, asset, free, locked FROM ledger_checkpoints) e GROUP BY account, asset"
)
"""Every ledger entry with the checkpoints of the pruned ones, grouped by (account, asset)."""
_ENTRIES_ONLY = (
    "(SELECT account, asset, d_free AS f, d_locked AS lk FROM ledger) e GROUP BY account, asset"
)
"""The same in a store not migrated to version 7 yet (no checkpoints: nothing was pruned)."""
UPSERT_CHECKPOINT = (
    "INSERT INTO ledger_checkpoints (account, asset, free, locked, entries, through)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account, asset) DO UPDATE SET"
    " free = ledger_checkpoints.free + excluded.free,"
    " locked = ledger_checkpoints.locked + excluded.locked,"
    " entries = ledger_checkpoints.entries + excluded.entries, through = excluded.through"
)
_MINE = f"SELECT {TRADE_COLUMNS} FROM trades WHERE symbol = ? AND {{side}}_account = ?"
_TEXT_KEYS = {"api_key", "asset", "symbol", "interval", "kind", "contract"}

FUTURES_TYPES: dict[str, type[FuturesDoc]] = {
    KIND_ORDER: FuturesOrderState,
    KIND_POSITION: Position,
    KIND_TRIGGER: Trigger,
    KIND_SETTING: Setting,
    KIND_CONTRACT: ContractState,
    KIND_FUNDING: FundingRecord,
    KIND_TRANSFER: AccountTransfer,
    KIND_REFERENCE: PriceReference,
}
"""The Struct each kind of futures document decodes to."""
RESTORE_ORDER = (KIND_CONTRACT, KIND_SETTING, KIND_POSITION, KIND_TRIGGER, KIND_ORDER)
"""The order in which ``load`` lists live futures documents, by kind (any other kind after)."""
_FUTURES_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(t) for kind, t in FUTURES_TYPES.items()
}
_FUTURES_ENCODER = msgspec.json.Encoder()


def order_row(o: OrderState) -> Row:
    return msgspec.structs.astuple(o)  # the struct's fields are the table's columns, in order


def trade_row(t: Trade) -> Row:
    return msgspec.structs.astuple(t)


def key_row(k: KeyRow) -> Row:
    return (k.api_key, k.secret, k.user_id, int(k.read_only), ",".join(k.ips), k.created, k.revoked)


def futures_row(event: FuturesChanged) -> Row:
    return (
        event.kind,
        event.user,
        event.contract,
        event.id,
        int(event.live),
        _FUTURES_ENCODER.encode(event.doc).decode(),
    )


def _transfer(doc: str | bytes) -> AccountTransfer:
    record = decode_futures(KIND_TRANSFER, doc)
    assert isinstance(record, AccountTransfer)
    return record


def decode_futures(kind: str, doc: str | bytes) -> FuturesDoc:
    """A stored futures document as its Struct; StoreError if the kind or the JSON is bad."""
    decoder = _FUTURES_DECODERS.get(kind)
    if decoder is None:
        raise StoreError(f"unknown kind of futures document {kind!r}")
    try:
        decoded: FuturesDoc = decoder.decode(doc)
    except msgspec.DecodeError as exc:
        raise StoreError(f"a stored futures {kind} document is invalid: {exc}") from None
    return decoded


def order_state(row: Row) -> OrderState:
    return OrderState(*row)


OrderKind = tuple[str, str, str, str, str]
"""An order's (symbol, side, type, tif, status)."""

_KIND_TEXT = "symbol || ' ' || side || ' ' || type || ' ' || tif || ' ' || status"
OPEN_STATUS_TERM = "status IN ('NEW', 'PARTIALLY_FILLED')"
"""The open orders, in the very words of the ``orders_open`` partial index (migration 6)."""

OPEN_ORDERS = (
    f"SELECT id, account, {_KIND_TEXT}, price, qty, quote_qty, filled, filled_quote, held,"
    f" client_id, time, updated FROM orders WHERE {OPEN_STATUS_TERM} ORDER BY id"
)
"""Every open order, ascending id, with its five words in one text column (one string for the
driver to build per row instead of five), read in id order from the partial index that holds
the open orders alone."""


def order_kinds(symbols: Iterable[str]) -> dict[str, OrderKind]:
    """The words an open order of ``symbols`` can have, by their ``_KIND_TEXT``, as the
    engine's own string objects: a recovered order then shares them, like a live one, instead
    of holding copies of its own."""
    return {
        f"{symbol} {side} {type_} {tif} {status}": (symbol, side, type_, tif, status)
        for symbol in symbols
        for side in (BUY, SELL)
        for type_ in (LIMIT, MARKET)
        for tif in TIME_IN_FORCE
        for status in OPEN_STATUSES
    }


def _split_kind(text: str) -> OrderKind:
    """Words that ``order_kinds`` did not list (a symbol no longer configured, say), interned."""
    symbol, side, type_, tif, status = (sys.intern(w) for w in text.rsplit(" ", 4))
    return symbol, side, type_, tif, status


def open_orders(rows: Iterable[Row], kinds: dict[str, OrderKind]) -> list[Order]:
    """Orders from ``OPEN_ORDERS`` rows, taken one at a time as they are read. ``kinds``
    (from ``order_kinds``) also learns any other words met."""
    orders: list[Order] = []
    append = orders.append
    accounts: dict[int, int] = {}
    same_account = accounts.setdefault
    for (
        id, account, text, price, qty, quote_qty, filled, filled_quote, held, client_id, time,
        updated,
    ) in rows:  # fmt: skip
        kind = kinds.get(text)
        if kind is None:
            kind = kinds[text] = _split_kind(text)
        symbol, side, type_, tif, status = kind
        account = same_account(account, account)  # one object per account, as when live
        order = Order(id, account, symbol, side, type_, tif, price, qty, quote_qty, client_id, time)
        order.filled = filled
        order.filled_quote = filled_quote
        order.held = held
        order.status = status
        if updated != time:  # else one integer object for both, as in a live order
            order.updated = updated
        append(order)
    return orders


def batch_rows(
    batch: Batch, first_ledger_id: int, first_admin_id: int = 1
) -> Iterator[tuple[str, list[Row]]]:
    """Each non-empty table's statement and rows, in the order a commit writes them."""
    tables: list[tuple[str, list[Row]]] = [
        (INSERT_USER, [(u.id, u.name, u.created) for u in batch.users]),
        (UPSERT_KEY, [key_row(k) for k in batch.keys.values()]),
        (
            INSERT_TRANSFER,
            [(t.id, t.tx_id, t.account, t.asset, t.amount, t.time) for t in batch.transfers],
        ),
        (UPSERT_ORDER, [order_row(o) for o in batch.orders.values()]),
        (INSERT_TRADE, [trade_row(t) for t in batch.trades]),
        (INSERT_LEDGER, [(first_ledger_id + i, *e) for i, e in enumerate(batch.ledger)]),
        (UPSERT_BALANCE, [(a, asset, f, lk) for (a, asset), (f, lk) in batch.balances.items()]),
        (
            UPSERT_BAR,
            [
                (s, i, b.open_time, b.open, b.high, b.low, b.close, b.volume, b.amount)
                for (s, i, _), b in batch.bars.items()
            ],
        ),
        (INSERT_MARGIN_ACCOUNT, [(m.id, m.user, m.symbol) for m in batch.margin_accounts]),
        (UPSERT_DEBT, [(a, asset, p, i) for (a, asset), (p, i) in batch.debts.items()]),
        (UPSERT_STATE, list(batch.engine_state.items())),
        (UPSERT_FUTURES, [futures_row(e) for e in batch.futures.values()]),
        (
            INSERT_ADMIN_LOG,
            [
                (
                    first_admin_id + i,
                    r.time,
                    r.actor,
                    r.agent,
                    r.action,
                    r.params,
                    r.result,
                    r.code,
                    r.detail,
                )
                for i, r in enumerate(batch.admin_log)
            ],
        ),
    ]
    return ((sql, rows) for sql, rows in tables if rows)


class SQLStore(Generic[C]):
    """The Store implementation over any DB-API-like connection; see the module docstring."""

    dialect: ClassVar[str] = SQLITE
    """Which ``Only`` steps of a migration this backend runs."""
    placeholder: ClassVar[str] = "?"
    errors: ClassVar[tuple[type[Exception], ...]] = ()
    """Exceptions meaning the store failed; they surface as StoreError."""
    bytewise: ClassVar[str] = ""
    """Appended to text columns in ORDER BY so that text sorts by bytes in every backend."""
    import_chunk: ClassVar[int] = 5000
    json_text: ClassVar[str] = "json_extract(doc, '$.{field}')"
    ended_futures: ClassVar[str] = "futures_docs INDEXED BY futures_ended"
    """How the pruner names futures_docs: SQLite's planner, without statistics, would
    rather take ``futures_live`` and sort every ended order per batch."""
    """The SQL of a text field of the JSON in ``futures_docs.doc``."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._connections: list[C] = []
        self._lock = threading.Lock()
        self._next_ledger_id: int | None = None
        self._checkpointed: bool | None = None
        """Whether the ledger_checkpoints table exists (known once asked; migrations reset)."""
        self._next_admin_id: int | None = None
        self.last_sync_seconds: float | None = None
        """How long the last commit's COMMIT took (``/metrics``: the fsync's share)."""

    # ------------------------------------------------------------- dialect

    def identity(self) -> dict[str, str]:
        raise NotImplementedError

    def _connect(self) -> C:
        raise NotImplementedError

    def _transaction(self, conn: C) -> contextlib.AbstractContextManager[object]:
        """Begin a write transaction; commit when the block ends, roll back if it raises."""
        raise NotImplementedError

    def _batch_transaction(self, conn: C) -> contextlib.AbstractContextManager[object]:
        """The transaction of one group commit (a backend may pipeline it)."""
        return self._transaction(conn)

    def _executemany(self, conn: C, sql: str, rows: list[Row]) -> None:
        raise NotImplementedError

    def _stream(self, conn: C, sql: str) -> Iterator[Row]:
        """Rows of a large query without holding them all in memory."""
        return iter(conn.execute(sql))

    def _usable(self, conn: C) -> bool:
        """False when a thread's (read) connection was lost and should be opened again."""
        return True

    def _write_conn(self) -> C:
        return self._conn()

    # ------------------------------------------------------------- plumbing

    def _conn(self) -> C:
        conn: C | None = getattr(self._local, "conn", None)
        if conn is None or not self._usable(conn):
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def _rows(self, conn: C, text: str, params: Row = ()) -> list[Any]:
        return conn.execute(self._sql(text), params).fetchall()

    def _one(self, conn: C, text: str, params: Row = ()) -> Any:
        return conn.execute(self._sql(text), params).fetchone()

    def _next_id(self, conn: C, table: str) -> int:
        # + 1 in Python: in SQL it would overflow BIGINT (PostgreSQL) or turn REAL (SQLite).
        return int(self._one(conn, f"SELECT MAX(id) FROM {table}")[0] or 0) + 1

    @contextlib.contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        try:
            yield
        except self.errors as exc:
            detail = " ".join(str(exc).split())  # one line: drivers' messages span several
            raise StoreError(f"{what} failed: {detail or type(exc).__name__}") from exc

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(*self.errors):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()

    # ------------------------------------------------------------- schema

    def _version(self, conn: C) -> int:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        return self._applied(conn)

    def _applied(self, conn: C) -> int:
        return int(self._one(conn, "SELECT MAX(version) FROM schema_version")[0] or 0)

    def _exists(self, conn: C, table: str) -> bool:
        exists = (
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            if self.dialect == SQLITE
            else "SELECT 1 WHERE to_regclass(?) IS NOT NULL"
        )
        return self._one(conn, exists, (table,)) is not None

    def schema_version(self) -> int:
        with self._failing("reading the schema version"):
            conn = self._write_conn()
            return self._applied(conn) if self._exists(conn, "schema_version") else 0

    def _ledger_entries(self, conn: C) -> str:
        if self._checkpointed is None:
            self._checkpointed = self._exists(conn, "ledger_checkpoints")
        return _ALL_ENTRIES if self._checkpointed else _ENTRIES_ONLY

    def migrate(self, upto: int | None = None) -> int:
        """Apply every migration not applied yet (up to version ``upto`` if given: tests and
        measurements build older schemas that way); return the version now in force."""
        with self._failing("schema migration"):
            conn = self._write_conn()
            current = self._version(conn)
            self._checkpointed = None
            applied = False
            for version, _name, steps in MIGRATIONS:
                if version <= current or (upto is not None and version > upto):
                    continue
                with self._transaction(conn):
                    for step in steps:
                        if not isinstance(step, Only):
                            conn.execute(step)
                        elif step.dialect == self.dialect:
                            for statement in step.statements:
                                conn.execute(statement)
                    conn.execute(
                        self._sql("INSERT INTO schema_version (version) VALUES (?)"), (version,)
                    )
                current = version
                applied = True
            if applied:
                self._after_migration(conn)
            return current

    def _after_migration(self, conn: C) -> None:
        """Tidy up after migrations ran (a backend may reclaim space a table rebuild used)."""

    # ------------------------------------------------------------- writes

    def commit(self, batch: Batch) -> None:
        with self._failing("commit"):
            conn = self._write_conn()
            if self._next_ledger_id is None:
                self._next_ledger_id = self._next_id(conn, "ledger")
            first_ledger_id = self._next_ledger_id
            first_admin_id = 1
            if batch.admin_log:
                if self._next_admin_id is None:
                    self._next_admin_id = self._next_id(conn, "admin_log")
                first_admin_id = self._next_admin_id
            if batch.projects is not None:
                batch.engine_state[PROJECTED] = batch.projects[1]
            with self._batch_transaction(conn):
                if batch.projects is not None:
                    self._claim_projection(conn, batch.projects[0])
                for text, rows in batch_rows(batch, first_ledger_id, first_admin_id):
                    self._executemany(conn, self._sql(text), rows)
                written = perf_counter()
            # Leaving the transaction commits it: the write-out and the fsync (PostgreSQL's
            # pipeline also sends the statements then).
            self.last_sync_seconds = perf_counter() - written
            self._next_ledger_id = first_ledger_id + len(batch.ledger)
            if batch.admin_log:
                self._next_admin_id = first_admin_id + len(batch.admin_log)

    def _claim_projection(self, conn: C, after: int) -> None:
        """Inside a projector's commit: the projections must still stand at ``after`` (else
        another projector wrote these records: this commit is rolled back)."""
        row = self._one(conn, self._projected_sql(), (PROJECTED,))
        now = int(row[0]) if row else 0
        if now != after:
            raise ProjectionMoved(f"the projections stand at {now}, not {after}")

    def _projected_sql(self) -> str:
        return "SELECT value FROM engine_state WHERE name = ?"

    def projected(self) -> int:
        """The last journal record the projections hold (0: none yet)."""
        with self._failing("reading the projection's position"):
            row = self._one(
                self._conn(), "SELECT value FROM engine_state WHERE name = ?", (PROJECTED,)
            )
            return int(row[0]) if row else 0

    checkpoints: ClassVar[bool] = False
    """Whether ``checkpoint`` does anything (SQLite's write-ahead log); the group committer
    then calls it now and then, off the commit path."""

    def checkpoint(self) -> None:
        """Copy committed pages from a write-ahead log into the database file without
        blocking commits (SQLite); nothing for other backends."""

    # ------------------------------------------------------------- recovery

    def _read_snapshot(self, conn: C) -> contextlib.AbstractContextManager[object]:
        """A read transaction: every query in it sees the same committed state (a projector
        may be committing meanwhile)."""
        raise NotImplementedError

    def load(self, symbols: list[str], bars_to_keep: dict[str, int]) -> Snapshot:
        with self._failing("loading the store"):
            conn = self._conn()
            with self._read_snapshot(conn):
                return self._load(conn, symbols, bars_to_keep)

    def _load(self, conn: C, symbols: list[str], bars_to_keep: dict[str, int]) -> Snapshot:
        snap = Snapshot()
        snap.users = [
            UserRow(*r) for r in self._rows(conn, "SELECT id, name, created FROM users ORDER BY id")
        ]
        snap.keys = [
            KeyRow(k, s, uid, bool(ro), tuple(filter(None, ips.split(","))), c, rv)
            for k, s, uid, ro, ips, c, rv in self._rows(
                conn,
                "SELECT api_key, secret, user_id, read_only, ips, created, revoked"
                f" FROM api_keys ORDER BY api_key{self.bytewise}",
            )
        ]
        snap.balances = self._rows(
            conn,
            "SELECT account, asset, free, locked FROM balances"
            f" ORDER BY account, asset{self.bytewise}",
        )
        snap.transfers = [
            (tx, TransferRecord(i, a, asset, amount))
            for i, tx, a, asset, amount in self._rows(
                conn, "SELECT id, tx_id, account, asset, amount FROM transfers ORDER BY id"
            )
        ]
        snap.open_orders = open_orders(conn.execute(OPEN_ORDERS), order_kinds(symbols))
        snap.margin_accounts = self._rows(
            conn, "SELECT id, user_id, symbol FROM margin_accounts ORDER BY id"
        )
        snap.debts = self._rows(
            conn,
            "SELECT account, asset, principal, interest FROM margin_debts"
            " WHERE principal <> 0 OR interest <> 0"
            f" ORDER BY account, asset{self.bytewise}",
        )
        snap.engine_state = dict(self._rows(conn, "SELECT name, value FROM engine_state"))
        self._load_futures(conn, snap)
        # Conditional orders share the order id space with spot and futures orders.
        snap.next_order_id = max(
            self._next_id(conn, "orders"),
            snap.futures_max_ids.get(KIND_ORDER, 0) + 1,
            snap.futures_max_ids.get(KIND_TRIGGER, 0) + 1,
        )
        snap.next_trade_id = self._next_id(conn, "trades")
        for symbol in symbols:
            for interval, keep in bars_to_keep.items():
                rows = self._rows(
                    conn,
                    "SELECT open_time, open, high, low, close, volume, amount FROM klines"
                    " WHERE symbol = ? AND interval = ? ORDER BY open_time DESC LIMIT ?",
                    (symbol, interval, keep),
                )
                if rows:
                    snap.bars.append((symbol, interval, [Bar(*r) for r in reversed(rows)]))
            trades = self._rows(
                conn,
                "SELECT id, time, price, qty, taker_side, quote FROM trades WHERE symbol = ?"
                f" ORDER BY id DESC LIMIT {prune.RECENT_TRADES}",
                (symbol,),
            )
            if trades:
                snap.recent_trades.append((symbol, [PublicTrade(*r) for r in reversed(trades)]))
        return snap

    def _load_futures(self, conn: C, snap: Snapshot) -> None:
        by_kind: dict[str, list[object]] = {}
        for kind, doc in self._rows(
            conn,
            "SELECT kind, doc FROM futures_docs WHERE live = 1"
            f" ORDER BY id, user_id, contract{self.bytewise}",
        ):
            by_kind.setdefault(kind, []).append(decode_futures(kind, doc))
        kinds = [k for k in RESTORE_ORDER if k in by_kind]
        kinds += sorted(k for k in by_kind if k not in RESTORE_ORDER)
        snap.futures_docs = [doc for k in kinds for doc in by_kind[k]]
        snap.futures_max_ids = {
            kind: int(top)
            for kind, top in self._rows(
                conn, "SELECT kind, MAX(id) FROM futures_docs GROUP BY kind"
            )
        }

    # ------------------------------------------------------------- history reads

    def futures_history(
        self,
        kind: str,
        user: int,
        contract: str | None,
        from_id: int | None,
        limit: int,
        live: bool | None,
    ) -> list[FuturesDoc]:
        if limit <= 0:
            return []
        where = "kind = ? AND user_id = ?"
        params: list[Any] = [kind, user]
        if contract is not None:
            where += " AND contract = ?"
            params.append(contract)
        if live is not None:
            where += " AND live = ?"
            params.append(int(live))
        if from_id is None:
            order = f"id DESC, contract{self.bytewise} DESC"
        else:
            where += " AND id >= ?"
            params.append(from_id)
            order = f"id, contract{self.bytewise}"
        with self._failing("reading futures history"):
            rows = self._rows(
                self._conn(),
                f"SELECT doc FROM futures_docs WHERE {where} ORDER BY {order} LIMIT ?",
                (*params, limit),
            )
        if from_id is not None:
            rows.reverse()
        return [decode_futures(kind, doc) for (doc,) in rows]

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
        """The user's spot <-> futures transfers (of ``asset``, in one direction when
        ``into_futures`` is not None) made within [start, end], newest first: ``limit`` of
        them after the first ``skip``. Read newest first in chunks, so the cost grows with
        the transfers passed over, not with the user's whole history."""
        where = "kind = ? AND user_id = ?" + (" AND contract = ?" if asset is not None else "")
        args: tuple[Any, ...] = (KIND_TRANSFER, user) + ((asset,) if asset is not None else ())
        out: list[AccountTransfer] = []
        below = _INT64_MAX
        with self._failing("reading transfers"):
            conn = self._conn()
            while len(out) < skip + limit:
                rows = self._rows(
                    conn,
                    f"SELECT id, doc FROM futures_docs WHERE {where} AND id < ?"
                    " ORDER BY id DESC LIMIT 500",
                    (*args, below),
                )
                for row_id, doc in rows:
                    record = _transfer(doc)
                    if record.time < start:
                        return out[skip : skip + limit]
                    if record.time <= end and into_futures in (None, record.into_futures):
                        out.append(record)
                    below = row_id
                if len(rows) < 500:
                    break
        return out[skip : skip + limit]

    def account_transfer(self, user: int, transfer_id: int) -> AccountTransfer | None:
        with self._failing("reading a transfer"):
            row = self._one(
                self._conn(),
                "SELECT doc FROM futures_docs WHERE kind = ? AND user_id = ? AND id = ?",
                (KIND_TRANSFER, user, transfer_id),
            )
        return _transfer(row[0]) if row else None

    def futures_doc(self, kind: str, user: int, contract: str, id: int) -> FuturesDoc | None:
        with self._failing("reading a futures document"):
            row = self._one(
                self._conn(),
                "SELECT doc FROM futures_docs"
                " WHERE kind = ? AND user_id = ? AND contract = ? AND id = ?",
                (kind, user, contract, id),
            )
        return decode_futures(kind, row[0]) if row else None

    def futures_by_client_id(
        self, user: int, contract: str, client_id: str
    ) -> FuturesOrderState | Trigger | None:
        if not client_id:
            return None
        with self._failing("reading a futures order"):
            row = self._one(
                self._conn(),
                "SELECT kind, doc FROM futures_docs WHERE kind IN (?, ?) AND user_id = ?"
                f" AND contract = ? AND {self.json_text.format(field='client_id')} = ?"
                " ORDER BY id DESC LIMIT 1",
                (KIND_ORDER, KIND_TRIGGER, user, contract, client_id),
            )
        if not row:
            return None
        found = decode_futures(row[0], row[1])
        return found if isinstance(found, FuturesOrderState | Trigger) else None

    def find_order(
        self, account: int, symbol: str, order_id: int | None, client_id: str | None
    ) -> OrderState | None:
        with self._failing("reading an order"):
            conn = self._conn()
            if order_id is not None:
                row = self._one(
                    conn,
                    f"SELECT {ORDER_COLUMNS} FROM orders"
                    " WHERE id = ? AND account = ? AND symbol = ?",
                    (order_id, account, symbol),
                )
            elif client_id:
                row = self._one(
                    conn,
                    f"SELECT {ORDER_COLUMNS} FROM orders WHERE account = ? AND symbol = ?"
                    " AND client_id = ? ORDER BY id DESC LIMIT 1",
                    (account, symbol, client_id),
                )
            else:
                return None
            return order_state(row) if row else None

    def account_trades(
        self, account: int, symbol: str, limit: int, from_id: int | None
    ) -> list[Trade]:
        with self._failing("reading trades"):
            conn = self._conn()
            if from_id is None:
                sql = (
                    f"{_MINE.format(side='bid')} UNION ALL {_MINE.format(side='ask')}"
                    " ORDER BY id DESC LIMIT ?"
                )
                rows = self._rows(conn, sql, (symbol, account, symbol, account, limit))
            else:
                sql = (
                    f"{_MINE.format(side='bid')} AND id >= ? UNION ALL"
                    f" {_MINE.format(side='ask')} AND id >= ? ORDER BY id ASC LIMIT ?"
                )
                rows = self._rows(
                    conn, sql, (symbol, account, from_id, symbol, account, from_id, limit)
                )
                rows.reverse()
            return [Trade(*r) for r in rows]

    def account_orders(
        self, account: int, symbol: str | None, start: int, end: int, limit: int
    ) -> list[OrderState]:
        """Orders of ``account`` (on ``symbol``, or every pair) placed within
        ``start <= time <= end``, newest first, at most ``limit``."""
        with self._failing("reading orders"):
            where = "account = ?" + (" AND symbol = ?" if symbol is not None else "")
            args: tuple[Any, ...] = (account,) + ((symbol,) if symbol is not None else ())
            rows = self._rows(
                self._conn(),
                f"SELECT {ORDER_COLUMNS} FROM orders WHERE {where}"
                " AND time >= ? AND time <= ? ORDER BY id DESC LIMIT ?",
                (*args, start, end, limit),
            )
            return [order_state(row) for row in rows]

    def account_trades_between(
        self, account: int, symbol: str | None, start: int, end: int, limit: int
    ) -> list[Trade]:
        """Trades of ``account`` (on ``symbol``, or every pair) within
        ``start <= time <= end``, newest first, at most ``limit``."""
        with self._failing("reading trades"):
            pair = " AND symbol = ?" if symbol is not None else ""
            mine = (
                f"SELECT {TRADE_COLUMNS} FROM trades WHERE {{side}}_account = ?{pair}"
                " AND time >= ? AND time <= ?"
            )
            args: tuple[Any, ...] = (account,) + ((symbol,) if symbol is not None else ())
            rows = self._rows(
                self._conn(),
                f"{mine.format(side='bid')} UNION ALL {mine.format(side='ask')}"
                " ORDER BY id DESC LIMIT ?",
                (*args, start, end, *args, start, end, limit),
            )
            return [Trade(*r) for r in rows]

    def ledger_sums(self) -> dict[tuple[int, str], tuple[int, int]]:
        with self._failing("reading the ledger"):
            conn = self._conn()
            rows = self._rows(
                conn, f"SELECT account, asset, SUM(f), SUM(lk) FROM {self._ledger_entries(conn)}"
            )
            return {(a, asset): (int(f), int(lk)) for a, asset, f, lk in rows}

    def admin_log(self, limit: int, before: int | None = None) -> list[tuple[Any, ...]]:
        """The admin audit trail, newest first: up to ``limit`` rows with an id below
        ``before`` (all when None), each with the columns of ``TABLES["admin_log"]``."""
        columns = TABLES["admin_log"].column_list
        if self.schema_version() < ADMIN_LOG_VERSION:
            return []
        with self._failing("reading the admin log"):
            if before is None:
                sql = f"SELECT {columns} FROM admin_log ORDER BY id DESC LIMIT ?"
                return [tuple(r) for r in self._rows(self._conn(), sql, (limit,))]
            sql = f"SELECT {columns} FROM admin_log WHERE id < ? ORDER BY id DESC LIMIT ?"
            return [tuple(r) for r in self._rows(self._conn(), sql, (before, limit))]

    def admin_log_span(self) -> tuple[int, int, int]:
        """(rows, lowest id, highest id) of the admin audit trail ((0, 0, 0) when empty, or
        when the store's schema predates the trail)."""
        if self.schema_version() < ADMIN_LOG_VERSION:
            return 0, 0, 0
        with self._failing("auditing the admin log"):
            count, low, high = self._one(
                self._conn(), "SELECT COUNT(*), MIN(id), MAX(id) FROM admin_log"
            )
        return int(count), int(low or 0), int(high or 0)

    def ledger_mismatches(self) -> list[tuple[int, str, int, int, int, int]]:
        """Stored balances that differ from their ledger checkpoint plus the sum of their
        stored ledger entries, as
        (account, asset, free, locked, sum of d_free, sum of d_locked). One statement, so it
        reads one consistent snapshot even while commits go on. The sums are one pass over
        the whole ledger (a scan and a sort or hash: no index serves it), used by both halves
        (a common table expression used twice is computed once, in SQLite and PostgreSQL)."""
        with self._failing("auditing the ledger"):
            conn = self._conn()
            entries = self._ledger_entries(conn)
            rows = self._rows(
                conn,
                f"WITH l AS (SELECT account, asset, SUM(f) AS f, SUM(lk) AS lk FROM {entries})"
                " SELECT b.account, b.asset, b.free, b.locked, COALESCE(l.f, 0), COALESCE(l.lk, 0)"
                " FROM balances b LEFT JOIN l ON l.account = b.account AND l.asset = b.asset"
                " WHERE b.free <> COALESCE(l.f, 0) OR b.locked <> COALESCE(l.lk, 0)"
                " UNION ALL SELECT l.account, l.asset, 0, 0, l.f, l.lk FROM l"
                " LEFT JOIN balances b ON b.account = l.account AND b.asset = l.asset"
                " WHERE b.account IS NULL AND (l.f <> 0 OR l.lk <> 0)",
            )
            return [
                (a, asset, int(f), int(lk), int(sf), int(sl)) for a, asset, f, lk, sf, sl in rows
            ]

    # ------------------------------------------------------------- retention

    def prune_keep(self, symbols: Iterable[str]) -> prune.Keep:
        """What a pruning pass must leave for recovery (see ``prune``), read from the store."""
        with self._failing("reading what pruning keeps"):
            conn = self._write_conn()
            keep = prune.Keep(
                max_order=self._next_id(conn, "orders") - 1,
                max_trade=self._next_id(conn, "trades") - 1,
                max_ledger=self._next_id(conn, "ledger") - 1,
            )
            for kind in (KIND_ORDER, KIND_TRIGGER):
                top = self._one(conn, "SELECT MAX(id) FROM futures_docs WHERE kind = ?", (kind,))
                keep.max_futures[kind] = int(top[0] or 0)
            for symbol in symbols:
                row = self._one(
                    conn,
                    "SELECT id FROM trades WHERE symbol = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                    (symbol, prune.RECENT_TRADES - 1),
                )
                keep.recent_trades[symbol] = int(row[0]) if row else 0
            return keep

    def prune_step(
        self,
        kind: str,
        cut: prune.Cutoffs,
        keep: prune.Keep,
        after: int,
        limit: int,
        stop_at: int,
    ) -> prune.Step:
        """Look at up to ``limit`` rows of ``kind`` with an id above ``after``, up to the first
        placed at or after ``stop_at``, and delete those past their horizon, in one
        transaction; ledger entries are folded into their
        checkpoints in the same transaction, so every balance stays the sum of its
        checkpoint and its remaining entries at every commit."""
        with self._failing(f"pruning {kind}"):
            conn = self._write_conn()
            with self._transaction(conn):
                if kind == prune.ORDERS:
                    rows = self._rows(
                        conn,
                        "SELECT id, account, status, time, updated FROM orders WHERE id > ?"
                        " ORDER BY id LIMIT ?",
                        (after, limit),
                    )
                    ids, stop = prune.due_orders(rows, cut, keep, stop_at)
                    self._delete(conn, "DELETE FROM orders WHERE id = ?", [(i,) for i in ids])
                elif kind == prune.TRADES:
                    rows = self._rows(
                        conn,
                        "SELECT id, symbol, time, bid_account, ask_account FROM trades"
                        " WHERE id > ? ORDER BY id LIMIT ?",
                        (after, limit),
                    )
                    ids, stop = prune.due_trades(rows, cut, keep, stop_at)
                    self._delete(conn, "DELETE FROM trades WHERE id = ?", [(i,) for i in ids])
                elif kind == prune.LEDGER:
                    rows = self._rows(
                        conn,
                        "SELECT id, account, asset, d_free, d_locked, time FROM ledger"
                        " WHERE id > ? ORDER BY id LIMIT ?",
                        (after, limit),
                    )
                    ids, fold, stop = prune.due_ledger(rows, cut, keep, stop_at)
                    if fold:
                        self._executemany(
                            conn,
                            self._sql(UPSERT_CHECKPOINT),
                            [(a, asset, *sums) for (a, asset), sums in fold.items()],
                        )
                    self._delete(conn, "DELETE FROM ledger WHERE id = ?", [(i,) for i in ids])
                elif kind == prune.FUTURES_ORDERS:
                    rows = self._rows(
                        conn,
                        f"SELECT kind, user_id, contract, id, doc FROM {self.ended_futures}"
                        f" WHERE {prune.FUTURES_ENDED} AND id > ? ORDER BY id LIMIT ?",
                        (after, limit),
                    )
                    keys, stop = prune.due_futures(rows, cut, keep, stop_at)
                    self._delete(
                        conn,
                        "DELETE FROM futures_docs"
                        " WHERE kind = ? AND user_id = ? AND contract = ? AND id = ?",
                        keys,
                    )
                    ids = [key[3] for key in keys]
                else:
                    raise StoreError(f"unknown kind of history to prune {kind!r}")
            if stop is not None:
                return prune.Step(len(ids), stop - 1, True)
            last = int(rows[-1][3 if kind == prune.FUTURES_ORDERS else 0]) if rows else after
            return prune.Step(len(ids), last, len(rows) < limit)

    def _delete(self, conn: C, text: str, keys: list[Row]) -> None:
        if keys:
            self._executemany(conn, self._sql(text), keys)

    def reclaim_space(self) -> int:
        """Give the disk back what pruning freed, if the backend has to be told (SQLite's
        incremental vacuum); the pages it returned."""
        return 0

    def vacuum(self) -> None:
        """Rebuild or clean every table offline (SQLite: VACUUM; PostgreSQL: VACUUM ANALYZE)."""
        raise NotImplementedError

    def table_stats(self) -> dict[str, tuple[int, int | None]]:
        """Per table: (rows, bytes with its indexes; None where the backend cannot tell)."""
        with self._failing("reading table sizes"):
            conn = self._conn()
            sizes = self._table_sizes(conn)
            return {
                name: (int(self._one(conn, f"SELECT COUNT(*) FROM {name}")[0]), sizes.get(name))
                for name in TABLES
            }

    def _table_sizes(self, conn: C) -> dict[str, int]:
        return {}

    def storage_stats(self) -> dict[str, object]:
        """What the backend says about its space as a whole (files, free pages...)."""
        return {}

    # ------------------------------------------------------------- export and import

    def _ordered(self, table: Table) -> str:
        keys = ", ".join(k + self.bytewise if k in _TEXT_KEYS else k for k in table.key)
        return f"SELECT {table.column_list} FROM {table.name} ORDER BY {keys}"

    def export_to(self, out: TextIO) -> dict[str, int]:
        with self._failing("export"):
            conn = self._write_conn()
            with self._transaction(conn):  # one consistent snapshot
                version = self._version(conn)
                tables = ((t, self._stream(conn, self._ordered(t))) for t in TABLES.values())
                return dump.write(out, version, tables)

    def import_from(self, source: TextIO) -> dict[str, int]:
        with self._failing("import"):
            reader = dump.Reader(source)
            conn = self._write_conn()
            version = self._version(conn)
            if reader.version != version:
                raise StoreRefused(
                    f"the export is of schema version {reader.version}, this store is at"
                    f" {version}: run `tradehall db upgrade` on the source with this tradehall"
                    " and export again"
                )
            with self._transaction(conn):
                holding = [t for t in TABLES if self._one(conn, f"SELECT 1 FROM {t} LIMIT 1")]
                if holding:
                    raise StoreRefused(
                        "the target store is not empty (rows in "
                        f"{', '.join(holding)}): import only into an empty store"
                    )
                for table, rows in reader.tables():
                    insert = self._sql(_insert(table))
                    while chunk := list(itertools.islice(rows, self.import_chunk)):
                        self._executemany(conn, insert, chunk)
            self._next_ledger_id = None
            return reader.counts
