"""The fixture of a store made by the previous release (git commit 410891b, the last one
before the journal), tests/store/data/release-410891b: a small but varied SQLite data folder,
and the facts its server answered. ``reads`` is also what the upgrade test
(tests/store/test_store_upgrade_release.py) asks this release's server, to compare.

Made with THAT release's code (this tree's code would make a store with a journal); it needs
nothing of the tests but this file:

    git worktree add /tmp/prev-release 410891b
    PYTHONPATH=/tmp/prev-release/src python tests/release_fixture.py \\
        tests/store/data/release-410891b
    git worktree remove /tmp/prev-release

It starts the old release's ``tradehall serve`` on a fresh data folder and drives it over HTTP
as a venue's users and operator would (README.md of that release): users, API keys (one bound
to addresses, one read-only, one revoked), deposits and a withdrawal, spot orders resting,
filled, partly filled and cancelled (one an IOC that found nothing) on two pairs, a margin
account with a loan, futures positions (open, and one opened and closed), futures orders
(resting, filled, a waiting conditional one), a funding settlement, the lending pool and
insurance fund funded, the admin trail of all that, klines. Then it records what the server
answered about that venue (``facts.json``: every user's balances, open orders and history,
with the keys that read them), stops the server gracefully, exports the store with the old
release's `db export` (``export.jsonl``), vacuums it with its `db vacuum`, checkpoints the
WAL, and keeps ``tradehall.db`` as SQL text (``tradehall.sql``: no database file is kept in
git; the tests rebuild it) and ``secret.key`` (the key that sealed the API secrets).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tradehall.client import AdminClient, Client

RELEASE = "410891b"
SPOT = ("BTCUSDT", "ETHUSDT")
CONTRACT = "E-BTC-USDT"
MARGIN = "BTCUSDT"
MARGIN_USER = "carol"
"""The one user with a margin account (on ``MARGIN``)."""


def tradehall(*args: str) -> list[str]:
    return [sys.executable, "-m", "tradehall", *args]


def wait_for(what: str, check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def client(url: str, user: dict[str, Any]) -> Client:
    return Client(url, user["apiKey"], user["secret"])


def make_venue(admin: AdminClient, url: str) -> dict[str, dict[str, Any]]:
    """Users, keys, funds and a little trading of every kind: each user's id, API key and
    secret by name."""
    admin.fund("pool", "USDT", "1000000", "pool-usdt")
    admin.fund("pool", "BTC", "50", "pool-btc")
    admin.fund("insurance", "USDT", "100000", "insurance-usdt")
    users: dict[str, dict[str, Any]] = {}

    def user(name: str, *, read_only: bool = False, ips: list[str] | None = None) -> int:
        made = admin.create_user(name)
        key = admin.create_key(made["id"], read_only=read_only, ips=ips)
        users[name] = {"userId": made["id"], "apiKey": key["apiKey"], "secret": key["secret"]}
        return int(made["id"])

    for name in ("alice", "bob", "carol"):
        uid = user(name, ips=["127.0.0.1", "10.0.0.0/8"] if name == "alice" else None)
        admin.deposit(uid, "USDT", "50000", f"dep-usdt-{name}")
        admin.deposit(uid, "BTC", "2", f"dep-btc-{name}")
        admin.deposit(uid, "ETH", "20", f"dep-eth-{name}")
    dave = user("dave", read_only=True)
    admin.revoke_key(admin.create_key(dave)["apiKey"])
    admin.deposit(dave, "USDT", "100", "dep-usdt-dave")
    admin.withdraw(users["bob"]["userId"], "USDT", "1234.5", "wd-usdt-bob")
    alice, bob, carol = (client(url, users[name]) for name in ("alice", "bob", "carol"))

    # Spot: asks that fill, one partly; bids resting and one cancelled; an IOC that finds nothing.
    for price in ("30000", "30100", "30200"):
        alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.5", price)
    bob.create_order("BTCUSDT", "BUY", "MARKET", "21050")  # quote amount: the 1st ask and more
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.25", "29900", client_order_id="bob-bid-1")
    gone = bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", "29800")
    bob.cancel_order("BTCUSDT", gone["orderId"])
    carol.create_order("BTCUSDT", "BUY", "LIMIT", "0.2", "29000", time_in_force="IOC")
    bob.create_order("ETHUSDT", "SELL", "LIMIT", "3", "2000")
    carol.create_order("ETHUSDT", "BUY", "LIMIT", "2", "2000")
    carol.create_order("ETHUSDT", "BUY", "LIMIT", "1.5", "1950")
    alice.create_order("ETHUSDT", "SELL", "LIMIT", "1", "2100")

    # Margin: carol moves 2,000 USDT in and buys 0.1 BTC (3,020 USDT): she borrows the rest.
    # Low leverage on purpose: years of missed interest do not bring her near liquidation.
    admin.margin_transfer(users[MARGIN_USER]["userId"], MARGIN, "USDT", "2000", "spot", "margin")
    carol.margin_create_order(MARGIN, "BUY", "LIMIT", "0.1", "30200")
    carol.margin_create_order(MARGIN, "SELL", "LIMIT", "0.05", "35000")

    # Futures: the index of E-BTC-USDT is BTCUSDT's last price, read by the scheduler.
    wait_for("the futures index", lambda: float(alice.futures_index(CONTRACT)["indexPrice"]) > 0)
    for name in ("alice", "bob", "carol"):
        admin.futures_transfer(users[name]["userId"], "USDT", "10000", "spot", "futures")
    alice.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 100, "30100", position_type=1)
    bob.futures_create_order(CONTRACT, "SELL", "LIMIT", "OPEN", 100, "30100", position_type=1)
    bob.futures_create_order(CONTRACT, "SELL", "LIMIT", "OPEN", 20, "30150", position_type=1)
    carol.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 20, "30150", position_type=2)
    alice.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 20, "30050", position_type=1)
    carol.futures_create_order(CONTRACT, "SELL", "LIMIT", "CLOSE", 20, "30050", position_type=2)
    alice.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 50, "29000", position_type=1)
    bob.futures_create_order(CONTRACT, "SELL", "LIMIT", "OPEN", 30, "31000", position_type=1)
    alice.futures_condition_order(CONTRACT, "SELL", "LIMIT", "CLOSE", 40, 1, "25000", "24900")
    admin.funding_now(CONTRACT)
    return users


def reads(
    admin: AdminClient, url: str, users: dict[str, dict[str, Any]], span: tuple[int, int]
) -> dict[str, Any]:
    """What the server answers about the venue, by user (``users``: id, API key and secret by
    name) and for the operator. The v3 history reads ask for the time ``span`` (their default
    is the last seven days)."""
    start, end = span
    answers: dict[str, Any] = {}
    for name, user in users.items():
        c = client(url, user)
        answers[name] = {
            "userId": user["userId"],
            "apiKey": user["apiKey"],
            "secret": user["secret"],
            "account": c.account(),
            "openOrders": {s: c.open_orders(s) for s in SPOT},
            "myTrades": {s: c.my_trades(s, 100) for s in SPOT},
            "historyOrders": {
                s: c.history_orders(s, 100, start_time=start, end_time=end) for s in SPOT
            },
            "myTradesV3": {s: c.my_trades_v3(s, 100, start_time=start, end_time=end) for s in SPOT},
            "marginOpenOrders": c.margin_open_orders(MARGIN),
            "marginTrades": c.margin_my_trades(MARGIN, 100),
            "futuresAccount": c.futures_account(),
            "futuresPositions": c.futures_positions(),
            "futuresOpenOrders": c.futures_open_orders(),
            "futuresOrderHistory": c.futures_order_history(CONTRACT, 100),
            "futuresTrades": c.futures_my_trades(CONTRACT, 100),
            "futuresProfitHistory": c.futures_profit_history(CONTRACT, 100),
            "triggerOrders": c.futures_trigger_order_list(CONTRACT),
        }
    answers[MARGIN_USER]["marginAccount"] = admin.margin_account(
        users[MARGIN_USER]["userId"], MARGIN
    )
    public = Client(url)
    return {
        "users": answers,
        "adminUsers": admin.list_users(),
        "adminLog": admin.admin_log(1000),
        "audit": admin.audit(),
        "trades": {s: public.trades(s, 100) for s in SPOT},
        "klines": {s: public.klines(s, "1month", 300) for s in SPOT},
        "futuresKlines": public.futures_klines(CONTRACT, "1month", 300),
    }


def main(out: Path) -> None:
    if importlib.util.find_spec("tradehall.store.journal") is not None:
        raise SystemExit(f"run this with release {RELEASE}'s code on PYTHONPATH (see above)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        serve = tradehall("serve", "--port", "0", "--data-dir", str(data), "--json")
        proc = subprocess.Popen([*serve, "--no-rate-limits"], stdout=subprocess.PIPE, env=env)
        try:
            assert proc.stdout is not None
            url = json.loads(proc.stdout.readline())["url"]
            token = (data / "admin.token").read_text().strip()
            admin = AdminClient(url, token)
            wait_for("the server", lambda: Client(url).ping() == {})
            start = int(time.time() * 1000)
            users = make_venue(admin, url)
            end = int(time.time() * 1000)
            report: dict[str, Any] = {"release": RELEASE, "madeBetween": [start, end]}
            report |= reads(admin, url, users, (start, end))
            assert report["audit"]["ok"], report["audit"]
        finally:
            proc.send_signal(signal.SIGTERM)
            if proc.wait(30) != 0:
                raise SystemExit(f"the server exited with {proc.returncode}")
        for command in (("db", "export", "--out", str(out / "export.jsonl")), ("db", "vacuum")):
            if subprocess.run(tradehall(*command, "--data-dir", str(data)), env=env).returncode:
                raise SystemExit(f"{' '.join(command[:2])} failed")
        db = sqlite3.connect(data / "tradehall.db")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        if (data / "tradehall.db-wal").exists() and (data / "tradehall.db-wal").stat().st_size:
            raise SystemExit("the WAL file was not checkpointed")
        db = sqlite3.connect(data / "tradehall.db")
        mode = db.execute("PRAGMA auto_vacuum").fetchone()[0]
        dump = [HEADER, f"PRAGMA auto_vacuum={mode};", *db.iterdump()]
        db.close()
        (out / "tradehall.sql").write_text("\n".join(dump) + "\n")
        shutil.copyfile(data / "secret.key", out / "secret.key")
        (out / "facts.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")


HEADER = (
    "-- The previous release's tradehall.db (schema version 8) as SQL text: tests rebuild the file."
)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} OUTPUT-FOLDER")
    main(Path(sys.argv[1]))
