"""Crash safety: kill -9 a real server in the middle of concurrent signed trading, restart it on
the same data folder, and prove the promise: every acknowledged order and cancel is there in the
state its response said (or a later one), nothing unacknowledged was applied twice, and every
invariant holds. Runs on every store backend (the ``backend`` parameter)."""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support import Backend
from tradehall.client import AdminClient, ApiError, Client

LATER = {
    "NEW": {"NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED"},
    "PARTIALLY_FILLED": {"PARTIALLY_FILLED", "FILLED", "CANCELED"},
    "FILLED": {"FILLED"},
    "CANCELED": {"CANCELED"},
    "REJECTED": {"REJECTED"},
}


@dataclass
class Ledger:
    """What the load generator was told: acknowledged orders, cancels, and the unanswered."""

    placed: dict[str, dict[str, Any]] = field(default_factory=dict)
    canceled: set[str] = field(default_factory=set)
    unanswered_client_ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def trader_loop(client: Client, tag: str, seed: int, stop: threading.Event, log: Ledger) -> None:
    rng = random.Random(seed)
    mine: list[str] = []
    n = 0
    while not stop.is_set():
        n += 1
        action = rng.random()
        client_id = f"{tag}-{n}"
        try:
            if action < 0.6 or not mine:
                side = rng.choice(["BUY", "SELL"])
                price = str(30000 + rng.randint(-20, 20))
                order = client.create_order(
                    "BTCUSDT", side, "LIMIT", f"0.{rng.randint(1, 50):03d}", price=price,
                    client_order_id=client_id,
                )  # fmt: skip
                with log.lock:
                    log.placed[order["orderId"]] = order
                if order["status"] in ("NEW", "PARTIALLY_FILLED"):
                    mine.append(order["orderId"])
            elif action < 0.9:
                order_id = mine.pop(rng.randrange(len(mine)))
                try:
                    answer = client.cancel_order("BTCUSDT", order_id)
                except ApiError as exc:
                    if exc.code in (-1145, -2013):  # filled meanwhile: not a failure
                        continue
                    raise
                with log.lock:
                    log.canceled.add(answer["orderId"])
            else:
                side = rng.choice(["BUY", "SELL"])
                volume = "300" if side == "BUY" else "0.010"
                order = client.create_order(
                    "BTCUSDT", side, "MARKET", volume, client_order_id=client_id
                )
                with log.lock:
                    log.placed[order["orderId"]] = order
        except ApiError:
            # The server answered with an error: acknowledged as refused, nothing applied.
            continue
        except Exception:
            # No answer (the server died mid-request): the outcome is unknown.
            with log.lock:
                log.unanswered_client_ids.add(client_id)
            return


def run_and_kill(
    server_factory: Any, backend: Backend, data_dir: Path, kill_after: float, seed: int
) -> Ledger:
    server = server_factory(data_dir, *backend.server_args(data_dir))
    admin_token = (data_dir / "admin.token").read_text().strip()
    admin = AdminClient(server.url, admin_token)
    clients = []
    for i in range(4):
        user = admin.create_user(f"crash-{seed}-{i}")
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", "200000")
        admin.deposit(user["id"], "BTC", "10")
        clients.append(Client(server.url, key["apiKey"], key["secret"], timeout=5.0))
    log = Ledger()
    stop = threading.Event()
    threads = [
        threading.Thread(target=trader_loop, args=(c, f"s{seed}t{i}", seed * 10 + i, stop, log))
        for i, c in enumerate(clients)
    ]
    for t in threads:
        t.start()
    time.sleep(kill_after)
    server.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(10)
    for c in clients:
        c.close()
    admin.close()
    return log


def verify_after_restart(
    server_factory: Any, backend: Backend, data_dir: Path, log: Ledger
) -> None:
    server = server_factory(data_dir, *backend.server_args(data_dir))
    token = (data_dir / "admin.token").read_text().strip()
    with AdminClient(server.url, token) as admin:
        report = admin.audit()
        assert report["ok"], report["problems"]
    assert server.stop() == 0

    rows = {
        str(r[0]): (r[1], r[2], r[3])
        for r in backend.query(data_dir, "SELECT id, status, filled, client_id FROM orders")
    }
    duplicated = backend.query(
        data_dir,
        "SELECT client_id, COUNT(*) FROM orders WHERE client_id != ''"
        " GROUP BY client_id HAVING COUNT(*) > 1",
    )
    assert duplicated == [], "an order was applied twice"
    assert log.placed, "the load generator placed nothing before the kill"
    for order_id, answer in log.placed.items():
        assert order_id in rows, f"acknowledged order {order_id} was lost"
        status, _filled, client_id = rows[order_id]
        assert status in LATER[answer["status"]], (order_id, answer["status"], status)
        assert client_id == answer["clientOrderId"]
    for order_id in log.canceled:
        assert rows[order_id][0] == "CANCELED", f"acknowledged cancel of {order_id} was lost"


@pytest.mark.parametrize("kill_after,seed", [(0.6, 1), (1.3, 2), (2.1, 3)])
def test_kill_9_under_load_loses_nothing_acknowledged(
    server_factory: Any, backend: Backend, tmp_path: Path, kill_after: float, seed: int
) -> None:
    data_dir = tmp_path / "data"
    log = run_and_kill(server_factory, backend, data_dir, kill_after, seed)
    verify_after_restart(server_factory, backend, data_dir, log)


def test_repeated_crashes_on_one_folder_keep_every_invariant(
    server_factory: Any, backend: Backend, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    logs = [
        run_and_kill(server_factory, backend, data_dir, delay, 10 + i)
        for i, delay in enumerate((0.5, 0.9))
    ]
    merged = Ledger()
    for log in logs:
        merged.placed.update(log.placed)
        merged.canceled |= log.canceled
        merged.unanswered_client_ids |= log.unanswered_client_ids
    verify_after_restart(server_factory, backend, data_dir, merged)
