"""Test support shared by every test package: an in-process exchange behind the real app
(HTTP through Starlette's TestClient), and real server processes. Fixtures live in conftest.py;
tests import helpers from here (``from support import ...``), never from a conftest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from tradehall.client import AdminClient, Client
from tradehall.config import load_config
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

ADMIN_TOKEN = "test-admin-token"
BASE_URL = "http://testserver"


class FakeClock:
    """Milliseconds that only move when a test moves them (server and clients share it)."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class ClientClock:
    """A client's view of a FakeClock: each signature gets a distinct timestamp a few ms in the
    past (inside the default recvWindow), so two identical requests are not one replayed."""

    def __init__(self, server: FakeClock) -> None:
        self.server = server
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.server.now - self.calls % 4000


@dataclass
class Env:
    """One exchange, its app and helpers to make funded traders."""

    http: TestClient
    exchange: Exchange
    clock: FakeClock
    admin: AdminClient
    db_path: Path
    clients: list[Client] = field(default_factory=list)

    def trader(self, funds: dict[str, str] | None = None, *, read_only: bool = False) -> Client:
        user = self.admin.create_user()
        key = self.admin.create_key(user["id"], read_only=read_only)
        for asset, amount in (funds or {}).items():
            self.admin.deposit(user["id"], asset, amount)
        client = Client(
            BASE_URL, key["apiKey"], key["secret"], http=self.http, clock=ClientClock(self.clock)
        )
        client.user_id = user["id"]  # type: ignore[attr-defined]
        self.clients.append(client)
        return client

    def public(self) -> Client:
        return Client(BASE_URL, http=self.http, clock=self.clock)

    def audit(self) -> dict[str, Any]:
        report = self.admin.audit()
        assert report["ok"], report["problems"]
        return report


def make_exchange(db_path: Path) -> Exchange:
    store = SQLiteStore(db_path, "normal")
    store.migrate()
    exchange = Exchange(load_config(), store, check_invariants=True)
    exchange.recover()
    return exchange


# --------------------------------------------------------------------------- real processes


@dataclass
class ServerProcess:
    data_dir: Path
    proc: subprocess.Popen[str]
    url: str
    demo: dict[str, Any] | None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout)


def tradehall_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tradehall", *args]


def start_server(data_dir: Path, *extra: str, timeout: float = 20.0) -> ServerProcess:
    """Start `tradehall serve` on a free loopback port and wait until it announces itself."""
    proc = subprocess.Popen(
        tradehall_command("serve", "--port", "0", "--data-dir", str(data_dir), "--json", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(5)
        raise RuntimeError(f"server did not start: {proc.stderr.read() if proc.stderr else ''}")
    info = json.loads(line)
    server = ServerProcess(data_dir, proc, info["url"], info.get("demo"))
    while time.monotonic() < deadline:
        try:
            Client(server.url, timeout=1.0).ping()
            return server
        except Exception:
            time.sleep(0.05)
    server.stop(signal.SIGKILL)
    raise RuntimeError("server did not answer in time")
