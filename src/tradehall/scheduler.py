"""Time-driven work as commands: the scheduler reads the clock and applies commands (hourly
margin interest; every second, a futures tick that refreshes index and mark prices, samples
the premium, settles funding when due and liquidates what the prices call for, and the
revocation of self-service keys unused for too long); it never
changes state behind the engine's back. Commands are durable like
any other, so a restart resumes where the last committed one left off (missed hours are charged
by the first accrual after the restart)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from tradehall import selfservice
from tradehall.engine.commands import AccrueInterest, FuturesTick
from tradehall.engine.index_sources import NONE, THIN, USED
from tradehall.engine.margin import HOUR_MS
from tradehall.exchange import Exchange
from tradehall.store.base import StoreError
from tradehall.store.writer import GroupCommitter
from tradehall.units import format_units

log = logging.getLogger("tradehall.scheduler")


class Scheduler:
    def __init__(
        self,
        exchange: Exchange,
        committer: GroupCommitter,
        clock: Callable[[], int],
        interval_s: float = 1.0,
    ) -> None:
        self.exchange = exchange
        self.committer = committer
        self.clock = clock
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._source_status: dict[tuple[str, str], str] = {}

    async def tick(self) -> None:
        """Apply whatever the current time calls for, and wait until it is durable."""
        if self.exchange.failure is not None:
            return
        now = self.clock()
        margin = self.exchange.engine.margin
        if margin.accrued_hour is None or now // HOUR_MS > margin.accrued_hour:
            self.exchange.apply(AccrueInterest(now))
            await self.committer.durable_shielded()
        selfservice.sweep(self.exchange, now)  # self-service keys unused too long: revoked
        # Prices: spot band references, futures index and mark, funding, liquidations.
        self.exchange.apply(FuturesTick(now))
        self._log_index_sources()
        if self.exchange.pending:
            await self.committer.durable_shielded()

    def _log_index_sources(self) -> None:
        """One line when an index source is left out (stale, an outlier, too thin) or taken
        back: the operator's record of what the index was built from."""
        for symbol, state in self.exchange.engine.futures.states.items():
            for name, source in state.sources.items():
                key = (symbol, name)
                before = self._source_status.get(key, USED)
                if source.status == before:
                    continue
                self._source_status[key] = source.status
                if source.status == USED:
                    log.info("index source %s of %s is used again", name, symbol)
                elif source.status == THIN:  # a quiet book: expected, not a fault
                    log.info("index source %s of %s left out: the book is thinner than its"
                             " depth", name, symbol)  # fmt: skip
                elif source.status != NONE:
                    places = self.exchange.engine.futures.contracts[symbol].price_precision
                    # A stale feed has no value any more: its last pushed price says more.
                    seen = source.value or source.fed
                    log.warning(
                        "index source %s of %s left out: %s (its price %s, the index %s)",
                        name, symbol, source.status, format_units(seen, places),
                        format_units(state.index, places),
                    )  # fmt: skip

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except StoreError as exc:  # the store failed (fail-stop): said once, elsewhere
                if self.exchange.failure is None:
                    log.error("scheduled command failed: %s", exc)
            except Exception:
                log.exception("scheduled command failed")
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
