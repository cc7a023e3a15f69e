"""Cancelling a task that waits for a commit does not fail the other requests waiting for
the same commit (``GroupCommitter.durable_shielded``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from support import make_exchange
from tradehall.engine.commands import Deposit
from tradehall.store.writer import GroupCommitter


def test_a_cancelled_waiter_leaves_the_shared_commit_alone(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "db.sqlite")

    async def scenario() -> None:
        committer = GroupCommitter(exchange)
        try:
            exchange.apply(Deposit(1, 1, "USDT", 100, "a"))
            shared = committer.durable()  # what an HTTP handler awaits

            async def background() -> None:
                await committer.durable_shielded()

            task = asyncio.ensure_future(background())
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.wait_for(shared, 10)  # committed, not cancelled
            assert not shared.cancelled()
            exchange.apply(Deposit(2, 1, "USDT", 100, "b"))
            await asyncio.wait_for(committer.durable(), 10)  # and the next commit works
        finally:
            await committer.flush()
            committer.close()

    asyncio.run(scenario())
    exchange.store.close()
