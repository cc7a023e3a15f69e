"""One WebSocket connection: a reader (client messages), a writer (the subscriber's queue to
the socket) and a heartbeat (``{"ping": ms}`` every ``heartbeat_s``; a client silent for
``idle_timeout_s`` is closed). The endpoints (``market``, ``private``) handle the messages."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from tradehall.codes import Code
from tradehall.stream.direct import DirectSocket
from tradehall.stream.fanout import Fanout, Subscriber
from tradehall.stream.frames import BadMessage, error_frame, gzip_json, parse_message

log = logging.getLogger("tradehall.stream")

CLOSE_POLICY = 1008
"""Close code for a dropped client (too slow, silent, revoked key)."""
CLOSE_GOING_AWAY = 1001

Handler = Callable[["Connection", dict[str, Any]], Awaitable[None]]


class Connection:
    """``send`` is the ASGI send the frames go out through (the one ``websocket`` wraps,
    without Starlette's per-message checks: the writer only sends once accepted)."""

    direct = True
    """Write frames straight to the socket when the server allows it
    (``tradehall.stream.direct``); False keeps every frame on the ASGI path."""

    def __init__(
        self, websocket: WebSocket, hub: Fanout, send: Send, *, login_required: bool = False
    ) -> None:
        self.websocket = websocket
        self._send = send
        self.hub = hub
        self.settings = hub.settings
        self.subscriber = Subscriber(self.settings.queue_frames, self._drop)
        self.last_seen = asyncio.get_running_loop().time()
        self.login_by = self.last_seen + self.settings.idle_timeout_s if login_required else None
        """When a private stream's connection must have logged in (None: no login needed)."""
        self._closing: str | None = None
        self._done = asyncio.Event()

    def send(self, message: Any) -> None:
        self.subscriber.offer(gzip_json(message))

    def error(self, code: Code, msg: str, **extra: Any) -> None:
        self.subscriber.offer(error_frame(code, msg, **extra))

    def _drop(self, reason: str) -> None:
        if self._closing is None:
            self._closing = reason
            self.hub.drops += 1
            log.info("closing a stream connection: %s", reason)
        self._done.set()

    async def run(self, handle: Handler) -> None:
        await self.websocket.accept()
        self.hub.connections.add(self.subscriber)
        tasks = [
            asyncio.create_task(self._read(handle)),
            asyncio.create_task(self._write()),
            asyncio.create_task(self._heartbeat()),
        ]
        try:
            await self._done.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self.hub.forget(self.subscriber)
            if self._closing is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.websocket.close(CLOSE_POLICY, self._closing), 1)

    async def _read(self, handle: Handler) -> None:
        websocket = self.websocket
        limit = self.settings.max_message_bytes
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                self.last_seen = asyncio.get_running_loop().time()
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                try:
                    parsed = parse_message(raw, limit)
                    if "ping" in parsed:
                        self.send({"pong": parsed["ping"]})
                    elif "pong" in parsed:
                        pass
                    else:
                        await handle(self, parsed)
                except BadMessage as exc:
                    self.error(exc.code, exc.msg)
        except WebSocketDisconnect:
            pass
        finally:
            self._done.set()

    async def _write(self) -> None:
        """Through ASGI: every frame queued, oldest first, one wake-up for all the frames
        queued by then (a push of depth and trades queues two at once). Straight to the
        socket when the server allows it (``direct``): the hub's batch writes the frames, and
        this task only waits for a socket that was not ready (its buffer full)."""
        subscriber = self.subscriber
        frames = subscriber.frames
        socket = DirectSocket.of(self._send) if self.direct else None
        try:
            if socket is not None:
                subscriber.attach(socket, self.hub.batch)
                writable = socket.writable
                while True:
                    await subscriber.wait()
                    if not writable.is_set():
                        await writable.wait()
                    if socket.closed():
                        return
                    subscriber.flush()
            send = self._send
            while True:
                if not frames:
                    await subscriber.wait()
                await send({"type": "websocket.send", "bytes": frames.popleft()})
        except Exception:  # the peer went away mid-send
            pass
        finally:
            self._done.set()

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        period = self.settings.heartbeat_s
        idle = self.settings.idle_timeout_s
        while True:
            await asyncio.sleep(min(period, idle))
            now = loop.time()
            if now - self.last_seen >= idle:
                self._drop(f"no message from the client for {idle} s")
                return
            if self.login_by is not None and self.subscriber.user is None and now >= self.login_by:
                self._drop(f"no login within {idle} s")
                return
            self.send({"ping": self.hub.clock()})


def params_of(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise BadMessage(Code.BAD_PARAM, "params must be a JSON object")
    return params
