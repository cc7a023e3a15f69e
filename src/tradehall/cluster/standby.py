"""High availability: ``tradehall engine --standby`` (docs/deployment.md, "High availability").

Every engine of an HA venue starts as a *standby*: it loads the exchange from the tables and
then follows the journal, replaying each record as the leader commits it, so that its memory
is the leader's a few milliseconds behind. Leadership is PostgreSQL's session advisory lock
on the schema, the one the engine's write session has always taken: a standby bids for it
every ``BID_S``; it is free once the leader's session is gone (its process died, its session
was terminated, or it sat idle past its lease because the process was frozen). The winner

1. claims the next epoch (``Journal.next_epoch``): the fence; from that statement on, no
   append of the previous leader can commit, and every one it did commit is in the journal;
2. replays the journal to its head (whatever it had not yet followed);
3. serves: the same process path as a plain ``tradehall engine`` after recovery.

A leader holds its lease by running a statement on its write session at least every
``HEARTBEAT_S`` (a commit counts); the session is set to end after ``LEASE_S`` without one.
It steps down (``Role.step_down``: it stops answering at once, then the process starts again
as a standby) when its write session is lost, when an append is fenced, when NATS has been
unreachable for ``NATS_GRACE_S``, and it answers nothing once ``LEASE_S - MARGIN_S`` passed
without a renewal (it may have been frozen, and another engine may lead).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tradehall.config import Config
from tradehall.datadir import DataDir
from tradehall.exchange import Exchange
from tradehall.secretbox import SecretBox
from tradehall.state_digest import ForkedDigest
from tradehall.store.base import StoreError, collector_paused
from tradehall.store.journal import CommandIds, HashMark, JournalRecord, StateHashed
from tradehall.store.journaled import JournaledStore

log = logging.getLogger("tradehall.engine")

LEASE_S = 3.0
"""A leader's write session ends after this long without a statement (PostgreSQL's
``idle_session_timeout``): how long a frozen leader keeps the lock."""
HEARTBEAT_S = 0.5
"""How often an idle leader renews its lease."""
MARGIN_S = 0.5
"""A leader answers nothing once ``LEASE_S - MARGIN_S`` passed since its last renewal."""
NATS_GRACE_S = 2.0
"""A leader cut off from NATS this long steps down (no gateway can reach it)."""
BID_S = 0.1
"""How often a standby bids for leadership."""
POLL_S = 0.002
POLL_MAX_S = 0.02
"""A standby that has caught up looks for new journal records after ``POLL_S``, twice as
long after each look that found nothing, up to ``POLL_MAX_S`` (as the projector does)."""
REPORT_S = 1.0
"""How often an engine writes its position in ``ha_nodes`` (the operator's view)."""
ID_HORIZON_MS = 20_000
"""Command ids of the journal's records this recent are kept by a standby: a gateway's
resend (within twice its timeout of the first send) to a new leader is then answered from
them, never applied twice."""
RETRY_S = 1.0
"""A standby that cannot reach the store tries again after this long."""
HASH_EVERY_S = 30.0
"""The leader hashes its state (in a forked child: ``state_digest``) at most this often and
records the digest in the journal; standbys check theirs against it."""

NODES = (
    "CREATE TABLE IF NOT EXISTS ha_nodes ("
    " node TEXT PRIMARY KEY,"
    " role TEXT NOT NULL,"
    " epoch BIGINT NOT NULL,"
    " seq BIGINT NOT NULL,"
    " seen BIGINT NOT NULL,"
    " pid BIGINT NOT NULL)"
)
REPORT = (
    "INSERT INTO ha_nodes (node, role, epoch, seq, seen, pid) VALUES (%s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (node) DO UPDATE SET role = excluded.role, epoch = excluded.epoch,"
    " seq = excluded.seq, seen = excluded.seen, pid = excluded.pid"
)
FORGET_AFTER_MS = 900_000
"""An engine not heard of for this long leaves ``ha_nodes``."""


def default_node() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Diverged(StoreError):
    """A standby replayed a record and reached another state than the leader's hash: it
    must never lead."""


@dataclass
class RecentCommands:
    """The ids of commands committed in the journal's recent records: id -> record."""

    horizon_ms: int = ID_HORIZON_MS
    ids: dict[str, int] = field(default_factory=dict)
    _order: deque[tuple[int, list[str]]] = field(default_factory=deque)
    since: int = 0
    """Ids of records appended from this time (ms) on are all known."""

    def add(self, record: JournalRecord) -> None:
        for entry in record.entries:
            if type(entry) is CommandIds:
                for command_id in entry.ids:
                    self.ids[command_id] = record.seq
                self._order.append((record.time, entry.ids))
        self._forget(now_ms() - self.horizon_ms)

    def _forget(self, before: int) -> None:
        order, ids = self._order, self.ids
        while order and order[0][0] < before:
            for command_id in order.popleft()[1]:
                ids.pop(command_id, None)
        self.since = max(self.since, before)


def recent_commands(store: JournaledStore, upto: int) -> RecentCommands:
    """The ids of the commands committed in the journal's last ``ID_HORIZON_MS``, up to
    record ``upto`` (an engine that starts, as a standby or after a restart)."""
    recent = RecentCommands()
    since = now_ms() - recent.horizon_ms
    for record in reversed(list(store.journal.since(since, upto))):
        recent.add(record)
    recent.since = since
    return recent


class Follower:
    """A standby's exchange, following the journal."""

    def __init__(
        self, config: Config, store: JournaledStore, secret_box: SecretBox | None, node: str
    ):
        self.config = config
        self.store = store
        self.secret_box = secret_box
        self.node = node
        self.exchange: Exchange | None = None
        self.seq = 0
        """The last journal record applied."""
        self.recent = RecentCommands()
        self.checked = 0
        """State hashes checked against the leader's."""
        self._digest = ForkedDigest()
        self._hashing = 0
        """The record whose state ``_digest`` is hashing (0: none)."""
        self._mine: dict[int, str] = {}
        """This standby's digests of marked records, until the leader's arrive."""
        self._reported = 0.0

    # ------------------------------------------------------------- loading

    def wait_for_store(self, bid: Callable[[], bool], stopping: Callable[[], bool]) -> bool:
        """Until the schema and the journal exist; a standby writes nothing, so it waits for
        the leader (or ``db upgrade``) to make them, unless it wins leadership first (the
        first engine of a new venue): then it makes them itself. True if it leads."""
        projections, journal = self.store.projections, self.store.journal
        told = False
        with projections._failing("looking for the schema"):
            schema = projections._conn().execute("SELECT current_schema()").fetchone()
        if schema is None or schema[0] is None:
            raise StoreError(
                "no schema of the search_path exists: create it first (CREATE SCHEMA ...)"
                " or fix search_path"
            )
        while not stopping():
            conn = projections._conn()
            with projections._failing("looking for the journal"):
                ready = projections._exists(conn, "journal")
                if ready:
                    conn.execute(NODES)  # IF NOT EXISTS: a store made before HA has none
            if ready:
                journal._ready = True
                return False
            if bid():
                self.store.migrate()  # ``lead`` adds the HA table
                return True
            if not told:
                log.info("standby: waiting for the leader to create the store")
                told = True
            time.sleep(0.5)
        raise Stopped()

    def load(self) -> None:
        """The exchange from the tables and the journal after them (a cold start), then the
        ids of the commands committed in the last ``ID_HORIZON_MS``."""
        began = time.perf_counter()
        assert self.secret_box is not None
        exchange = Exchange(self.config, self.store, secret_box=self.secret_box)
        with collector_paused():
            exchange.recover()
        exchange.journaling = False  # replayed records are already in the journal
        self.exchange = exchange
        self.seq = exchange.replayed
        self.recent = recent_commands(self.store, self.seq)
        log.info(
            "standby: loaded the exchange at journal record %d in %.2f s",
            self.seq,
            time.perf_counter() - began,
        )

    # ------------------------------------------------------------- following

    def step(self, limit: int = 256) -> int:
        """Apply the next records; how many (0: caught up)."""
        exchange = self.exchange
        assert exchange is not None
        records = self.store.journal.read(self.seq, limit)
        self._collect(wait=False)
        for record in records:
            exchange.replay(record.entries, record.seq)
            exchange.take_pending()  # replayed rows are the projector's to write
            self.recent.add(record)
            for entry in record.entries:
                kind = type(entry)
                if kind is HashMark:
                    self._collect(wait=True)  # one digest at a time
                    if self._digest.start(exchange.engine.state_hash):
                        self._hashing = record.seq
                elif kind is StateHashed:
                    self._check(entry)  # type: ignore[arg-type]
            self.seq = record.seq
        return len(records)

    def _collect(self, *, wait: bool) -> None:
        """Keep the digest being made once it is done (``wait``: wait for it)."""
        while self._hashing:
            digest = self._digest.poll()
            if not self._digest.busy:
                if digest is not None:
                    self._mine[self._hashing] = digest
                self._hashing = 0
                return
            if not wait:
                return
            time.sleep(0.001)

    def _check(self, hashed: StateHashed) -> None:
        """The leader's digest of record ``hashed.at`` against this standby's (if it
        replayed that record: one loaded after it has none to compare)."""
        if self._hashing == hashed.at:
            self._collect(wait=True)
        mine = self._mine.pop(hashed.at, None)
        for older in [at for at in self._mine if at < hashed.at]:
            del self._mine[older]
        if mine is None:
            return
        if mine != hashed.digest:
            raise Diverged(
                f"standby {self.node} replayed journal record {hashed.at} to another state"
                " than the leader's (state hashes differ): it stops, and must not lead"
            )
        self.checked += 1
        log.info(
            "standby: the state at journal record %d is the leader's (hashes match)", hashed.at
        )

    def close(self) -> None:
        """Stop a digest in the making (the standby leads now)."""
        self._digest.close()
        self._hashing = 0

    def report(self, epoch: int) -> None:
        """This engine's position in ``ha_nodes`` (a standby on its read session)."""
        conn = self.store.projections._conn()
        with self.store.projections._failing("reporting the standby's position"):
            conn.execute(
                REPORT,
                (self.node, "standby", epoch, self.seq, now_ms(), os.getpid()),
            )

    def follow(self, bid: Callable[[], bool], stopping: Callable[[], bool]) -> None:
        """Follow the journal until ``bid()`` wins leadership (or ``stopping()``)."""
        last_bid = 0.0
        idle = POLL_S
        while True:
            if stopping():
                raise Stopped()
            applied = self.step()
            now = time.monotonic()
            if now - self._reported >= REPORT_S:
                self._reported = now
                try:
                    self.report(self.store.journal.epoch())
                except StoreError as exc:
                    log.warning("%s", exc)
            if now - last_bid >= BID_S:
                last_bid = now
                if bid():
                    return
            if applied:
                idle = POLL_S
            else:
                time.sleep(idle)
                idle = min(idle * 2, POLL_MAX_S)


class Stopped(Exception):
    """A standby was asked to stop before it led."""


@dataclass
class Role:
    """An HA engine's standing, shared by the standby phase, the engine service and the CLI."""

    node: str
    leading: bool = False
    epoch: int = 0
    since_ms: int = 0
    """When this engine began to lead."""
    takeover_s: float = 0.0
    """From winning the lock to serving (fence, catch-up)."""
    recent: RecentCommands | None = None
    stepped_down: str | None = None
    """Why this engine stopped leading (the process then starts again as a standby)."""
    stop_server: Callable[[], None] | None = None
    renewed: float = field(default_factory=time.monotonic)
    """When the lease was last renewed (monotonic)."""
    patient: bool = False
    """Retry the store from the start: this process is a leader that stepped down (its
    database may be away for a while: a failover), not an operator's first start."""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    """``ha_nodes`` as the leader last read it (with each heartbeat)."""

    def lease_valid(self) -> bool:
        return time.monotonic() - self.renewed < LEASE_S - MARGIN_S

    def step_down(self, why: str) -> None:
        if self.stepped_down is not None:
            return
        self.stepped_down = why
        self.leading = False
        log.error("engine %s steps down: %s", self.node, why)
        if self.stop_server is not None:
            self.stop_server()


def lead(
    config: Config,
    store: JournaledStore,
    secret_box: Callable[[bool], SecretBox],
    role: Role,
    *,
    announce: Callable[[], None],
    stopping: Callable[[], bool],
    can_lead: Callable[[], bool] = lambda: True,
) -> Exchange:
    """Follow the journal as a standby until this engine leads; then fence, catch up and
    return the exchange, ready to serve (``server.run`` goes on as after a recovery).
    ``secret_box(new)``: the venue's sealing key; ``new``: this engine made the store, so
    it may make the key too (a standby of an existing venue must be given the leader's).

    A store error before the first load stops the standby (a wrong ``--database`` is an
    operator's mistake to be told at once); after it, the database is retried (it may be
    restarting or failing over)."""
    projections = store.projections
    if getattr(projections, "try_lead", None) is None:
        raise StoreError("high availability (--standby) needs PostgreSQL (--database)")

    def try_lead() -> bool:
        """Win the lock, and keep it only if this engine can serve (NATS reachable)."""
        if not projections.try_lead():  # type: ignore[attr-defined]
            return False
        if can_lead():
            return True
        projections.resign()  # type: ignore[attr-defined]
        log.warning("standby: no leader, but this engine cannot reach NATS: not leading")
        return False

    follower = Follower(config, store, None, role.node)
    announced = False
    while True:
        try:
            if follower.exchange is None:
                led = follower.wait_for_store(try_lead, stopping)
                if follower.secret_box is None:
                    follower.secret_box = secret_box(led)
                follower.load()
                if not announced:
                    announce()
                    announced = True
            if not led:
                follower.follow(try_lead, stopping)
            break
        except Diverged:
            raise
        except StoreError as exc:  # the database restarting, failing over: wait for it
            if not announced and not role.patient:
                raise
            log.warning("standby: %s; trying again in %.0f s", exc, RETRY_S)
            deadline = time.monotonic() + RETRY_S
            while time.monotonic() < deadline:
                if stopping():
                    raise Stopped() from None
                time.sleep(0.1)
    if stopping():  # asked to stop as it won: leave the lock to another standby
        raise Stopped()
    won = time.perf_counter()
    projections.hold_lease(LEASE_S)  # type: ignore[attr-defined]
    role.renewed = time.monotonic()
    store.migrate()  # this release's tables, if an older leader left older ones
    with projections._failing("creating the HA table"):
        projections._write_conn().execute(NODES)
    role.epoch = store.start_appending(claim=True)  # the fence
    while follower.step():
        pass
    if follower.seq != store.head:
        raise StoreError(
            f"the journal's head is {store.head} but this standby reached record"
            f" {follower.seq}: records are missing (compacted?); start it again (cold)"
        )
    follower.close()
    exchange = follower.exchange
    assert exchange is not None
    exchange.journaling = True
    exchange.hash_every_s = HASH_EVERY_S
    role.recent = follower.recent
    store.ha = role
    role.leading = True
    role.since_ms = now_ms()
    role.takeover_s = time.perf_counter() - won
    log.warning(
        "engine %s leads (epoch %d) from journal record %d; took over in %.3f s",
        role.node,
        role.epoch,
        store.head,
        role.takeover_s,
    )
    return exchange


def leader_heartbeat(store: JournaledStore, role: Role) -> None:
    """The leader's lease renewal and report, on the write session (the writer's thread)."""
    projections = store.projections
    conn = projections._write_conn()
    with projections._failing("renewing the leader's lease"):
        conn.execute(REPORT, (role.node, "leader", role.epoch, store.head, now_ms(), os.getpid()))
        conn.execute("DELETE FROM ha_nodes WHERE seen < %s", (now_ms() - FORGET_AFTER_MS,))
        rows = conn.execute(
            "SELECT node, role, epoch, seq, seen, pid FROM ha_nodes ORDER BY node"
        ).fetchall()
    role.nodes = [
        {"node": n, "role": r, "epoch": int(e), "seq": int(s), "seen": int(t), "pid": int(p)}
        for n, r, e, s, t, p in rows
    ]


ALIVE_MS = int(3 * REPORT_S * 1000)
"""An engine that reported within this long is alive (the status's view)."""


def ha_status(role: Role, head: int) -> dict[str, Any]:
    """The HA view of the status (docs/deployment.md): who leads, since when, and where each
    engine heard of lately stands."""
    now = now_ms()
    engines = []
    for row in role.nodes:
        alive = now - row["seen"] <= ALIVE_MS
        mine = row["node"] == role.node
        standing = row["role"] if alive else "gone"
        if not mine and standing == "leader":
            standing = "gone"  # a leader of an earlier epoch that did not report since
        engines.append(
            {
                "node": row["node"],
                "role": "leader" if mine and role.leading else standing,
                "epoch": row["epoch"],
                "seq": head if mine else row["seq"],
                "lag": 0 if mine else max(0, head - row["seq"]),
                "seenMsAgo": 0 if mine else max(0, now - row["seen"]),
                "pid": row["pid"],
            }
        )
    return {
        "node": role.node,
        "leading": role.leading,
        "epoch": role.epoch,
        "since": role.since_ms,
        "takeoverSeconds": round(role.takeover_s, 3),
        "standbys": sum(1 for e in engines if e["role"] == "standby"),
        "engines": engines,
    }


@dataclass
class StandbyStart:
    """``server.run``'s way in for an HA engine: follow as a standby until leading."""

    role: Role
    announce: Callable[[], None]
    stopping: Callable[[], bool]
    can_lead: Callable[[], bool] = lambda: True
    """Whether this engine could serve if it led (NATS reachable), asked when it wins."""

    def lead(self, cfg: Config, store: JournaledStore, datadir: DataDir) -> Exchange:
        datadir.clear_server()  # a leader's server.json, left by a kill, is not this run's

        def secret_box(new_venue: bool) -> SecretBox:
            box = datadir.existing_secret_box()
            if box is not None:
                return box
            if new_venue:
                return datadir.secret_box()  # made now, in the data folder
            raise StoreError(
                f"a standby needs the venue's sealing key: copy secret.key from the leader's"
                f" data folder into {datadir.path}, or set TRADEHALL_SECRET_KEY"
                " (docs/deployment.md, High availability)"
            )

        return lead(
            cfg,
            store,
            secret_box,
            self.role,
            announce=self.announce,
            stopping=self.stopping,
            can_lead=self.can_lead,
        )
