"""The projector: builds the tables (orders, trades, ledger, balances, history) from the
journal, off the engine's core.

It keeps an exchange of its own, loaded from the tables as they stand (as of the last journal
record they hold), and replays each journal record after that through it: the same commands
give the same events, which it writes as rows, with the sequence number it reached, in one
transaction per chunk of records. So it is idempotent (a record is projected once: the commit
checks the sequence number it started from) and restartable (it continues from the tables).

It runs as a process of its own (``tradehall projector``, which ``serve`` and ``engine`` start
as a child), or inline in the offline commands.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tradehall.config import BUILTIN_SOURCE, Config
from tradehall.exchange import Exchange
from tradehall.secretbox import SecretBox
from tradehall.store.base import ProjectionMoved, collector_paused
from tradehall.store.journal import Journal
from tradehall.store.journaled import JournaledStore
from tradehall.store.sql import SQLStore

log = logging.getLogger("tradehall.projector")

CHUNK = 256
"""Journal records projected per transaction at most (each record is a whole group commit)."""
IDLE_S = 0.002
IDLE_MAX_S = 0.02
"""When it has caught up, the projector looks again after ``IDLE_S``, twice as long after each
look that found nothing, up to ``IDLE_MAX_S``: under load it follows within milliseconds, and
an idle one does not take a core's share from the engine beside it by reading the journal
500 times a second (measured: /ping 31,000 -> 25,000 per second on 2 cores with 2 ms)."""


class SignalStop:
    """Set by a signal handler. A plain attribute, no lock: ``threading.Event.set`` takes the
    event's lock, which the main thread the handler interrupts may be holding (inside
    ``Event.wait``): the handler then waits for it forever, and so does the process (seen:
    a projector that never exited after SIGTERM)."""

    def __init__(self) -> None:
        self.stopped = False

    def set(self, *_: object) -> None:
        self.stopped = True

    def is_set(self) -> bool:
        return self.stopped


@dataclass
class ProjectorStats:
    records: int = 0
    entries: int = 0
    rows: int = 0
    commits: int = 0
    busy_s: float = 0.0
    started: float = field(default_factory=time.monotonic)


class Projector:
    def __init__(
        self,
        config: Config,
        projections: SQLStore[Any],
        journal: Journal,
        secret_box: SecretBox,
        *,
        chunk: int = CHUNK,
    ) -> None:
        self.config = config
        self.projections = projections
        self.journal = journal
        self.secret_box = secret_box
        self.chunk = chunk
        self.exchange: Exchange | None = None
        self.seq = 0
        """The last journal record the tables hold."""
        self.stats = ProjectorStats()
        self._lock = threading.Lock()

    def load(self) -> None:
        """(Re)build the projector's exchange from the tables."""
        exchange = Exchange(self.config, self.projections, secret_box=self.secret_box)
        with collector_paused():
            exchange.recover()
        self.exchange = exchange
        self.seq = exchange.projected
        log.info("projector: the tables stand at journal record %d", self.seq)

    def step(self) -> int:
        """Project the next chunk of records; how many (0: caught up)."""
        with self._lock:
            if self.exchange is None:
                self.load()
            exchange = self.exchange
            assert exchange is not None
            records = self.journal.read(self.seq, self.chunk)
            if not records:
                return 0
            began = time.perf_counter()
            try:
                for record in records:
                    exchange.replay(record.entries, record.seq)
                    self.stats.entries += len(record.entries)
                batch = exchange.take_pending()
                batch.projects = (self.seq, records[-1].seq)
                self.stats.rows += batch.row_count()
                self.projections.commit(batch)
            except ProjectionMoved:
                log.warning("another projector wrote these records: reloading from the tables")
                self.exchange = None
                return 0
            except BaseException:
                self.exchange = None  # memory may be ahead of the tables: reload next time
                raise
            self.seq = records[-1].seq
            self.stats.records += len(records)
            self.stats.commits += 1
            self.stats.busy_s += time.perf_counter() - began
            return len(records)

    def catch_up(self) -> None:
        """Project every record appended so far."""
        while self.step():
            pass

    def run(self, stopping: Callable[[], bool], parent: int | None = None) -> None:
        """Project until ``stopping()`` (then catch up and return), or the parent process
        (``parent``) is gone. ``stopping`` is polled: a signal handler only sets a flag (one
        that set a ``threading.Event`` while this thread waited on it would deadlock)."""
        idle = IDLE_S
        while not stopping():
            if parent is not None and os.getppid() != parent:
                log.warning("the engine process is gone: catching up, then stopping")
                break
            if self.step():
                idle = IDLE_S
            else:
                time.sleep(idle)
                idle = min(idle * 2, IDLE_MAX_S)
        self.catch_up()


