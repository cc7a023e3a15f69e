"""Retention (`[retention]`, `tradehall db prune`, `db stats`): pruning removes exactly what
is past its horizon (ended orders, trades, ledger detail; the simulation's participants on
their shorter horizon) and nothing else; the pruned ledger is folded into checkpoints, so the
audit passes, recovery gives the same state, history reads within the 7-day window answer
as before, export and import round-trip, and the venue carries on like one never pruned."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from store_support import fingerprint, run
from support import TEST_SECRET_BOX_KEY, Backend
from tradehall.cli import app
from tradehall.codes import Reject
from tradehall.config import load_config
from tradehall.engine.commands import CancelOrder, Command, Deposit, PlaceOrder
from tradehall.engine.orders import GTC, IOC, OPEN_STATUSES
from tradehall.exchange import Exchange
from tradehall.retention import Pruner
from tradehall.secretbox import ENV_VAR as SECRET_KEY_ENV
from tradehall.secretbox import SecretBox
from tradehall.sim.runner import Simulation
from tradehall.store import sqlite
from tradehall.store.factory import ENV_VAR
from tradehall.store.writer import GroupCommitter

MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
NOW = time.time_ns() // 1_000_000
"""The test's now: set again as each test starts (``fresh_now``), since `db prune` horizons
are measured from the wall clock, and a suite can run for many minutes after this module is
imported."""
ANN, MAKER, TAKER = 1, 2, 3
"""A user and the simulation's two participants on BTCUSDT (their user names make them so)."""
SIM = {MAKER, TAKER}
DEFAULTS = {"orders": 90 * DAY, "trades": 90 * DAY, "ledger": 90 * DAY}
SIM_HORIZON, SYSTEM_HORIZON = 30 * MINUTE, HOUR


def cli(*args: str) -> Any:
    env = {ENV_VAR: None, SECRET_KEY_ENV: SecretBox.encode_key(TEST_SECRET_BOX_KEY)}
    return CliRunner().invoke(app, list(args), env=env)


def trading(seed: int, start: int, count: int, step: int = 1000) -> list[Command]:
    """``count`` commands from ``start`` (ms), one every ``step`` ms: crossing limit orders of all
    three accounts (most trade at once), IOCs, and cancels."""
    rng = random.Random(seed)
    commands: list[Command] = []
    for i in range(count):
        ts = start + i * step
        account = rng.choice((ANN, MAKER, TAKER))
        roll = rng.random()
        if roll < 0.15:
            commands.append(CancelOrder(ts, account, "BTCUSDT", order_id=rng.randint(1, 9000)))
        else:
            commands.append(
                PlaceOrder(
                    ts, account, "BTCUSDT", rng.choice(("BUY", "SELL")), "LIMIT",
                    price=rng.randint(2_999_900, 3_000_100), qty=rng.randint(10, 2000),
                    tif=GTC if roll < 0.8 else IOC,
                )
            )  # fmt: skip
    return commands


def venue(exchange: Exchange) -> None:
    """Three phases: 100 days ago, 2 hours ago (past the simulation's 30 minutes, within the
    users' 90 days) and the last 25 minutes (within every horizon, with a margin for the
    seconds between this and the pruning)."""
    start = NOW - 100 * DAY
    for name in ("ann", "sim-maker-BTCUSDT", "sim-taker-BTCUSDT"):
        exchange.create_user(name, start)
    for account in (ANN, MAKER, TAKER):
        for asset, amount in (("USDT", 10**9 * 10**8), ("BTC", 10**4 * 10**8)):
            with contextlib.suppress(Reject):
                exchange.apply(Deposit(start, account, asset, amount, f"{asset}-{account}"))
    run(exchange, trading(1, start, 1200), 50)
    run(exchange, trading(2, NOW - 2 * HOUR, 1200), 50)
    run(exchange, trading(3, NOW - 25 * MINUTE, 2400, 500), 50)  # until 5 minutes ago


@pytest.fixture(autouse=True)
def fresh_now() -> None:
    global NOW
    NOW = time.time_ns() // 1_000_000


def cutoff(kind: str, account: int, now: int | None = None) -> int:
    now = NOW if now is None else now
    if account in SIM:
        return now - SIM_HORIZON
    if kind == "ledger" and account <= 0:
        return now - SYSTEM_HORIZON
    return now - DEFAULTS[kind]


