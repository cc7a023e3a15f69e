"""The hub on a real exchange and committer: pushes only after the commit, coalescing, and a
slow client dropped without holding back anyone else."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

from support import make_exchange
from tradehall.config import WebSocketSettings
from tradehall.engine.commands import Deposit, PlaceOrder
from tradehall.store.writer import GroupCommitter
from tradehall.stream.fanout import SPOT, Subscriber
from tradehall.stream.hub import Hub

T0 = 1_700_000_000_000


def test_a_slow_client_is_dropped_and_the_others_keep_receiving(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "db.sqlite")

    async def scenario() -> None:
        committer = GroupCommitter(exchange)
        hub = Hub(exchange, committer, lambda: T0, WebSocketSettings(push_interval_ms=10))
        hub.start()
        try:
            dropped: list[str] = []
            slow = Subscriber(2, dropped.append)
            fast = Subscriber(1000, lambda reason: None)
            channel = hub.channel(SPOT, "market_btcusdt_depth_step0")
            hub.subscribe(slow, channel.name)
            hub.subscribe(fast, channel.name)
            exchange.apply(Deposit(T0, 1, "USDT", 10**14, "t1"))
            await committer.durable()
            for i in range(8):  # eight book changes, each committed and pushed on its own
                exchange.apply(
                    PlaceOrder(T0, 1, "BTCUSDT", "BUY", "LIMIT", price=2_000_000 + i, qty=1000)
                )
                await committer.durable()
                await asyncio.sleep(0.05)
            assert dropped == ["too slow: the client did not read its frames"]
            assert len(slow.frames) == 2  # nothing more was queued once dropped
            frames = list(fast.frames)
            assert len(frames) >= 8
            last = json.loads(gzip.decompress(frames[-1]))
            assert len(last["tick"]["buys"]) == 8 and last["channel"] == channel.name
        finally:
            await hub.stop()
            await committer.flush()
            committer.close()

    asyncio.run(scenario())
    exchange.store.close()
