"""Retention in the running server: a periodic task that prunes history past its horizon
(``[retention]``, store/prune.py) in short transactions on the writer's thread, between
commits, never on the engine's path; then gives SQLite's freed pages back to the disk."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tradehall.config import RetentionSettings
from tradehall.engine.futures_model import futures_account
from tradehall.exchange import Exchange
from tradehall.sim.accounts import participant_market
from tradehall.store import prune
from tradehall.store.base import StoreError
from tradehall.store.journaled import JournaledStore
from tradehall.store.writer import GroupCommitter

log = logging.getLogger("tradehall.retention")


def simulation_accounts(exchange: Exchange) -> frozenset[int]:
    """Every ledger account of the simulation's participants (spot, margin, futures), and
    their user ids (which futures documents are keyed by)."""
    users = {u.id for u in exchange.users.values() if participant_market(u.name) is not None}
    margin = exchange.engine.margin.by_user
    accounts = {a.id for (user, _), a in margin.items() if user in users}
    return frozenset([*users, *(futures_account(u) for u in users), *accounts])


def cutoffs_now(exchange: Exchange, settings: RetentionSettings, now: int) -> prune.Cutoffs:
    return prune.cutoffs(
        now,
        orders_days=settings.orders_days,
        trades_days=settings.trades_days,
        ledger_days=settings.ledger_days,
        system_ledger_hours=settings.system_ledger_hours,
        simulation_minutes=settings.simulation_minutes,
        simulation_accounts=simulation_accounts(exchange),
    )


OnWriter = Callable[..., Awaitable[Any]]
"""Runs a store call where writes may run (the group committer's thread, or right here)."""


async def directly(fn: Callable[..., Any], *args: Any) -> Any:
    """``OnWriter`` where nothing else writes (the offline ``tradehall db prune``)."""
    return fn(*args)


Cursors = dict[tuple[str, str], int]
"""Per (kind, horizon), the id the walk of the next pass starts after."""


async def prune_pass(
    exchange: Exchange,
    settings: RetentionSettings,
    now: int,
    on_writer: OnWriter,
    cursors: Cursors | None = None,
) -> dict[str, int]:
    """Prune every kind once by ``settings``' horizons at ``now`` (whether or not they are
    enabled: the caller decides), one short transaction at a time, each walk from its cursor
    in ``cursors`` (from the start without), which it then moves on; the rows deleted per
    kind, and ``reclaimedPages``: the SQLite pages given back to the disk afterwards."""
    done: dict[str, int] = dict.fromkeys(prune.KINDS, 0)
    if exchange.failure is not None:
        return done
    store = exchange.store
    cursors = {} if cursors is None else cursors
    cut = cutoffs_now(exchange, settings, now)
    symbols = [*exchange.config.markets.pairs, *exchange.config.markets.contracts]
    keep = await on_writer(store.prune_keep, symbols)
    for kind in prune.KINDS:
        for horizon in prune.CLASSES[kind]:
            stop_at = cut.of(horizon)
            after = cursors.get((kind, horizon), 0)
            while stop_at and exchange.failure is None:
                step = await on_writer(
                    store.prune_step, kind, cut, keep, after, settings.batch_rows, stop_at
                )
                done[kind] += step.deleted
                after = step.last_id
                if step.done:
                    break
            cursors[(kind, horizon)] = after
    done["reclaimedPages"] = await on_writer(store.reclaim_space)
    done["journalRecords"] = 0
    if isinstance(store, JournaledStore) and settings.journal_hours:
        before = now - settings.journal_hours * 3_600_000
        while exchange.failure is None:
            gone = await on_writer(store.compact_journal, before, settings.batch_rows)
            done["journalRecords"] += gone
            if gone < settings.batch_rows:
                break
        if done["journalRecords"]:
            done["reclaimedPages"] += await on_writer(store.reclaim_journal)
    return done


class Pruner:
    def __init__(
        self,
        exchange: Exchange,
        committer: GroupCommitter,
        clock: Callable[[], int],
        settings: RetentionSettings | None = None,
    ) -> None:
        self.exchange = exchange
        self.committer = committer
        self.clock = clock
        self.settings = settings or exchange.config.retention
        self._task: asyncio.Task[None] | None = None
        self.totals: dict[str, int] = dict.fromkeys(prune.KINDS, 0)
        """Rows pruned since the start, per kind."""
        self.cursors: Cursors = {}
        self.passes = 0

    async def run_pass(self) -> dict[str, int]:
        """Prune every kind once; the rows deleted per kind (and SQLite pages given back)."""
        if self.passes % prune.FULL_WALK_EVERY == 0:
            self.cursors.clear()
        self.passes += 1
        done = await prune_pass(
            self.exchange, self.settings, self.clock(), self.committer.on_writer, self.cursors
        )
        for kind in prune.KINDS:
            self.totals[kind] += done[kind]
        return done

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.interval_s)
            try:
                pruned = await self.run_pass()
            except StoreError as exc:
                if self.exchange.failure is None:  # a failed store is said once, elsewhere
                    log.error(
                        "pruning failed (nothing is lost: the next pass tries again): %s", exc
                    )
            except Exception:
                log.exception("pruning failed (nothing is lost: the next pass tries again)")
            else:
                if any(pruned.values()):
                    log.info("pruned %s", pruned)

    def start(self) -> None:
        if self.settings.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
