"""Fail-stop: when the store cannot commit, the server acknowledges nothing more and answers
503 / -1001; a restart recovers the last commit. The failure is real on each backend: a
genuinely full SQLite database, and PostgreSQL sessions terminated by the database server."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, Backend, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, ApiError, Client
from tradehall.datadir import DataDir
from tradehall.engine import audit
from tradehall.store.base import Store
from tradehall.store.sqlite import SQLiteStore


class FillableStore(SQLiteStore):
    """A real SQLite store whose file can be capped at its current size: every later write
    fails with SQLITE_FULL, as on a full disk."""

    full = False

    def _conn(self) -> sqlite3.Connection:
        conn = super()._conn()
        if self.full:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn


def breakable_store(backend: Backend, data_dir: Path) -> tuple[Store, Callable[[], Any], str]:
    """A store, what breaks it for real, and what its failure message then says."""
    if backend.name == "sqlite":
        data_dir.mkdir(parents=True)
        fillable = FillableStore(DataDir(data_dir).db_path, "full")
        return fillable, lambda: setattr(fillable, "full", True), "full"
    return backend.open_store(data_dir, "full"), lambda: backend.terminate(data_dir), "connection"


def test_failed_store_stops_acknowledging_and_restart_recovers(
    backend: Backend, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    store, break_store, symptom = breakable_store(backend, data_dir)
    exchange = make_exchange(store=store)
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN)
    with TestClient(app) as http:
        admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
        user = admin.create_user("alice")
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", "100000")
        alice = Client(BASE_URL, key["apiKey"], key["secret"], http=http, clock=clock)
        kept = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="30000")

        break_store()
        last_acknowledged_hash = exchange.engine.state_hash()
        refused = None
        for i in range(500):  # write until the store fails (SQLite: the capped file is full)
            answer = alice.request(
                "POST",
                "/spot/open/sapi/v1/order",
                body={"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "volume": "0.001",
                      "price": str(20000 + i), "newClientOrderId": f"fill-{i:040d}"},
            )  # fmt: skip
            if answer.status_code != 200:
                refused = answer
                break
            last_acknowledged_hash = exchange.engine.state_hash()
        assert refused is not None, "the broken store never failed"
        assert refused.status_code == 503 and refused.json()["code"] == -1001
        assert exchange.failure is not None and symptom in exchange.failure, exchange.failure

        # From now on nothing is acknowledged: writes, signed reads, admin writes.
        sell = {"symbol": "BTCUSDT", "side": "SELL", "type": "LIMIT", "volume": "0.1", "price": "1"}
        after = alice.request("POST", "/spot/open/sapi/v1/order", body=sell)
        assert after.status_code == 503 and after.json()["code"] == -1001
        read = alice.request("GET", "/spot/open/sapi/v1/account")
        assert read.status_code == 503 and read.json()["code"] == -1001
        depth = alice.request("GET", "/spot/open/sapi/v1/depth?symbol=BTCUSDT", signed=False)
        assert depth.status_code == 503 and depth.json()["code"] == -1001
        assert admin.status()["writable"] is False
        try:
            admin.deposit(user["id"], "USDT", "1")
            raise AssertionError("a deposit was acknowledged after the store failed")
        except ApiError as exc:
            assert (exc.status, exc.code) == (503, -1001)

    store.close()
    recovered = backend.exchange(data_dir)
    try:
        assert audit.check(recovered.engine) == []
        open_ids = {o.id for o in recovered.engine.open_orders(user["id"])}
        assert int(kept["orderId"]) in open_ids
        # The recovered state is exactly the one after the last acknowledged write.
        assert recovered.engine.state_hash() == last_acknowledged_hash
    finally:
        recovered.store.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_lost_postgresql_connection_stops_a_real_server_and_restart_recovers(
    backend: Backend, server_factory: Any, tmp_path: Path
) -> None:
    """A real server process whose PostgreSQL sessions are terminated (as by a database
    restart or failover) refuses every write with 503 / -1001; restarted, it has every
    acknowledged order."""
    data_dir = tmp_path / "data"
    server = server_factory(data_dir, *backend.server_args(data_dir))
    token = DataDir(data_dir).read_token()
    assert token is not None
    with AdminClient(server.url, token) as admin:
        user = admin.create_user("bob")
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", "100000")
        with Client(server.url, key["apiKey"], key["secret"]) as bob:
            kept = [
                bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price=str(29000 + i))
                for i in range(5)
            ]
            assert backend.terminate(data_dir) >= 1
            with pytest.raises(ApiError) as refused:
                bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="28000")
            assert (refused.value.status, refused.value.code) == (503, -1001)
            with pytest.raises(ApiError) as read:
                bob.account()
            assert (read.value.status, read.value.code) == (503, -1001)
        status = admin.status()
        assert status["writable"] is False and "commit failed" in status["failure"]
    server.stop(signal.SIGKILL)

    restarted = server_factory(data_dir, *backend.server_args(data_dir))
    with AdminClient(restarted.url, token) as admin:
        assert admin.audit()["ok"]
        with Client(restarted.url, key["apiKey"], key["secret"]) as bob:
            open_ids = {o["orderId"] for o in bob.open_orders("BTCUSDT")}
    assert {o["orderId"] for o in kept} <= open_ids
    assert len(open_ids) == len(kept)  # the refused order was not applied
    assert restarted.stop() == 0
