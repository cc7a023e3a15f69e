"""Test support shared by every test package: an in-process exchange behind the real app
(HTTP through Starlette's TestClient), and real server processes. Fixtures live in conftest.py;
tests import helpers from here (``from support import ...``), never from a conftest."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.testclient import TestClient
from starlette.types import ASGIApp

from tradehall.api.app import create_app
from tradehall.api.http import AppState
from tradehall.client import AdminClient, Client
from tradehall.cluster import DEFAULT_READ_CACHE_MS
from tradehall.cluster.engine_service import EngineService
from tradehall.cluster.gateway import Gateway
from tradehall.cluster.gateway_app import create_gateway_app
from tradehall.config import Config, LimitSettings, load_config
from tradehall.datadir import DataDir
from tradehall.exchange import Exchange
from tradehall.projector import open_exchange
from tradehall.secretbox import SecretBox
from tradehall.store.base import Store
from tradehall.store.factory import open_projections, open_store
from tradehall.store.journal import Journal
from tradehall.store.journaled import JournaledStore
from tradehall.store.sql import SQLStore
from tradehall.store.sqlite import SQLiteStore

ADMIN_TOKEN = "test-admin-token"
TEST_SECRET_BOX_KEY = b"tradehall-test-secret-key-32byte"
TEST_SECRET_BOX = SecretBox(TEST_SECRET_BOX_KEY)
"""One sealing key for every in-process test exchange, so a store can be reopened."""
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

    gateway: Gateway | None = None
    """In the split topology: the gateway ``http`` reaches (the admin API is the engine's)."""
    engine: TestClient | None = None
    """In the split topology: the engine process's app (admin API, scheduler)."""

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
        report: dict[str, Any] = self.admin.audit()
        assert report["ok"], report["problems"]
        return report

    def metrics(self) -> Samples:
        """The exchange's ``GET /metrics`` (the engine's, in the split topology)."""
        return scrape(self.engine or self.http)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Prometheus samples by (name, labels)."""


def scrape(http: TestClient) -> Samples:
    """``GET /metrics`` with the admin token, read with the Prometheus library's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = http.get("/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


class SplitAdmin(AdminClient):
    """The engine's admin API, for tests on the split topology: a key it creates is returned
    once the gateway has heard of it (just after its commit), as a client would wait for it,
    and every call returns once the gateway has heard the engine's market notes up to then
    (an admin call does not pass through the gateway, so its reply cannot tell the gateway
    that public data changed: without the wait, a public read right after it could still be
    answered from the gateway's read cache)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: TestClient,
        gateway: Gateway,
        engine: EngineService,
    ) -> None:
        super().__init__(base_url, token, http=http)
        self.gateway = gateway
        self.engine = engine

    def request(self, *args: Any, **kwargs: Any) -> Any:
        response = super().request(*args, **kwargs)
        self.caught_up()
        return response

    def caught_up(self) -> None:
        """Wait until the gateway's read cache heard every market note published so far."""
        reads, engine = self.gateway.reads, self.engine
        if reads is None or engine.notes == 0:
            return
        deadline = time.monotonic() + 10
        # Caught up: every note heard, or everything kept forgotten (the engine's reset).
        while reads.epoch is not None and (
            reads.epoch != engine.epoch or reads.heard < engine.notes
        ):
            assert time.monotonic() < deadline, "the gateway did not hear the market notes"
            time.sleep(0.001)

    def create_key(
        self, user_id: int, *, read_only: bool = False, ips: list[str] | None = None
    ) -> Any:
        created = super().create_key(user_id, read_only=read_only, ips=ips)
        deadline = time.monotonic() + 10
        while created["apiKey"] not in self.gateway.keys:
            assert time.monotonic() < deadline, "the gateway did not hear of the key"
            time.sleep(0.002)
        return created


@contextlib.contextmanager
def split_apps(
    exchange: Exchange,
    clock: FakeClock,
    *,
    read_cache_ms: int = DEFAULT_READ_CACHE_MS,
    limits: LimitSettings | None = None,
    wrap: Callable[[ASGIApp], ASGIApp] = lambda app: app,
) -> Iterator[tuple[TestClient, EngineService, Gateway, TestClient]]:
    """The engine process's app (admin API) with its NATS service, and a gateway's app (the
    client API, its rate limits ``limits``, off by default; wrapped in ``wrap``), each on its
    own event loop as in two processes, over the test NATS. The gateway serves the
    self-service accounts when the exchange's configuration does."""
    subject = f"test-{uuid.uuid4().hex}"
    services: list[EngineService] = []

    def service(state: AppState) -> contextlib.AbstractAsyncContextManager[None]:
        services.append(EngineService(state, NATS_URL, subject))
        return services[-1].running()

    engine_app = create_app(
        exchange,
        clock=clock,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        client_api=False,
        companion=service,
    )
    gateway = Gateway(
        NATS_URL,
        subject,
        limits=limits or LimitSettings(enabled=False),
        clock=clock,
        read_cache_ms=read_cache_ms,
        self_service=exchange.config.sandbox.self_service,
    )
    with (
        TestClient(engine_app) as engine_http,
        TestClient(wrap(create_gateway_app(gateway))) as http,
    ):
        yield engine_http, services[0], gateway, http


def make_exchange(
    db_path: Path | None = None,
    *,
    store: Store | JournaledStore | None = None,
    config: Config | None = None,
) -> Exchange:
    """A recovered exchange with every invariant checked after every command: on the SQLite
    file ``db_path`` (its journal beside it, projected in this process after each commit),
    or on ``store`` when given (a plain store: the exchange writes rows itself, as the
    projector does); the built-in configuration unless ``config``."""
    if store is None:
        assert db_path is not None
        store = journaled_store(db_path)
    if isinstance(store, JournaledStore):
        return open_exchange(
            config or load_config(), store, TEST_SECRET_BOX, inline=True, check_invariants=True
        )
    store.migrate()
    exchange = Exchange(
        config or load_config(), store, secret_box=TEST_SECRET_BOX, check_invariants=True
    )
    exchange.recover()
    return exchange


def journaled_store(db_path: Path, synchronous: str = "normal") -> JournaledStore:
    """The SQLite layout of a data folder: the projections in ``db_path``, the journal in
    ``journal.db`` beside it."""
    return JournaledStore(
        SQLiteStore(db_path, synchronous),
        Journal(SQLiteStore(db_path.with_name("journal.db"), synchronous)),
    )


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


def start_server(
    data_dir: Path, *extra: str, timeout: float = 20.0, rate_limits: bool = False
) -> ServerProcess:
    """Start `tradehall serve` on a free loopback port and wait until it announces itself.
    Rate limits are off unless asked for: tests drive servers faster than the seed allows."""
    flags = [] if rate_limits else ["--no-rate-limits"]
    proc = subprocess.Popen(
        tradehall_command(
            "serve", "--port", "0", "--data-dir", str(data_dir), "--json", *flags, *extra
        ),
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


# --------------------------------------------------------------------------- store backends

PG_URL_VAR = "TRADEHALL_TEST_PG"
PG_URL = os.environ.get(PG_URL_VAR) or "postgresql://127.0.0.1:5432/test"
PG_STATE: dict[str, Any] = {"skipped": 0}
"""The probe's answer ("reason": None when reachable) and how many tests it skipped."""


def postgres_unreachable() -> str | None:
    """Why PostgreSQL tests cannot run here (one line), or None; probed once per session."""
    if "reason" not in PG_STATE:
        import psycopg

        try:
            psycopg.connect(PG_URL, connect_timeout=3).close()
            PG_STATE["reason"] = None
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split("\n", 1)[0].split()) or type(exc).__name__
            PG_STATE["reason"] = (
                f"no PostgreSQL at {PG_URL} ({detail}); start it (.ci/run does) or set {PG_URL_VAR}"
            )
    reason: str | None = PG_STATE["reason"]
    return reason


@dataclass
class Backend:
    """One store backend for a test. Each data folder a test uses gets its own store: a SQLite
    file in the folder, or a fresh PostgreSQL schema, dropped when the test ends."""

    name: str
    schemas: dict[Path, str] = field(default_factory=dict)

    def database(self, data_dir: Path) -> str:
        """The --database value for ``data_dir``'s store ("" for SQLite)."""
        if self.name == "sqlite":
            return ""
        if data_dir not in self.schemas:
            schema = f"th_test_{uuid.uuid4().hex[:12]}"
            self._admin(f"CREATE SCHEMA {schema}")
            self.schemas[data_dir] = schema
        schema = self.schemas[data_dir]
        options = quote(f"-csearch_path={schema}")
        sep = "&" if "?" in PG_URL else "?"
        return f"{PG_URL}{sep}options={options}&application_name={schema}"

    def server_args(self, data_dir: Path) -> tuple[str, ...]:
        database = self.database(data_dir)
        return ("--database", database) if database else ()

    def open_store(self, data_dir: Path, synchronous: str = "normal") -> SQLStore[Any]:
        """The tables alone (what the projector writes), as the engine process opens them."""
        data_dir.mkdir(parents=True, exist_ok=True)
        return open_projections(self.database(data_dir), data_dir, synchronous=synchronous, role="")

    def open_journaled(self, data_dir: Path, synchronous: str = "normal") -> JournaledStore:
        """The store as the engine process has it: the journal and the tables."""
        data_dir.mkdir(parents=True, exist_ok=True)
        return open_store(self.database(data_dir), data_dir, synchronous=synchronous)

    def exchange(self, data_dir: Path) -> Exchange:
        """The data folder's exchange, recovered as a server would (the tables, then the
        journal after them), projecting in this process."""
        return make_exchange(store=self.open_journaled(data_dir))

    def query(self, data_dir: Path, sql: str) -> list[Any]:
        """Rows of ``sql`` run directly on ``data_dir``'s database."""
        if self.name == "sqlite":
            db = sqlite3.connect(DataDir(data_dir).db_path)
            try:
                return db.execute(sql).fetchall()
            finally:
                db.close()
        import psycopg

        with psycopg.connect(self.database(data_dir)) as conn:
            return conn.execute(sql).fetchall()

    def execute(self, data_dir: Path, sql: str) -> None:
        """Run one statement (DDL included) directly on ``data_dir``'s database, committed."""
        if self.name == "sqlite":
            db = sqlite3.connect(DataDir(data_dir).db_path)
            try:
                db.execute(sql)
                db.commit()
            finally:
                db.close()
            return
        import psycopg

        with psycopg.connect(self.database(data_dir)) as conn:
            conn.execute(sql)

    def terminate(self, data_dir: Path) -> int:
        """PostgreSQL: end every server session of ``data_dir``'s store, as a crashed or
        restarted database server would; the number ended."""
        rows = self._admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (self.schemas[data_dir],),
        )
        return sum(1 for (ended,) in rows if ended)

    def drop(self) -> None:
        for data_dir, schema in self.schemas.items():
            self.terminate(data_dir)
            self._admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.schemas.clear()

    def _admin(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []


# --------------------------------------------------------------------------- scale-out topology

NATS_URL = os.environ.get("TRADEHALL_TEST_NATS") or "nats://127.0.0.1:4222"


def nats_unreachable() -> str | None:
    """Why the engine + gateway tests cannot run here (one line), or None."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(NATS_URL)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), 2).close()
    except OSError as exc:
        return (
            f"no NATS at {NATS_URL} ({exc.strerror or exc}); start nats-server -js (.ci/run does)"
        )
    return None


NATS_DOWN = nats_unreachable()
"""Probed once per session: the ``env`` fixture's engine + gateway runs skip without it."""
SERVE = "serve"
SPLIT = "engine+gateway"
"""The ``env`` fixture's two topologies (tests/conftest.py)."""


def _announced(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(5)
        raise RuntimeError(f"{what} did not start: {proc.stderr.read() if proc.stderr else ''}")
    info: dict[str, Any] = json.loads(line)
    return info


def start_engine(data_dir: Path, subject: str, *extra: str, nats: str = NATS_URL) -> ServerProcess:
    """`tradehall engine` on a data folder, listening under ``subject`` on the test NATS; its
    ``url`` is its loopback admin API."""
    proc = subprocess.Popen(
        tradehall_command(
            "engine",
            "--data-dir",
            str(data_dir),
            "--json",
            "--nats",
            nats,
            "--engine-subject",
            subject,
            *extra,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    info = _announced(proc, "engine")
    return ServerProcess(data_dir, proc, info["url"], info.get("demo"))


def start_gateway(
    subject: str,
    *extra: str,
    workers: int = 1,
    timeout: float = 20.0,
    nats: str = NATS_URL,
    rate_limits: bool = False,
) -> ServerProcess:
    """`tradehall gateway` on a free loopback port for the engine under ``subject``; returns
    once it answers (its ``data_dir`` is meaningless: a gateway has none). Rate limits are off
    unless asked for, as with ``start_server``."""
    proc = subprocess.Popen(
        tradehall_command(
            "gateway",
            "--port",
            "0",
            "--json",
            *([] if rate_limits else ["--no-rate-limits"]),
            "--nats",
            nats,
            "--engine-subject",
            subject,
            "--workers",
            str(workers),
            *extra,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    info = _announced(proc, "gateway")
    gateway = ServerProcess(Path(), proc, info["url"], None)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            Client(gateway.url, timeout=1.0).ping()
            return gateway
        except Exception:
            time.sleep(0.05)
    gateway.stop(signal.SIGKILL)
    raise RuntimeError("gateway did not answer in time")


def start_standby(data_dir: Path, subject: str, *extra: str, nats: str = NATS_URL) -> ServerProcess:
    """`tradehall engine --standby` once it follows (its first line says so): no admin URL
    until it leads (``wait_leading``)."""
    proc = subprocess.Popen(
        tradehall_command(
            "engine", "--standby", "--data-dir", str(data_dir), "--json", "--nats", nats,
            "--engine-subject", subject, *extra,
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    line = _announced(proc, "standby")
    assert line.get("role") == "standby", line
    return ServerProcess(data_dir, proc, "", None)


def wait_leading(engine: ServerProcess) -> dict[str, Any]:
    """The standby's next line, which says it leads; its ``url`` becomes the admin API's."""
    line = _announced(engine.proc, "leader")
    assert line.get("role") == "leader", line
    engine.url, engine.demo = line["url"], line.get("demo")
    return line


def start_ha_pair(
    first: Path, second: Path, subject: str, database: str, *extra: str
) -> list[ServerProcess]:
    """Two `engine --standby` on one PostgreSQL store: the first leads (it makes the store
    and the sealing key), the second, given the key, follows. [leader, standby]; the caller
    stops them."""
    engines = [start_standby(first, subject, "--node", "engine-a", "--database", database, *extra)]
    try:
        wait_leading(engines[0])
        second.mkdir(parents=True, exist_ok=True)
        (second / "secret.key").write_bytes((first / "secret.key").read_bytes())
        engines.append(
            start_standby(second, subject, "--node", "engine-b", "--database", database, *extra)
        )
    except BaseException:
        for engine in engines:
            engine.stop(signal.SIGKILL)
        raise
    return engines
