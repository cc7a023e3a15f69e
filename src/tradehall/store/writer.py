"""Group commit: every write waits for a commit, and one commit serves every request that
arrived while the previous one was being written.

While the writer thread commits batch N, the event loop keeps applying commands into batch
N + 1; when N is done, N + 1 goes in one transaction. So under load a commit carries many
requests and durability (one fsync per commit) costs little per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from tradehall.exchange import Exchange
from tradehall.metrics.histogram import SIZE_BUCKETS, Histogram
from tradehall.store.base import StoreError
from tradehall.store.batch import Batch

log = logging.getLogger("tradehall.store")
T = TypeVar("T")

CHECKPOINT_ROWS = 16_000
CHECKPOINT_COMMITS = 400
"""A store that has checkpoints (SQLite's WAL) gets one after this many rows or this many
commits, whichever comes first, each run on its own thread so that no commit (and no request
waiting for one) pays for it. Each checkpoint copies every page changed since the last one
and syncs the database file, so the hot pages (balances, index leaves) are copied once per
checkpoint: under a load of signed placements, one every ~50 commits instead of every 8
bought 8-11 % more placements and cancels per second (docs/performance.md, session 5). The
commit count bounds the WAL when commits are small (~12 pages for a lone placement): 400 of
them stay well under the 10,000 pages at which a commit would checkpoint by itself."""


class GroupCommitter:
    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="tradehall-writer")
        self._next: asyncio.Future[None] | None = None
        """Resolves when what is staged now is committed."""
        self._inflight: asyncio.Future[None] | None = None
        self._running = False
        self._task: asyncio.Task[None] | None = None
        self.commits = 0
        self._checkpoint_fn: Callable[[], None] | None = (
            getattr(exchange.store, "checkpoint", None)
            if getattr(exchange.store, "checkpoints", False)
            else None
        )
        self._checkpointer: ThreadPoolExecutor | None = None
        self._checkpoint: Future[None] | None = None
        self._rows_since_checkpoint = 0
        self._commits_since_checkpoint = 0
        self.batch_rows = Histogram(SIZE_BUCKETS)
        self.commit_seconds = Histogram()
        """From the cut of a batch to its commit's end (what a write waits, at most)."""
        self.sync_seconds = Histogram()
        """The COMMIT statement of each commit: the write-out and fsync."""
        self.listeners: list[Callable[[Batch], None]] = []
        """Called on the event loop with each batch once it is committed (the streams' feed).
        A listener must be quick and must not raise; if it does, it is logged and the
        commit stands."""

    def durable(self) -> asyncio.Future[None]:
        """A future that resolves once everything applied so far is committed (or fails with
        StoreError). Await it before acknowledging a write or showing live state."""
        exchange = self.exchange
        if exchange.failure is None and exchange.pending:
            waiting = self._next
            if waiting is not None and self._running:
                # The common case under load: a commit is already due, every command staged
                # since shares it (and no call to get_running_loop, which is a getpid system
                # call on Python 3.11: that took ~1 us per placement in the engine process).
                return waiting
        loop = asyncio.get_running_loop()
        if exchange.failure is not None:
            failed: asyncio.Future[None] = loop.create_future()
            failed.set_exception(StoreError(exchange.failure))
            return failed
        if exchange.pending:
            if self._next is None:
                self._next = loop.create_future()
            if not self._running:
                self._running = True
                self._task = loop.create_task(self._run())
            return self._next
        if self._inflight is not None and not self._inflight.done():
            return self._inflight
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    def busy(self) -> bool:
        """A commit is being written (its batch is neither pending nor committed)."""
        return self._inflight is not None and not self._inflight.done()

    def durable_shielded(self) -> asyncio.Future[None]:
        """``durable()`` for a task that may be cancelled while it waits (the scheduler, the
        simulation, the streams): ``durable()`` hands every waiter the same future, and
        cancelling a task cancels the future it awaits, which would fail every request
        waiting on that commit. The shield takes the cancellation instead."""
        return asyncio.shield(self.durable())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.exchange.pending and self.exchange.failure is None:
                batch = self.exchange.take_pending()
                future = self._next or loop.create_future()
                self._next = None
                self._inflight = future
                rows = batch.row_count()
                cut = time.perf_counter()
                try:
                    await loop.run_in_executor(self._executor, self.exchange.store.commit, batch)
                except Exception as exc:  # fail-stop: nothing more is acknowledged
                    self.exchange.failure = f"store commit failed: {exc}"
                    error = StoreError(self.exchange.failure)
                    for waiting in (future, self._next):
                        if waiting is not None and not waiting.done():
                            waiting.set_exception(error)
                            waiting.exception()  # mark retrieved: waiters get it when they await
                    self._next = None
                    return
                self.commits += 1
                self.commit_seconds.observe(time.perf_counter() - cut)
                self.batch_rows.observe(rows)
                synced = getattr(self.exchange.store, "last_sync_seconds", None)
                if synced is not None:
                    self.sync_seconds.observe(synced)
                if not future.done():
                    future.set_result(None)
                for listener in self.listeners:
                    try:
                        listener(batch)
                    except Exception:
                        log.exception("a commit listener failed")
                self._rows_since_checkpoint += rows
                self._commits_since_checkpoint += 1
                if (
                    self._rows_since_checkpoint >= CHECKPOINT_ROWS
                    or self._commits_since_checkpoint >= CHECKPOINT_COMMITS
                ):
                    self._start_checkpoint()
            if self.exchange.failure is not None and self._next is not None:
                # The exchange failed stop elsewhere (an engine failure) while requests
                # waited for a commit that will now never be written: they get the error.
                waiting, self._next = self._next, None
                if not waiting.done():
                    waiting.set_exception(StoreError(self.exchange.failure))
                    waiting.exception()  # mark retrieved: waiters get it when they await
        finally:
            self._running = False

    def _start_checkpoint(self) -> None:
        if self._checkpoint_fn is None:
            return
        if self._checkpoint is not None and not self._checkpoint.done():
            return  # the previous one is still copying
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(1, thread_name_prefix="tradehall-checkpoint")
        self._rows_since_checkpoint = 0
        self._commits_since_checkpoint = 0
        self._checkpoint = self._checkpointer.submit(self._checkpoint_fn)
        self._checkpoint.add_done_callback(_log_failure)

    async def on_writer(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the writer's thread, between two commits: store work that
        writes beside the commits (pruning). A commit due meanwhile waits for it, so each
        call must be short."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def flush(self) -> None:
        """Commit everything staged; used on shutdown."""
        while self.exchange.pending or (self._inflight is not None and not self._inflight.done()):
            await self.durable()

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._checkpointer is not None:
            self._checkpointer.shutdown(wait=True)


def _log_failure(done: Future[None]) -> None:
    """A failed checkpoint loses nothing (the commits are in the synced WAL; the next commit
    or checkpoint tries again); it is only logged."""
    exc = done.exception()
    if exc is not None:
        log.warning("background checkpoint failed: %s", exc)
