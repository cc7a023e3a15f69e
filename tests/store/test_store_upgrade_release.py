"""Upgrading a store made by the previous release (git commit 410891b, the last before the
journal) to the journal layout, with `tradehall db upgrade` or by `tradehall serve` itself.

The fixture (tests/store/data/release-410891b, made by tests/release_fixture.py with that
release's code; its README says how) is that release's data folder: its ``tradehall.db`` (kept
as SQL text, ``tradehall.sql``, rebuilt into the file here) and
the ``secret.key`` that sealed its API secrets, and ``facts.json``, what its server answered
about the venue (balances, open orders and history of every user, the margin account, futures
positions and orders, the admin trail, klines), with the API keys that read it. Here this
release upgrades a copy, serves it, and must answer the same; then it takes new orders, which
go to the journal and reach the tables through the projector process; after a restart
everything is still there and the audit passes.

Retention is off in these servers: the fixture's history ages, and the default horizons (90
days) would prune it once it is old enough, which is retention's business, not the upgrade's.
What time alone changes in a served venue is left out of the comparisons (``static``): a
restart charges the margin interest of the hours missed since the fixture was made, and may
settle a futures funding time, which moves futures balances and positions' margins.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from release_fixture import CONTRACT, MARGIN, MARGIN_USER, RELEASE, reads
from release_fixture import client as user_client
from store_support import table_rows
from support import Backend, ServerProcess, start_server
from tradehall.cli import app
from tradehall.client import AdminClient, Client
from tradehall.datadir import DataDir
from tradehall.secretbox import ENV_VAR as SECRET_KEY_ENV
from tradehall.store.batch import PROJECTED
from tradehall.store.factory import ENV_VAR as DATABASE_ENV
from tradehall.store.schema import LATEST_VERSION

FIXTURE = Path(__file__).parent / "data" / f"release-{RELEASE}"
FACTS: dict[str, Any] = json.loads((FIXTURE / "facts.json").read_text())
SQLITE = Backend("sqlite")
POSITION_FIELDS = (
    "id", "uid", "contractName", "side", "volume", "openPrice", "avgPrice", "positionType",
    "leverageLevel", "closeVolume", "status", "tradeFee", "ctime",
)  # fmt: skip
"""What funding and marks leave alone in a position."""


def cli(*args: str) -> Any:
    """The CLI as an operator runs it on a data folder (its own secret.key, no database from
    the environment); the JSON it printed, with its exit code."""
    result = CliRunner().invoke(
        app, [*args, "--json"], env={DATABASE_ENV: None, SECRET_KEY_ENV: None}
    )
    return result.exit_code, json.loads(result.stdout) if result.stdout else result.output


def old_folder(path: Path) -> Path:
    """A copy of the previous release's data folder (as an operator's: 0700, key 0600)."""
    path.mkdir(mode=0o700, parents=True)
    db = sqlite3.connect(path / "tradehall.db")
    try:
        db.executescript((FIXTURE / "tradehall.sql").read_text("utf-8"))
    finally:
        db.close()
    shutil.copyfile(FIXTURE / "secret.key", path / "secret.key")
    (path / "secret.key").chmod(0o600)
    return path


def release_rows(tmp_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The fixture's rows, read from a folder rebuilt from it."""
    return table_rows(SQLITE, old_folder(tmp_path / "release"))


def without_retention(tmp_path: Path) -> Path:
    builtin = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    line = "enabled = true                # false: keep everything"
    assert builtin.count(line) == 1
    config = tmp_path / "no-retention.toml"
    config.write_text(builtin.replace(line, "enabled = false"))
    return config


def serve(backend: Backend, data: Path, config: Path) -> tuple[ServerProcess, AdminClient]:
    server = start_server(data, "--config", str(config), *backend.server_args(data))
    return server, AdminClient(server.url, DataDir(data).admin_token())


def client(url: str, name: str) -> Client:
    return user_client(url, FACTS["users"][name])


def reads_now(url: str, admin: AdminClient) -> dict[str, Any]:
    """What the server answers now, as the fixture's server was asked: the v3 history reads
    over the seven days from when the fixture was made (up to now), however long ago that
    was."""
    start, _ = FACTS["madeBetween"]
    end = min(start + 7 * 86_400_000 - 1, int(time.time() * 1000))
    return reads(admin, url, FACTS["users"], (start, end))


