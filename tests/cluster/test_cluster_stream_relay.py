"""The engine's stream relay on a real exchange, hub and NATS: what gateways follow is their
restated interest; a gateway gone silent is forgotten after the expiry, one leaving at once;
a channel just added by a ``sub`` survives a restatement sent before the client subscribed;
a channel a gateway newly restates, or restates asking for a resync, gets its current state
pushed."""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from support import NATS_URL, make_exchange, nats_unreachable
from tradehall.cluster.protocol import (
    StreamAsk,
    StreamInterest,
    decode_stream_answer,
    encode,
)
from tradehall.cluster.stream_relay import GRACE, StreamRelay
from tradehall.config import WebSocketSettings
from tradehall.engine.commands import Deposit, PlaceOrder
from tradehall.store.writer import GroupCommitter
from tradehall.stream.fanout import SPOT
from tradehall.stream.hub import Hub

T0 = 1_700_000_000_000
DEPTH = "market_btcusdt_depth_step0"
TRADES = "market_btcusdt_trade_ticker"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def settle(condition: object, seconds: float = 5) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition() and loop.time() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.01)
    assert condition(), "not reached in time"  # type: ignore[operator]


def test_interest_is_restated_expired_and_left(tmp_path: Path) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    exchange = make_exchange(tmp_path / "db.sqlite")
    subject = f"test-{uuid.uuid4().hex}"

    async def scenario() -> None:
        committer = GroupCommitter(exchange)
        hub = Hub(exchange, committer, lambda: T0, WebSocketSettings(push_interval_ms=10))
        clock = Clock()
        relay = StreamRelay(hub, subject, expiry=15, monotonic=clock)
        peer = await nats.connect(NATS_URL)
        pushed: list[bytes] = []

        async def on_push(msg: Msg) -> None:
            pushed.append(msg.data)

        await peer.subscribe(f"{subject}.ws.out.md.{DEPTH}", cb=on_push)
        try:
            async with relay.running(NATS_URL):

                async def interest(
                    gateway: str, *channels: str, leaving: bool = False, resync: bool = False
                ) -> None:
                    follows = [(SPOT, c) for c in channels]
                    body = StreamInterest(gateway, follows, [], leaving, resync)
                    await peer.publish(f"{subject}.ws.interest", encode(body))

                # A restatement follows channels (a bad name is ignored) and pushes their state.
                exchange.apply(Deposit(T0, 1, "USDT", 10**14, "t1"))
                exchange.apply(
                    PlaceOrder(T0, 1, "BTCUSDT", "BUY", "LIMIT", price=2_000_000, qty=1000)
                )
                await committer.durable()
                await interest("g1", DEPTH, TRADES, "market_nope_ticker")
                await settle(lambda: set(relay.channels) == {DEPTH, TRADES})
                await settle(lambda: bool(pushed))
                book = json.loads(gzip.decompress(pushed[-1]))
                assert book["channel"] == DEPTH and book["tick"]["buys"][0][0] == "20000.00"
                assert set(hub.channels) == {DEPTH, TRADES}

                # A second gateway by `sub`; its first restatement, sent before its client
                # subscribed, leaves the channel out: kept within the grace period.
                ask = StreamAsk("g2", SPOT, "sub", {"channel": DEPTH})
                answer = decode_stream_answer(
                    (await peer.request(f"{subject}.ws.ask", encode(ask), timeout=5)).data
                )
                assert answer.code == 0 and answer.channel == DEPTH and answer.frame
                await interest("g2")
                await asyncio.sleep(0.2)
                assert set(relay.channels[DEPTH].gateways) == {"g1", "g2"}
                clock.now += GRACE + 1
                await interest("g2")
                await settle(lambda: set(relay.channels[DEPTH].gateways) == {"g1"})

                # A plain restatement of what g1 follows pushes nothing; one asking for a
                # resync (g1 was cut off from NATS) pushes the current state again.
                seen = len(pushed)
                await interest("g1", DEPTH, TRADES)
                await asyncio.sleep(0.3)
                assert len(pushed) == seen
                await interest("g1", DEPTH, TRADES, resync=True)
                await settle(lambda: len(pushed) > seen)

                # g1 restates only the depth: the trades channel goes.
                await interest("g1", DEPTH)
                await settle(lambda: set(relay.channels) == {DEPTH})
                assert set(hub.channels) == {DEPTH}

                # Silent past the expiry: forgotten, and the hub follows nothing more.
                clock.now += 16
                relay.expire()
                assert relay.channels == {} and hub.channels == {}

                # Back, then leaving: forgotten at once.
                await interest("g1", DEPTH)
                await settle(lambda: DEPTH in relay.channels)
                await interest("g1", leaving=True)
                await settle(lambda: not relay.channels)
                assert hub.channels == {}
        finally:
            await peer.close()
            await committer.flush()
            committer.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    exchange.store.close()
