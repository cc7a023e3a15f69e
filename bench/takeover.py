"""High availability (issue 27, docs/deployment.md): how long a takeover takes, and what a
standby following the journal costs its leader.

1. **Takeover.** Per size of the open book (default 0, 100,000 and 1,000,000 open orders, one
   fresh PostgreSQL schema each), two ``tradehall engine --standby`` processes (their own data
   folders, the same ``secret.key``) and one ``tradehall gateway``. A writer in this process
   places signed orders through the gateway, ``rate`` a second, each sent on time whether or
   not the ones before it were answered (BUY LIMIT IOC below the book: every one is a
   committed write, none rests, so the book keeps its size). The leader is killed (SIGKILL);
   the takeover time is from the kill to the first acknowledged placement *sent after it*.
   (A client in a strict one-at-a-time loop would measure the gateway instead: its request
   in flight at the kill is lost with the engine, and the gateway answers it only after its
   2 s timeout and one resend. Those requests are reported apart, as ``in_flight``.)

   - *warm*: the other engine is a standby that has loaded the exchange and follows the
     journal; after each takeover the killed engine is started again as a standby (its load
     time is ``restart_load_s``), and the next takeover kills the other one (the leaders
     alternate).
   - *frozen* (``--kinds``, not by default): as warm, but the leader is stopped (SIGSTOP)
     rather than killed: as when its machine or network is lost, nothing closes its
     sessions, and its lock is free only once its lease ran out (then it is killed).
   - *cold*: no standby runs; an engine is started (same command) right after the kill (once
     the killed process is reaped), so its time includes the process's start and the
     loading of the exchange.

   Each takeover is split with the new leader's log (timestamps in ms): *detection* (kill to
   the advisory lock won: the lock is free once PostgreSQL saw the session end, which the
   killed process's sockets tell it only once its exit is complete, ``reaped_s``; a standby
   bids every 0.1 s), *internal* (lock won to serving: fence, catch up; ``ha.takeoverSeconds``
   in the status) and *serve to first ack* (the server's start: app, uvicorn, NATS
   connections and subscriptions; then the writer's next placement); cold ones also
   *spawn to loaded* and the load itself. After each takeover, once the new leader's
   projector caught up, every acknowledged clientOrderId must be in the store's ``orders``
   table (none lost), and no clientOrderId tried (acknowledged or not) may be there twice
   (none applied twice).

   The stores are built offline, as ``bench.recovery`` builds its own: an ``Exchange`` on
   the store's tables (``PostgresStore``, no journal) placing the open orders with
   ``Exchange.apply`` and ``commit_now`` every 50,000 (14,000-20,000 orders/s on PostgreSQL),
   then VACUUM ANALYZE; the engines then start on that schema.

2. **Cost of following.** One HA leader on a fresh schema, placements flooded into it over NATS
   as gateways send them (pre-admitted commands, 32 to a message, as in ``bench.gateway``'s
   engine ceiling, but BUY and SELL around one price so that about half trade and the book
   stays small), rounds alternating *alone* and *followed* (a second engine following as a
   standby, started for the setting and stopped after it; ABBA order). In each setting: the
   *ceiling* (512 commands outstanding: placements a second, the leader's CPU per placement;
   the standby's CPU, how far behind it was at the end and how long it took to catch up),
   then a *fixed* load (``fixed_rate`` a second: the leader's CPU per placement, which at a
   fixed rate does not move with the batches' sizes). The cost of following is each round's
   followed against alone, median over the rounds (positive: following costs): on a small
   shared machine the ceiling also pays for the CPU the standby takes, the leader's CPU per
   placement only for what following does to the leader itself.

    python -m bench.takeover                                    # both parts, default sizes
    python -m bench.takeover --sizes 0,100000 --takeovers 10 --parts takeover
    python -m bench.takeover --sizes 1000000 --big-takeovers 5
    python -m bench.takeover --parts following --rounds 8 --out following.json

Needs PostgreSQL (``--database``, default the test database) and NATS (``--nats``). Nothing
is pinned: both engines, the gateway, PostgreSQL, NATS and the writers share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

from bench.common import (
    MID_TICKS,
    REPO,
    SYMBOL,
    fresh_schema,
    kill,
    machine,
    process_cpu_seconds,
    python,
    python_env,
    run_json,
)
from bench.wire import NATS, PING, admin_token, create_accounts, start_announcing
from tradehall.client import AdminClient, ApiError, AsyncClient

DATABASE = "postgresql://127.0.0.1:5432/test"
"""The default ``--database``: the test suite's (a fresh schema is made per size, dropped after)."""
T_BUILD = 1_690_000_000_000
COMMIT_EVERY = 50_000
BAND = 5000
BOOK_ORDERS_PER_ACCOUNT = 500
"""Open orders per account of the built book (the engine allows 1,000 per pair)."""
FLOOD_BATCH = 32
"""Commands per message of the floods (what a few busy gateway workers send)."""
WRITER_PRICE = f"{(MID_TICKS - BAND - 100) / 100:.2f}"
"""The writers' BUY IOC limit: below every bid of the built book, so it never trades."""