def expected_after(rows: dict[str, list[Any]], now: int | None = None) -> dict[str, set[int]]:
    """The ids each table keeps at ``now``, by the documented rules (independently of the
    store's code)."""
    now = NOW if now is None else now
    orders, trades, ledger = rows["orders"], rows["trades"], rows["ledger"]
    top_order, top_trade, top_ledger = (max(r[0] for r in t) for t in (orders, trades, ledger))
    recent = sorted(r[0] for r in trades)[-1000]
    return {
        "orders": {
            id
            for id, account, status, updated in orders
            if status in OPEN_STATUSES
            or updated >= cutoff("orders", account, now)
            or id == top_order
        },
        "trades": {
            id
            for id, t, bid, ask in trades
            if t >= min(cutoff("trades", bid, now), cutoff("trades", ask, now))
            or id == top_trade
            or id >= recent
        },
        "ledger": {
            id
            for id, account, t, *_ in ledger
            if t >= cutoff("ledger", account, now) or id == top_ledger
        },
    }


def table_rows(backend: Backend, data_dir: Path) -> dict[str, list[Any]]:
    return {
        "orders": backend.query(data_dir, "SELECT id, account, status, updated FROM orders"),
        "trades": backend.query(data_dir, "SELECT id, time, bid_account, ask_account FROM trades"),
        "ledger": backend.query(
            data_dir, "SELECT id, account, time, asset, d_free, d_locked FROM ledger"
        ),
    }


def history(exchange: Exchange) -> list[Any]:
    """What the v3 history endpoints answer a user within the last 7 days, v1 /myTrades
    (its newest trades), and a participant's orders of the last minutes."""
    store = exchange.store
    return [
        store.account_orders(ANN, "BTCUSDT", NOW - 7 * DAY, NOW + HOUR, 1000),
        store.account_trades_between(ANN, None, NOW - 7 * DAY, NOW + HOUR, 1000),
        store.account_trades(ANN, "BTCUSDT", 100, None),  # v1 /myTrades: its newest
        store.account_orders(MAKER, None, NOW - 20 * MINUTE, NOW + HOUR, 1000),
    ]


