"""Migration 4 on a store that already holds a venue: every row survives, the busiest tables
become rowid tables on SQLite, the ledger's account index goes, and the exchange recovers and
carries on exactly as one that never migrated. Also the audit's ledger check, which that
index used to serve."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from store_support import command_stream, fingerprint, populate, run, table_rows
from support import TEST_SECRET_BOX, Backend
from tradehall.cli import app
from tradehall.config import load_config
from tradehall.datadir import DataDir
from tradehall.engine.events import Trade
from tradehall.engine.orders import OPEN_STATUSES, OrderState
from tradehall.exchange import Exchange
from tradehall.store.batch import Batch, LedgerRow
from tradehall.store.prune import FUTURES_ENDED
from tradehall.store.schema import ADMIN_LOG_VERSION, LATEST_VERSION, MIGRATIONS, TABLES
from tradehall.store.sql import OPEN_ORDERS, OPEN_STATUS_TERM, SQLStore
from tradehall.store.sqlite import SQLiteStore

MAX = 2**63 - 1
MIN = -(2**63)
REBUILT = ("ledger", "orders", "trades")
NAMED_INDEXES = {
    "ledger": set(),
    "orders": {"orders_account", "orders_open"},
    "trades": {"trades_bid", "trades_ask", "trades_symbol"},
}


AMOUNT_COLUMN = "ALTER TABLE klines ADD COLUMN amount BIGINT NOT NULL DEFAULT 0"
"""Migration 5's column. Today's code writes it, so a store it fills at version 3 has it too
(``version_3``); ``back_to_version_3`` takes it away before the migrations under test run."""


def admin_log_table(backend: Backend) -> list[str]:
    """The admin audit trail's migration, in ``backend``'s dialect: today's code writes and
    audits the table, so a store it fills at version 3 has it too, as it has the column."""
    (steps,) = [steps for version, _, steps in MIGRATIONS if version == ADMIN_LOG_VERSION]
    out: list[str] = []
    for step in steps:
        if isinstance(step, str):
            out.append(step)
        elif step.dialect == backend.name:
            out.extend(step.statements)
    return out


def version_3(backend: Backend, data_dir: Path) -> SQLStore[Any]:
    store = backend.open_store(data_dir)
    assert isinstance(store, SQLStore)
    assert store.migrate(3) == 3
    backend.execute(data_dir, AMOUNT_COLUMN)
    for statement in admin_log_table(backend):
        backend.execute(data_dir, statement)
    return store


def back_to_version_3(
    backend: Backend, data_dir: Path, rows: dict[str, list[tuple[Any, ...]]]
) -> dict[str, list[tuple[Any, ...]]]:
    """Drop migration 5's column; ``rows`` as migrating up will leave them (bars written
    before migration 5 carry amount 0)."""
    backend.execute(data_dir, "ALTER TABLE klines DROP COLUMN amount")
    backend.execute(data_dir, "DROP TABLE admin_log")
    upgraded = {**rows, "klines": [(*row[:-1], 0) for row in rows["klines"]]}
    return upgraded | {name: [] for name in ADDED_LATER}


def exchange_at(backend: Backend, data_dir: Path, version: int | None) -> Exchange:
    """A recovered exchange on ``data_dir``'s store, migrated up to ``version`` (None: all;
    3: with migration 5's column, see ``version_3``)."""
    if version == 3:
        store: SQLStore[Any] = version_3(backend, data_dir)
    else:
        opened = backend.open_store(data_dir)
        assert isinstance(opened, SQLStore)
        store = opened
        assert store.migrate(version) == (version or LATEST_VERSION)
    exchange = Exchange(load_config(), store, secret_box=TEST_SECRET_BOX, check_invariants=True)
    exchange.recover()
    return exchange


ADDED_LATER = {"ledger_checkpoints": 7, "admin_log": ADMIN_LOG_VERSION}
"""Tables of the catalogue a migration after version 3 creates (empty when it does)."""


