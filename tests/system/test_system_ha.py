"""High availability (issue 27), with real processes: two `tradehall engine --standby` on one
PostgreSQL schema, one `tradehall gateway --workers 2` in front of them, over NATS.

The leader is killed (kill -9), cut off (its PostgreSQL sessions terminated, its NATS
connection dropped through a proxy of the test's own, the process frozen with SIGSTOP) while
six writers place and cancel orders through the gateway; a standby is frozen while the leader
takes writes and then has to lead. Each time the other engine takes over, the old one comes
back as a standby, and what the writers were told is checked against the store: every
acknowledged write is there, nothing was applied twice (clientOrderIds are unique, the ledger
audits), what a 503/-1001 left unknown is found (or not) by clientOrderId, and the journal's
own records show that no two leaders ever committed (epochs never go back in sequence order).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import gzip
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import websockets.asyncio.client

from support import (
    NATS_URL,
    PG_URL,
    Backend,
    ServerProcess,
    nats_unreachable,
    postgres_unreachable,
    start_gateway,
    tradehall_command,
)
from tradehall.client import AdminClient, ApiError, Client
from tradehall.datadir import DataDir

DEPTH = "market_btcusdt_depth_step0"

SYMBOL = "BTCUSDT"
WRITERS = 6
MID = 20_000
"""Crossing orders are priced around it, so that the writers trade with each other."""
RESTING_BELOW = 10_000
"""Resting orders are bids under it: nothing sells that low, so they stay open until
cancelled (what the engine's memory must show after a takeover is then known exactly)."""
FUNDS = {"USDT": "100000000", "BTC": "10000"}
NATS_CUT_S = 8.0
"""How long a leader's NATS link is refused once cut: longer than it takes to notice (2 s)
and start again as a standby."""
STEP_S = 25.0
"""The most any one step (a takeover, a start, a catch-up) may take here."""


# --------------------------------------------------------------------------- processes


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def is_tradehall(pid: int) -> bool:
    """``pid`` is still one of the tradehall processes the test started (not reused)."""
    try:
        return b"tradehall" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def stopped_state(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


class Engine:
    """One `tradehall engine --standby`: its stdout lines (a standby line when it follows, a
    leader line when it leads; after a step-down the same process prints them again)."""

    def __init__(self, name: str, data_dir: Path, database: str, nats: str, subject: str):
        self.name = name
        self.data_dir = data_dir
        self.database = database
        self.nats = nats
        self.subject = subject
        self.log = data_dir.with_name(f"{name}.log")
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self.pids: set[int] = set()
        """Every process of this engine seen (itself, its projector children)."""

    def start(self, env: dict[str, str]) -> None:
        command = tradehall_command(
            "engine", "--standby", "--node", self.name, "--database", self.database,
            "--data-dir", str(self.data_dir), "--nats", self.nats,
            "--engine-subject", self.subject, "--json",
        )  # fmt: skip
        with self.log.open("a") as log:
            log.write(f"--- started at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log, text=True, env=env
            )
        self.pids.add(self.proc.pid)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                info = json.loads(line)
            except ValueError:
                info = {"text": line.rstrip()}
            info["at"] = time.monotonic()
            with self._changed:
                self.lines.append(info)
                self._changed.notify_all()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_line(self, wanted: Callable[[dict[str, Any]], bool], since: int, what: str) -> int:
        """The index of the first line from ``since`` on that is ``wanted``."""
        deadline = time.monotonic() + STEP_S
        with self._changed:
            while True:
                for index in range(since, len(self.lines)):
                    if wanted(self.lines[index]):
                        return index
                if not self.alive():
                    assert self.proc is not None
                    raise AssertionError(
                        f"{self.name} exited (status {self.proc.returncode}) before {what}:"
                        f" {self.tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {what} in {STEP_S} s: {self.tail()}")
                self._changed.wait(min(left, 0.2))

    def wait_standby(self, since: int) -> int:
        return self.wait_line(lambda i: i.get("role") == "standby", since, "standby line")

    def wait_leader(self, since: int) -> dict[str, Any]:
        index = self.wait_line(lambda i: i.get("role") == "leader", since, "leader line")
        return self.lines[index]

    def leading(self) -> dict[str, Any] | None:
        """Its last line, if it is a leader's."""
        with self._changed:
            last = self.lines[-1] if self.lines else None
        return last if last is not None and last.get("role") == "leader" else None

    def remember_children(self) -> None:
        if self.proc is not None:
            self.pids.update(children(self.proc.pid))

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return f"\n--- {self.name}'s stdout: {self.lines[-6:]}\n--- its log:\n" + "\n".join(
            text[-lines:]
        )

    def stop(self) -> None:
        """However it is (frozen, leading, following, gone), and every child it had."""
        self.remember_children()
        for pid in sorted(self.pids):
            if is_tradehall(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        deadline = time.monotonic() + 10
        for pid in sorted(self.pids):  # a projector finishes its catch-up, then exits
            while is_tradehall(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if is_tradehall(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        self.remember_children()
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)


class Proxy:
    """A TCP proxy to NATS (one engine's link): ``cut`` drops its connections and refuses
    new ones (accepted, then closed at once) for a while, as a partition would."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 4222)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"nats://127.0.0.1:{self.listener.getsockname()[1]}"
        self.refuse_until = 0.0
        self.cuts = 0
        self.refused = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self.refuse_until:
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, 2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            pair = [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst, pair), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair: list[socket.socket]) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):  # wakes the other direction's thread
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            pair.pop()
            if pair:
                return
            self._sockets.difference_update((src, dst))
        src.close()  # by the last of the pair's two threads: no file descriptor reused
        dst.close()  # while the other one could still write to it

    def cut(self, seconds: float) -> None:
        self.cuts += 1
        self.refuse_until = time.monotonic() + seconds
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        self.cut(0)


# --------------------------------------------------------------------------- the writers


@dataclass
class Book:
    """What one writer sent, and what it was told."""

    placed: dict[str, int] = field(default_factory=dict)
    """Acknowledged placements: clientOrderId -> orderId (and unknown ones found applied)."""
    resting: dict[int, str] = field(default_factory=dict)
    """Acknowledged resting orders not cancelled (as far as the writer knows), oldest first."""
    cancelled: set[int] = field(default_factory=set)
    """Orders whose cancel was acknowledged (or found applied)."""
    unknown: list[str] = field(default_factory=list)
    refusals: dict[str, str] = field(default_factory=dict)
    """503 answers that said the write was not made ("writes are stopped"), by clientOrderId:
    none may turn out applied (an old leader's error must never beat the new leader's answer)."""
    """Placements answered 503/-1001 (outcome unknown), not yet looked up."""
    unknown_cancels: list[int] = field(default_factory=list)
    not_applied: set[str] = field(default_factory=set)
    """Placements of unknown outcome that were looked up and never applied."""
    wrong: list[str] = field(default_factory=list)
    """Any other answer: each one a failure."""
    acks: int = 0
    sent: int = 0


class Writer:
    def __init__(self, index: int, client: Client, user_id: int) -> None:
        self.index = index
        self.client = client
        self.user_id = user_id
        self.book = Book()
        self.rng = random.Random(index)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, tag: str) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, args=(tag,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(60)
            assert not self._thread.is_alive(), f"writer {self.index} is stuck"

    def _run(self, tag: str) -> None:
        n = 0
        while not self._stopping.is_set():
            n += 1
            try:
                if n % 3 == 0 and self.book.resting:
                    self._cancel()
                else:
                    self._place(f"w{self.index}-{tag}-{n}-{'r' if n % 3 == 1 else 'x'}")
            except Exception as exc:  # a writer's thread must not die unseen
                self.book.wrong.append(f"{type(exc).__name__}: {exc}")

    def _cancel(self) -> None:
        book = self.book
        order_id = next(iter(book.resting))
        del book.resting[order_id]
        book.sent += 1
        try:
            answer = self.client.cancel_order(SYMBOL, order_id)
        except ApiError as exc:
            if (exc.status, exc.code) != (503, -1001):
                book.wrong.append(f"cancel of {order_id}: {exc.status} {exc.code} {exc}")
                return
            book.unknown_cancels.append(order_id)
            time.sleep(0.1)
            return
        if answer.get("status") != "CANCELED":
            book.wrong.append(f"cancel of {order_id} answered {answer}")
            return
        book.cancelled.add(order_id)
        book.acks += 1

    def _place(self, cid: str) -> None:
        book = self.book
        if cid.endswith("r"):
            side, price, qty = "BUY", self.rng.randrange(1_000, RESTING_BELOW // 2), "0.05"
        else:
            side, price = self.rng.choice(("BUY", "SELL")), MID + self.rng.randrange(-20, 21)
            qty = "0.001"
        book.sent += 1
        try:
            answer = self.client.create_order(
                SYMBOL, side, "LIMIT", qty, str(price), client_order_id=cid
            )
        except ApiError as exc:
            if (exc.status, exc.code) != (503, -1001):
                book.wrong.append(f"placement {cid}: {exc.status} {exc.code} {exc}")
                return
            book.unknown.append(cid)
            if "writes are stopped" in exc.msg:
                book.refusals[cid] = exc.msg
            time.sleep(0.1)
            return
        book.placed[cid] = int(answer["orderId"])
        if cid.endswith("r"):
            book.resting[int(answer["orderId"])] = cid
        book.acks += 1


# --------------------------------------------------------------------------- the venue


def terminate(application_name: str) -> int:
    """End the PostgreSQL sessions of one engine (and its projector): how many."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return sum(1 for (ended,) in rows if ended)


@dataclass
class Venue:
    backend: Backend
    root: Path
    subject: str
    env: dict[str, str]
    engines: dict[str, Engine]
    proxies: dict[str, Proxy]
    pg_proxies: dict[str, Proxy]
    """Each engine's link to PostgreSQL (its projector's too), cut by a partition."""
    gateway: ServerProcess | None = None
    writers: list[Writer] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    """What happened, for failure messages."""

    # -- who leads

    def leader(self) -> tuple[Engine, dict[str, Any]]:
        leading = [(e, line) for e in self.engines.values() if (line := e.leading())]
        assert len(leading) == 1, f"not one engine leads: {[e.name for e, _ in leading]}"
        return leading[0]

    def other(self, engine: Engine) -> Engine:
        (found,) = (e for e in self.engines.values() if e is not engine)
        return found

    def admin(self, engine: Engine | None = None) -> AdminClient:
        engine, line = (engine, engine.leading()) if engine else self.leader()
        assert line is not None, f"{engine.name} does not lead"
        token = DataDir(engine.data_dir).read_token()
        assert token is not None
        return AdminClient(line["url"], token)

    def note(self, what: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {what}")

    def context(self, told: Engine | None = None) -> str:
        """What happened lately, and the engines' logs (but ``told``'s, already shown)."""
        tails = "".join(e.tail() for e in self.engines.values() if e is not told)
        return "\n".join(self.log[-30:]) + tails

    # -- the writers

    def add_writers(self, count: int) -> None:
        assert self.gateway is not None
        admin = self.admin()
        for index in range(count):
            user = admin.create_user()
            key = admin.create_key(user["id"])
            for asset, amount in FUNDS.items():
                admin.deposit(user["id"], asset, amount)
            client = Client(self.gateway.url, key["apiKey"], key["secret"], timeout=30.0)
            deadline = time.monotonic() + STEP_S
            while True:  # the gateway hears of a key just after its commit
                try:
                    client.account()
                    break
                except ApiError:
                    assert time.monotonic() < deadline, "the gateway never heard of the key"
                    time.sleep(0.02)
            self.writers.append(Writer(index, client, int(user["id"])))

    def write(self, tag: str) -> None:
        for writer in self.writers:
            writer.start(tag)

    def acks(self) -> list[int]:
        return [w.book.acks for w in self.writers]

    def wait_acks(self, since: list[int], count: int, scenario: str) -> None:
        """Until every writer had ``count`` more writes acknowledged (the venue takes them)."""
        deadline = time.monotonic() + STEP_S
        while any(now - then < count for now, then in zip(self.acks(), since, strict=True)):
            assert time.monotonic() < deadline, (
                f"{scenario}: writes did not go on after the takeover: acks {self.acks()}"
                f" since {since}\n{self.context()}"
            )
            time.sleep(0.05)

    def stop_writers(self) -> None:
        for writer in self.writers:
            writer.stop()

    # -- the store

    def query(self, sql: str) -> list[Any]:
        return self.backend.query(self.root, sql)

    def projected(self) -> None:
        """Until the tables hold every journal record (the projector caught up)."""
        (head,) = self.query("SELECT COALESCE(MAX(seq), 0) FROM journal")[0]
        deadline = time.monotonic() + STEP_S
        while True:
            rows = self.query("SELECT value FROM engine_state WHERE name = 'journal.projected'")
            if rows and rows[0][0] >= head:
                return
            assert time.monotonic() < deadline, f"the tables stay behind record {head}: {rows}"
            time.sleep(0.05)

    def epochs(self) -> list[tuple[int, int, int, int]]:
        """(epoch, first seq, last seq, records) of each epoch's commits, in sequence order."""
        rows = self.query(
            "SELECT epoch, MIN(seq), MAX(seq), COUNT(*) FROM journal GROUP BY epoch"
            " ORDER BY MIN(seq)"
        )
        return [(int(e), int(lo), int(hi), int(n)) for e, lo, hi, n in rows]

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        # The standbys first: one that sees the leader go would take over while it stops.
        for engine in sorted(self.engines.values(), key=lambda e: e.leading() is not None):
            engine.stop()
        for proxy in [*self.proxies.values(), *self.pg_proxies.values()]:
            proxy.close()
        for engine in self.engines.values():
            terminate(application_name(engine.database))
        self.backend.drop()


def application_name(database: str) -> str:
    return database.rsplit("application_name=", 1)[1]


@pytest.fixture
def venue(tmp_path: Path) -> Iterator[Venue]:
    """Two engines (e1 leads, e2 follows), each on its own data folder, NATS through a proxy
    of its own, and one gateway of two workers; six writers with funded accounts."""
    for reason in (postgres_unreachable(), nats_unreachable()):
        if reason:
            pytest.skip(reason)
    backend = Backend("postgresql")
    database = backend.database(tmp_path)
    schema = backend.schemas[tmp_path]
    subject = f"test-ha-{uuid.uuid4().hex}"
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRADEHALL_SECRET_KEY": key}
    proxies = {name: Proxy(NATS_URL) for name in ("e1", "e2")}
    pg = urlsplit(PG_URL)
    pg_at = f"{pg.hostname}:{pg.port or 5432}"
    pg_proxies = {name: Proxy(f"tcp://{pg_at}") for name in ("e1", "e2")}
    engines = {
        name: Engine(
            name,
            tmp_path / name,
            database.replace(
                f"application_name={schema}", f"application_name={schema}_{name}"
            ).replace(pg_at, urlsplit(pg_proxies[name].url).netloc, 1),
            proxies[name].url,
            subject,
        )
        for name in ("e1", "e2")
    }
    found = Venue(backend, tmp_path, subject, env, engines, proxies, pg_proxies)
    try:
        e1, e2 = engines["e1"], engines["e2"]
        e1.start(env)
        e1.wait_leader(0)
        e2.start(env)
        e2.wait_standby(0)
        found.gateway = start_gateway(subject, workers=2)
        found.add_writers(WRITERS)
        yield found
    finally:
        with contextlib.suppress(Exception):
            for writer in found.writers:
                writer._stopping.set()
        found.stop()


# --------------------------------------------------------------------------- the checks


def settle_unknowns(venue: Venue, scenario: str) -> tuple[int, int]:
    """Look up, by clientOrderId through the gateway, every placement whose answer was
    503/-1001 (and every such cancel, by orderId): (found applied, found not applied)."""
    applied = never = 0
    for writer in venue.writers:
        book, client = writer.book, writer.client
        for cid in book.unknown:
            try:
                order = retry(functools.partial(client.get_order, SYMBOL, client_order_id=cid))
            except ApiError as exc:
                assert exc.code == -2013, f"{scenario}: looking {cid} up: {exc}"
                book.not_applied.add(cid)
                never += 1
                continue
            assert cid not in book.refusals, (
                f"{scenario}: {cid} was answered 503 {book.refusals[cid]!r}, yet it was applied"
            )
            book.placed[cid] = int(order["orderId"])
            if cid.endswith("r") and order["status"] == "NEW":
                book.resting[int(order["orderId"])] = cid
            applied += 1
        book.unknown.clear()
        for order_id in book.unknown_cancels:
            order = retry(functools.partial(client.get_order, SYMBOL, order_id))
            assert order["status"] in ("NEW", "CANCELED"), f"{scenario}: {order}"
            if order["status"] == "CANCELED":
                book.cancelled.add(order_id)
            else:
                book.resting[order_id] = order["clientOrderId"]
        book.unknown_cancels.clear()
    return applied, never


def retry(call: Callable[[], Any]) -> Any:
    """``call`` again while the venue answers 503/-1001 "not reachable" (a takeover)."""
    deadline = time.monotonic() + STEP_S
    while True:
        try:
            return call()
        except ApiError as exc:
            if (exc.status, exc.code) != (503, -1001) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def check_store(venue: Venue, scenario: str) -> dict[str, int]:
    """Every acknowledged write is in the store, none applied twice, the journal's epochs
    never go back, the ledger audits, and the leader's memory holds the open orders the
    writers were told of. What was checked, counted."""
    venue.stop_writers()
    for writer in venue.writers:
        assert not writer.book.wrong, (
            f"{scenario}: writer {writer.index} was answered what it should never be:"
            f" {writer.book.wrong[:5]}\n{venue.context()}"
        )
    applied, never = settle_unknowns(venue, scenario)
    venue.projected()
    epochs = venue.epochs()
    for before, after in itertools.pairwise(epochs):
        assert before[0] < after[0] and before[2] < after[1], (
            f"{scenario}: two leaders committed: the journal's epochs (epoch, first seq,"
            f" last seq, records) go back or interleave: {epochs}\n{venue.context()}"
        )
    accounts = ",".join(str(w.user_id) for w in venue.writers)
    rows = venue.query(
        f"SELECT account, client_id, id, status FROM orders WHERE account IN ({accounts})"
    )
    twice = [cid for cid, n in Counter(cid for _, cid, _, _ in rows).items() if n > 1]
    assert not twice, f"{scenario}: placements applied twice: {twice[:10]}\n{venue.context()}"
    stored = {cid: (int(order_id), status) for _, cid, order_id, status in rows}
    acknowledged = cancelled = 0
    for writer in venue.writers:
        book = writer.book
        for cid, order_id in book.placed.items():
            assert cid in stored, f"{scenario}: acknowledged {cid} is not in the store"
            assert stored[cid][0] == order_id, f"{scenario}: {cid}: {stored[cid]} != {order_id}"
        cids = {order_id: cid for cid, order_id in book.placed.items()}
        for order_id in book.cancelled:
            cid = cids[order_id]
            assert stored[cid][1] == "CANCELED", f"{scenario}: cancel of {cid}: {stored[cid]}"
        mine = {cid for account, cid, _, _ in rows if account == writer.user_id}
        unexpected = mine - set(book.placed)
        assert not unexpected, (
            f"{scenario}: orders no writer was told of, nor found by clientOrderId:"
            f" {sorted(unexpected)[:10]}"
        )
        # The leader's memory (open orders are answered from it), through the gateway.
        open_resting = {
            int(o["orderId"])
            for o in retry(functools.partial(writer.client.open_orders, SYMBOL, 1000))
            if float(o["price"]) < RESTING_BELOW
        }
        assert open_resting == set(book.resting), (
            f"{scenario}: writer {writer.index}'s resting orders in the leader's memory"
            f" {sorted(open_resting)} are not the ones it was told of {sorted(book.resting)}"
            f"\n{venue.context()}"
        )
        acknowledged += len(book.placed)
        cancelled += len(book.cancelled)
    report = venue.admin().audit()
    assert report["ok"], f"{scenario}: the audit found {report['problems']}\n{venue.context()}"
    return {
        "placed": acknowledged,
        "cancelled": cancelled,
        "unknown applied": applied,
        "unknown never applied": never,
        "epochs": len(epochs),
    }


def check_status(venue: Venue, leader: Engine, standby: Engine, scenario: str) -> None:
    """The leader's status shows it leading at its epoch and the other engine following."""
    line = leader.leading()
    assert line is not None
    deadline = time.monotonic() + STEP_S
    while True:
        ha = venue.admin(leader).status()["ha"]
        engines = {e["node"]: e for e in ha["engines"]}
        seen = engines.get(standby.name, {})
        if (
            ha["leading"]
            and ha["node"] == leader.name
            and ha["epoch"] == line["epoch"]
            and ha["standbys"] == 1
            and seen.get("role") == "standby"
            and seen.get("pid") == standby.pid
        ):
            return
        assert time.monotonic() < deadline, f"{scenario}: the status says {ha}"
        time.sleep(0.1)


def cli_audit(venue: Venue, scenario: str) -> None:
    """`tradehall audit` on the leader's data folder: it finds the running leader (its
    server.json) and audits through it."""
    leader, _ = venue.leader()
    done = subprocess.run(
        tradehall_command(
            "audit", "--data-dir", str(leader.data_dir), "--database", leader.database, "--json"
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=venue.env,
    )
    assert done.returncode == 0, f"{scenario}: tradehall audit: {done.stdout}{done.stderr}"
    assert json.loads(done.stdout)["ok"], done.stdout


def take_over(
    venue: Venue, old: Engine, fault: Callable[[], None], scenario: str
) -> tuple[Engine, dict[str, Any], float]:
    """Apply ``fault`` to the leader ``old``; wait for the other engine to lead at a later
    epoch: (it, its leader line, seconds from the fault to its leader line)."""
    new = venue.other(old)
    old_line = old.leading()
    assert old_line is not None, f"{scenario}: {old.name} does not lead"
    since = len(new.lines)
    began = time.monotonic()
    fault()
    venue.note(f"{scenario}: fault applied to {old.name} (epoch {old_line['epoch']})")
    try:
        line = new.wait_leader(since)
    except AssertionError as exc:
        raise AssertionError(f"{scenario}: {exc}\n{venue.context(new)}") from None
    assert line["epoch"] > old_line["epoch"], f"{scenario}: {line} after {old_line}"
    venue.note(f"{scenario}: {new.name} leads at epoch {line['epoch']}")
    return new, line, line["at"] - began


def follows(venue: Venue, engine: Engine, since: int, scenario: str) -> None:
    """Until ``engine`` prints a standby line (from its line ``since`` on)."""
    try:
        engine.wait_standby(since)
    except AssertionError as exc:
        raise AssertionError(f"{scenario}: {exc}\n{venue.context(engine)}") from None


# --------------------------------------------------------------------------- the tests


class DepthWatch(threading.Thread):
    """A client of the gateway's WebSocket stream following BTCUSDT's book: when each push
    came (monotonic), over one connection for the whole test."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.pushes: list[float] = []
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._follow())
        except BaseException as exc:  # reported by the test
            self.error = exc

    async def _follow(self) -> None:
        async with websockets.asyncio.client.connect(self.url, compression=None) as ws:
            sub = {"event": "sub", "params": {"channel": DEPTH, "cb_id": "t"}}
            await ws.send(json.dumps(sub))
            while not self._stopping.is_set():
                try:
                    frame = await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    continue
                assert isinstance(frame, bytes), "every server frame is binary"
                message = json.loads(gzip.decompress(frame))
                if "ping" in message:
                    await ws.send(json.dumps({"pong": message["ping"]}))
                elif message.get("channel") == DEPTH and "tick" in message:
                    self.pushes.append(time.monotonic())

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)


def test_leader_killed_under_load_five_times_the_standby_takes_over(venue: Venue) -> None:
    """kill -9 of the leader while six writers place and cancel through the gateway: the
    standby leads; every acknowledged write is in the store, none applied twice; the old
    leader started again follows as a standby. Five times, the leaders alternating."""
    takeovers: list[float] = []
    leaders: list[str] = []
    assert venue.gateway is not None
    watch = DepthWatch("ws" + venue.gateway.url[len("http") :] + "/kline-api/ws")
    watch.start()
    last_takeover = 0.0
    for round_ in range(1, 6):
        scenario = f"kill -9, round {round_}"
        old, _ = venue.leader()
        venue.write(f"k{round_}")
        venue.wait_acks([0] * WRITERS, 1, scenario)
        time.sleep(0.7)
        new, _, took = take_over(venue, old, old.kill, scenario)
        last_takeover = time.monotonic()
        takeovers.append(took)
        leaders.append(new.name)
        since = len(old.lines)
        old.start(venue.env)
        venue.wait_acks(venue.acks(), 3, scenario)
        follows(venue, old, since, scenario)
        venue.note(f"{scenario}: {old.name} restarted, follows")
        counts = check_store(venue, scenario)
        venue.note(f"{scenario}: {counts}")
        check_status(venue, new, old, scenario)
    assert leaders == ["e2", "e1", "e2", "e1", "e2"]
    # One WebSocket connection, opened before the first kill, still gets the book's pushes
    # from the fifth leader (the gateway restates its clients' channels to each new one).
    venue.write("ws")
    venue.wait_acks(venue.acks(), 3, "WebSocket after the takeovers")
    watch.stop()
    assert watch.error is None, f"the depth stream failed: {watch.error!r}"
    assert any(at > last_takeover for at in watch.pushes), (
        f"no depth push on the WebSocket after the last takeover ({len(watch.pushes)} before)"
    )
    cli_audit(venue, "kill -9, after the fifth round")
    print(f"takeovers after kill -9: {[round(t, 2) for t in takeovers]} s; {venue.log[-1]}")


def cut_postgres(venue: Venue, leader: Engine) -> Callable[[], None]:
    return lambda: venue.note(
        f"{terminate(application_name(leader.database))} sessions of {leader.name} ended"
    )


def cut_off(venue: Venue, scenario: str) -> float:
    """One partition of the leader under load: the standby leads, the old leader steps down
    by itself and follows again (the same process prints a standby line), writes go on
    through the gateway, and the store shows every acknowledged write, none twice, and no
    two leaders committing. How long the takeover took (from the fault)."""
    old, _ = venue.leader()
    old_pid = old.pid
    venue.write(scenario[:4].replace(" ", ""))
    venue.wait_acks([0] * WRITERS, 1, scenario)
    time.sleep(0.5)
    since = len(old.lines)
    if scenario.startswith("SIGSTOP"):
        frozen = time.monotonic()
        new, _, took = take_over(venue, old, lambda: os.kill(old.pid, signal.SIGSTOP), scenario)
        time.sleep(max(0.0, 6.0 - (time.monotonic() - frozen)))
        assert stopped_state(old.pid), f"{scenario}: {old.name} was not frozen all along"
        os.kill(old.pid, signal.SIGCONT)
        venue.note(f"{scenario}: {old.name} resumed")
    elif scenario.startswith("PostgreSQL sessions"):
        new, _, took = take_over(venue, old, cut_postgres(venue, old), scenario)
    elif scenario.startswith("PostgreSQL unreachable"):
        # Its link to the database cut and refused for a while (a partition, or the
        # database failing over): it steps down, waits for the database, follows again.
        pg_proxy = venue.pg_proxies[old.name]
        new, _, took = take_over(venue, old, lambda: pg_proxy.cut(NATS_CUT_S), scenario)
    else:
        proxy = venue.proxies[old.name]
        new, _, took = take_over(venue, old, lambda: proxy.cut(NATS_CUT_S), scenario)
    after = venue.acks()
    follows(venue, old, since, scenario)
    assert old.pid == old_pid and old.alive(), f"{scenario}: {old.name} is not the same"
    venue.note(f"{scenario}: {old.name} stepped down, follows")
    venue.wait_acks(after, 3, scenario)
    counts = check_store(venue, scenario)
    venue.note(f"{scenario}: {counts}")
    check_status(venue, new, old, scenario)
    cli_audit(venue, scenario)
    return took


def test_a_leader_cut_off_from_postgres_or_frozen_steps_down(venue: Venue) -> None:
    """The leader's PostgreSQL sessions terminated (pg_terminate_backend); then the new
    leader frozen (SIGSTOP) for 6 s and resumed after the standby took over."""
    took = {s: cut_off(venue, s) for s in ("PostgreSQL sessions terminated", "SIGSTOP for 6 s")}
    print(f"takeovers: { {k: round(v, 2) for k, v in took.items()} }; {venue.log[-1]}")


def test_a_leader_cut_off_from_postgresql_waits_for_it_then_follows(venue: Venue) -> None:
    """The leader's link to PostgreSQL cut, and refused for 8 s: the standby leads at once
    (the server ended the lost sessions: the lock is free); the old leader steps down and,
    started again, waits for its database rather than exit, then follows."""
    took = cut_off(venue, "PostgreSQL unreachable for 8 s")
    print(f"takeover: {took:.2f} s; {venue.log[-1]}")


def test_a_leader_cut_off_from_nats_steps_down(venue: Venue) -> None:
    """The leader's NATS connection dropped, and refused for 8 s (its link goes through a
    proxy of the test's own; the standby's link is not cut)."""
    took = cut_off(venue, "NATS dropped")
    print(f"takeover: {took:.2f} s; {venue.log[-1]}")


def test_a_standby_that_fell_behind_catches_up_before_it_leads(venue: Venue) -> None:
    """The standby frozen while the leader takes writes (its lag shows in the status), then
    resumed and the leader killed at once: it leads only with every acknowledged write."""
    scenario = "standby behind"
    leader, _ = venue.leader()
    standby = venue.other(leader)
    # An operator command on the standby's machine writes nothing and says where to go.
    refused = subprocess.run(
        tradehall_command(
            "user", "create", "--data-dir", str(standby.data_dir), "--database",
            standby.database, "--json",
        ),
        capture_output=True, text=True, timeout=30, env=venue.env,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stdout
    assert "standby" in json.loads(refused.stdout)["msg"] and "leader" in refused.stdout
    venue.write("b")
    venue.wait_acks([0] * WRITERS, 1, scenario)
    os.kill(standby.pid, signal.SIGSTOP)
    venue.note(f"{scenario}: {standby.name} frozen")
    try:
        frozen_at = venue.acks()
        venue.wait_acks(frozen_at, 60, scenario)
        deadline = time.monotonic() + STEP_S
        while True:  # the leader's status shows the standby behind, and not heard of lately
            engines = {e["node"]: e for e in venue.admin(leader).status()["ha"]["engines"]}
            seen = engines[standby.name]
            if seen["lag"] > 100 and seen["seenMsAgo"] > 1000:
                break
            assert time.monotonic() < deadline, f"{scenario}: the status says {seen}"
            time.sleep(0.1)
        (head,) = venue.query("SELECT MAX(seq) FROM journal")[0]
    finally:
        os.kill(standby.pid, signal.SIGCONT)
    new, line, took = take_over(venue, leader, leader.kill, scenario)
    assert new is standby
    since = len(leader.lines)
    leader.start(venue.env)
    venue.wait_acks(venue.acks(), 3, scenario)
    follows(venue, leader, since, scenario)
    counts = check_store(venue, scenario)
    status = venue.admin(standby).status()["ha"]
    assert status["leading"] and status["epoch"] == line["epoch"]
    epochs = venue.epochs()
    assert epochs[-2][2] >= head, f"{scenario}: {epochs} (head {head} when the standby froze)"
    print(
        f"{scenario}: {head - seen['seq']} records behind; took over in {took:.2f} s"
        f" (its own view: {status['takeoverSeconds']} s); {counts}"
    )


def standby_refusal(data_dir: Path, database: str) -> dict[str, Any]:
    """What `engine --standby` says when it cannot be a standby (it must exit, at once)."""
    done = subprocess.run(
        tradehall_command(
            "engine", "--standby", "--data-dir", str(data_dir), "--database", database,
            "--json", "--nats", NATS_URL, "--engine-subject", f"test-{uuid.uuid4().hex}",
        ),
        capture_output=True, text=True, timeout=30,
        env={k: v for k, v in os.environ.items() if k != "TRADEHALL_SECRET_KEY"},
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    refusal: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return refusal


def test_a_standby_that_cannot_be_one_says_why_and_exits(tmp_path: Path) -> None:
    """A wrong --database, or a venue's store without its sealing key: told at once (an
    operator must not believe a standby follows when it cannot)."""
    for reason in (postgres_unreachable(), nats_unreachable()):
        if reason:
            pytest.skip(reason)
    backend = Backend("postgresql")
    try:
        database = backend.database(tmp_path / "first")
        schema = backend.schemas[tmp_path / "first"]
        missing = database.replace(schema, f"{schema}_missing")
        refusal = standby_refusal(tmp_path / "a", missing)
        assert refusal["code"] == -1001 and "no schema" in refusal["msg"], refusal
        # The venue's store exists (made by its first engine); this standby has no key.
        made = subprocess.run(
            tradehall_command(
                "db", "upgrade", "--data-dir", str(tmp_path / "first"), "--database", database
            ),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        refusal = standby_refusal(tmp_path / "b", database)
        assert "sealing key" in refusal["msg"] and "secret.key" in refusal["msg"], refusal
        assert not (tmp_path / "b" / "secret.key").exists()  # none made behind its back
    finally:
        backend.drop()
