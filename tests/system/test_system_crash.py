"""Crash safety: kill -9 a real server in the middle of concurrent signed trading, restart it on
the same data folder, and prove the promise: every acknowledged order and cancel is there in the
state its response said (or a later one), nothing unacknowledged was applied twice, and every
invariant holds. Spot and perpetual futures trade side by side in every run (two threads each).
Runs on every store backend (the ``backend`` parameter)."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from support import Backend
from tradehall.client import AdminClient, ApiError, Client
from tradehall.store.postgres import PostgresStore
from tradehall.store.sqlite import SQLiteStore

LATER = {
    "NEW": {"NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED"},
    "PARTIALLY_FILLED": {"PARTIALLY_FILLED", "FILLED", "CANCELED"},
    "FILLED": {"FILLED"},
    "CANCELED": {"CANCELED"},
    "REJECTED": {"REJECTED"},
}
CONTRACT = "E-BTC-USDT"
"""Linear, 0.001 BTC a contract, its index the BTCUSDT spot price the spot traders make."""
JSON_TEXT = {"sqlite": SQLiteStore.json_text, "postgresql": PostgresStore.json_text}
"""Each backend's SQL for a field of a ``futures_docs`` JSON document."""
SPOT_TRADERS = 2
FUTURES_TRADERS = 2


@dataclass
class Ledger:
    """What the load generators were told: acknowledged orders, cancels, and the unanswered."""

    placed: dict[str, dict[str, Any]] = field(default_factory=dict)
    canceled: set[str] = field(default_factory=set)
    unanswered_client_ids: set[str] = field(default_factory=set)
    futures_placed: dict[str, str] = field(default_factory=dict)
    """Acknowledged futures orders (the answer is only the id): orderId -> clientOrderId."""
    futures_canceled: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def merge(self, other: Ledger) -> None:
        self.placed.update(other.placed)
        self.canceled |= other.canceled
        self.unanswered_client_ids |= other.unanswered_client_ids
        self.futures_placed.update(other.futures_placed)
        self.futures_canceled |= other.futures_canceled


def run_trader(step: Callable[[str], None], tag: str, stop: threading.Event, log: Ledger) -> None:
    """Call ``step(client_id)`` until stopped or the server stops answering. An error answer
    (4xx) is a refusal: nothing was applied. No answer, or a 5xx (what the fail-stop server
    answers when the commit did not happen), leaves the outcome unknown: the loop ends."""
    n = 0
    while not stop.is_set():
        n += 1
        client_id = f"{tag}-{n}"
        try:
            step(client_id)
            continue
        except ApiError as exc:
            if exc.status < 500:
                continue
        except Exception:
            pass
        with log.lock:
            log.unanswered_client_ids.add(client_id)
        return


def spot_trader(client: Client, rng: random.Random, log: Ledger) -> Callable[[str], None]:
    mine: list[str] = []

    def step(client_id: str) -> None:
        action = rng.random()
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
                    return
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

    return step


def closable_positions(client: Client) -> list[tuple[str, int]]:
    """(side, contracts not yet covered by CLOSE orders) of the caller's open positions."""
    found = []
    for account in client.futures_account()["account"]:
        for group in account["positionVos"]:
            if group["contractName"] != CONTRACT:
                continue
            for position in group["positions"]:
                free = Decimal(str(position["volume"])) - Decimal(
                    str(position["pendingCloseVolume"])
                )
                if free > 0:
                    found.append((position["side"], int(free)))
    return found


