"""The engine process's side of the WebSocket streams: its ``Hub`` renders every push once, as
in one process, and this relay hands each push of a channel or account some gateway follows
to NATS (``<prefix>.ws.out.md.<channel>``, ``<prefix>.ws.out.user.<kind>.<id>``). Gateways
fan the frames out to their clients; the engine's cost does not grow with the number of
clients.

What gateways follow is their interest: a channel is added when the engine answers a gateway's
``sub`` (so no push between the snapshot and the first push is missed), an account when it
confirms a private stream's key, and each gateway restates all it follows every few seconds.
A gateway not heard of for ``expiry`` seconds (killed) is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg

from tradehall.api.errors import ApiError
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import (
    StreamAnswer,
    StreamAsk,
    decode_interest,
    decode_stream_ask,
    encode,
)
from tradehall.codes import Code
from tradehall.stream.fanout import KINDS, Subscriber
from tradehall.stream.frames import BadMessage
from tradehall.stream.hub import Hub

log = logging.getLogger("tradehall.engine")

INTEREST_REFRESH = 5.0
"""Seconds between a gateway's restatements of what it follows."""
INTEREST_EXPIRY = 3 * INTEREST_REFRESH
GRACE = 2.0
"""A channel added by answering a ``sub`` is kept this long even if a restatement sent before
the gateway subscribed its client leaves it out."""


