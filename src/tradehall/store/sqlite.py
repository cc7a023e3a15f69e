"""The embedded default store: stdlib sqlite3 in WAL mode.

Writes happen on one thread (the group-commit writer), reads on others; each thread gets its
own connection, which WAL lets read while the writer writes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from tradehall.engine.engine import TransferRecord
from tradehall.engine.events import Trade
from tradehall.engine.orders import OPEN_STATUSES, Order, OrderState
from tradehall.marketdata import Bar, PublicTrade
from tradehall.store.base import Snapshot, StoreError
from tradehall.store.batch import Batch, KeyRow, UserRow
from tradehall.store.schema import MIGRATIONS

ORDER_COLUMNS = (
    "id, account, symbol, side, type, tif, price, qty, quote_qty, filled, filled_quote, held,"
    " status, client_id, time, updated"
)
TRADE_COLUMNS = (
    "id, symbol, price, qty, quote, time, taker_side, bid_order, ask_order, bid_account,"
    " ask_account, bid_fee, ask_fee"
)

UPSERT_ORDER = (
    f"INSERT INTO orders ({ORDER_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (id) DO UPDATE SET filled = excluded.filled,"
    " filled_quote = excluded.filled_quote, held = excluded.held, status = excluded.status,"
    " updated = excluded.updated"
)
_MINE = f"SELECT {TRADE_COLUMNS} FROM trades WHERE symbol = ? AND {{side}}_account = ?"
INSERT_TRADE = f"INSERT INTO trades ({TRADE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
INSERT_LEDGER = (
    "INSERT INTO ledger (id, account, asset, d_free, d_locked, reason, ref, time)"
    " VALUES (?,?,?,?,?,?,?,?)"
)
UPSERT_BALANCE = (
    "INSERT INTO balances (account, asset, free, locked) VALUES (?,?,?,?)"
    " ON CONFLICT (account, asset) DO UPDATE SET free = excluded.free, locked = excluded.locked"
)
INSERT_TRANSFER = (
    "INSERT INTO transfers (id, tx_id, account, asset, amount, time) VALUES (?,?,?,?,?,?)"
)
UPSERT_BAR = (
    "INSERT INTO klines (symbol, interval, open_time, open, high, low, close, volume)"
    " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (symbol, interval, open_time) DO UPDATE SET"
    " high = excluded.high, low = excluded.low, close = excluded.close, volume = excluded.volume"
)
INSERT_USER = "INSERT INTO users (id, name, created) VALUES (?,?,?)"
UPSERT_KEY = (
    "INSERT INTO api_keys (api_key, secret, user_id, read_only, ips, created, revoked)"
    " VALUES (?,?,?,?,?,?,?) ON CONFLICT (api_key) DO UPDATE SET revoked = excluded.revoked"
)


def order_row(o: OrderState) -> tuple[object, ...]:
    return (
        o.id, o.account, o.symbol, o.side, o.type, o.tif, o.price, o.qty, o.quote_qty,
        o.filled, o.filled_quote, o.held, o.status, o.client_id, o.time, o.updated,
    )  # fmt: skip


def trade_row(t: Trade) -> tuple[object, ...]:
    return (
        t.id, t.symbol, t.price, t.qty, t.quote, t.time, t.taker_side, t.bid_order,
        t.ask_order, t.bid_account, t.ask_account, t.bid_fee, t.ask_fee,
    )  # fmt: skip


def order_state(row: tuple[object, ...]) -> OrderState:
    return OrderState(*row)  # type: ignore[arg-type]


def order_from_row(row: tuple[object, ...]) -> Order:
    s = order_state(row)
    order = Order(
        s.id, s.account, s.symbol, s.side, s.type, s.tif, s.price, s.qty, s.quote_qty,
        s.client_id, s.time,
    )  # fmt: skip
    order.filled = s.filled
    order.filled_quote = s.filled_quote
    order.held = s.held
    order.status = s.status
    order.updated = s.updated
    return order


class SQLiteStore:
    def __init__(self, path: str | Path, synchronous: str = "full") -> None:
        self.path = str(path)
        self.synchronous = synchronous.upper()
        self._local = threading.local()
        self._next_ledger_id: int | None = None
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    # ----------------------------------------------------------------- schema

    def migrate(self) -> int:
        conn = self._conn()
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version, _name, statements in MIGRATIONS:
            if version <= current:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            current = version
        return int(current)

    # ----------------------------------------------------------------- writes

    def commit(self, batch: Batch) -> None:
        conn = self._conn()
        try:
            if self._next_ledger_id is None:
                row = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM ledger").fetchone()
                self._next_ledger_id = int(row[0])
            first_ledger_id = self._next_ledger_id
            conn.execute("BEGIN IMMEDIATE")
            try:
                if batch.users:
                    conn.executemany(INSERT_USER, [(u.id, u.name, u.created) for u in batch.users])
                if batch.keys:
                    conn.executemany(UPSERT_KEY, [_key_row(k) for k in batch.keys.values()])
                if batch.transfers:
                    conn.executemany(
                        INSERT_TRANSFER,
                        [
                            (t.id, t.tx_id, t.account, t.asset, t.amount, t.time)
                            for t in batch.transfers
                        ],
                    )
                if batch.orders:
                    conn.executemany(UPSERT_ORDER, [order_row(o) for o in batch.orders.values()])
                if batch.trades:
                    conn.executemany(INSERT_TRADE, [trade_row(t) for t in batch.trades])
                if batch.ledger:
                    conn.executemany(
                        INSERT_LEDGER,
                        [
                            (
                                first_ledger_id + i,
                                e.account,
                                e.asset,
                                e.d_free,
                                e.d_locked,
                                e.reason,
                                e.ref,
                                e.time,
                            )
                            for i, e in enumerate(batch.ledger)
                        ],
                    )
                if batch.balances:
                    conn.executemany(
                        UPSERT_BALANCE,
                        [(a, asset, f, lk) for (a, asset), (f, lk) in batch.balances.items()],
                    )
                if batch.bars:
                    conn.executemany(
                        UPSERT_BAR,
                        [
                            (s, i, b.open_time, b.open, b.high, b.low, b.close, b.volume)
                            for (s, i, _), b in batch.bars.items()
                        ],
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._next_ledger_id = first_ledger_id + len(batch.ledger)
        except sqlite3.Error as exc:
            raise StoreError(f"commit failed: {exc}") from exc

    # ----------------------------------------------------------------- recovery

    def load(self, symbols: list[str], bars_to_keep: dict[str, int]) -> Snapshot:
        conn = self._conn()
        snap = Snapshot()
        snap.users = [
            UserRow(*r) for r in conn.execute("SELECT id, name, created FROM users ORDER BY id")
        ]
        snap.keys = [
            KeyRow(k, s, uid, bool(ro), tuple(filter(None, ips.split(","))), c, rv)
            for k, s, uid, ro, ips, c, rv in conn.execute(
                "SELECT api_key, secret, user_id, read_only, ips, created, revoked FROM api_keys"
            )
        ]
        snap.balances = list(conn.execute("SELECT account, asset, free, locked FROM balances"))
        snap.transfers = [
            (tx, TransferRecord(i, a, asset, amount))
            for i, tx, a, asset, amount in conn.execute(
                "SELECT id, tx_id, account, asset, amount FROM transfers ORDER BY id"
            )
        ]
        placeholders = ",".join("?" * len(OPEN_STATUSES))
        snap.open_orders = [
            order_from_row(r)
            for r in conn.execute(
                f"SELECT {ORDER_COLUMNS} FROM orders WHERE status IN ({placeholders}) ORDER BY id",
                tuple(sorted(OPEN_STATUSES)),
            )
        ]
        snap.next_order_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM orders").fetchone()[
            0
        ]
        snap.next_trade_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM trades").fetchone()[
            0
        ]
        for symbol in symbols:
            for interval, keep in bars_to_keep.items():
                rows = conn.execute(
                    "SELECT open_time, open, high, low, close, volume FROM klines"
                    " WHERE symbol = ? AND interval = ? ORDER BY open_time DESC LIMIT ?",
                    (symbol, interval, keep),
                ).fetchall()
                if rows:
                    snap.bars.append((symbol, interval, [Bar(*r) for r in reversed(rows)]))
            trades = conn.execute(
                "SELECT id, time, price, qty, taker_side FROM trades WHERE symbol = ?"
                " ORDER BY id DESC LIMIT 1000",
                (symbol,),
            ).fetchall()
            if trades:
                snap.recent_trades.append((symbol, [PublicTrade(*r) for r in reversed(trades)]))
        return snap

    # ----------------------------------------------------------------- history reads

    def find_order(
        self, account: int, symbol: str, order_id: int | None, client_id: str | None
    ) -> OrderState | None:
        conn = self._conn()
        if order_id is not None:
            row = conn.execute(
                f"SELECT {ORDER_COLUMNS} FROM orders WHERE id = ? AND account = ? AND symbol = ?",
                (order_id, account, symbol),
            ).fetchone()
        elif client_id:
            row = conn.execute(
                f"SELECT {ORDER_COLUMNS} FROM orders WHERE account = ? AND symbol = ?"
                " AND client_id = ? ORDER BY id DESC LIMIT 1",
                (account, symbol, client_id),
            ).fetchone()
        else:
            return None
        return order_state(row) if row else None

    def account_trades(
        self, account: int, symbol: str, limit: int, from_id: int | None
    ) -> list[Trade]:
        conn = self._conn()
        if from_id is None:
            sql = (
                f"{_MINE.format(side='bid')} UNION ALL {_MINE.format(side='ask')}"
                " ORDER BY id DESC LIMIT ?"
            )
            rows = conn.execute(sql, (symbol, account, symbol, account, limit)).fetchall()
        else:
            sql = (
                f"{_MINE.format(side='bid')} AND id >= ? UNION ALL"
                f" {_MINE.format(side='ask')} AND id >= ? ORDER BY id ASC LIMIT ?"
            )
            rows = conn.execute(
                sql, (symbol, account, from_id, symbol, account, from_id, limit)
            ).fetchall()
            rows.reverse()
        return [Trade(*r) for r in rows]

    def ledger_sums(self) -> dict[tuple[int, str], tuple[int, int]]:
        rows = self._conn().execute(
            "SELECT account, asset, SUM(d_free), SUM(d_locked) FROM ledger GROUP BY account, asset"
        )
        return {(a, asset): (int(f), int(lk)) for a, asset, f, lk in rows}

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()


def _key_row(k: KeyRow) -> tuple[object, ...]:
    return (k.api_key, k.secret, k.user_id, int(k.read_only), ",".join(k.ips), k.created, k.revoked)