def futures_trader(client: Client, rng: random.Random, log: Ledger) -> Callable[[str], None]:
    """LIMIT OPEN orders on both sides around 30000 (so the two traders meet), MARKET OPEN
    orders, LIMIT and MARKET CLOSE orders of the positions held, and cancels."""
    mine: list[str] = []

    def place(client_id: str, side: str, kind: str, action: str, volume: Any, price: Any) -> str:
        answer = client.futures_create_order(
            CONTRACT, side, kind, action, volume, price, client_order_id=client_id
        )
        order_id = str(answer["orderId"])
        with log.lock:
            log.futures_placed[order_id] = client_id
        return order_id

    def limit_price(side: str) -> str:
        if rng.random() < 0.3:  # away from the crossing range: it rests, to be cancelled
            away = rng.randint(21, 120)
            return f"{30000 - away if side == 'BUY' else 30000 + away}.{rng.randint(0, 9)}"
        return f"{30000 + rng.randint(-20, 20)}.{rng.randint(0, 9)}"

    def step(client_id: str) -> None:
        action = rng.random()
        if action < 0.5 or not mine:
            side = rng.choice(["BUY", "SELL"])
            volume = rng.randint(1, 20)
            mine.append(place(client_id, side, "LIMIT", "OPEN", volume, limit_price(side)))
        elif action < 0.75:
            order_id = mine.pop(rng.randrange(len(mine)))
            try:
                answer = client.futures_cancel_order(CONTRACT, order_id)
            except ApiError as exc:
                if exc.code in (-1145, -2013):  # filled meanwhile: not a failure
                    return
                raise
            with log.lock:
                log.futures_canceled.add(str(answer["orderId"]))
        elif action < 0.85:
            # A MARKET OPEN's volume is its value in USDT: about 10 contracts.
            place(client_id, rng.choice(["BUY", "SELL"]), "MARKET", "OPEN", "300", None)
        else:
            positions = closable_positions(client)
            if not positions:
                return
            held, free = rng.choice(positions)
            side = "SELL" if held == "BUY" else "BUY"
            volume = rng.randint(1, free)
            if rng.random() < 0.5:
                mine.append(place(client_id, side, "LIMIT", "CLOSE", volume, limit_price(side)))
            else:
                place(client_id, side, "MARKET", "CLOSE", volume, None)

    return step


def run_and_kill(
    server_factory: Any, backend: Backend, data_dir: Path, kill_after: float, seed: int
) -> Ledger:
    server = server_factory(data_dir, *backend.server_args(data_dir))
    admin_token = (data_dir / "admin.token").read_text().strip()
    admin = AdminClient(server.url, admin_token)
    admin.set_index_price(CONTRACT, "30000")  # no orders without an index; spot moves it on
    log = Ledger()
    stop = threading.Event()
    clients = []
    threads = []
    for i in range(SPOT_TRADERS + FUTURES_TRADERS):
        user = admin.create_user(f"crash-{seed}-{i}")
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", "200000")
        admin.deposit(user["id"], "BTC", "10")
        client = Client(server.url, key["apiKey"], key["secret"], timeout=5.0)
        clients.append(client)
        rng = random.Random(seed * 10 + i)
        if i < SPOT_TRADERS:
            step, tag = spot_trader(client, rng, log), f"s{seed}t{i}"
        else:
            # Half through the operator's transfer, half through the user's own.
            if i % 2:
                admin.futures_transfer(user["id"], "USDT", "100000", "spot", "futures")
            else:
                client.futures_transfer("USDT", "100000", "spot", "futures")
            step, tag = futures_trader(client, rng, log), f"s{seed}f{i}"
        threads.append(threading.Thread(target=run_trader, args=(step, tag, stop, log)))
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
        report = admin.audit()  # spot, margin and futures invariants
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

    verify_futures(backend, data_dir, log)


def verify_futures(backend: Backend, data_dir: Path, log: Ledger) -> None:
    """The futures orders stored after the restart (documents in ``futures_docs``) against
    what the futures traders were told."""
    text = JSON_TEXT[backend.name].format
    stored = {
        str(order_id): (status, client_id, int(live))
        for order_id, status, client_id, live in backend.query(
            data_dir,
            f"SELECT id, {text(field='status')}, {text(field='client_id')}, live"
            " FROM futures_docs WHERE kind = 'order'",
        )
    }
    client_ids = [client_id for _status, client_id, _live in stored.values() if client_id]
    assert len(client_ids) == len(set(client_ids)), "a futures order was applied twice"
    assert log.futures_placed, "the futures traders placed nothing before the kill"
    for order_id, client_id in log.futures_placed.items():
        assert order_id in stored, f"acknowledged futures order {order_id} was lost"
        status, stored_client_id, live = stored[order_id]
        # An acknowledged placement is at least NEW (no POST_ONLY is sent, so never REJECTED).
        assert status in LATER["NEW"], (order_id, status)
        assert live == (status in ("NEW", "PARTIALLY_FILLED")), (order_id, status, live)
        assert stored_client_id == client_id, (order_id, client_id, stored_client_id)
    for order_id in log.futures_canceled:
        assert stored[order_id][0] == "CANCELED", f"acknowledged cancel of {order_id} was lost"


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
    merged = Ledger()
    for i, delay in enumerate((0.5, 0.9)):
        merged.merge(run_and_kill(server_factory, backend, data_dir, delay, 10 + i))
    verify_after_restart(server_factory, backend, data_dir, merged)
