"""Helpers shared by the simulation tests (tests/sim/): the simulation driven tick by tick on
a real exchange and group committer, with a fake clock."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from support import FakeClock, make_exchange
from tradehall.exchange import Exchange
from tradehall.sim.runner import Simulation
from tradehall.sim.settings import SimulationSettings
from tradehall.store.writer import GroupCommitter


def simulate(
    settings: SimulationSettings, ticks: int, db: Path | None = None
) -> tuple[Exchange, Simulation]:
    """``ticks`` ticks of ``settings`` on the exchange recovered from ``db`` (a new one
    when absent), audited once at the end by the caller."""
    exchange = make_exchange(db or Path(tempfile.mkdtemp()) / "t.db")
    exchange.engine.check_invariants = False  # audited once at the end (fast)
    clock = FakeClock()

    async def main() -> Simulation:
        committer = GroupCommitter(exchange)
        sim = Simulation(exchange, committer, clock, settings)
        await sim.setup()
        for _ in range(ticks):
            clock.advance(settings.tick_ms)
            await sim.tick()
        committer.close()
        return sim

    return exchange, asyncio.run(main())
