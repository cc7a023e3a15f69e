"""Fail-stop: when the store cannot commit (here a genuinely full SQLite database), the server
acknowledges nothing more and answers 503 / -1001; a restart recovers the last commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, ApiError, Client
from tradehall.engine import audit
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


def test_full_disk_stops_acknowledging_and_restart_recovers(tmp_path: Path) -> None:
    db_path = tmp_path / "tradehall.db"
    store = FillableStore(db_path, "full")
    store.migrate()
    exchange = make_exchange(db_path)
    exchange.store.close()
    exchange.store = store
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN)
    with TestClient(app) as http:
        admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
        user = admin.create_user("alice")
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", "100000")
        alice = Client(BASE_URL, key["apiKey"], key["secret"], http=http, clock=clock)
        kept = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="30000")

        store.full = True
        last_acknowledged_hash = exchange.engine.state_hash()
        refused = None
        for i in range(500):  # write until SQLite reports the capped file full
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
        assert refused is not None, "the capped database never filled up"
        assert refused.status_code == 503 and refused.json()["code"] == -1001
        assert exchange.failure is not None and "full" in exchange.failure

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
    recovered = make_exchange(db_path)
    try:
        assert audit.check(recovered.engine) == []
        open_ids = {o.id for o in recovered.engine.open_orders(user["id"])}
        assert int(kept["orderId"]) in open_ids
        # The recovered state is exactly the one after the last acknowledged write.
        assert recovered.engine.state_hash() == last_acknowledged_hash
    finally:
        recovered.store.close()
