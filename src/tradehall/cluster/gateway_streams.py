"""A gateway's WebSocket streams: the same endpoints and protocol as in one process, fed by the
engine process over NATS (``stream_relay``). Clients' ``sub`` and ``req`` and a private
stream's key are asked of the engine; the pushes of every channel and account this gateway
follows arrive as finished frames and are fanned out here, so the per-client cost (framing,
compression is already done, the socket writes) is paid on the gateways' cores.

Answers and pushes arrive through one subscription (``<prefix>.ws.out.>``), in the order the
engine sent them, and a ``sub``'s answer subscribes its client as it is read: no push that
follows the snapshot is missed.

A revoked key's private streams are closed as soon as the gateway learns of the revocation
(the engine's announcement, or a reload of the keys after NATS was away); when the engine
restarts (``<prefix>.keys.reset``) or NATS reconnects, this gateway restates everything it
follows and asks for its current state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import msgspec
import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg

from tradehall.cluster.gateway import Gateway, engine_unreachable
from tradehall.cluster.link import Service
from tradehall.cluster.protocol import (
    StreamAnswer,
    StreamAsk,
    StreamInterest,
    decode_stream_answer,
    encode,
)
from tradehall.cluster.stream_relay import INTEREST_REFRESH
from tradehall.codes import Code
from tradehall.config import WebSocketSettings
from tradehall.exchange import ApiKey
from tradehall.stream.fanout import KINDS, Fanout, Opened
from tradehall.stream.frames import BadMessage

log = logging.getLogger("tradehall.gateway")

RESTATE_DELAY = 0.2
"""Seconds after a channel or account loses its last client before the engine is told (a
client resubscribing at once costs nothing)."""


class GatewayStreams(Fanout, Service):
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
        self._out = f"{self.subject}.ws.out."
        self._mine = f"{self._out}gw.{self.name}."
        self._pending: dict[str, _Pending] = {}
        self._asked = 0
        self._resync = False
        self._restating: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        nc = self.nc = self.gateway.nc
        assert nc is not None, "the gateway starts first"
        await nc.subscribe(f"{self._out}>", cb=self._on_out, pending_msgs_limit=-1)
        self.gateway.on_resync.append(self.resync_soon)
        self.gateway.on_revoked.append(self._revoked)
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

    async def _on_out(self, msg: Msg) -> None:
        """Pushes and answers, one at a time, in the engine's order."""
        rest = msg.subject[len(self._out) :]
        if rest.startswith("md."):
            self.publish(rest[3:], msg.data)
        elif rest.startswith("user."):
            kind, _, user = rest[5:].partition(".")
            if kind in KINDS and user.isdigit():
                self.publish_user(kind, int(user), msg.data)
        elif msg.subject.startswith(self._mine):
            self._answered(msg.subject[len(self._mine) :], msg)

    def _answered(self, token: str, msg: Msg) -> None:
        pending = self._pending.pop(token, None)
        if pending is None or pending.future.done():
            return  # given up on (timed out)
        if not msg.data and msg.headers and msg.headers.get("Status") == "503":
            pending.future.set_exception(engine_unreachable("no engine process is listening"))
            return
        try:
            answer = decode_stream_answer(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pending.future.set_exception(engine_unreachable("an answer it could not read"))
            return
        if answer.code == 0 and pending.then is not None:
            try:
                pending.then(answer)  # before the next push is read
            except Exception as exc:
                pending.future.set_exception(exc)
                return
        pending.future.set_result(answer)

    def _revoked(self, api_key: str) -> None:
        self.drop_keys((api_key,))

    # ------------------------------------------------------------- interest

    def interest(self, resync: bool = False) -> StreamInterest:
        channels = [(self.kinds[name], name) for name in self.channels if name in self.kinds]
        users = [(kind, user) for kind, by_user in self.users.items() for user in by_user]
        return StreamInterest(self.name, channels, users, resync=resync)

    async def restate(self, resync: bool = False) -> None:
        nc = self.nc
        if nc is None or not nc.is_connected:
            return
        try:
            await nc.publish(f"{self.subject}.ws.interest", encode(self.interest(resync)))
        except nats.errors.Error as exc:
            log.info("stream interest not sent (%s)", type(exc).__name__)

    def restate_soon(self) -> None:
        if self._restating is None:
            self._restating = asyncio.get_running_loop().call_later(
                RESTATE_DELAY, self._restate_now
            )

    def resync_soon(self) -> None:
        """Restate, and have the engine push the current state of all that is followed."""
        self._resync = True
        self.restate_soon()

    def _restate_now(self) -> None:
        self._restating = None
        resync, self._resync = self._resync, False
        self._spawn(self.restate(resync))

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

    async def _ask(
        self, ask: StreamAsk, then: Callable[[StreamAnswer], None] | None = None
    ) -> StreamAnswer:
        """The engine's answer to ``ask``; ``then`` runs with a successful answer as it is read,
        before any push sent after it."""
        nc = self.nc
        if nc is None or not nc.is_connected:
            raise engine_unreachable("not connected to NATS")
        try:
            data = encode(ask)
        except (TypeError, OverflowError, msgspec.EncodeError):
            raise BadMessage(Code.BAD_PARAM, "params holds a value out of range") from None
        self._asked += 1
        token = str(self._asked)
        pending = _Pending(asyncio.get_running_loop().create_future(), then)
        self._pending[token] = pending
        try:
            await nc.publish(f"{self.subject}.ws.ask", data, reply=self._mine + token)
            answer = await asyncio.wait_for(
                asyncio.shield(pending.future), timeout=self.gateway.timeout
            )
        except (TimeoutError, nats.errors.TimeoutError):
            raise engine_unreachable("no answer in time") from None
        except nats.errors.Error as exc:
            raise engine_unreachable(type(exc).__name__) from None
        finally:
            self._pending.pop(token, None)
            if not pending.future.done():
                pending.future.cancel()
        if answer.code:
            try:
                code = Code(answer.code)
            except ValueError:
                code = Code.INTERNAL
            raise BadMessage(code, answer.msg)
        return answer

    async def open(self, kind: str, params: dict[str, Any], opened: Opened) -> None:
        def then(answer: StreamAnswer) -> None:
            self.kinds[answer.channel] = kind
            opened(answer.channel, answer.frame)

        await self._ask(StreamAsk(self.name, kind, "sub", params), then)

    async def history(self, kind: str, params: dict[str, Any]) -> bytes:
        answer = await self._ask(StreamAsk(self.name, kind, "req", params))
        if answer.frame is None:
            raise engine_unreachable("an empty answer")
        return answer.frame

    def find_key(self, api_key: str) -> ApiKey | None:
        return self.gateway.find_key(api_key)

    async def confirm(self, kind: str, key: ApiKey, confirmed: Callable[[], None]) -> bool:
        api_key = key.row.api_key
        accepted = False

        def then(answer: StreamAnswer) -> None:
            nonlocal accepted
            # A revocation this gateway heard while the engine was confirming wins.
            known = self.gateway.keys.get(api_key)
            if known is not None and known.row.revoked is None:
                accepted = True
                confirmed()

        try:
            await self._ask(StreamAsk(self.name, kind, "user", {}, api_key), then)
        except BadMessage as exc:
            if exc.code == Code.BAD_KEY:
                return False
            raise
        return accepted


class _Pending:
    __slots__ = ("future", "then")

    def __init__(
        self, future: asyncio.Future[StreamAnswer], then: Callable[[StreamAnswer], None] | None
    ) -> None:
        self.future = future
        self.then = then
