"""Moving a venue between stores: `tradehall db export` from SQLite, `tradehall db import` into
an empty store of each backend, and nothing is lost: the same audit, engine state hash, users,
keys, order and trade history, byte for byte the same export, and the same future."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from store_support import command_stream, fingerprint, populate, run
from support import TEST_SECRET_BOX_KEY, Backend
from tradehall.cli import app
from tradehall.secretbox import ENV_VAR as SECRET_KEY_ENV
from tradehall.secretbox import SecretBox
from tradehall.store.factory import ENV_VAR

SQLITE = Backend("sqlite")
HISTORY = ("SELECT * FROM orders ORDER BY id", "SELECT * FROM trades ORDER BY id")


def cli(*args: str, sealing_key: str | None = SecretBox.encode_key(TEST_SECRET_BOX_KEY)) -> Any:
    """The CLI with the sealing key the test exchanges use (as an operator moving a venue
    takes the source's secret.key along), or with the data folder's own (None)."""
    env = {ENV_VAR: None, SECRET_KEY_ENV: sealing_key}
    return CliRunner().invoke(app, list(args), env=env)


def test_sqlite_to_another_store_through_export_and_import(
    backend: Backend, tmp_path: Path
) -> None:
    source, target, dump = tmp_path / "sqlite", tmp_path / "target", tmp_path / "venue.jsonl"
    live = SQLITE.exchange(source)
    try:
        populate(live)
        before = fingerprint(live)
    finally:
        live.store.close()
    assert any(book.orders for book in live.engine.spot.books.values())

    exported = cli("db", "export", "--out", str(dump), "--data-dir", str(source), "--json")
    assert exported.exit_code == 0, exported.output
    counts = json.loads(exported.stdout)["rows"]
    assert counts["orders"] > 100 and counts["trades"] > 50 and counts["klines"] > 0
    into = ("--data-dir", str(target), *backend.server_args(target))
    imported = cli("db", "import", "--in", str(dump), *into, "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["rows"] == counts
    if backend.name == "sqlite":
        assert f"note: created a new, empty exchange in {target}" in imported.stderr

    moved = backend.exchange(target)
    try:
        assert fingerprint(moved) == before
        for sql in HISTORY:
            assert backend.query(target, sql) == SQLITE.query(source, sql)
    finally:
        moved.store.close()
    # A second import is refused: the target is no longer empty.
    again = cli("db", "import", "--in", str(dump), *into, "--json")
    assert again.exit_code == 1 and "import only into an empty store" in again.output
    assert json.loads(again.stdout)["code"] == -1020  # the operator's mistake, not a failure
    # Exported again, the moved store gives the very same file.
    echo = tmp_path / "echo.jsonl"
    assert cli("db", "export", "--out", str(echo), *into).exit_code == 0
    assert echo.read_bytes() == dump.read_bytes()

    # And both carry on identically (ledger, order and trade ids continue where they were).
    tail = command_stream(22, 200)[6:]
    moved, original = backend.exchange(target), SQLITE.exchange(source)
    try:
        run(moved, tail, 4)
        run(original, tail, 4)
        assert fingerprint(moved) == fingerprint(original)
    finally:
        moved.store.close()
        original.store.close()
    assert cli("db", "export", "--out", str(dump), "--data-dir", str(source)).exit_code == 0
    assert cli("db", "export", "--out", str(echo), *into).exit_code == 0
    assert echo.read_bytes() == dump.read_bytes()


def test_a_damaged_export_imports_nothing(backend: Backend, tmp_path: Path) -> None:
    source, target, dump = tmp_path / "sqlite", tmp_path / "target", tmp_path / "venue.jsonl"
    live = SQLITE.exchange(source)
    try:
        populate(live)
    finally:
        live.store.close()
    assert cli("db", "export", "--out", str(dump), "--data-dir", str(source)).exit_code == 0
    lines = dump.read_text().splitlines(keepends=True)
    into = ("--data-dir", str(target), *backend.server_args(target))
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(lines[:-1]))
    result = cli("db", "import", "--in", str(truncated), *into)
    assert result.exit_code == 1 and "truncated" in result.output
    altered = tmp_path / "altered.jsonl"
    row = next(i for i, line in enumerate(lines) if line.startswith("[") and i > 10)
    altered.write_text(
        "".join([*lines[:row], lines[row].replace(",", ",1.5,", 1), *lines[row + 1 :]])
    )
    result = cli("db", "import", "--in", str(altered), *into)
    assert result.exit_code == 1 and "export file line" in result.output
    # The file is the operator's mistake, not a failed store: -1102 (a script reading -1001
    # would think the store broken), for a cut, altered, binary or missing file alike.
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xef\x00\xff" * 100)
    for bad, problem in (
        (truncated, "truncated"),
        (altered, "export file line"),
        (binary, "not UTF-8"),
        (tmp_path / "missing.jsonl", "cannot read"),
    ):
        result = cli("db", "import", "--in", str(bad), *into, "--json")
        assert result.exit_code == 1, result.output
        error = json.loads(result.stdout)
        assert error["code"] == -1102 and problem in error["msg"], error
    for table in ("users", "orders", "ledger", "klines"):
        assert backend.query(target, f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_an_import_needs_the_sources_sealing_key(tmp_path: Path) -> None:
    """The stranger's path of docs/storage.md with the CLI alone: a store made by the CLI,
    exported, imported elsewhere. The API secrets in the file are sealed with the source's
    secret.key, so an import into a folder with no key or another key is refused and imports
    nothing (no command could open that store); with the source's key copied over it works."""
    source, dump = tmp_path / "source", tmp_path / "venue.jsonl"

    def ok(*args: str) -> Any:
        result = cli(*args, "--json", sealing_key=None)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    user = ok("user", "create", "--name", "ann", "--data-dir", str(source))
    ok("key", "create", "--user", str(user["id"]), "--data-dir", str(source))
    ok("deposit", "--user", str(user["id"]), "--asset", "USDT", "--amount", "5", "--data-dir",
       str(source))  # fmt: skip
    ok("db", "export", "--out", str(dump), "--data-dir", str(source))

    no_key, other_key = tmp_path / "no-key", tmp_path / "other-key"
    other_key.mkdir()
    (other_key / "secret.key").write_text(SecretBox.encode_key(SecretBox.new_key()))
    for target, problem in ((no_key, "sealed with the source's"), (other_key, "another secret")):
        refused = cli("db", "import", "--in", str(dump), "--data-dir", str(target), "--json",
                      sealing_key=None)  # fmt: skip
        assert refused.exit_code == 1, refused.output
        error = json.loads(refused.stdout)
        assert problem in error["msg"] and "copy secret.key" in error["msg"], error
        assert error["code"] == -1020, error
        assert ok("user", "list", "--data-dir", str(target))["users"] == []

    (other_key / "secret.key").write_bytes((source / "secret.key").read_bytes())
    ok("db", "import", "--in", str(dump), "--data-dir", str(other_key))
    assert [u["name"] for u in ok("user", "list", "--data-dir", str(other_key))["users"]] == ["ann"]
    assert ok("audit", "--data-dir", str(other_key))["ok"] is True


def test_an_export_refuses_a_folder_without_an_exchange(tmp_path: Path) -> None:
    typo, dump = tmp_path / "typo", tmp_path / "venue.jsonl"
    result = cli("db", "export", "--out", str(dump), "--data-dir", str(typo), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"code": -1102, "msg": f"no exchange in {typo}"}
    assert not typo.exists() and not dump.exists()


@pytest.mark.parametrize("argv", [("audit",), ("status",), ("db", "vacuum")])
def test_audit_status_and_vacuum_refuse_a_folder_without_an_exchange(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """README: nothing to audit, report or vacuum, and nothing created. A cron job auditing a
    mistyped --data-dir (or a PostgreSQL venue's folder without its --database) must fail,
    not pass on a new, empty exchange."""
    typo = tmp_path / "typo"
    result = cli(*argv, "--data-dir", str(typo), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"code": -1102, "msg": f"no exchange in {typo}"}
    assert not typo.exists()


def test_sim_status_of_a_folder_without_an_exchange_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    result = cli("sim", "status", "--data-dir", str(typo), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"running": False, "server": False}
    assert not typo.exists()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_an_audit_refuses_a_database_without_an_exchange(backend: Backend, tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ("--data-dir", str(data), *backend.server_args(data), "--json")
    result = cli("audit", *args)
    assert result.exit_code == 1, result.output
    assert "no exchange in this database" in json.loads(result.stdout)["msg"]
    assert cli("db", "upgrade", *args).exit_code == 0
    assert json.loads(cli("audit", *args).stdout)["ok"] is True


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_an_export_refuses_a_database_without_an_exchange(backend: Backend, tmp_path: Path) -> None:
    data, dump = tmp_path / "data", tmp_path / "venue.jsonl"
    args = ("--data-dir", str(data), *backend.server_args(data), "--json")
    result = cli("db", "export", "--out", str(dump), *args)
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)
    assert error["code"] == -1102 and "no exchange in this database" in error["msg"]
    assert not dump.exists()
    tables = "SELECT COUNT(*) FROM information_schema.tables"
    assert backend.query(data, f"{tables} WHERE table_schema = current_schema()") == [(0,)]
    assert cli("db", "upgrade", *args).exit_code == 0  # once it holds an exchange: exported
    exported = cli("db", "export", "--out", str(dump), *args)
    assert exported.exit_code == 0 and json.loads(exported.stdout)["rows"]["users"] == 0
