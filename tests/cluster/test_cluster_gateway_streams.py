"""A gateway's streams against a stand-in engine on a real NATS: a revoked key's private
stream closes even when the revocation's announcement was missed, and a revocation heard
while the engine confirms a new private stream refuses it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest
from nats.aio.msg import Msg

from support import NATS_URL, nats_unreachable
from tradehall.cluster.gateway import Gateway
from tradehall.cluster.gateway_streams import GatewayStreams
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import KeyInfo, KeySet, StreamAnswer, encode
from tradehall.config import LimitSettings, WebSocketSettings
from tradehall.stream.fanout import SPOT, Subscriber

KEY = KeyInfo("k1", "s1", 7, False, (), 1, None)
REVOKED = KeyInfo("k1", "s1", 7, False, (), 1, 2)

Scenario = Callable[[Gateway, GatewayStreams, list[KeySet], str], Awaitable[None]]


def with_stand_in_engine(
    scenario: Scenario, on_ask: Callable[..., Awaitable[None]] | None = None
) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"

    async def run() -> None:
        engine = await connect(NATS_URL, "stand-in-engine")
        keys = [KeySet([KEY])]

        async def on_keys(msg: Msg) -> None:
            await msg.respond(encode(keys[0]))

        await engine.subscribe(f"{subject}.keys", cb=on_keys)
        if on_ask is not None:

            async def ask(msg: Msg) -> None:
                await on_ask(engine, subject, msg)

            await engine.subscribe(f"{subject}.ws.ask", cb=ask)
        await engine.flush()
        gateway = Gateway(NATS_URL, subject, limits=LimitSettings(enabled=False), timeout=2)
        streams = GatewayStreams(gateway, WebSocketSettings())
        try:
            async with gateway.running(), streams.running():
                await scenario(gateway, streams, keys, subject)
        finally:
            await engine.drain()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_a_revocation_missed_while_away_closes_the_stream_on_the_keys_reload() -> None:
    async def scenario(
        gateway: Gateway, streams: GatewayStreams, keys: list[KeySet], subject: str
    ) -> None:
        key = gateway.find_key("k1")
        assert key is not None
        dropped: list[str] = []
        streams.add_private(Subscriber(10, dropped.append), SPOT, key.user_id, "k1")
        # Revoked while this gateway heard nothing (its keys.changed lost); the engine then
        # announces itself (or NATS reconnects): the gateway reloads every key.
        keys[0] = KeySet([REVOKED])
        peer = await connect(NATS_URL, "announcer")
        await peer.publish(f"{subject}.keys.reset", b"")
        await peer.drain()
        for _ in range(100):
            if dropped:
                break
            await asyncio.sleep(0.02)
        assert dropped == ["the API key was revoked"]

    with_stand_in_engine(scenario)


def test_a_revocation_heard_while_the_engine_confirms_refuses_the_stream() -> None:
    async def revoke_then_confirm(engine: object, subject: str, msg: Msg) -> None:
        # The engine confirmed the key; the revocation commits right after, and its
        # announcement reaches the gateway before the confirmation does.
        from nats.aio.client import Client

        assert isinstance(engine, Client)
        await engine.publish(f"{subject}.keys.changed", encode(KeySet([REVOKED])))
        await engine.flush()
        await asyncio.sleep(0.2)
        await msg.respond(encode(StreamAnswer(user=7)))

    async def scenario(
        gateway: Gateway, streams: GatewayStreams, keys: list[KeySet], subject: str
    ) -> None:
        key = gateway.find_key("k1")
        assert key is not None
        opened: list[int] = []
        assert not await streams.confirm(SPOT, key, lambda: opened.append(1))
        assert opened == [] and streams.users[SPOT] == {}

    with_stand_in_engine(scenario, revoke_then_confirm)
