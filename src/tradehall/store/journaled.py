"""The store as the engine process sees it: the journal is the durable record, and the
tables (orders, trades, ledger, balances, history) are projections of it, written by the
projector (``tradehall.projector``), its own process.

A commit is one journal append. Recovery loads the projections (a snapshot of the whole
exchange as of the last journal record they hold) and replays the journal after it. A history
read first waits until the projections hold every record committed when it was asked (so a
client always sees its own acknowledged writes), for at most ``wait_s``; past that it fails
with ``ProjectionBehind`` (HTTP 503, -1001: retry).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any, TextIO

from tradehall.store.base import StoreError, StoreRefused
from tradehall.store.batch import Batch
from tradehall.store.journal import CommandIds, Journal, JournalRecord, encode
from tradehall.store.prune import Cutoffs, Keep, Step
from tradehall.store.sql import SQLStore

WAIT_S = 1.5
"""How long a history read waits for the projections to reach the writes before it: under
the gateways' timeout for the engine's answer (2 s), so that a client behind a gateway is
told that history is catching up, not that the engine is unreachable."""
POLL_S = 0.002


class ProjectionBehind(StoreError):
    """The projections did not reach the journal's head in time (nothing is lost: retry)."""


def behind(projected: int, goal: int) -> ProjectionBehind:
    return ProjectionBehind(
        f"history is catching up with the latest writes (at record {projected} of {goal});"
        " retry shortly"
    )


READ_AFTER: ContextVar[int | None] = ContextVar("read_after", default=None)
"""Set by a caller that has already waited for the projections (``api.projection_wait``):
the record its read must see, instead of the head when the read runs."""


