"""A signed read shows only what is committed: an answer built from memory is taken before the
read waits for the commit, so commands applied while it waits (not yet durable, a crash could
undo them) are not in it.

The store here is a real SQLite store whose commits can be held at the gate, so the test
decides which batch is on disk when. While the read waits for batch N, a fill of the order it
asks for is applied into batch N + 1; batch N then commits and the read answers, with N + 1
still held. What the read said must be what the database file holds at that moment."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client
from tradehall.exchange import Exchange
from tradehall.store.batch import Batch
from tradehall.store.sqlite import SQLiteStore


class GatedStore(SQLiteStore):
    """Commits pass one by one, as ``allow`` lets them."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "normal")
        self._turns = threading.Condition()
        self.allowed = 10**9
        self.started = 0

    def commit(self, batch: Batch) -> None:
        with self._turns:
            self.started += 1
            self._turns.notify_all()
            self._turns.wait_for(lambda: self.started <= self.allowed, timeout=20)
        super().commit(batch)

    def hold_after(self, commits: int) -> None:
        with self._turns:
            self.allowed = commits

    def allow(self, commits: int) -> None:
        with self._turns:
            self.allowed = commits
            self._turns.notify_all()

    def wait_started(self, commits: int) -> None:
        with self._turns:
            assert self._turns.wait_for(lambda: self.started >= commits, timeout=10)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.setdefault("answer", fn()), daemon=True)
    thread.start()
    return thread, out


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[GatedStore, Exchange, TestClient, Path]]:
    db = tmp_path / "tradehall.db"
    store = GatedStore(db)
    exchange = make_exchange(store=store)
    app = create_app(exchange, clock=FakeClock(), admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app) as http:
        yield store, exchange, http, db
        store.allow(10**9)
    store.close()


def trader(http: TestClient, admin: AdminClient, asset: str, amount: str) -> Client:
    user = admin.create_user()
    key = admin.create_key(user["id"])
    admin.deposit(user["id"], asset, amount)
    return Client(BASE_URL, key["apiKey"], key["secret"], http=http, clock=FakeClock())


def committed_filled(db: Path, order_id: int) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute("SELECT filled FROM orders WHERE id = ?", (order_id,)).fetchone()[0]
        )
    finally:
        conn.close()


def read_while_a_fill_waits(
    store: GatedStore,
    blocker: Callable[[], Any],
    read: Callable[[], Any],
    fill: Callable[[], Any],
    filled_in_memory: Callable[[], bool],
) -> tuple[Any, Callable[[], None]]:
    """``blocker``'s batch (N) is held on its way to disk while ``read`` waits for it; ``fill``
    is applied into batch N + 1; N then commits and ``read`` answers with N + 1 still held.
    Returns the read's answer, and what lets every commit through and waits for the rest."""
    first = store.started + 1
    store.hold_after(first - 1)
    blocked, _ = in_thread(blocker)
    store.wait_started(first)
    reading, out = in_thread(read)
    time.sleep(0.3)  # the read reaches its wait for batch N
    filling, _ = in_thread(fill)
    wait_until(filled_in_memory)  # batch N + 1, in memory only
    store.allow(first)  # N commits; N + 1 is held
    reading.join(10)
    assert "answer" in out, "the read did not answer once its batch was committed"

    def finish() -> None:
        store.allow(10**9)
        for thread in (blocked, filling):
            thread.join(10)

    return out["answer"], finish


def test_a_read_of_a_live_order_does_not_show_a_fill_still_being_committed(
    gated: tuple[GatedStore, Exchange, TestClient, Path],
) -> None:
    store, exchange, http, db = gated
    admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
    alice = trader(http, admin, "USDT", "100000")
    bob = trader(http, admin, "USDT", "100000")
    carol = trader(http, admin, "BTC", "1")
    order_id = int(alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")["orderId"])
    book = exchange.engine.spot.books["BTCUSDT"]

    answered, finish = read_while_a_fill_waits(
        store,
        lambda: bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="20000"),
        lambda: alice.get_order("BTCUSDT", order_id),
        lambda: carol.create_order("BTCUSDT", "SELL", "LIMIT", "0.003", price="30000"),
        lambda: book.orders[order_id].filled > 0,
    )
    assert (answered["status"], answered["executedQty"]) == ("NEW", "0.000000"), answered
    assert committed_filled(db, order_id) == 0
    finish()
    assert committed_filled(db, order_id) > 0


def test_a_read_of_a_live_futures_order_does_not_show_a_fill_still_being_committed(
    gated: tuple[GatedStore, Exchange, TestClient, Path],
) -> None:
    store, exchange, http, _ = gated
    admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
    admin.set_index_price("E-BTC-USDT", "30000")
    alice, bob, carol = (trader(http, admin, "USDT", "100000") for _ in range(3))
    for client in (alice, bob, carol):
        client.futures_transfer("USDT", "50000", "spot", "futures")
    placed = alice.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", "10", "30000")
    order_id = int(placed["orderId"])
    book = exchange.engine.futures.books["E-BTC-USDT"]

    answered, finish = read_while_a_fill_waits(
        store,
        lambda: bob.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", "10", "29000"),
        lambda: alice.futures_get_order("E-BTC-USDT", order_id),
        lambda: carol.futures_create_order("E-BTC-USDT", "SELL", "LIMIT", "OPEN", "3", "30000"),
        lambda: book.orders[order_id].filled > 0,
    )
    assert (answered["status"], answered["executedQty"]) == ("NEW", 0), answered
    finish()
    assert book.orders[order_id].filled == 3 and not exchange.pending