LEAD_IN_WAIT_S = 20.0
"""How long a takeover waits, after its lead-in, for the writer's first acknowledged placement."""


@dataclass(frozen=True)
class TakeoverSpec:
    sizes: tuple[int, ...] = (0, 100_000, 1_000_000)
    takeovers: int = 10
    """Takeovers of each kind per size, below ``big``."""
    big_takeovers: int = 3
    """Takeovers of each kind per size from ``big`` open orders on (each costs a load of
    the exchange: the killed engine's restart, warm, or the new engine's, cold)."""
    big: int = 1_000_000
    kinds: tuple[str, ...] = ("warm", "cold")
    """Also ``frozen``: as warm, but the leader is stopped (SIGSTOP) instead of killed, as
    when its machine or its network is lost: its sessions stay open, and the lock is free
    only once PostgreSQL ended its write session, idle past the lease (3 s)."""
    rate: float = 200.0
    """Placements a second of the writer (each sent on time, whether or not the ones before
    it were answered)."""
    writer_accounts: int = 4
    request_timeout: float = 10.0
    """How long the writer waits for an answer: longer than the gateway's timeout and its
    resend (2 s each), so that the requests in flight at the kill get theirs."""
    in_transit_s: float = 0.05
    """Answers that arrive within this long after the kill to requests sent before it were
    the killed leader's, on their way (not in flight at the kill)."""
    """A writer's pause after an error answer (503 while no engine leads)."""
    lead_in: float = 0.5
    """Seconds of placements before the kill."""
    tail: float = 0.3
    """Seconds of placements after the first acknowledged one after the kill."""
    gateway_workers: int = 1
    timeout: float = 300.0
    """Longest wait for an engine to load, lead or catch up."""
    database: str = DATABASE
    nats: str = NATS
    parts: tuple[str, ...] = ("takeover", "following")
    rounds: int = 6
    """Rounds of the cost-of-following part (each: alone and followed)."""
    duration: float = 4.0
    warmup: float = 1.0
    accounts: int = 400
    """Accounts of the cost-of-following flood (each may hold 1,000 open orders)."""
    in_flight: int = 512
    """Commands the ceiling's flood keeps outstanding (``bench.gateway``'s default)."""
    fixed_rate: float = 3000.0
    """Placements a second of the fixed load (under the ceiling in both settings)."""
    keep: bool = False
    """Keep the work folder (engine and gateway logs) and the schemas."""


# --------------------------------------------------------------------------- processes


LEADS = re.compile(
    r"^(\S+ \S+) WARNING tradehall\.engine: engine (\S+) leads \(epoch (\d+)\) from journal"
    r" record (\d+); took over in ([\d.]+) s"
)
LOADED = re.compile(
    r"^(\S+ \S+) INFO tradehall\.engine: standby: loaded the exchange at journal record (\d+)"
    r" in ([\d.]+) s"
)