def all_rows(
    backend: Backend, data_dir: Path, version: int | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows; at ``version``, only the tables that exist there."""
    names = [n for n in TABLES if version is None or ADDED_LATER.get(n, 0) <= version]
    return table_rows(backend, data_dir, names)


def indexes(backend: Backend, data_dir: Path, table: str) -> set[str]:
    """The table's indexes: named ones (SQLite: with their SQL; PostgreSQL: every index but
    the primary key's)."""
    if backend.name == "sqlite":
        sql = f"SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}'"
    else:
        sql = (
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            f" AND tablename = '{table}' AND indexname <> '{table}_pkey'"
        )
    return {name for (name,) in backend.query(data_dir, sql)}


def test_migration_4_keeps_every_row_and_the_venue_carries_on(
    backend: Backend, tmp_path: Path
) -> None:
    data = tmp_path / "venue"
    old = exchange_at(backend, data, 3)
    try:
        populate(old)
        before = fingerprint(old)
    finally:
        old.store.close()
    rows = all_rows(backend, data, 3)
    assert all(rows[t] for t in (*REBUILT, "balances", "klines", "users", "transfers"))
    assert any(row[-1] for row in rows["klines"])  # bars of today's code have their amount
    assert "ledger_account" in indexes(backend, data, "ledger")
    rows = back_to_version_3(backend, data, rows)

    migrated = exchange_at(backend, data, None)
    try:
        assert fingerprint(migrated) == before  # state hash, audit, users, keys
        assert all_rows(backend, data) == rows
        for table in REBUILT:
            assert indexes(backend, data, table) == NAMED_INDEXES[table]
        if backend.name == "sqlite":
            for table in REBUILT:  # the key is the rowid: one b-tree, no separate key index
                info = backend.query(data, f"PRAGMA table_info({table})")
                assert [(name, kind, pk) for _, name, kind, _, _, pk in info if pk] == [
                    ("id", "INTEGER", 1)
                ]
            assert backend.query(data, "PRAGMA integrity_check") == [("ok",)]
        versions = backend.query(data, "SELECT version FROM schema_version")
        assert sorted(v for (v,) in versions) == list(range(1, LATEST_VERSION + 1))
        # It goes on exactly as a venue that was never migrated.
        tail = command_stream(12, 300)[6:]
        run(migrated, tail, 4)
        reference = exchange_at(backend, tmp_path / "reference", None)
        try:
            populate(reference)
            run(reference, tail, 5)
            # (API keys are random: the state hash and the audit report.)
            assert fingerprint(migrated)[:2] == fingerprint(reference)[:2]
        finally:
            reference.store.close()
        ledger = all_rows(backend, data)["ledger"]
        assert [row[0] for row in ledger] == list(range(1, len(ledger) + 1))
    finally:
        migrated.store.close()


def test_migration_4_keeps_64_bit_extremes(backend: Backend, tmp_path: Path) -> None:
    batch = Batch()
    batch.orders[MAX] = OrderState(
        MAX, 1, "BTCUSDT", "BUY", "LIMIT", "GTC", MAX, MAX, 0, MAX, MAX, MAX, "NEW", "c", MAX, MIN
    )
    batch.orders[1] = OrderState(
        1, MIN, "BTCUSDT", "SELL", "LIMIT", "GTC", 1, 1, 0, 0, 0, 0, "CANCELED", "", MIN, MIN
    )
    batch.trades.append(Trade(MAX, "BTCUSDT", MAX, MAX, MAX, MAX, "BUY", MAX, 1, 1, 2, MAX, MIN))
    batch.trades.append(Trade(1, "BTCUSDT", 1, 1, 1, MIN, "SELL", 1, MAX, 2, 1, MIN, MAX))
    batch.ledger += [
        LedgerRow(1, "USDT", MAX, MIN, "deposit", MAX, MAX),
        LedgerRow(1, "USDT", MIN, MAX, "deposit", MIN, MIN),
    ]
    old = version_3(backend, tmp_path / "data")
    try:
        old.commit(batch)
    finally:
        old.close()
    rows = back_to_version_3(backend, tmp_path / "data", all_rows(backend, tmp_path / "data", 3))
    store = backend.open_store(tmp_path / "data")
    try:
        assert store.migrate() == LATEST_VERSION
        assert all_rows(backend, tmp_path / "data") == rows
        assert store.find_order(1, "BTCUSDT", MAX, None) == batch.orders[MAX]
        assert store.account_trades(1, "BTCUSDT", 10, None) == batch.trades
        assert store.ledger_sums() == {(1, "USDT"): (-1, -1)}
        snap = store.load(["BTCUSDT"], {})
        assert [o.snapshot() for o in snap.open_orders] == [batch.orders[MAX]]
        assert (snap.next_order_id, snap.next_trade_id) == (MAX + 1, MAX + 1)
        # New rows still go after the largest id.
        more = Batch()
        more.ledger.append(LedgerRow(2, "BTC", 5, 0, "deposit", 3, 4))
        store.commit(more)
    finally:
        store.close()
    ledger = all_rows(backend, tmp_path / "data")["ledger"]
    assert [row[0] for row in ledger] == [1, 2, 3]


def test_the_ledger_check_finds_every_kind_of_mismatch(backend: Backend, tmp_path: Path) -> None:
    batch = Batch()
    batch.ledger += [
        LedgerRow(1, "USDT", 100, 0, "deposit", 1, 1),
        LedgerRow(1, "USDT", -30, 30, "hold", 2, 2),
        LedgerRow(1, "BTC", 7, 0, "deposit", 3, 3),
        LedgerRow(2, "USDT", 5, 0, "deposit", 4, 4),  # no balance row: mismatch
        LedgerRow(3, "BTC", 9, 0, "deposit", 5, 5),
        LedgerRow(3, "BTC", -9, 0, "withdraw", 6, 6),  # sums to zero, no balance row: fine
    ]
    batch.balances[(1, "USDT")] = (70, 30)  # matches
    batch.balances[(1, "BTC")] = (8, 0)  # free differs
    batch.balances[(4, "ETH")] = (0, 1)  # no ledger entries: locked differs from 0
    batch.balances[(5, "ETH")] = (0, 0)  # no ledger entries, zero: fine
    store = backend.open_store(tmp_path / "data")
    try:
        store.migrate()
        store.commit(batch)
        assert sorted(store.ledger_mismatches()) == [
            (1, "BTC", 8, 0, 7, 0),
            (2, "USDT", 0, 0, 5, 0),
            (4, "ETH", 0, 1, 0, 0),
        ]
        assert store.ledger_sums() == {
            (1, "USDT"): (70, 30),
            (1, "BTC"): (7, 0),
            (2, "USDT"): (5, 0),
            (3, "BTC"): (0, 0),
        }
    finally:
        store.close()


def test_migration_6_indexes_the_open_orders_alone(backend: Backend, tmp_path: Path) -> None:
    data = tmp_path / "venue"
    old = exchange_at(backend, data, 5)
    try:
        populate(old)
        before = fingerprint(old)
        open_before = [o.snapshot() for o in old.store.load(["BTCUSDT"], {}).open_orders]
    finally:
        old.store.close()
    statuses = {s for (s,) in backend.query(data, "SELECT DISTINCT status FROM orders")}
    assert {"NEW", "FILLED", "CANCELED"} <= statuses  # open and closed orders both stored
    assert len(open_before) > 10

    migrated = exchange_at(backend, data, None)
    try:
        assert fingerprint(migrated) == before
        assert [o.snapshot() for o in migrated.store.load(["BTCUSDT"], {}).open_orders] == (
            open_before
        )
        assert indexes(backend, data, "orders") == NAMED_INDEXES["orders"]
        if backend.name == "sqlite":
            (definition,) = backend.query(
                data, "SELECT sql FROM sqlite_master WHERE name = 'orders_open'"
            )[0:1]
            assert definition[0].endswith(f"WHERE {OPEN_STATUS_TERM}")
            plan = backend.query(data, f"EXPLAIN QUERY PLAN {OPEN_ORDERS}")
            assert [row[-1] for row in plan] == ["SCAN orders USING INDEX orders_open"]
            # Only open orders are in it: closed ones never enter, or leave when they end.
            (entries,) = backend.query(data, "SELECT COUNT(*) FROM orders INDEXED BY orders_open"
                                       f" WHERE {OPEN_STATUS_TERM}")  # fmt: skip
            assert entries == (len(open_before),)
        else:
            (definition,) = backend.query(
                data,
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                " AND indexname = 'orders_open'",
            )
            assert "WHERE" in definition[0] and "PARTIALLY_FILLED" in definition[0]
        # And the venue goes on: orders end and rest, recovery finds exactly the open ones.
        run(migrated, command_stream(13, 200)[6:], 4)
        open_now = [o.snapshot() for o in migrated.store.load(["BTCUSDT"], {}).open_orders]
        assert [o.id for o in open_now] == sorted(
            o.id for book in migrated.engine.spot.books.values() for o in book.orders.values()
            if o.symbol == "BTCUSDT"
        )  # fmt: skip
    finally:
        migrated.store.close()


def test_the_open_orders_term_names_every_open_status() -> None:
    assert (f"status IN ({', '.join(repr(s) for s in sorted(OPEN_STATUSES))})") == OPEN_STATUS_TERM


def test_migration_7_adds_checkpoints_and_the_ended_futures_index(
    backend: Backend, tmp_path: Path
) -> None:
    data = tmp_path / "venue"
    old = exchange_at(backend, data, 6)
    try:
        populate(old)
        before = fingerprint(old)
    finally:
        old.store.close()
    rows = all_rows(backend, data, 6)
    assert "futures_ended" not in indexes(backend, data, "futures_docs")

    migrated = exchange_at(backend, data, None)
    try:
        assert fingerprint(migrated) == before  # the audit reads the (empty) checkpoints
        assert all_rows(backend, data) == rows | {"ledger_checkpoints": [], "admin_log": []}
        assert "futures_ended" in indexes(backend, data, "futures_docs")
        if backend.name == "sqlite":
            plan = backend.query(
                data,
                "EXPLAIN QUERY PLAN SELECT kind, user_id, contract, id, doc FROM"
                f" {SQLiteStore.ended_futures} WHERE {FUTURES_ENDED} AND id > 0"
                " ORDER BY id LIMIT 10",
            )
            assert [row[-1] for row in plan] == [
                "SEARCH futures_docs USING INDEX futures_ended (id>?)"
            ]
    finally:
        migrated.store.close()


def test_db_upgrade_switches_an_old_sqlite_file_to_incremental_vacuum(tmp_path: Path) -> None:
    data = tmp_path / "venue"
    data.mkdir()
    made_before = sqlite3.connect(DataDir(data).db_path)  # as tradehall made files before 7
    made_before.execute("PRAGMA auto_vacuum=NONE")
    made_before.execute("CREATE TABLE placeholder (x INTEGER)")
    made_before.execute("DROP TABLE placeholder")
    made_before.close()
    store = Backend("sqlite").open_store(data)
    try:
        store.migrate()
        assert isinstance(store, SQLiteStore) and store.auto_vacuum() == "none"
    finally:
        store.close()
    upgraded = CliRunner().invoke(app, ["db", "upgrade", "--data-dir", str(data), "--json"])
    assert upgraded.exit_code == 0, upgraded.output
    assert json.loads(upgraded.stdout) == {
        "version": LATEST_VERSION,
        "journal": {"created": True, "head": 0, "projected": 0},
        "vacuumed": True,
    }
    again = CliRunner().invoke(app, ["db", "upgrade", "--data-dir", str(data), "--json"])
    assert json.loads(again.stdout) == {
        "version": LATEST_VERSION,
        "journal": {"created": False, "head": 0, "projected": 0},
    }
    assert Backend("sqlite").query(data, "PRAGMA auto_vacuum") == [(2,)]
