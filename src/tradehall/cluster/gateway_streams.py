"""A gateway's WebSocket streams: the same endpoints and protocol as in one process, fed by the
engine process over NATS (``stream_relay``). Clients' ``sub`` and ``req`` and a private
stream's key are asked of the engine; the pushes of every channel and account this gateway
follows arrive as finished frames and are fanned out here, so the per-client cost (framing,
compression is already done, the socket writes) is paid on the gateways' cores.

A revoked key's private streams are closed when the engine announces the revocation
(``<prefix>.keys.changed``); when the engine restarts (``<prefix>.keys.reset``) or NATS
reconnects, this gateway restates everything it follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg

from tradehall.cluster.gateway import Gateway, engine_unreachable
from tradehall.cluster.protocol import (
    StreamAnswer,
    StreamAsk,
    StreamInterest,
    decode_keys,
    decode_stream_answer,
    encode,
)
from tradehall.cluster.stream_relay import INTEREST_REFRESH
from tradehall.codes import Code
from tradehall.config import WebSocketSettings
from tradehall.exchange import ApiKey
from tradehall.stream.fanout import KINDS, Fanout
from tradehall.stream.frames import BadMessage

log = logging.getLogger("tradehall.gateway")

RESTATE_DELAY = 0.2
"""Seconds after a channel or account loses its last client before the engine is told (a
client resubscribing at once costs nothing)."""


class GatewayStreams(Fanout):
    def __init__(
        self, gateway: Gateway, settings: WebSocketSettings, *, refresh: float = INTEREST_REFRESH
    ) -> None:
        super().__init__(gateway.clock, settings)
        self.gateway = gateway
        self.subject = gateway.subject
        self.name = gateway.name
        self.refresh = refresh
        self.kinds: dict[str, str] = {}
        """Followed channel -> its kind (spot or futures)."""
        self.nc: Nats | None = None
        self._restating: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------- lifecycle

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        nc = self.nc = self.gateway.nc
        assert nc is not None, "the gateway starts first"
        prefix = self.subject
        await nc.subscribe(f"{prefix}.ws.md.>", cb=self._on_market, pending_msgs_limit=-1)
        await nc.subscribe(f"{prefix}.ws.user.>", cb=self._on_user, pending_msgs_limit=-1)
        await nc.subscribe(f"{prefix}.keys.changed", cb=self._on_keys_changed)
        await nc.subscribe(f"{prefix}.keys.reset", cb=self._on_engine_started)
        self.gateway.on_reconnect.append(self.restate_soon)
        self._spawn(self._restate_forever())

    async def stop(self) -> None:
        if self._restating is not None:
            self._restating.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.drop_all("the server is shutting down")
        nc, self.nc = self.nc, None
        if nc is not None and nc.is_connected:
            with contextlib.suppress(Exception):
                await nc.publish(
                    f"{self.subject}.ws.interest", encode(StreamInterest(self.name, [], [], True))
                )
                await nc.flush(timeout=1)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------- from the engine

    async def _on_market(self, msg: Msg) -> None:
        self.publish(msg.subject[len(self.subject) + len(".ws.md.") :], msg.data)

    async def _on_user(self, msg: Msg) -> None:
        kind, _, user = msg.subject[len(self.subject) + len(".ws.user.") :].partition(".")
        if kind in KINDS and user.isdigit():
            self.publish_user(kind, int(user), msg.data)

    async def _on_keys_changed(self, msg: Msg) -> None:
        try:
            infos = decode_keys(msg.data).keys
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        self.drop_keys(info.api_key for info in infos if info.revoked is not None)

    async def _on_engine_started(self, msg: Msg) -> None:
        self.restate_soon()

    # ------------------------------------------------------------- interest

    def interest(self) -> StreamInterest:
        channels = [(self.kinds[name], name) for name in self.channels if name in self.kinds]
        users = [(kind, user) for kind, by_user in self.users.items() for user in by_user]
        return StreamInterest(self.name, channels, users)

    async def restate(self) -> None:
        nc = self.nc
        if nc is None or not nc.is_connected:
            return
        try:
            await nc.publish(f"{self.subject}.ws.interest", encode(self.interest()))
        except nats.errors.Error as exc:
            log.info("stream interest not sent (%s)", type(exc).__name__)

    def restate_soon(self) -> None:
        if self._restating is None:
            self._restating = asyncio.get_running_loop().call_later(
                RESTATE_DELAY, self._restate_now
            )

    def _restate_now(self) -> None:
        self._restating = None
        self._spawn(self.restate())

    async def _restate_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh)
            await self.restate()

    def closed(self, name: str) -> None:
        self.kinds.pop(name, None)
        self.restate_soon()

    def user_closed(self, kind: str, user: int) -> None:
        self.restate_soon()

    # ------------------------------------------------------------- what the endpoints ask

    async def _ask(self, ask: StreamAsk) -> StreamAnswer:
        nc = self.nc
        if nc is None:
            raise engine_unreachable("not connected to NATS")
        try:
            data = encode(ask)
        except (TypeError, OverflowError, msgspec.EncodeError):
            raise BadMessage(Code.BAD_PARAM, "params holds a value out of range") from None
        try:
            msg = await nc.request(f"{self.subject}.ws.ask", data, timeout=self.gateway.timeout)
        except nats.errors.NoRespondersError:
            raise engine_unreachable("no engine process is listening") from None
        except (TimeoutError, nats.errors.TimeoutError):
            raise engine_unreachable("no answer in time") from None
        except nats.errors.Error as exc:
            raise engine_unreachable(type(exc).__name__) from None
        answer = decode_stream_answer(msg.data)
        if answer.code:
            try:
                code = Code(answer.code)
            except ValueError:
                code = Code.INTERNAL
            raise BadMessage(code, answer.msg)
        return answer

    async def snapshot(self, kind: str, params: dict[str, Any]) -> tuple[str, bytes | None]:
        answer = await self._ask(StreamAsk(self.name, kind, "sub", params))
        self.kinds[answer.channel] = kind
        return answer.channel, answer.frame

    async def history(self, kind: str, params: dict[str, Any]) -> bytes:
        answer = await self._ask(StreamAsk(self.name, kind, "req", params))
        assert answer.frame is not None
        return answer.frame

    def find_key(self, api_key: str) -> ApiKey | None:
        return self.gateway.find_key(api_key)

    async def confirm(self, kind: str, key: ApiKey) -> bool:
        try:
            await self._ask(StreamAsk(self.name, kind, "user", {}, key.row.api_key))
        except BadMessage as exc:
            if exc.code == Code.BAD_KEY:
                return False
            raise
        return True