def attach_inline(
    store: JournaledStore, config: Config, secret_box: SecretBox | Callable[[], SecretBox]
) -> None:
    """Project in this process, after each commit and before each history read (offline
    commands; tests without a projector process). ``secret_box`` may be a function giving
    it: it is asked for only once there is something to project."""
    made: list[Projector] = []

    def catch_up() -> None:
        if not made:
            box = secret_box if isinstance(secret_box, SecretBox) else secret_box()
            made.append(Projector(config, store.projections, store.journal, box))
        made[0].catch_up()

    store.inline = catch_up


# --------------------------------------------------------------------------- the child process


class ProjectorProcess:
    """``tradehall projector`` as a child of the engine process (``serve``, ``engine``):
    started after recovery, restarted if it dies, stopped (after catching up) at shutdown."""

    RESTART_S = 1.0

    def __init__(self, config: Config, data_dir: str, *, env: dict[str, str] | None = None):
        self.config = config
        self.data_dir = data_dir
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stopping = False
        self._watch: threading.Thread | None = None

    def command(self) -> list[str]:
        from tradehall import logs

        args = [sys.executable, "-m", "tradehall", "projector", "--data-dir", self.data_dir]
        args += ["--log-format", logs.current_format]
        if self.config.source != BUILTIN_SOURCE:
            args += ["--config", self.config.source]
        return [*args, "--parent", str(os.getpid())]

    def start(self) -> None:
        env = dict(os.environ if self.env is None else self.env)
        database = self.config.server.database
        if database:
            env["TRADEHALL_DATABASE"] = database  # not in argv, where ps shows it
        self.proc = subprocess.Popen(self.command(), env=env, stdin=subprocess.DEVNULL)
        if self._watch is None:
            self._watch = threading.Thread(
                target=self._supervise, name="tradehall-projector-watch", daemon=True
            )
            self._watch.start()

    def _supervise(self) -> None:
        while not self._stopping:
            proc = self.proc
            if proc is not None and proc.poll() is not None and not self._stopping:
                log.error("the projector exited (status %s): restarting it", proc.returncode)
                time.sleep(self.RESTART_S)
                if self._stopping:
                    return
                self.restarts += 1
                self.start()
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Ask it to catch up and stop; kill it after ``timeout`` (the next start continues
        from the tables)."""
        self._stopping = True
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning(
                "the projector did not catch up within %.0f s: stopped; the next start"
                " continues from the tables",
                timeout,
            )
            proc.kill()
            proc.wait()


def open_exchange(
    config: Config,
    store: JournaledStore,
    secret_box: SecretBox,
    *,
    inline: bool,
    check_invariants: bool = False,
) -> Exchange:
    """The exchange of the engine process (or of an offline command) on ``store``: migrated,
    this run's epoch claimed, recovered from the projections and the journal after them.
    ``inline``: no projector process runs beside it, so this process projects (the offline
    commands): the tables are caught up first, and after every commit."""
    store.migrate()
    store.start_appending(claim=not inline)
    if inline:
        attach_inline(store, config, secret_box)
        store.caught_up()
    exchange = Exchange(config, store, secret_box=secret_box, check_invariants=check_invariants)
    with collector_paused():
        exchange.recover()
    if inline:
        store.projected_seen()
        store.rows_inline = True  # the tables hold the head: each commit writes its rows
        exchange.writes_rows = True
    return exchange
