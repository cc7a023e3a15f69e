"""Frames written straight to the socket (``tradehall.stream.direct``) and through ASGI when
the server does not allow it: on uvicorn as ``tradehall serve`` configures it, against a
stand-in source of frames, with real clients. Every frame arrives, whole and in order; a
client that does not read is dropped and closed (1008) without holding back the others."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from tradehall.api.app import App
from tradehall.api.replay import MemoryReplayGuard
from tradehall.config import WebSocketSettings
from tradehall.server import uvicorn_config
from tradehall.stream.direct import binary_frame
from tradehall.stream.fanout import Fanout, Opened
from tradehall.stream.routes import SPOT_MARKET, routes

CHANNEL = "market_btcusdt_depth_step0"


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 200_000])
def test_a_direct_frame_is_one_final_unmasked_binary_frame(size: int) -> None:
    payload = os.urandom(size)
    reader = StreamReader()
    reader.feed_data(binary_frame(payload) + b"rest")
    parser = Frame.parse(reader.read_exact, mask=False)
    with pytest.raises(StopIteration) as done:
        next(parser)
    frame = done.value.value
    assert (frame.opcode, frame.fin, bytes(frame.data)) == (Opcode.BINARY, True, payload)
    assert not (frame.rsv1 or frame.rsv2 or frame.rsv3)
    assert bytes(reader.buffer) == b"rest"  # the frame, and nothing more


class Source(Fanout):
    """A stand-in for the hub: any channel opens at once, and the test publishes."""

    async def open(self, kind: str, params: dict[str, Any], opened: Opened) -> None:
        opened(str(params["channel"]), None)


class PassThrough:
    """A middleware that wraps ``send``, as any ASGI middleware may: the streams then write
    through ASGI."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def wrapped(message: Any) -> None:
            await send(message)

        await self.app(scope, receive, wrapped)


@contextlib.asynccontextmanager
async def serving(source: Source, middleware: list[Middleware]) -> AsyncIterator[str]:
    app = App(routes=list(routes(source, MemoryReplayGuard(), 1000)), middleware=middleware)
    config = uvicorn_config(app)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield f"ws://127.0.0.1:{listener.getsockname()[1]}{SPOT_MARKET}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        listener.close()


async def subscribed(
    url: str, source: Source, count: int, receive_buffer: int = 0, **options: Any
) -> Any:
    sock = socket.socket()
    if receive_buffer:  # a small kernel buffer: the server's fills soon after
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    port = int(url.split(":")[2].split("/")[0])
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    ws = await connect(url, sock=sock, **options)
    await ws.send(json.dumps({"event": "sub", "params": {"channel": CHANNEL}}))
    reply = json.loads(gzip.decompress(await ws.recv()))  # type: ignore[arg-type]
    assert reply["event_rep"] == "subed"
    while len(source.connections) < count:
        await asyncio.sleep(0.01)
    return ws


@pytest.mark.parametrize("path", ["direct", "asgi"])
def test_every_frame_arrives_in_order_and_a_client_that_does_not_read_is_dropped(
    path: str,
) -> None:
    settings = WebSocketSettings(queue_frames=20, heartbeat_s=30, idle_timeout_s=60)
    source = Source(lambda: 0, settings)
    middleware = [Middleware(PassThrough)] if path == "asgi" else []
    # 30 MB in all: more than the kernel's buffers for the slow client's socket hold.
    frames = [i.to_bytes(4, "big") + os.urandom(60_000) for i in range(500)]

    async def scenario() -> None:
        async with serving(source, middleware) as url:
            # A browser offers permessage-deflate; the server declines (the frames are gzip).
            fast = await subscribed(url, source, 1, max_size=None)
            assert fast.response.headers.get("Sec-WebSocket-Extensions") is None
            # max_queue=1: the client's library stops reading the socket after one frame.
            slow = await subscribed(url, source, 2, 65536, max_size=None, max_queue=1)
            assert all((sub.socket is not None) == (path == "direct") for sub in source.connections)
            received: list[bytes] = []

            async def read() -> None:
                while len(received) < len(frames):
                    received.append(await fast.recv())

            async def dropped() -> None:
                """Once the server has dropped the slow client, read what it sent: the
                frames queued in the sockets, then the close frame."""
                while len(source.connections) > 1:
                    await asyncio.sleep(0.005)
                with pytest.raises(ConnectionClosed):
                    while True:
                        await slow.recv()

            reader = asyncio.create_task(read())
            slow_reader = asyncio.create_task(dropped())
            for frame in frames:
                source.publish(CHANNEL, frame)
                await asyncio.sleep(0.002)
            await asyncio.wait_for(reader, 20)
            assert received == frames
            await asyncio.wait_for(slow_reader, 10)
            assert len(source.connections) == 1  # the slow client is gone, the fast one stays
            assert slow.close_code == 1008
            assert slow.close_reason == "too slow: the client did not read its frames"
            await fast.close()

    asyncio.run(scenario())
