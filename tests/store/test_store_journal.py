"""The journal as the durable record: what a commit appends, how the projector builds the
tables from it, and how the audit checks the tables against a replay of it."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import TEST_SECRET_BOX, Env, journaled_store, make_exchange
from tradehall.codes import Reject
from tradehall.config import load_config
from tradehall.engine.commands import CancelOrder, Deposit, PlaceOrder
from tradehall.exchange import Exchange
from tradehall.projector import Projector
from tradehall.store.base import ProjectionMoved, StoreError
from tradehall.store.batch import AdminLogRow, Batch, KeyRow, UserRow
from tradehall.store.journal import JSON, MSGPACK, Entry, Fenced, StateNoted, decode, encode
from tradehall.store.journaled import JournaledStore, ProjectionBehind


def test_every_entry_kind_round_trips() -> None:
    entries: list[Entry] = [
        PlaceOrder(1, 2, "BTCUSDT", "BUY", "LIMIT", 300, 4, client_id="c"),
        CancelOrder(5, 2, "BTCUSDT", order_id=7),
        Deposit(6, 2, "USDT", 10**20, "tx"),
        UserRow(3, "alice", 9),
        KeyRow("k", "sealed", 3, False, ("10.0.0.0/8",), 9, None),
        AdminLogRow(1, "local", "cli", "deposit", "{}", "ok", 0, "{}"),
        StateNoted("selfservice.key.k", 12),
    ]
    fmt, body = encode(entries)
    assert fmt == JSON  # 10**20 is beyond MessagePack's integers
    assert decode(body, fmt) == entries
    small = entries[:2]
    fmt, body = encode(small)
    assert fmt == MSGPACK and decode(body, fmt) == small


def test_a_damaged_record_is_refused_naming_the_problem() -> None:
    with pytest.raises(StoreError, match="a journal record could not be read"):
        decode(b"\x91\x92\x63\xc0")  # entry kind 99


def test_two_writers_can_never_both_append_the_same_record(tmp_path: Path) -> None:
    """The two fences a second engine meets: the sequence number is the journal's primary
    key, and an append succeeds only while the epoch it was claimed in is the latest."""
    first, second = (
        journaled_store(tmp_path / "tradehall.db"),
        journaled_store(tmp_path / "tradehall.db"),
    )
    first.migrate()
    first.start_appending()
    batch = Batch(entries=[Deposit(1, 1, "USDT", 5, "a")])
    first.commit(batch)
    assert batch.journal_seq == 1
    second.migrate()
    second.start_appending()  # claims a later epoch: the first engine is fenced off
    assert second.epoch == first.epoch + 1 and second.head == 1
    with pytest.raises(Fenced, match="no longer leads"):
        first.commit(Batch(entries=[Deposit(1, 1, "USDT", 5, "b")]))
    second.commit(Batch(entries=[Deposit(1, 1, "USDT", 5, "c")]))
    second.head = 1  # as if it had missed record 2
    with pytest.raises(StoreError, match="journal append failed"):
        second.commit(Batch(entries=[Deposit(1, 1, "USDT", 5, "d")]))
    epochs = sqlite3.connect(tmp_path / "journal.db").execute("SELECT seq, epoch FROM journal")
    assert epochs.fetchall() == [(1, first.epoch), (2, second.epoch)]
    first.close()
    second.close()


def apply_some(exchange: Exchange, count: int) -> int:
    user = exchange.create_user(f"u{count}", 1)
    exchange.apply(Deposit(1, user.id, "USDT", 10**12, f"tx-{count}"))
    for i in range(count):
        exchange.apply(PlaceOrder(2, user.id, "BTCUSDT", "BUY", "LIMIT", 2_000_000 + i, 1_000))
    exchange.commit_now()
    return user.id


def plain_exchange(store: JournaledStore) -> Exchange:
    """An exchange of the engine process whose tables nobody projects (no inline projector)."""
    store.migrate()
    store.start_appending()
    exchange = Exchange(load_config(), store, secret_box=TEST_SECRET_BOX)
    exchange.recover()
    return exchange


def test_the_projector_builds_the_tables_and_recovery_replays_what_it_has_not(
    tmp_path: Path,
) -> None:
    store = journaled_store(tmp_path / "tradehall.db")
    live = plain_exchange(store)
    apply_some(live, 5)
    assert (store.head, store.projected()) == (1, 0)
    # A restart before the projector ran: the tables are empty, the journal has it all.
    store.close()
    store = journaled_store(tmp_path / "tradehall.db")
    again = plain_exchange(store)
    assert again.engine.state_hash() == live.engine.state_hash()
    projector = Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX)
    projector.catch_up()
    assert projector.seq == 1 and store.projected() == 1
    # The tables alone now give the same state, and a second projector finds nothing to do.
    tables = make_exchange(store=store.projections)
    assert tables.engine.state_hash() == live.engine.state_hash()
    late = Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX)
    assert late.step() == 0


def test_a_projector_that_lost_the_race_writes_nothing(tmp_path: Path) -> None:
    store = journaled_store(tmp_path / "tradehall.db")
    live = plain_exchange(store)
    apply_some(live, 3)
    a = Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX)
    b = Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX)
    a.load()
    b.load()
    assert a.step() == 1
    assert b.step() == 0  # its commit found the tables moved: rolled back, reloads
    orders = store.projections._conn().execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    assert orders == 3
    with pytest.raises(ProjectionMoved):
        batch = Batch(projects=(0, 1))
        store.projections.commit(batch)


def test_a_history_read_waits_for_the_projections_then_says_why_not(tmp_path: Path) -> None:
    store = journaled_store(tmp_path / "tradehall.db")
    store.wait_s = 0.05
    live = plain_exchange(store)
    user = apply_some(live, 1)
    with pytest.raises(ProjectionBehind, match="history is catching up"):
        store.account_orders(user, None, 0, 10**13, 10)
    Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX).catch_up()
    assert len(store.account_orders(user, None, 0, 10**13, 10)) == 1


def test_the_audit_checks_the_tables_against_a_replay_of_the_journal(env: Env) -> None:
    trader = env.trader({"USDT": "100000"})
    for price in ("20000", "20001", "20002"):
        trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.5", price=price)
    assert env.audit()["ok"]
    tables = sqlite3.connect(env.db_path)
    with tables:
        tables.execute("UPDATE orders SET price = price + 1 WHERE status = 'NEW'")
    report = env.admin.audit()
    assert not report["ok"]
    assert any(p.startswith("journal: the tables") for p in report["problems"]), report


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 40)), min_size=1, max_size=30))
def test_projections_and_recovery_equal_the_live_engine(steps: list[tuple[int, int]]) -> None:
    """Any stream of placements and cancels, committed in batches of any size: the tables
    the projector writes, and a recovery from them plus the journal, hold the live state."""
    import tempfile

    folder = Path(tempfile.mkdtemp())
    store = journaled_store(folder / "tradehall.db")
    live = plain_exchange(store)
    user = live.create_user("p", 1)
    live.apply(Deposit(1, user.id, "USDT", 10**14, "t"))
    live.apply(Deposit(1, user.id, "BTC", 10**12, "b"))
    projector = Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX)
    placed: list[int] = []
    for kind, n in steps:
        if kind == 0 or not placed:
            side = "BUY" if n % 2 else "SELL"
            price = 3_000_000 + (n if side == "SELL" else -n) * 100
            order = PlaceOrder(2, user.id, "BTCUSDT", side, "LIMIT", price, n * 1_000)
            placed.append(live.apply(order).id)
        elif kind == 1:
            with contextlib.suppress(Reject):  # filled meanwhile
                live.apply(CancelOrder(3, user.id, "BTCUSDT", order_id=placed.pop(n % len(placed))))
        else:
            live.commit_now()
            if n % 3 == 0:
                projector.step()
    live.commit_now()
    recovered = plain_exchange(journaled_store(folder / "tradehall.db"))
    assert recovered.engine.state_hash() == live.engine.state_hash()
    projector.catch_up()
    tables = make_exchange(store=store.projections)
    assert tables.engine.state_hash() == live.engine.state_hash()


def test_the_journal_is_compacted_behind_the_projections_only(tmp_path: Path) -> None:
    import asyncio

    from tradehall.config import RetentionSettings
    from tradehall.retention import directly, prune_pass

    store = journaled_store(tmp_path / "tradehall.db")
    live = plain_exchange(store)
    for n in range(4):
        apply_some(live, n + 1)
    assert store.head == 4
    Projector(load_config(), store.projections, store.journal, TEST_SECRET_BOX).catch_up()
    # As if the tables stood at record 2 (a projector behind).
    store.projections._conn().execute(
        "UPDATE engine_state SET value = 2 WHERE name = ?", ("journal.projected",)
    )
    later = 10**13 + 2 * 3_600_000
    settings = RetentionSettings(journal_hours=1)
    done = asyncio.run(prune_pass(live, settings, later, directly))
    assert done["journalRecords"] == 2  # records 1 and 2: the tables hold them
    assert store.journal.first() == 3 and store.journal.head() == 4
    # Too recent: kept whatever the tables hold.
    store.projections._conn().execute(
        "UPDATE engine_state SET value = 4 WHERE name = ?", ("journal.projected",)
    )
    assert asyncio.run(prune_pass(live, settings, 0, directly))["journalRecords"] == 0
    assert asyncio.run(prune_pass(live, settings, later, directly))["journalRecords"] == 2
    assert store.journal.first() is None and store.journal.head() == 4  # the head stays
    live.apply(Deposit(9, 1, "USDT", 1, "after"))
    live.commit_now()
    assert store.head == 5
    store.close()
    again = plain_exchange(journaled_store(tmp_path / "tradehall.db"))
    assert again.store.head == 5  # type: ignore[attr-defined]


def test_an_offline_command_claims_an_epoch_only_when_it_writes(tmp_path: Path) -> None:
    from tradehall.projector import open_exchange

    for writes in (False, True, False):
        store = journaled_store(tmp_path / "tradehall.db")
        exchange = open_exchange(load_config(), store, TEST_SECRET_BOX, inline=True)
        if writes:
            exchange.create_user("w", 1)
            exchange.commit_now()
            assert store.epoch == 1
        else:
            assert store.epoch == 0
        store.close()
    meta = sqlite3.connect(tmp_path / "journal.db").execute("SELECT value FROM journal_meta")
    assert meta.fetchall() == [(1,)]