def log_time(stamp: str) -> float:
    """A log line's time (``logs``' text format: local time, milliseconds) as time.time()."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class EngineProcess:
    """One ``tradehall engine --standby`` process and what it announced (stdout, JSON lines,
    with the time each arrived) and logged (stderr, in a file)."""

    def __init__(
        self, node: str, data_dir: Path, url: str, subject: str, nats: str, log_path: Path
    ) -> None:
        self.node = node
        self.data_dir = data_dir
        self.log_path = log_path
        cmd = [python(), "-m", "tradehall", "engine", "--standby", "--node", node, "--json"]
        cmd += ["--database", url, "--data-dir", str(data_dir)]
        cmd += ["--nats", nats, "--engine-subject", subject]
        with log_path.open("w") as log:
            self.spawned = time.time()
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=python_env(), stdout=subprocess.PIPE, stderr=log, text=True
            )
        self.announced: dict[str, tuple[float, dict[str, Any]]] = {}
        """By role (``standby``, ``leader``): when the line came, and the line."""
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            arrived = time.time()
            with contextlib.suppress(ValueError):
                info = json.loads(line)
                with self._changed:
                    self.announced[str(info.get("role", "?"))] = (arrived, info)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, role: str, timeout: float) -> dict[str, Any]:
        """The announcement of ``role`` (``standby``: loaded; ``leader``: serving)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while role not in self.announced:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"engine {self.node} exited: {self.tail_of_log()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"engine {self.node} did not announce {role} in time")
                self._changed.wait(min(left, 0.5))
            return self.announced[role][1]

    def admin(self) -> AdminClient:
        url = self.announced["leader"][1]["url"]
        return AdminClient(url, (self.data_dir / "admin.token").read_text().strip(), timeout=30)

    def events(self) -> dict[str, Any]:
        """The last 'leads' and 'loaded' lines of this process's log."""
        out: dict[str, Any] = {}
        for line in self.log_path.read_text(errors="replace").splitlines():
            if m := LEADS.match(line):
                out["lead_at"] = log_time(m[1])
                out["epoch"] = int(m[3])
                out["from_record"] = int(m[4])
                out["internal_s"] = float(m[5])
            elif m := LOADED.match(line):
                out["loaded_at"] = log_time(m[1])
                out["load_s"] = float(m[3])
        return out

    def tail_of_log(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def kill9(self) -> tuple[float, float]:
        """SIGKILL: the time it was sent, and the time the process was reaped (its exit is
        complete: memory freed, then its sockets closed, so PostgreSQL may end its session)."""
        at = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return at, time.time()

    def stop(self) -> None:
        kill(self.proc, grace=30)


class Cluster:
    """The engines of one schema, in data folders of their own under ``work``."""

    def __init__(self, spec: TakeoverSpec, url: str, work: Path) -> None:
        self.spec = spec
        self.url = url
        self.work = work
        self.subject = f"bench-ha-{uuid.uuid4().hex[:10]}"
        self.dirs: dict[str, Path] = {}
        for node in ("A", "B"):
            self.dirs[node] = work / f"engine-{node}"
            self.dirs[node].mkdir(parents=True, exist_ok=True)
        self.started: list[EngineProcess] = []
        self.gateway: subprocess.Popen[str] | None = None
        self.gateway_url = ""

    def share_key(self, secret_key: Path) -> None:
        """Every engine seals and opens API secrets with the same key."""
        for folder in self.dirs.values():
            if folder != secret_key.parent:
                shutil.copy(secret_key, folder / "secret.key")

    def start(self, node: str) -> EngineProcess:
        log_path = self.work / f"engine-{node}-{len(self.started)}.log"
        engine = EngineProcess(
            node, self.dirs[node], self.url, self.subject, self.spec.nats, log_path
        )
        self.started.append(engine)
        return engine

    def start_gateway(self) -> str:
        cmd = [python(), "-m", "tradehall", "gateway", "--port", "0", "--json", "--no-rate-limits"]
        cmd += ["--nats", self.spec.nats, "--engine-subject", self.subject]
        cmd += ["--workers", str(self.spec.gateway_workers)]
        self.gateway, info = start_announcing(cmd, self.work / "gateway.log", PING)
        self.gateway_url = info["url"]
        return self.gateway_url

    def close(self) -> None:
        if self.gateway is not None:
            kill(self.gateway)
        for engine in self.started:
            engine.stop()


# --------------------------------------------------------------------------- the stores


def build_store(url: str, data_dir: Path, open_orders: int, writers: int) -> dict[str, Any]:
    """The exchange's tables in the schema of ``url``, offline: ``writers`` accounts with a
    trading key each (returned), then accounts holding ``open_orders`` resting orders (half
    bids, half asks, within ``BAND`` ticks of the mid)."""
    from tradehall.config import load_config
    from tradehall.datadir import DataDir
    from tradehall.engine.commands import Deposit, PlaceOrder
    from tradehall.exchange import Exchange
    from tradehall.store.postgres import PostgresStore

    began = time.perf_counter()
    store = PostgresStore(url)
    store.migrate()
    exchange = Exchange(load_config(), store, secret_box=DataDir(data_dir).secret_box())
    exchange.recover()
    book_accounts = max(1, -(-open_orders // BOOK_ORDERS_PER_ACCOUNT))
    keys: list[list[str]] = []
    for i in range(writers + book_accounts):
        user = exchange.create_user(f"bench-ha-{i}", T_BUILD)
        if i < writers:
            key = exchange.create_key(user.id, False, [], T_BUILD)
            keys.append([key.api_key, key.secret])
        exchange.apply(Deposit(T_BUILD, user.id, "USDT", 10**6 * 10**8, f"u{user.id}"))
        exchange.apply(Deposit(T_BUILD, user.id, "BTC", 100 * 10**8, f"b{user.id}"))
    exchange.commit_now()
    rng = random.Random(27)
    for j in range(open_orders):
        account = writers + 1 + j % book_accounts
        qty = rng.randint(1, 10) * 1000
        if j % 2 == 0:
            price, side = MID_TICKS - 1 - rng.randrange(BAND), "BUY"
        else:
            price, side = MID_TICKS + 1 + rng.randrange(BAND), "SELL"
        exchange.apply(PlaceOrder(T_BUILD + j, account, SYMBOL, side, "LIMIT", price, qty))
        if (j + 1) % COMMIT_EVERY == 0:
            exchange.commit_now()
    exchange.commit_now()
    placed = time.perf_counter() - began
    store.vacuum()
    resting = sum(len(book.orders) for book in exchange.engine.spot.books.values())
    store.close()
    return {
        "keys": keys,
        "open_orders": resting,
        "accounts": writers + book_accounts,
        "build_s": placed,
        "vacuum_s": time.perf_counter() - began - placed,
    }


def store_check(url: str, acked: set[str], tried: set[str]) -> dict[str, Any]:
    """Which of the clientOrderIds ``tried`` are in the store's orders, and how often."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT client_id, count(*) FROM orders WHERE client_id = ANY(%s) GROUP BY client_id",
            (sorted(tried),),
        ).fetchall()
    found = {cid: int(n) for cid, n in rows}
    return {
        "acked": len(acked),
        "lost": sorted(acked - set(found))[:20],
        "lost_count": len(acked - set(found)),
        "applied_twice": sorted(cid for cid, n in found.items() if n > 1)[:20],
        "unacked_applied": len(set(found) - acked),
    }


# --------------------------------------------------------------------------- the writers


@dataclass
class Attempt:
    cid: str
    sent: float
    answered: float
    outcome: str
    """``ok``, an HTTP status with the error code (``503/-1001``) or ``timeout``/``error``."""
    detail: str = ""
    """An error's message."""


class Writer(threading.Thread):
    """Signed BUY LIMIT IOC placements through the gateway, ``rate`` a second, each sent
    without waiting for the ones before it (its own event loop, in a thread of its own)."""

    def __init__(self, url: str, keys: list[list[str]], tag: str, spec: TakeoverSpec) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.keys = keys
        self.tag = tag
        self.rate = spec.rate
        self.timeout = spec.request_timeout
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []

    def run(self) -> None:
        asyncio.run(self._place())

    async def _place(self) -> None:
        clients = [AsyncClient(self.url, k, s, timeout=self.timeout) for k, s in self.keys]
        tasks: set[asyncio.Task[None]] = set()
        n = 0
        due = time.perf_counter()
        try:
            while not self.stop.is_set():
                n += 1
                task = asyncio.create_task(self._one(clients[n % len(clients)], f"{self.tag}-{n}"))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                due += 1 / self.rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if tasks:
                await asyncio.wait(tasks)
        finally:
            for client in clients:
                await client.close()

    async def _one(self, client: AsyncClient, cid: str) -> None:
        sent = time.time()
        detail = ""
        try:
            await client.create_order(
                SYMBOL, "BUY", "LIMIT", "0.001", WRITER_PRICE,
                client_order_id=cid, time_in_force="IOC",
            )  # fmt: skip
            outcome = "ok"
        except ApiError as exc:
            outcome, detail = f"{exc.status}/{exc.code}", exc.msg
        except httpx2.TimeoutException:
            outcome = "timeout"
        except httpx2.HTTPError as exc:
            outcome, detail = "error", f"{type(exc).__name__}: {exc}"
        self.attempts.append(Attempt(cid, sent, time.time(), outcome, detail))


@contextlib.contextmanager
def writing(spec: TakeoverSpec, url: str, keys: list[list[str]], tag: str) -> Iterator[Writer]:
    writer = Writer(url, keys, tag, spec)
    writer.start()
    try:
        yield writer
    finally:
        writer.stop.set()
        writer.join(spec.request_timeout + 30)


def first_ack_after(writer: Writer, kill_at: float, timeout: float) -> Attempt | None:
    """The first acknowledged placement sent after ``kill_at`` (waits for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        acks = [a for a in list(writer.attempts) if a.outcome == "ok" and a.sent > kill_at]
        if acks:
            return min(acks, key=lambda a: a.answered)
        time.sleep(0.005)
    return None


# --------------------------------------------------------------------------- one takeover


def wait_caught_up(leader: EngineProcess, node: str, timeout: float) -> dict[str, Any]:
    """Until the leader's status shows ``node`` as a standby within a few records of it."""
    deadline = time.monotonic() + timeout
    with leader.admin() as admin:
        while True:
            ha = admin.status().get("ha", {})
            for engine in ha.get("engines", []):
                if engine["node"] == node and engine["role"] == "standby" and engine["lag"] <= 2:
                    return dict(engine)
            if time.monotonic() > deadline:
                raise RuntimeError(f"standby {node} did not catch up: {ha}")
            time.sleep(0.1)


def wait_projected(leader: EngineProcess, timeout: float) -> dict[str, Any]:
    """Until the leader's projector caught up with the journal; its status then."""
    deadline = time.monotonic() + timeout
    with leader.admin() as admin:
        while True:
            status: dict[str, Any] = admin.status()
            journal = status.get("journal") or {}
            if journal.get("lag") == 0 and (journal.get("projector") or {}).get("running"):
                return status
            if time.monotonic() > deadline:
                raise RuntimeError(f"the projector did not catch up: {journal}")
            time.sleep(0.05)


def one_takeover(
    spec: TakeoverSpec,
    cluster: Cluster,
    kind: str,
    leader: EngineProcess,
    standby: EngineProcess | None,
    keys: list[list[str]],
    number: int,
) -> tuple[dict[str, Any], EngineProcess]:
    """Kill ``leader`` under the writers' load; the successor (``standby``, or a new engine
    started after the kill) leads. The figures, and the new leader."""
    tag = f"{kind[0]}{number}"
    with writing(spec, cluster.gateway_url, keys, tag) as writer:
        time.sleep(spec.lead_in)
        # On a loaded machine the writer may not have had an answer yet: wait for one (the
        # takeover is timed from the kill, so a longer lead-in changes no figure).
        deadline = time.monotonic() + LEAD_IN_WAIT_S
        while not any(a.outcome == "ok" for a in writer.attempts):
            if time.monotonic() > deadline:
                sample = writer.attempts[:3]
                raise RuntimeError(f"no placement acknowledged before the kill: {sample}")
            time.sleep(0.05)
        if kind == "frozen":
            kill_at, reaped_at = time.time(), None
            os.kill(leader.pid, signal.SIGSTOP)
        else:
            kill_at, reaped_at = leader.kill9()
        successor = standby if standby is not None else cluster.start(leader.node)
        successor.wait_for("leader", spec.timeout)
        first = first_ack_after(writer, kill_at, 60)
        if first is None:
            raise RuntimeError("no placement acknowledged after the takeover")
        time.sleep(spec.tail)
    if kind == "frozen":
        leader.kill9()  # it would step down once resumed; the partition tests see to that
    events = successor.events()
    attempts = writer.attempts
    in_flight = [a for a in attempts if a.sent <= kill_at < a.answered - spec.in_transit_s]
    during: dict[str, int] = {}
    for a in attempts:
        if kill_at < a.sent and a.answered <= first.answered:
            during[a.outcome] = during.get(a.outcome, 0) + 1
    flight: dict[str, int] = {}
    for a in in_flight:
        flight[a.outcome] = flight.get(a.outcome, 0) + 1
    lead_at = events["lead_at"]
    out: dict[str, Any] = {
        "kind": kind,
        "killed": leader.node,
        "new_leader": successor.node,
        "epoch": events["epoch"],
        "takeover_s": first.answered - kill_at,
        "detection_s": lead_at - events["internal_s"] - kill_at,
        "reaped_s": None if reaped_at is None else reaped_at - kill_at,
        "internal_s": events["internal_s"],
        "serve_to_first_ack_s": first.answered - lead_at,
        "announced_s": successor.announced["leader"][0] - kill_at,
        "from_record": events["from_record"],
        "answers_during_takeover": during,
        "in_flight": flight,
        "in_flight_answer_s": max(a.answered for a in in_flight) - kill_at if in_flight else None,
        "loadavg": os.getloadavg()[0],
    }
    if kind == "cold":
        out["spawn_to_loaded_s"] = events["loaded_at"] - successor.spawned
        out["load_s"] = events["load_s"]
        out["spawn_after_kill_s"] = successor.spawned - kill_at
        # The lock was free long before a cold engine bid: no detection to speak of.
        out["detection_s"] = None
        out["loaded_to_lead_s"] = lead_at - events["loaded_at"]
    status = wait_projected(successor, spec.timeout)
    out["takeover_seconds_in_status"] = status["ha"]["takeoverSeconds"]
    out["open_orders"] = status["openOrders"]
    acked = {a.cid for a in attempts if a.outcome == "ok"}
    check = store_check(cluster.url, acked, {a.cid for a in attempts})
    out["store_check"] = check
    return out, successor


def summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"takeovers": len(trials)}
    for name in (
        "takeover_s", "detection_s", "internal_s", "serve_to_first_ack_s", "spawn_to_loaded_s",
        "load_s", "restart_load_s", "reaped_s", "in_flight_answer_s",
    ):  # fmt: skip
        values = [t[name] for t in trials if t.get(name) is not None]
        if values:
            out[name] = {"p50": statistics.median(values), "max": max(values)}
    out["acked"] = sum(t["store_check"]["acked"] for t in trials)
    out["lost"] = sum(t["store_check"]["lost_count"] for t in trials)
    out["applied_twice"] = sum(len(t["store_check"]["applied_twice"]) for t in trials)
    return out


def takeovers_at(
    spec: TakeoverSpec, size: int, work: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    """Every takeover of one size of the book, on a schema of its own."""
    url, drop = fresh_schema(spec.database)
    if spec.keep:
        log(f"  takeover: schema of {size:,} open orders kept: {url}")
    work = work / f"size-{size}"
    build_dir = work / "build"
    build_dir.mkdir(parents=True)
    cluster: Cluster | None = None
    try:
        log(f"  takeover: building {size:,} open orders")
        # In a process of its own: the exchange it builds is garbage afterwards, and freeing
        # it here (a full collection over millions of objects) would stall the writer's
        # thread for seconds during a takeover.
        cmd = [python(), "-m", "bench.takeover", "build", url, str(build_dir), str(size)]
        built = run_json([*cmd, str(spec.writer_accounts)], 3600)
        keys = built.pop("keys")
        log(
            f"  takeover: {built['open_orders']:,} open orders built in {built['build_s']:.1f} s"
            f" (+ {built['vacuum_s']:.1f} s VACUUM ANALYZE)"
        )
        cluster = Cluster(spec, url, work)
        cluster.share_key(build_dir / "secret.key")
        count = spec.takeovers if size < spec.big else spec.big_takeovers
        out: dict[str, Any] = {"open_orders": size, "build": built, "kinds": {}}
        leader = cluster.start("A")
        leader.wait_for("leader", spec.timeout)
        cluster.start_gateway()
        standby: EngineProcess | None = None
        for kind in spec.kinds:
            trials = []
            if kind != "cold" and standby is None:
                standby = cluster.start("B" if leader.node == "A" else "A")
            if kind == "cold" and standby is not None:
                standby.stop()
                standby = None
            for number in range(count):
                if standby is not None:
                    standby.wait_for("standby", spec.timeout)
                    wait_caught_up(leader, standby.node, spec.timeout)
                trial, leader = one_takeover(
                    spec, cluster, kind, leader, standby, keys, len(out["kinds"]) * 100 + number
                )
                trials.append(trial)
                check = trial["store_check"]
                log(
                    f"  takeover {size:,} {kind} {number + 1}/{count}: {trial['takeover_s']:.3f} s"
                    f" (detection {_s(trial['detection_s'])}, internal {trial['internal_s']:.3f} s,"
                    f" serve to ack {trial['serve_to_first_ack_s']:.3f} s"
                    + (f", load {trial['load_s']:.2f} s" if kind == "cold" else "")
                    + f"); {check['acked']} acked, {check['lost_count']} lost,"
                    f" {len(check['applied_twice'])} applied twice"
                )
                if kind != "cold":
                    standby = cluster.start(trial["killed"])
                    standby.wait_for("standby", spec.timeout)
                    trial["restart_load_s"] = standby.events().get("load_s")
            out["kinds"][kind] = {"summary": summary(trials), "trials": trials}
        return out
    finally:
        if cluster is not None:
            cluster.close()
        if not spec.keep:
            drop()


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


# --------------------------------------------------------------------------- cost of following


def flood_command(rng: random.Random, command_id: str, keys: list[str]) -> Any:
    """A pre-admitted placement as a gateway forwards it: BUY or SELL LIMIT within 20 ticks
    of 20000.00 either way, so that about half trade and the book stays small. The id must
    be new to the engine: one it committed lately is answered without being applied again."""
    from tradehall.cluster.protocol import Forwarded, wire_params

    params = {
        "symbol": SYMBOL,
        "side": rng.choice(("BUY", "SELL")),
        "type": "LIMIT",
        "volume": f"0.{rng.randint(1, 9):03d}",
        "price": f"{20000 + rng.randint(-20, 20)}.00",
    }
    return Forwarded(
        command_id, "POST", "/spot/open/sapi/v1/order", wire_params(params),
        rng.choice(keys), "127.0.0.1",
    )  # fmt: skip


async def flood(
    spec: TakeoverSpec, subject: str, keys: list[str], pids: dict[str, int], rate: float | None
) -> dict[str, Any]:
    """Placements straight into the engine over NATS, ``FLOOD_BATCH`` to a message: with
    ``rate`` None, ``spec.in_flight`` kept outstanding (the ceiling); else ``rate`` a second
    (a fixed load). Counts the answers and the CPU of ``pids`` over the window."""
    from tradehall.cluster.link import connect
    from tradehall.cluster.protocol import Commands, decode_answers, encode

    nc = await connect(spec.nats, "bench-ha-flood")
    rng = random.Random(27)
    statuses: dict[str, int] = {}
    refusals: list[str] = []
    latencies: list[float] = []
    pc = time.perf_counter
    measure_from = pc() + spec.warmup
    stop = measure_from + spec.duration
    count = 0
    cpu: list[dict[str, float | None]] = []
    prefix = f"ha-flood-{uuid.uuid4().hex[:12]}-"

    async def send() -> None:
        nonlocal count
        commands = [flood_command(rng, f"{prefix}{count + i}", keys) for i in range(FLOOD_BATCH)]
        count += FLOOD_BATCH
        t0 = pc()
        msg = await nc.request(
            f"{subject}.cmd", encode(Commands(commands, int(time.time() * 1e3))), timeout=30
        )
        t1 = pc()
        if measure_from <= t0 and t1 <= stop:
            for answer in decode_answers(msg.data):
                statuses[str(answer.status)] = statuses.get(str(answer.status), 0) + 1
                if answer.status != 200 and len(refusals) < 3:
                    refusals.append(answer.body.decode(errors="replace")[:200])
            latencies.append(t1 - t0)

    async def closed_loop() -> None:
        while pc() < stop:
            await send()

    async def paced(rate: float) -> None:
        tasks: set[asyncio.Task[None]] = set()
        due = pc()
        while due < stop:
            task = asyncio.create_task(send())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            due += FLOOD_BATCH / rate
            await asyncio.sleep(max(0.0, due - pc()))
        if tasks:
            await asyncio.wait(tasks)

    async def window() -> None:
        await asyncio.sleep(measure_from - pc())
        cpu.append({name: process_cpu_seconds(pid) for name, pid in pids.items()})
        await asyncio.sleep(stop - pc())
        cpu.append({name: process_cpu_seconds(pid) for name, pid in pids.items()})

    try:
        if rate is None:
            workers = [closed_loop() for _ in range(max(1, spec.in_flight // FLOOD_BATCH))]
        else:
            workers = [paced(rate)]
        await asyncio.gather(window(), *workers)
    finally:
        await nc.close()
    placed = statuses.get("200", 0)
    out: dict[str, Any] = {
        "placed_per_s": placed / spec.duration,
        "statuses": statuses,
        "refusals": refusals,
        "message_p50_ms": 1e3 * statistics.median(latencies) if latencies else None,
    }
    for name in pids:
        before, after = cpu[0][name], cpu[1][name]
        share = (
            (after - before) / spec.duration if before is not None and after is not None else None
        )
        out[f"{name}_cpu_share"] = share
        out[f"{name}_cpu_us_per_placement"] = (
            1e6 * share * spec.duration / placed if share and placed else None
        )
    return out


def window(
    spec: TakeoverSpec,
    subject: str,
    keys: list[str],
    leader: EngineProcess,
    standby: EngineProcess | None,
    rate: float | None,
) -> dict[str, Any]:
    """One flood; with a standby, also how far behind it was at the end (records, as the
    leader last heard, within ``REPORT_S``) and how long it then took to catch up."""
    pids = {"leader": leader.pid} | ({"standby": standby.pid} if standby else {})
    result = asyncio.run(flood(spec, subject, keys, pids, rate))
    if standby is not None:
        ended = time.perf_counter()
        with leader.admin() as admin:
            engines = admin.status().get("ha", {}).get("engines", [])
        result["standby_lag_at_end"] = next(
            (e["lag"] for e in engines if e["node"] == standby.node), None
        )
        wait_caught_up(leader, standby.node, spec.timeout)
        result["standby_catch_up_s"] = time.perf_counter() - ended
    return result


FOLLOWING_FIGURES = {
    "ceiling": ("placed_per_s", "leader_cpu_us_per_placement", "standby_cpu_share"),
    "fixed": ("leader_cpu_us_per_placement", "leader_cpu_share", "standby_cpu_share"),
}


def following(spec: TakeoverSpec, work: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The leader alone and followed by one standby, alternated: its ceiling (placements a
    second, and its CPU per placement there) and its CPU per placement at a fixed load."""
    url, drop = fresh_schema(spec.database)
    if spec.keep:
        log(f"  following: schema kept: {url}")
    work = work / "following"
    work.mkdir(parents=True)
    cluster = Cluster(spec, url, work)
    try:
        leader = cluster.start("A")  # a new store: it leads, and makes the secret key
        leader.wait_for("leader", spec.timeout)
        cluster.share_key(cluster.dirs["A"] / "secret.key")
        token = admin_token({"dataDir": str(leader.data_dir)})
        accounts = create_accounts(leader.announced["leader"][1]["url"], token, spec.accounts)
        keys = [a[0] for a in accounts]
        rounds = []
        for number in range(spec.rounds):
            order = ("alone", "followed") if number % 2 == 0 else ("followed", "alone")
            this: dict[str, Any] = {}
            for setting in order:
                standby = None
                if setting == "followed":
                    standby = cluster.start("B")
                    standby.wait_for("standby", spec.timeout)
                    wait_caught_up(leader, "B", spec.timeout)
                ceiling = window(spec, cluster.subject, keys, leader, standby, None)
                fixed = window(spec, cluster.subject, keys, leader, standby, spec.fixed_rate)
                if standby is not None:
                    standby.stop()
                this[setting] = {"ceiling": ceiling, "fixed": fixed}
                log(
                    f"  following {number + 1} {setting}: ceiling {ceiling['placed_per_s']:.0f}/s"
                    f" ({_us(ceiling['leader_cpu_us_per_placement'])} leader CPU each), at"
                    f" {spec.fixed_rate:.0f}/s {_us(fixed['leader_cpu_us_per_placement'])}"
                    + (
                        f"; standby {ceiling['standby_cpu_share']:.2f} / "
                        f"{fixed['standby_cpu_share']:.2f} cores, {ceiling['standby_lag_at_end']}"
                        f" records behind at the ceiling's end"
                        if standby
                        else ""
                    )
                )
            rounds.append(this)
        medians = {
            setting: {
                f"{part} {name}": statistics.median(
                    r[setting][part][name] for r in rounds if r[setting][part].get(name)
                )
                for part, names in FOLLOWING_FIGURES.items()
                for name in names
                if any(r[setting][part].get(name) for r in rounds)
            }
            for setting in ("alone", "followed")
        }

        def paired(part: str, name: str, more_is_better: bool) -> float | None:
            """The median over rounds of each round's cost (rounds are minutes apart at
            most, the machine's other load changes less within one)."""
            costs = []
            for r in rounds:
                alone, followed = r["alone"][part].get(name), r["followed"][part].get(name)
                if alone and followed:
                    costs.append(1 - followed / alone if more_is_better else followed / alone - 1)
            return statistics.median(costs) if costs else None

        cost = {
            "ceiling placed_per_s": paired("ceiling", "placed_per_s", True),
            "ceiling leader_cpu_us_per_placement": paired(
                "ceiling", "leader_cpu_us_per_placement", False
            ),
            "fixed leader_cpu_us_per_placement": paired(
                "fixed", "leader_cpu_us_per_placement", False
            ),
        }
        return {"rounds": rounds, "median": medians, "cost_of_following": cost}
    finally:
        cluster.close()
        if not spec.keep:
            drop()


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} us"


# --------------------------------------------------------------------------- the part


def run(spec: TakeoverSpec, work: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": asdict(spec), "machine": machine()}
    if "takeover" in spec.parts:
        out["takeover"] = [takeovers_at(spec, size, work, log) for size in spec.sizes]
    if "following" in spec.parts:
        out["following"] = following(spec, work, log)
    return out


def report(result: dict[str, Any]) -> str:
    lines = []
    for size in result.get("takeover", []):
        for kind, data in size["kinds"].items():
            s = data["summary"]

            def cell(name: str, s: dict[str, Any] = s) -> str:
                v = s.get(name)
                return f"{v['p50']:.3f} / {v['max']:.3f}" if v else "-"

            lines.append(
                f"| {size['open_orders']:,} | {kind} | {s['takeovers']} | {cell('takeover_s')} |"
                f" {cell('detection_s')} | {cell('internal_s')} | {cell('serve_to_first_ack_s')} |"
                f" {cell('load_s')} | {cell('in_flight_answer_s')} | {s['acked']} | {s['lost']} |"
                f" {s['applied_twice']} |"
            )
    text = ""
    if lines:
        head = (
            "| open orders | kind | n | takeover s p50 / max | detection | internal | serve to ack"
            " | load | in-flight answer | acked | lost | applied twice |\n" + "|---" * 12 + "|\n"
        )
        text += head + "\n".join(lines) + "\n"
    following = result.get("following")
    if following:
        text += "\n| leader | " + " | ".join(FOLLOWING_COLUMNS) + " |\n" + "|---" * 7 + "|\n"
        for setting, figures in following["median"].items():
            cells = [_cell(figures.get(name)) for name in FOLLOWING_COLUMNS]
            text += f"| {setting} (median) | " + " | ".join(cells) + " |\n"
        costs = following["cost_of_following"]
        text += (
            "| cost (median of rounds) | "
            + " | ".join(
                "-" if costs.get(name) is None else f"{100 * costs[name]:+.1f} %"
                for name in FOLLOWING_COLUMNS
            )
            + " |\n"
        )
    return text


FOLLOWING_COLUMNS = (
    "ceiling placed_per_s",
    "ceiling leader_cpu_us_per_placement",
    "ceiling standby_cpu_share",
    "fixed leader_cpu_us_per_placement",
    "fixed leader_cpu_share",
    "fixed standby_cpu_share",
)


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    d = TakeoverSpec()
    parser.add_argument("--sizes", default=",".join(str(n) for n in d.sizes))
    parser.add_argument("--takeovers", type=int, default=d.takeovers)
    parser.add_argument("--big-takeovers", type=int, default=d.big_takeovers)
    parser.add_argument(
        "--big", type=int, default=d.big, help="sizes from this on: --big-takeovers"
    )
    parser.add_argument("--kinds", default=",".join(d.kinds))
    parser.add_argument("--rate", type=float, default=d.rate, help="the writer's placements/s")
    parser.add_argument("--parts", default=",".join(d.parts))
    parser.add_argument("--rounds", type=int, default=d.rounds)
    parser.add_argument("--duration", type=float, default=d.duration)
    parser.add_argument("--warmup", type=float, default=d.warmup)
    parser.add_argument("--accounts", type=int, default=d.accounts)
    parser.add_argument("--in-flight", type=int, default=d.in_flight)
    parser.add_argument("--fixed-rate", type=float, default=d.fixed_rate)
    parser.add_argument("--database", default=d.database)
    parser.add_argument("--nats", default=d.nats)
    parser.add_argument("--keep", action="store_true", help="keep the logs and the schemas")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    spec = TakeoverSpec(
        sizes=tuple(int(n) for n in args.sizes.split(",") if n),
        takeovers=args.takeovers,
        big_takeovers=args.big_takeovers,
        big=args.big,
        kinds=tuple(k for k in args.kinds.split(",") if k),
        rate=args.rate,
        parts=tuple(p for p in args.parts.split(",") if p),
        rounds=args.rounds,
        duration=args.duration,
        warmup=args.warmup,
        accounts=args.accounts,
        in_flight=args.in_flight,
        fixed_rate=args.fixed_rate,
        database=args.database,
        nats=args.nats,
        keep=args.keep,
    )
    work = Path(tempfile.mkdtemp(prefix="tradehall-bench-takeover-"))
    try:
        result = run(spec, work, log=lambda line: None if args.json else print(line, flush=True))
    finally:
        if spec.keep:
            print(f"logs kept in {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1) if args.json else report(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:  # URL DIR OPEN_ORDERS WRITERS: JSON on stdout
        url, folder, size, writers = sys.argv[2:6]
        print(json.dumps(build_store(url, Path(folder), int(size), int(writers))))
    else:
        main()
