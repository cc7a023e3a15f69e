"""The store's contract on every backend: the schema the code expects, exact 64-bit integers,
migrations, one owner per PostgreSQL schema, and how the backend is chosen."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from support import Backend
from tradehall.cli import app
from tradehall.config import ConfigError, parse_config
from tradehall.engine.events import Trade
from tradehall.engine.orders import OrderState
from tradehall.store.base import StoreError
from tradehall.store.batch import Batch, KeyRow, LedgerRow, UserRow
from tradehall.store.factory import ENV_VAR, open_store
from tradehall.store.postgres import PostgresStore
from tradehall.store.schema import LATEST_VERSION, TABLES
from tradehall.store.sqlite import SQLiteStore

MAX = 2**63 - 1
MIN = -(2**63)


def cli(*args: str, env: Mapping[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env={ENV_VAR: None, **(env or {})})


def test_table_catalogue_matches_the_schema(backend: Backend, tmp_path: Path) -> None:
    store = backend.open_store(tmp_path / "data")
    try:
        assert store.migrate() == LATEST_VERSION
        conn = store._conn()
        for table in TABLES.values():
            described = conn.execute(f"SELECT * FROM {table.name} LIMIT 0").description
            assert tuple(d[0] for d in described) == table.columns, table.name
    finally:
        store.close()
    listing = {
        "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table'",
        "postgresql": "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema()",
    }[backend.name]
    names = {name for (name,) in backend.query(tmp_path / "data", listing)}
    assert names == {*TABLES, "schema_version"}
    # Rows are written straight from the engine's structs: their fields are the columns.
    assert OrderState.__struct_fields__ == TABLES["orders"].columns
    assert Trade.__struct_fields__ == TABLES["trades"].columns


def test_64_bit_integers_round_trip_exactly(backend: Backend, tmp_path: Path) -> None:
    batch = Batch()
    batch.users.append(UserRow(1, "edge", MAX))
    batch.keys["k"] = KeyRow("k", "s", 1, True, ("10.0.0.0/8", "127.0.0.1/32"), MAX, MAX)
    batch.orders[MAX] = OrderState(
        MAX, 1, "BTCUSDT", "BUY", "LIMIT", "GTC", MAX, MAX, 0, MAX, MAX, MAX, "NEW", "c", MAX, MAX
    )
    batch.trades.append(
        Trade(MAX, "BTCUSDT", MAX, MAX, MAX, MAX, "BUY", MAX, 1, 1, 2, MAX, MIN)
    )  # fmt: skip
    batch.ledger += [
        LedgerRow(1, "USDT", MAX, MIN, "deposit", MAX, MAX),
        LedgerRow(1, "USDT", MIN, MAX, "deposit", MIN, MIN),
    ]
    batch.balances[(1, "USDT")] = (MAX, MIN)
    store = backend.open_store(tmp_path / "data")
    try:
        store.migrate()
        store.commit(batch)
        snap = store.load(["BTCUSDT"], {})
        assert snap.users == batch.users
        assert snap.keys == list(batch.keys.values())
        assert [tuple(b) for b in snap.balances] == [(1, "USDT", MAX, MIN)]
        assert snap.open_orders[0].snapshot() == batch.orders[MAX]
        assert (snap.next_order_id, snap.next_trade_id) == (MAX + 1, MAX + 1)
        assert store.find_order(1, "BTCUSDT", MAX, None) == batch.orders[MAX]
        assert store.account_trades(1, "BTCUSDT", 10, None) == batch.trades
        assert store.ledger_sums() == {(1, "USDT"): (-1, -1)}
    finally:
        store.close()


def test_migrations_apply_once(backend: Backend, tmp_path: Path) -> None:
    store = backend.open_store(tmp_path / "data")
    try:
        assert store.migrate() == LATEST_VERSION
        assert store.migrate() == LATEST_VERSION
    finally:
        store.close()
    versions = backend.query(tmp_path / "data", "SELECT version FROM schema_version")
    assert sorted(v for (v,) in versions) == list(range(1, LATEST_VERSION + 1))


def test_db_upgrade_command(backend: Backend, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = cli(
        "db", "upgrade", "--data-dir", str(data_dir), "--json", *backend.server_args(data_dir)
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "version": LATEST_VERSION,
        "journal": {"created": True, "head": 0, "projected": 0},
    }
    again = cli("db", "upgrade", "--data-dir", str(data_dir), *backend.server_args(data_dir))
    assert again.stdout.strip() == (
        f"schema version {LATEST_VERSION}; journal present, at record 0 (tables at 0)"
    )


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_postgresql_schema_has_one_owner(backend: Backend, tmp_path: Path) -> None:
    first = backend.open_store(tmp_path / "one")
    url = backend.database(tmp_path / "one")
    second = open_store(url, tmp_path / "two")
    try:
        first.migrate()
        with pytest.raises(StoreError, match="in use by another tradehall process"):
            second.migrate()
        # Another data folder on the same database: the operator commands refuse too.
        result = cli("user", "list", "--data-dir", str(tmp_path / "two"), "--database", url)
        assert result.exit_code == 1
        assert "in use by another tradehall process" in result.output
        first.close()
        assert second.migrate() == LATEST_VERSION  # the lock went with the owner
    finally:
        first.close()
        second.close()


def test_the_database_setting_chooses_the_store(tmp_path: Path) -> None:
    sqlite = open_store("", tmp_path)
    tables, journal = sqlite.projections, sqlite.journal.db
    assert isinstance(tables, SQLiteStore) and tables.path == str(tmp_path / "tradehall.db")
    assert isinstance(journal, SQLiteStore) and journal.path == str(tmp_path / "journal.db")
    assert isinstance(open_store(None, tmp_path).projections, SQLiteStore)
    for url in ("postgresql://u@db.example:5433/ex", "postgres://u@db.example/ex"):
        store = open_store(url, tmp_path)  # nothing is connected before first use
        tables = store.projections
        assert isinstance(tables, PostgresStore)
        assert tables.where in ("db.example:5433/ex", "db.example:5432/ex")
        assert store.journal.db is tables  # one database: a table beside them
    for bad, shown in (("mysql://u:hunter2@h/db", "'mysql'"), ("tradehall.db", "not a URL")):
        with pytest.raises(StoreError, match="unsupported database") as refused:
            open_store(bad, tmp_path)
        assert shown in str(refused.value) and "hunter2" not in str(refused.value)


def test_config_validates_the_database(tmp_path: Path) -> None:
    base = '[[assets]]\nname = "BTC"\ndecimals = 8\n[[assets]]\nname = "USDT"\ndecimals = 8\n'
    pair = (
        '[[pairs]]\nsymbol = "BTCUSDT"\nbase = "BTC"\nquote = "USDT"\nprice_precision = 2\n'
        'quantity_precision = 6\nmin_quantity = "0.00001"\nmin_notional = "5"\n'
        'maker_fee = "0.001"\ntaker_fee = "0.001"\n'
    )
    ok = parse_config(f'[server]\ndatabase = "postgresql://h/db"\n{base}{pair}', "t.toml")
    assert ok.server.database == "postgresql://h/db"
    assert parse_config(base + pair, "t.toml").server.database == ""
    with pytest.raises(ConfigError) as bad:
        parse_config(f'[server]\nport = 1\ndatabase = "mysql://u:pw1@h/db"\n{base}{pair}', "t.toml")
    assert str(bad.value).startswith("t.toml:3: server.database: unsupported database")
    assert "pw1" not in str(bad.value)


def test_flag_beats_environment_beats_config_beats_sqlite(tmp_path: Path) -> None:
    """Each source names a different (closed) port, so the error says which one was used."""
    config = tmp_path / "c.toml"
    builtin = (Path(__file__).parents[2] / "src/tradehall/default_config.toml").read_text()
    config.write_text(
        builtin.replace("[server]\n", '[server]\ndatabase = "postgresql://127.0.0.1:1/conf"\n', 1)
    )
    env = {ENV_VAR: "postgresql://127.0.0.1:2/env"}
    flag = ("--database", "postgresql://127.0.0.1:3/flag")
    data = ("--data-dir", str(tmp_path / "data"), "--config", str(config))
    assert "127.0.0.1:3/flag" in cli("db", "upgrade", *data, *flag, env=env).output
    assert "127.0.0.1:2/env" in cli("db", "upgrade", *data, env=env).output
    assert "127.0.0.1:1/conf" in cli("db", "upgrade", *data).output
    plain = cli("db", "upgrade", "--data-dir", str(tmp_path / "data"), "--json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["version"] == LATEST_VERSION
    assert (tmp_path / "data" / "tradehall.db").exists()
    bad = cli("db", "upgrade", *data, "--database", "sqlite:///x.db")
    assert bad.exit_code == 1 and "unsupported database" in bad.output