class Relay(Subscriber):
    """Stands in the hub for every gateway that follows one channel or account."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        super().__init__(1, lambda reason: None)
        self.send = send

    def offer(self, frame: bytes) -> None:
        self.send(frame)


class Followers:
    """Gateways following one channel or account, each with when it was added."""

    __slots__ = ("gateways", "relay")

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.gateways: dict[str, float] = {}


class StreamRelay:
    def __init__(
        self,
        hub: Hub,
        subject: str,
        *,
        expiry: float = INTEREST_EXPIRY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub
        self.subject = subject
        self.expiry = expiry
        self._monotonic = monotonic
        self.nc: Nats | None = None
        self.channels: dict[str, Followers] = {}
        self.users: dict[tuple[str, int], Followers] = {}
        self.heard: dict[str, float] = {}
        self._outgoing: list[tuple[str, bytes]] = []
        self._sending: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.published = 0

    # ------------------------------------------------------------- lifecycle

    @contextlib.asynccontextmanager
    async def running(self, url: str) -> AsyncIterator[None]:
        """Serve on a NATS connection of its own (its answers and pushes keep their order)."""
        nc = await connect(url, "tradehall-engine-streams")
        try:
            await self.start(nc)
            try:
                yield
            finally:
                await self.stop()
        finally:
            with contextlib.suppress(Exception):
                await nc.drain()

    async def start(self, nc: Nats) -> None:
        self.nc = nc
        self.hub.start()
        await nc.subscribe(f"{self.subject}.ws.ask", cb=self._on_ask, pending_msgs_limit=-1)
        await nc.subscribe(f"{self.subject}.ws.interest", cb=self._on_interest)
        self._spawn(self._expire_forever())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.hub.stop()
        if self._sending is not None:
            with contextlib.suppress(Exception):
                await self._sending
        self.nc = None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------- asks

    async def _on_ask(self, msg: Msg) -> None:
        try:
            ask = decode_stream_ask(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("dropped an undecodable stream request: %s", exc)
            return
        self._spawn(self._answer(ask, msg))

    async def _answer(self, ask: StreamAsk, msg: Msg) -> None:
        try:
            answer = await self.answer(ask)
        except (BadMessage, ApiError) as exc:
            answer = StreamAnswer(int(exc.code), exc.msg)
        with contextlib.suppress(Exception):  # NATS is away: the gateway times out
            await msg.respond(encode(answer))

    async def answer(self, ask: StreamAsk) -> StreamAnswer:
        if ask.kind not in KINDS:
            raise BadMessage(Code.BAD_PARAM, f"unknown stream kind {ask.kind!r}")
        self.heard[ask.gateway] = self._monotonic()
        if ask.event == "sub":
            name, frame = await self.hub.snapshot(ask.kind, ask.params)
            self._follow_channel(ask.gateway, name)
            return StreamAnswer(channel=name, frame=frame)
        if ask.event == "req":
            return StreamAnswer(frame=await self.hub.history(ask.kind, ask.params))
        if ask.event == "user":
            key = self.hub.find_key(ask.api_key or "")
            if key is None or not await self.hub.confirm(
                ask.kind, key, lambda: self._follow_user(ask.gateway, ask.kind, key.user_id)
            ):
                raise BadMessage(Code.BAD_KEY, "invalid API key")
            return StreamAnswer(user=key.user_id)
        raise BadMessage(Code.UNSUPPORTED, f"unknown stream request {ask.event!r}")

    # ------------------------------------------------------------- interest

    async def _on_interest(self, msg: Msg) -> None:
        try:
            interest = decode_interest(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("dropped an undecodable stream interest: %s", exc)
            return
        gateway = interest.gateway
        if interest.leaving:
            self.forget_gateway(gateway)
            return
        self.heard[gateway] = now = self._monotonic()
        wanted = set()
        for kind, name in interest.channels:
            if kind in KINDS:
                try:
                    wanted.add(self.hub.channel(kind, name).name)
                except BadMessage:
                    continue
        for name in wanted:
            followers = self.channels.get(name)
            if followers is None or gateway not in followers.gateways:
                self._follow_channel(gateway, name)
                self.hub.resend(name)  # this gateway may have missed changes: show it all
            elif interest.resync:
                self.hub.resend(name)
        for name, followers in list(self.channels.items()):
            added = followers.gateways.get(gateway)
            if added is not None and name not in wanted and now - added > GRACE:
                self._unfollow_channel(gateway, name)
        users = {(kind, user) for kind, user in interest.users if kind in KINDS}
        for kind, user in users:
            self._follow_user(gateway, kind, user)
        for account, followers in list(self.users.items()):
            added = followers.gateways.get(gateway)
            if added is not None and account not in users and now - added > GRACE:
                self._unfollow_user(gateway, account)

    def forget_gateway(self, gateway: str) -> None:
        self.heard.pop(gateway, None)
        for name, followers in list(self.channels.items()):
            if gateway in followers.gateways:
                self._unfollow_channel(gateway, name)
        for account, followers in list(self.users.items()):
            if gateway in followers.gateways:
                self._unfollow_user(gateway, account)

    def expire(self) -> None:
        """Forget the gateways not heard of for ``expiry`` seconds."""
        now = self._monotonic()
        for gateway, heard in list(self.heard.items()):
            if now - heard > self.expiry:
                log.info("stream interest of gateway %s expired", gateway)
                self.forget_gateway(gateway)

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(self.expiry / 3)
            self.expire()

    def _follow_channel(self, gateway: str, name: str) -> None:
        followers = self.channels.get(name)
        if followers is None:
            subject = f"{self.subject}.ws.out.md.{name}"
            relay = Relay(lambda frame: self._send(subject, frame))
            followers = self.channels[name] = Followers(relay)
            self.hub.subscribe(relay, name)
        followers.gateways[gateway] = self._monotonic()

    def _unfollow_channel(self, gateway: str, name: str) -> None:
        followers = self.channels[name]
        del followers.gateways[gateway]
        if not followers.gateways:
            del self.channels[name]
            self.hub.unsubscribe(followers.relay, name)

    def _follow_user(self, gateway: str, kind: str, user: int) -> None:
        followers = self.users.get((kind, user))
        if followers is None:
            subject = f"{self.subject}.ws.out.user.{kind}.{user}"
            relay = Relay(lambda frame: self._send(subject, frame))
            followers = self.users[(kind, user)] = Followers(relay)
            self.hub.add_private(relay, kind, user, None)
        followers.gateways[gateway] = self._monotonic()

    def _unfollow_user(self, gateway: str, account: tuple[str, int]) -> None:
        followers = self.users[account]
        del followers.gateways[gateway]
        if not followers.gateways:
            del self.users[account]
            self.hub.forget(followers.relay)

    # ------------------------------------------------------------- pushes

    def _send(self, subject: str, frame: bytes) -> None:
        """Queue a push; one task publishes what is queued, in order."""
        self._outgoing.append((subject, frame))
        if self._sending is None or self._sending.done():
            self._sending = asyncio.get_running_loop().create_task(self._publish())

    async def _publish(self) -> None:
        while self._outgoing and self.nc is not None:
            batch, self._outgoing = self._outgoing, []
            for subject, frame in batch:
                try:
                    await self.nc.publish(subject, frame)
                except Exception as exc:  # NATS is away: clients see a gap in this stream
                    log.warning("could not publish a stream push: %s", exc)
                    break
                self.published += 1
