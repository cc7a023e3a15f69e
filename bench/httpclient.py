"""A minimal HTTP/1.1 client for load generation: one keep-alive connection per object, one
request in flight on it, responses framed by ``Content-Length``.

It is an ``asyncio.Protocol`` (not streams): the whole response is parsed in
``data_received`` and hands one result to one future, which costs the generator far less per
request than a reader's ``readuntil`` + ``readexactly`` pair. The caller builds the request
bytes itself (request line, headers, body), so nothing is formatted twice.
"""

from __future__ import annotations

import asyncio
import socket
from typing import cast


class ConnectionLost(ConnectionError):
    pass


class HttpConnection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost = False

    # ------------------------------------------------------------------ protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        waiter = self.waiter
        if waiter is None:
            return
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(buf[:end]).lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            self._fail(ConnectionLost("response without content-length"))
            return
        stop = head.find(b"\r\n", at + 17)
        length = int(head[at + 17 : stop if stop > 0 else len(head)])
        total = end + 4 + length
        if len(buf) < total:
            return
        status = int(head[9:12])
        body = bytes(buf[end + 4 : total])
        del buf[:total]
        self.waiter = None
        if not waiter.done():
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._fail(ConnectionLost(str(exc) if exc else "closed by the server"))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    # ------------------------------------------------------------------ use

    def request(self, data: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Send one complete request; the future gives (status, body)."""
        fut: asyncio.Future[tuple[int, bytes]] = self.loop.create_future()
        if self.lost or self.transport is None:
            fut.set_exception(ConnectionLost("connection is closed"))
            return fut
        self.waiter = fut
        self.transport.write(data)
        return fut

    def close(self) -> None:
        if self.transport is not None and not self.lost:
            self.lost = True
            self.transport.close()


async def connect(host: str, port: int) -> HttpConnection:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(lambda: HttpConnection(loop), host, port)
    return protocol


class Pool:
    """``size`` connections; a lost one is re-opened the next time it is used."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.conns: list[HttpConnection] = []
        self.reconnects = 0

    async def open(self, size: int) -> None:
        while len(self.conns) < size:
            self.conns.append(await connect(self.host, self.port))

    async def get(self, index: int) -> HttpConnection:
        conn = self.conns[index]
        if conn.lost:
            conn = self.conns[index] = await connect(self.host, self.port)
            self.reconnects += 1
        return conn

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.conns.clear()