def test_prune_keeps_exactly_what_the_horizons_say(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, twin = tmp_path / "live", tmp_path / "twin"
    exchanges = [backend.exchange(live), backend.exchange(twin)]
    try:
        for exchange in exchanges:
            venue(exchange)
        before = fingerprint(exchanges[0])
        reads = history(exchanges[0])
    finally:
        for exchange in exchanges:
            exchange.store.close()
    rows = table_rows(backend, live)
    keep = expected_after(rows)
    # The scenario has something to prune and something to keep of every kind.
    for kind in ("orders", "trades", "ledger"):
        assert 0 < len(keep[kind]) < len(rows[kind]) * 0.9, kind
    assert any(r[1] == ANN and r[0] in keep["orders"] for r in rows["orders"])

    where = ("--data-dir", str(live), *backend.server_args(live))
    monkeypatch.setattr(sqlite, "FREE_PAGES_KEPT", 0)  # give back every page pruning frees
    pages = backend.query(live, "PRAGMA page_count") if backend.name == "sqlite" else None
    pruned = cli("db", "prune", *where, "--json")
    assert pruned.exit_code == 0, pruned.output
    counts = json.loads(pruned.stdout)["pruned"]
    if pages is not None:  # SQLite gave the freed pages back to the disk
        assert counts["reclaimedPages"] > 0
        assert backend.query(live, "PRAGMA page_count")[0][0] < pages[0][0] - 50
        assert backend.query(live, "PRAGMA freelist_count") == [(0,)]
    after = table_rows(backend, live)
    for kind in ("orders", "trades", "ledger"):
        assert {r[0] for r in after[kind]} == keep[kind], kind
        assert counts[kind] == len(rows[kind]) - len(keep[kind])
    # Every pruned entry is in its checkpoint: per (account, asset), checkpoint + remaining
    # entries == the sums of all entries before pruning.
    sums: dict[tuple[int, str], list[int]] = {}
    for _, account, _, asset, d_free, d_locked in rows["ledger"]:
        s = sums.setdefault((account, asset), [0, 0])
        s[0] += d_free
        s[1] += d_locked
    folded: dict[tuple[int, str], list[int]] = {}
    for account, asset, free, locked in backend.query(
        live, "SELECT account, asset, free, locked FROM ledger_checkpoints"
    ):
        folded[(account, asset)] = [free, locked]
    assert (
        sum(e for *_, e in backend.query(live, "SELECT entries FROM ledger_checkpoints"))
        == (counts["ledger"])
    )
    for _, account, _, asset, d_free, d_locked in after["ledger"]:
        s = folded.setdefault((account, asset), [0, 0])
        s[0] += d_free
        s[1] += d_locked
    assert folded == sums

    audit = cli("audit", *where, "--json")
    assert audit.exit_code == 0 and json.loads(audit.stdout)["ok"], audit.output
    # Pruning again finds nothing more.
    again = cli("db", "prune", *where, "--json")
    assert sum(json.loads(again.stdout)["pruned"].values()) == 0

    # Recovery gives the same state; the history windows answer as before; and the venue
    # carries on exactly like its twin that was never pruned (ids continue, no reuse).
    recovered, unpruned = backend.exchange(live), backend.exchange(twin)
    try:
        assert fingerprint(recovered) == before
        assert history(recovered) == reads
        tail = trading(4, NOW + 1000, 600)
        run(recovered, tail, 20)
        run(unpruned, tail, 20)
        assert fingerprint(recovered) == fingerprint(unpruned)
        assert history(recovered)[:3] == history(unpruned)[:3]
    finally:
        recovered.store.close()
        unpruned.store.close()


def test_pruned_store_exports_and_imports(backend: Backend, tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    exchange = backend.exchange(source)
    try:
        venue(exchange)
    finally:
        exchange.store.close()
    where = ("--data-dir", str(source), *backend.server_args(source))
    assert cli("db", "prune", *where).exit_code == 0
    dump, echo = tmp_path / "venue.jsonl", tmp_path / "echo.jsonl"
    exported = cli("db", "export", "--out", str(dump), *where, "--json")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.stdout)["rows"]["ledger_checkpoints"] > 0
    into = ("--data-dir", str(target), *backend.server_args(target))
    assert cli("db", "import", "--in", str(dump), *into).exit_code == 0
    assert cli("audit", *into).exit_code == 0
    assert cli("db", "export", "--out", str(echo), *into).exit_code == 0
    assert echo.read_bytes() == dump.read_bytes()
    moved, original = backend.exchange(target), backend.exchange(source)
    try:
        assert fingerprint(moved) == fingerprint(original)
    finally:
        moved.store.close()
        original.store.close()


def test_db_stats_shows_tables_sizes_and_retention(backend: Backend, tmp_path: Path) -> None:
    data = tmp_path / "data"
    exchange = backend.exchange(data)
    try:
        venue(exchange)
    finally:
        exchange.store.close()
    config = tmp_path / "retention.toml"
    builtin = (Path(__file__).parents[2] / "src/tradehall/default_config.toml").read_text()
    config.write_text(builtin.replace("orders_days = 90 ", "orders_days = 30 "))
    where = ("--data-dir", str(data), "--config", str(config), *backend.server_args(data))
    shown = cli("db", "stats", *where, "--json")
    assert shown.exit_code == 0, shown.output
    stats = json.loads(shown.stdout)
    tables = {t["table"]: t for t in stats["tables"]}
    assert tables["orders"]["rows"] == len(backend.query(data, "SELECT id FROM orders"))
    assert tables["ledger_checkpoints"]["rows"] == 0
    assert tables["ledger"]["bytes"] is None or tables["ledger"]["bytes"] > 0
    if backend.name == "postgresql":
        assert tables["ledger"]["bytes"] > 0
    else:
        assert stats["store"]["autoVacuum"] == "incremental"
        assert stats["folderBytes"] >= stats["store"]["pages"] * stats["store"]["pageSize"]
    assert stats["retention"]["enabled"] is True
    assert stats["retention"]["ordersDays"] == 30
    assert stats["retention"]["simulationMinutes"] == 30
    human = cli("db", "stats", *where)
    assert human.exit_code == 0 and "orders 30 d" in human.stdout


def test_retention_config_errors_name_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    builtin = (Path(__file__).parents[2] / "src/tradehall/default_config.toml").read_text()
    for wrong, problem in (
        ("orders_days = 3", "retention.orders_days: must be 0 (keep forever) or at least 7"),
        ("trades_days = -1", "retention.trades_days: must be between 0 and"),
        ("simulation_minutes = true", "retention.simulation_minutes: must be an integer"),
        ("keep_forever = 1", "retention.keep_forever: unknown key"),
    ):
        key = wrong.split(" =")[0]
        text = re.sub(rf"^{key} = .*$", wrong, builtin, flags=re.M)
        config.write_text(
            text if wrong in text else text.replace("[retention]", f"[retention]\n{wrong}")
        )
        shown = cli("db", "stats", "--data-dir", str(tmp_path / "d"), "--config", str(config))
        assert shown.exit_code != 0 and problem in shown.output, (wrong, shown.output)


def test_the_servers_pruner_walks_on_from_where_it_stopped(
    backend: Backend, tmp_path: Path
) -> None:
    """The server's task: each pass resumes each walk where the last one stopped, so it
    looks at new rows only; what it passed over and became due later for another reason than
    age goes at the next walk from the start."""
    data = tmp_path / "data"
    exchange = backend.exchange(data)
    clock = [NOW]
    committer = GroupCommitter(exchange)
    pruner = Pruner(exchange, committer, lambda: clock[0])

    def ids() -> dict[str, set[int]]:
        return {kind: {r[0] for r in rows} for kind, rows in table_rows(backend, data).items()}

    try:
        venue(exchange)
        first = asyncio.run(pruner.run_pass())
        assert ids() == expected_after(table_rows(backend, twin_of(backend, tmp_path)))
        run(exchange, trading(5, NOW + MINUTE, 2400, 1000), 50)  # 40 more minutes
        clock[0] = later = NOW + 50 * MINUTE
        due_later = expected_after(table_rows(backend, data), later)
        second = asyncio.run(pruner.run_pass())
        kept = ids()
        for kind in ("orders", "trades", "ledger"):
            assert kept[kind] >= due_later[kind], kind  # nothing before its time
            assert first[kind] > 0 and second[kind] > 0, kind
        assert kept["ledger"] == due_later["ledger"]  # entries become due by age alone
        # The next walk from the start takes what the resumed walks passed over (orders that
        # ended later, trades that were among the latest 1,000 of their market).
        pruner.cursors.clear()
        asyncio.run(pruner.run_pass())
        assert ids() == due_later
        assert fingerprint(exchange)[1]["ok"]
    finally:
        committer.close()
        exchange.store.close()


def twin_of(backend: Backend, tmp_path: Path) -> Path:
    """A store holding the same venue, never pruned (the rows the first pass started from)."""
    twin = tmp_path / "twin"
    exchange = backend.exchange(twin)
    try:
        venue(exchange)
    finally:
        exchange.store.close()
    return twin


def test_futures_history_of_the_simulation_is_pruned_and_recovery_holds(
    backend: Backend, tmp_path: Path
) -> None:
    """The simulation trading a perpetual contract for 45 simulated minutes: its ended
    futures orders past 30 minutes go (never a live document, never the newest of a kind),
    its positions, settings and contract state stay, and the audit and recovery hold."""
    data = tmp_path / "data"
    exchange = backend.exchange(data)
    clock = [NOW - 45 * MINUTE]
    committer = GroupCommitter(exchange)
    # A tick every 5 s, not the default 0.5 s: each tick waits for its own commit (on
    # PostgreSQL most of the test's time at 0.5 s), and the 45 minutes leave the same kinds of
    # documents, thousands of ended orders among them, a third of them due.
    settings = dataclasses.replace(
        load_config().simulation, seed=3, markets=("E-BTC-USDT",), tick_ms=5000
    )
    sim = Simulation(exchange, committer, lambda: clock[0], settings)

    docs = "SELECT kind, user_id, contract, id, live, doc FROM futures_docs"
    try:
        asyncio.run(_setup_and_run(sim, committer, clock, settings.tick_ms))
        before = fingerprint(exchange)
        rows = backend.query(data, docs)
        pruned = asyncio.run(Pruner(exchange, committer, lambda: clock[0]).run_pass())
    finally:
        committer.close()
        exchange.store.close()
    ended = [r for r in rows if r[0] in ("order", "trigger") and not r[4]]
    top = {kind: max(r[3] for r in rows if r[0] == kind) for kind in ("order",)}
    due = {
        (r[0], r[1], r[2], r[3])
        for r in ended
        if json.loads(r[5])["updated"] < clock[0] - SIM_HORIZON and r[3] != top.get(r[0])
    }
    assert len(due) > 100 and pruned["futures_orders"] == len(due)
    after = {(r[0], r[1], r[2], r[3]) for r in backend.query(data, docs)}
    assert after == {(r[0], r[1], r[2], r[3]) for r in rows} - due
    assert cli("audit", "--data-dir", str(data), *backend.server_args(data)).exit_code == 0
    recovered = backend.exchange(data)
    try:
        assert fingerprint(recovered) == before
    finally:
        recovered.store.close()


async def _setup_and_run(
    sim: Simulation, committer: GroupCommitter, clock: list[int], tick_ms: int
) -> None:
    await sim.setup()
    while clock[0] < NOW:
        clock[0] += tick_ms
        await sim.tick()
    await committer.flush()