def static(answers: dict[str, Any]) -> dict[str, Any]:
    """``answers`` without what the clock alone changes (see the module's docstring): the
    futures accounts, the positions' margins and funding, the margin account's interest and
    risk, the flat bars of the months since; the admin trail as far as the previous release
    had written it. (A month's bar stays among the latest 300 for 25 years.)"""
    users = {}
    for name, user in answers["users"].items():
        kept = {k: v for k, v in user.items() if k != "futuresAccount"}
        kept["futuresPositions"] = [
            {k: p[k] for k in POSITION_FIELDS} for p in user["futuresPositions"]
        ]
        if "marginAccount" in user:
            account = user["marginAccount"]
            kept["marginAccount"] = {
                "symbol": account["symbol"],
                "userId": account["userId"],
                "lastPrice": account["lastPrice"],
                "assets": [
                    {k: a[k] for k in ("asset", "free", "locked", "borrowed")}
                    for a in account["assets"]
                ],
            }
        users[name] = kept
    upto = max(e["id"] for e in FACTS["adminLog"]["entries"])
    months = {bar["idx"] for bar in FACTS["futuresKlines"]}

    def of_then(bars: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [bar for bar in bars if bar["idx"] in months]

    return {
        "users": users,
        "adminUsers": answers["adminUsers"],
        "adminLog": [e for e in answers["adminLog"]["entries"] if e["id"] <= upto],
        "audit": answers["audit"],
        "trades": answers["trades"],
        "klines": {s: of_then(bars) for s, bars in answers["klines"].items()},
        "futuresKlines": of_then(answers["futuresKlines"]),
    }


def known(old: Any, new: Any) -> Any:
    """``new`` as far as ``old`` goes: the fields a later release added are left out, so that
    ``known(old, new) == old`` says every answer of the previous release is given the same."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: known(v, new[k]) if k in new else "<missing>" for k, v in old.items()}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [known(o, n) for o, n in zip(old, new, strict=True)]
    return new


def journal_state(backend: Backend, data: Path) -> tuple[int, int]:
    """(records in the journal, the last one the tables hold); none before there is one."""
    if backend.name == "sqlite":
        if not DataDir(data).journal_path.exists():
            return 0, 0
        db = sqlite3.connect(DataDir(data).journal_path)
        try:
            ((count,),) = db.execute("SELECT COUNT(*) FROM journal").fetchall()
        finally:
            db.close()
    else:
        ((count,),) = backend.query(data, "SELECT COUNT(*) FROM journal")
    projected = backend.query(data, f"SELECT value FROM engine_state WHERE name = '{PROJECTED}'")
    return int(count), int(projected[0][0]) if projected else 0


def projected_up_to(backend: Backend, data: Path, head: int) -> None:
    """Wait (bounded) for the projector process to bring the tables to record ``head``."""
    deadline = time.monotonic() + 20
    while journal_state(backend, data)[1] < head:
        assert time.monotonic() < deadline, f"the projector did not reach record {head}"
        time.sleep(0.05)


def caught_up(backend: Backend, data: Path) -> None:
    """Wait for the projector to hold what a just-started server wrote (its scheduler's
    catch-up records): a history read waits 1.5 s at most, which a loaded machine's projector
    start can exceed (the read then answers 503 -1001, as documented)."""
    projected_up_to(backend, data, journal_state(backend, data)[0])


def the_old_venue_is_served(url: str, admin: AdminClient) -> None:
    now = reads_now(url, admin)
    assert known(static(FACTS), static(now)) == static(FACTS)
    assert now["audit"]["ok"], now["audit"]["problems"]


def trade_on(url: str, admin: AdminClient) -> None:
    """New writes of every kind on the upgraded venue, and what they must show at once."""
    alice, bob, carol = (client(url, name) for name in ("alice", "bob", MARGIN_USER))
    (bid,) = FACTS["users"]["bob"]["openOrders"]["BTCUSDT"]  # bob's bid at 29,900
    sold = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.1", bid["price"])
    assert sold["status"] == "FILLED"
    after = bob.get_order("BTCUSDT", bid["orderId"])
    assert (after["status"], after["executedQty"]) == ("PARTIALLY_FILLED", "0.100000")
    newest = bob.my_trades("BTCUSDT", 1)[0]  # a history read: the projector got there
    assert (newest["bidId"], newest["askId"]) == (int(bid["orderId"]), int(sold["orderId"]))
    (ask,) = FACTS["users"][MARGIN_USER]["marginOpenOrders"]
    carol.margin_cancel_order(MARGIN, ask["orderId"])
    assert carol.margin_open_orders(MARGIN) == []
    placed = alice.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 10, "29500")
    assert int(placed["orderId"]) in {o["orderId"] for o in alice.futures_open_orders(CONTRACT)}
    admin.deposit(FACTS["users"]["dave"]["userId"], "USDT", "5", "after-the-upgrade")
    usdt = [b for b in client(url, "dave").account()["balances"] if b["asset"] == "USDT"]
    assert usdt == [{"asset": "USDT", "free": "105.00000000", "locked": "0.00000000"}]


def serve_upgraded(backend: Backend, data: Path, config: Path) -> None:
    """Serve the upgraded (or still old) folder: the old venue as it was; new writes to the
    journal, projected by the projector process; all of it again after a restart."""
    records_before, _ = journal_state(backend, data)
    server, admin = serve(backend, data, config)
    try:
        caught_up(backend, data)
        the_old_venue_is_served(server.url, admin)
        trade_on(server.url, admin)
        records, _ = journal_state(backend, data)
        assert records > records_before  # the writes are journal records
        projected_up_to(backend, data, records)
        written = static(reads_now(server.url, admin))
        assert server.stop() == 0
    finally:
        server.stop()
    # The scheduler's ticks may have added records since: all of them projected at shutdown.
    head, projected = journal_state(backend, data)
    assert head == projected >= records
    server, admin = serve(backend, data, config)
    try:
        caught_up(backend, data)
        assert static(reads_now(server.url, admin)) == written
        assert server.stop() == 0
    finally:
        server.stop()
    code, report = cli("audit", "--data-dir", str(data), *backend.server_args(data))
    assert (code, report["ok"]) == (0, True), report


def test_db_upgrade_of_a_data_folder_of_the_previous_release(tmp_path: Path) -> None:
    data = old_folder(tmp_path / "data")
    assert not DataDir(data).journal_path.exists()
    code, upgraded = cli("db", "upgrade", "--data-dir", str(data))
    assert code == 0, upgraded
    assert upgraded == {
        "version": LATEST_VERSION,
        "journal": {"created": True, "head": 0, "projected": 0},
    }
    assert DataDir(data).journal_path.exists()
    code, report = cli("audit", "--data-dir", str(data))
    assert (code, report) == (0, FACTS["audit"])
    # The tables are the previous release's, row for row: they are the projections at 0.
    assert table_rows(SQLITE, data) == release_rows(tmp_path)
    echo = tmp_path / "echo.jsonl"
    assert cli("db", "export", "--out", str(echo), "--data-dir", str(data))[0] == 0
    assert echo.read_bytes() == (FIXTURE / "export.jsonl").read_bytes()
    serve_upgraded(SQLITE, data, without_retention(tmp_path))
    code, again = cli("db", "upgrade", "--data-dir", str(data))  # idempotent
    assert (code, again["journal"]["created"]) == (0, False)
    assert again["journal"]["head"] == again["journal"]["projected"] > 0


def test_serve_upgrades_a_data_folder_of_the_previous_release_itself(tmp_path: Path) -> None:
    data = old_folder(tmp_path / "data")
    serve_upgraded(SQLITE, data, without_retention(tmp_path))
    code, after = cli("db", "upgrade", "--data-dir", str(data))  # serve made the journal
    assert (code, after["journal"]["created"]) == (0, False)
    assert after["journal"]["head"] == after["journal"]["projected"] > 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_db_upgrade_of_a_postgresql_database_of_the_previous_release(
    backend: Backend, tmp_path: Path
) -> None:
    """A PostgreSQL database as the previous release left it: that release's tables with the
    fixture's rows, and no journal. CI has no old code to make it with, so: the fixture's
    ``export.jsonl`` (written by that release's `db export`) is loaded into a fresh schema by
    this release's `db import`, which checks that the export's schema version is its own (the
    tables have not changed since that release: `git diff 410891b --
    src/tradehall/store/schema.py` is empty) and creates the journal's tables beside them,
    which are dropped again. Then `db upgrade` and the same checks as on SQLite. (A later
    migration would make this release refuse that export: build the old schema with
    ``migrate(8)`` and load the rows then.)"""
    data = tmp_path / "pg"
    data.mkdir(mode=0o700)
    shutil.copyfile(FIXTURE / "secret.key", data / "secret.key")
    into = ("--data-dir", str(data), *backend.server_args(data))
    code, imported = cli("db", "import", "--in", str(FIXTURE / "export.jsonl"), *into)
    assert code == 0, imported
    backend.execute(data, "DROP TABLE journal")
    backend.execute(data, "DROP TABLE journal_meta")
    assert table_rows(backend, data) == release_rows(tmp_path)  # the release's rows alone

    code, upgraded = cli("db", "upgrade", *into)
    assert code == 0, upgraded
    assert upgraded == {
        "version": LATEST_VERSION,
        "journal": {"created": True, "head": 0, "projected": 0},
    }
    code, report = cli("audit", *into)
    assert (code, report) == (0, FACTS["audit"])
    echo = tmp_path / "echo.jsonl"
    assert cli("db", "export", "--out", str(echo), *into)[0] == 0
    assert echo.read_bytes() == (FIXTURE / "export.jsonl").read_bytes()
    serve_upgraded(backend, data, without_retention(tmp_path))
