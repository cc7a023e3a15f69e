"""Frames written straight to the socket, framed once per push rather than once per client.

Through ASGI every frame to every client costs a ``websocket.send`` message, uvicorn's
framing of it (websockets' sans-I/O protocol) and one ``transport.write``, a system call
that on loopback also runs the receiver's TCP: most of the fan-out's cost. When the server
is uvicorn's ``websockets-sansio`` protocol (what ``tradehall.server`` configures), the
writer can instead write every frame queued for a client in one ``transport.write`` (a push
of depth and trades queues two at once), each frame's bytes built once for all clients.

What this relies on, checked when a connection starts (``DirectSocket.of``), and otherwise
the writer keeps to ASGI: the ASGI ``send`` is the protocol object's own bound method (no
middleware in between), of uvicorn's ``WebSocketsSansIOProtocol`` class, with its
``transport`` (the asyncio transport), ``writable`` (the event uvicorn clears while the
transport's buffer is over its high-water mark, and which its own ``send`` waits on) and
``close_sent``. Server frames need no mask; a binary frame is its two to ten header bytes and
the payload (RFC 6455 5.2); an uncompressed frame is valid whether or not the client offered
permessage-deflate (RFC 7692 6), and tradehall does not negotiate it (its frames are gzip
already). The frames are whole, and the loop runs one writer at a time, so they never
interleave with the protocol's own (pings, the close frame).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

try:
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
except ImportError:  # a uvicorn that moved it: every connection keeps to ASGI
    WebSocketsSansIOProtocol = None  # type: ignore[assignment,misc]


class Transport(Protocol):
    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: ...


@lru_cache(maxsize=512)
def binary_frame(payload: bytes) -> bytes:
    """``payload`` as one final, unmasked binary frame. Cached: a push's frame is the same
    bytes object for every subscriber, so after the first its hash is known and the lookup
    finds it by identity."""
    size = len(payload)
    if size < 126:
        header = bytes((0x82, size))
    elif size < 1 << 16:
        header = bytes((0x82, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x82, 127)) + size.to_bytes(8, "big")
    return header + payload


class DirectSocket:
    """The socket under one accepted uvicorn WebSocket connection."""

    __slots__ = ("protocol", "transport", "writable")

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.transport: Transport = protocol.transport
        self.writable: asyncio.Event = protocol.writable

    @classmethod
    def of(cls, send: Callable[..., Any]) -> DirectSocket | None:
        """The socket behind ``send``, if ``send`` is uvicorn's websockets-sansio protocol's
        own (see the module); None otherwise."""
        protocol = getattr(send, "__self__", None)
        if WebSocketsSansIOProtocol is None or type(protocol) is not WebSocketsSansIOProtocol:
            return None
        attributes = vars(protocol)
        if not isinstance(attributes.get("writable"), asyncio.Event) or not isinstance(
            attributes.get("close_sent"), bool
        ):
            return None
        transport = attributes.get("transport")
        if not callable(getattr(transport, "write", None)):
            return None
        return cls(protocol)

    def closed(self) -> bool:
        return bool(self.protocol.close_sent) or self.transport.is_closing()

    def ready(self) -> bool:
        return self.writable.is_set() and not self.closed()

    def write(self, frames: Sequence[bytes]) -> None:
        if len(frames) == 1:
            self.transport.write(binary_frame(frames[0]))
        else:
            self.transport.write(b"".join([binary_frame(frame) for frame in frames]))