class JournaledStore:
    def __init__(
        self,
        projections: SQLStore[Any],
        journal: Journal,
        *,
        wait_s: float = WAIT_S,
    ) -> None:
        self.projections = projections
        self.journal = journal
        self.wait_s = wait_s
        self.head = 0
        """The last journal record appended (or found at start)."""
        self.epoch = 0
        """This run's epoch (claimed at ``start_appending``)."""
        self.rows_inline = False
        """This process writes each record's rows itself right after appending it (its
        exchange stages them: offline commands and in-process test servers, which start
        with the tables caught up)."""
        self.inline: Callable[[], None] | None = None
        """Catches the projections up in this thread (offline commands, tests without a
        projector process): called after each commit and before each history read."""
        self.projector: Any = None
        """The projector process the engine supervises (``ProjectorProcess``), if any."""
        self.ha: Any = None
        """An HA engine's standing (``cluster.standby.Role``), once it leads."""
        self._projected = 0
        self._lock = threading.Lock()
        self.checkpoints = bool(getattr(journal.db, "checkpoints", False))
        self._separate = journal.db is not projections
        """SQLite: the journal has a file of its own."""

    # ------------------------------------------------------------- schema and identity

    def identity(self) -> dict[str, str]:
        return self.projections.identity()

    def migrate(self) -> int:
        version = self.projections.migrate()
        self.journal.prepare()
        self.head = max(self.journal.head(), self.projections.projected())
        return version

    def schema_version(self) -> int:
        return self.projections.schema_version()

    def start_appending(self, *, claim: bool = True) -> int:
        """Find where appends continue (the head) and claim this run's epoch (``claim``;
        otherwise at the first append: an offline command that only reads claims none)."""
        self.head = max(self.journal.head(), self.projections.projected())
        if claim:
            self.epoch = self.journal.next_epoch()
        return self.epoch

    # ------------------------------------------------------------- the journal

    @property
    def last_sync_seconds(self) -> float | None:
        return self.journal.last_sync_seconds

    def commit(self, batch: Batch) -> None:
        if batch.entries:
            if not self.epoch:  # an offline command claims one only when it writes
                self.epoch = self.journal.next_epoch()
            seq = self.head + 1
            entries: list[Any] = batch.entries
            if batch.command_ids:
                entries = [*entries, CommandIds(batch.command_ids)]
            fmt, body = encode(entries)
            self.journal.append(seq, self.epoch, time.time_ns() // 1_000_000, fmt, body)
            self.head = seq
            batch.journal_seq = seq
            if self.rows_inline and self._projected == seq - 1:
                # This process is its own projector: the batch's rows are the record's.
                batch.projects = (seq - 1, seq)
                self.projections.commit(batch)
                with self._lock:
                    self._projected = seq
                return
        if self.inline is not None:
            self.inline()

    def checkpoint(self) -> None:
        checkpoint = getattr(self.journal.db, "checkpoint", None)
        if checkpoint is not None:
            checkpoint()

    def tail(self, after: int) -> Iterator[JournalRecord]:
        """The records after ``after`` (recovery replays them over the projections)."""
        return self.journal.records(after)

    def projected(self) -> int:
        return self.projections.projected()

    def projected_seen(self) -> int:
        """``projected()`` read now, or the last value seen if the store cannot be read (for
        status and metrics, which answer while the store is down)."""
        try:
            projected = self.projections.projected()
        except StoreError:
            return self._projected
        with self._lock:
            self._projected = max(self._projected, projected)
        return projected

    def compact_journal(self, before: int, limit: int) -> int:
        """Drop up to ``limit`` journal records that the tables hold and that were appended
        before ``before`` (ms); how many went (on the writer: between two appends)."""
        upto = min(self.projections.projected(), self.head)
        return self.journal.compact(upto, before, limit)

    def reclaim_journal(self) -> int:
        return self.journal.db.reclaim_space() if self._separate else 0

    # ------------------------------------------------------------- reads

    def caught_up(self, target: int | None = None, *, wait_s: float | None = None) -> None:
        """Return once the projections hold every record up to ``target`` (default: what is
        committed now); ``ProjectionBehind`` after ``wait_s`` (default: the store's)."""
        goal = self.head if target is None else target
        if self._projected >= goal:
            return
        deadline = time.monotonic() + (self.wait_s if wait_s is None else wait_s)
        inline = self.inline
        while True:
            projected = self.projections.projected()
            with self._lock:
                self._projected = max(self._projected, projected)
            if projected >= goal:
                return
            if inline is not None:
                inline()
                inline = None  # once: if that did not get there, nothing here will
                continue
            if time.monotonic() >= deadline:
                raise behind(projected, goal)
            time.sleep(POLL_S)

    def load(self, symbols: list[str], bars_to_keep: dict[str, int]) -> Any:
        return self.projections.load(symbols, bars_to_keep)

    def projected_cached(self) -> int:
        """The projector's position as last read (no store read)."""
        return self._projected

    def _read(self, name: str, *args: Any) -> Any:
        self.caught_up(READ_AFTER.get())
        return getattr(self.projections, name)(*args)

    def find_order(self, *args: Any) -> Any:
        return self._read("find_order", *args)

    def account_trades(self, *args: Any) -> Any:
        return self._read("account_trades", *args)

    def account_orders(self, *args: Any) -> Any:
        return self._read("account_orders", *args)

    def account_trades_between(self, *args: Any) -> Any:
        return self._read("account_trades_between", *args)

    def futures_history(self, *args: Any) -> Any:
        return self._read("futures_history", *args)

    def account_transfers(self, *args: Any) -> Any:
        return self._read("account_transfers", *args)

    def account_transfer(self, *args: Any) -> Any:
        return self._read("account_transfer", *args)

    def futures_doc(self, *args: Any) -> Any:
        return self._read("futures_doc", *args)

    def futures_by_client_id(self, *args: Any) -> Any:
        return self._read("futures_by_client_id", *args)

    def admin_log(self, limit: int, before: int | None = None) -> list[tuple[Any, ...]]:
        result: list[tuple[Any, ...]] = self._read("admin_log", limit, before)
        return result

    def admin_log_span(self) -> tuple[int, int, int]:
        result: tuple[int, int, int] = self._read("admin_log_span")
        return result

    def ledger_mismatches(self) -> list[tuple[int, str, int, int, int, int]]:
        result: list[tuple[int, str, int, int, int, int]] = self._read("ledger_mismatches")
        return result

    def ledger_sums(self) -> dict[tuple[int, str], tuple[int, int]]:
        result: dict[tuple[int, str], tuple[int, int]] = self._read("ledger_sums")
        return result

    # ------------------------------------------------------------- upkeep of the projections

    def prune_keep(self, symbols: Iterable[str]) -> Keep:
        return self.projections.prune_keep(symbols)

    def prune_step(
        self, kind: str, cut: Cutoffs, keep: Keep, after: int, limit: int, stop_at: int
    ) -> Step:
        return self.projections.prune_step(kind, cut, keep, after, limit, stop_at)

    def reclaim_space(self) -> int:
        return self.projections.reclaim_space()

    def vacuum(self) -> None:
        self.projections.vacuum()
        vacuum = getattr(self.journal.db, "vacuum", None)
        if vacuum is not None and self._separate:
            vacuum()

    def table_stats(self) -> dict[str, tuple[int, int | None]]:
        return self.projections.table_stats()

    def storage_stats(self) -> dict[str, object]:
        stats = dict(self.projections.storage_stats())
        stats["journal"] = {**self.journal.stats(), "head": self.head, "epoch": self.epoch}
        if self._separate:
            stats["journalFiles"] = self.journal.db.storage_stats().get("files", {})
        return stats

    def export_to(self, out: TextIO) -> dict[str, int]:
        self.caught_up()
        return self.projections.export_to(out)

    def import_from(self, source: TextIO) -> dict[str, int]:
        if self.journal.head() > 0:
            raise StoreRefused(
                "the target store is not empty (records in its journal): import only into an"
                " empty store"
            )
        counts = self.projections.import_from(source)
        # The imported projections were made from a journal that is not here: this one
        # continues after the record they hold.
        self.journal.set_base(self.projections.projected())
        self.head = max(self.journal.head(), self.projections.projected())
        return counts

    def close(self) -> None:
        self.projections.close()
        if self._separate:
            self.journal.db.close()
