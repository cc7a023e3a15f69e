"""The subscribers of the fan-out benchmark, as a process of their own: N WebSocket clients
on one market's depth and trades, reading every frame. Every ``sample``-th client also
decodes its frames and times each trade from its command time to its arrival.

Prints ``{"ready": N}`` once every client is subscribed, then measures until its standard
input closes, and prints one JSON line of results.

    python -m bench.ws_subscribers '{"url": "ws://127.0.0.1:8080/kline-api/ws", "clients": 1000}'

The clients are as cheap as a client can be while still reading every frame, so that this
process takes as little as possible of the CPU the server under test shares: each is a bare
asyncio protocol (no WebSocket library) that does the opening handshake, sends its two
subscriptions, and then walks the frame headers in each chunk the socket delivers: a frame
is counted from its header, its payload skipped unless the client is sampled or the frame is
small enough to be the server's ``{"ping": ms}`` (answered with a pong, as any client must).
The protocol's own pings are answered; a close frame from the server is counted as a drop.
Sampled clients (every ``sample``-th: 10 of 1,000 in ``bench.ws_fanout``, spread over the
order in which the server writes to them) gunzip and parse every frame as a real client does
and time every trade they see.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import sys
import time
from typing import Any, cast
from urllib.parse import urlsplit

import msgspec

from bench.common import percentiles

SYMBOL = "btcusdt"
CHANNELS = (f"market_{SYMBOL}_depth_step0", f"market_{SYMBOL}_trade_ticker")
SMALL = 64
"""Frames shorter than this are decoded by every client: the server's ping is one."""

decode = msgspec.json.Decoder().decode

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Tally:
    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0
        self.latencies_ms: list[float] = []
        self.trades = 0
        self.closed = 0
        self.measuring = False
        self.started = 0.0


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked, final frame from a client (RFC 6455 5.2: clients always mask)."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        header = bytes((0x80 | opcode, 0x80 | size))
    elif size < 1 << 16:
        header = bytes((0x80 | opcode, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 0x80 | 127)) + size.to_bytes(8, "big")
    key = int.from_bytes((mask * (size // 4 + 1))[:size], "big")
    masked = (int.from_bytes(payload, "big") ^ key).to_bytes(size, "big") if size else b""
    return header + mask + masked


class Subscriber(asyncio.Protocol):
    """One client: handshake, subscriptions, then frames counted as they arrive."""

    def __init__(self, host: str, path: str, decode: bool, tally: Tally) -> None:
        self.host = host
        self.path = path
        self.decode = decode
        self.tally = tally
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.upgraded = False
        self.partial: list[bytes] = []
        self.partial_opcode = 0
        self.subscribed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(f"connection lost: {exc}"))

    def send(self, opcode: int, payload: bytes) -> None:
        assert self.transport is not None
        if not self.transport.is_closing():
            self.transport.write(client_frame(opcode, payload))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if not self.upgraded:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buffer[: buffer.find(b"\r\n")])
            if b" 101 " not in status:
                self.subscribed.set_exception(ConnectionError(status.decode(errors="replace")))
                return
            del buffer[: end + 4]
            self.upgraded = True
            for channel in CHANNELS:
                message = {"event": "sub", "params": {"channel": channel}}
                self.send(OP_TEXT, json.dumps(message).encode())
            self.subscribed.set_result(None)
        tally = self.tally
        size = len(buffer)
        pos = 0
        while size - pos >= 2:
            first, second = buffer[pos], buffer[pos + 1]
            length = second & 0x7F
            start = pos + 2
            if length == 126:
                if size - pos < 4:
                    break
                length = int.from_bytes(buffer[pos + 2 : pos + 4], "big")
                start = pos + 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(buffer[pos + 2 : pos + 10], "big")
                start = pos + 10
            end = start + length
            if end > size:
                break
            pos = end
            opcode = first & 0x0F
            if opcode in (OP_BINARY, OP_TEXT, OP_CONT):
                if not first & 0x80 or opcode == OP_CONT:  # a fragment (the server sends none)
                    if opcode != OP_CONT:
                        self.partial_opcode = opcode
                    self.partial.append(bytes(buffer[start:end]))
                    if not first & 0x80:
                        continue
                    payload = b"".join(self.partial)
                    self.partial = []
                    self.message(len(payload), payload)
                elif self.decode or length < SMALL:
                    self.message(length, bytes(buffer[start:end]))
                elif tally.measuring:
                    tally.frames += 1
                    tally.bytes += length
            elif opcode == OP_PING:
                self.send(OP_PONG, bytes(buffer[start:end]))
            elif opcode == OP_CLOSE:
                tally.closed += 1
                self.send(OP_CLOSE, bytes(buffer[start : start + 2]))
                assert self.transport is not None
                self.transport.close()
                pos = size
                break
        del buffer[:pos]

    def message(self, length: int, payload: bytes) -> None:
        tally = self.tally
        message = decode(gzip.decompress(payload))
        if "ping" in message:
            self.send(OP_TEXT, json.dumps({"pong": message["ping"]}).encode())
        if not tally.measuring:
            return
        tally.frames += 1
        tally.bytes += length
        if self.decode and message.get("channel", "").endswith("_trade_ticker"):
            now = time.time() * 1000
            for trade in message["tick"]["data"]:
                tally.trades += 1
                tally.latencies_ms.append(now - trade["ts"])


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    clients = int(spec["clients"])
    sample = max(1, int(spec.get("sample", 20)))
    url = urlsplit(spec["url"])
    host, port = url.hostname or "127.0.0.1", url.port or 80
    tally = Tally()
    loop = asyncio.get_running_loop()
    subscribers: list[Subscriber] = []
    for i in range(clients):
        protocol = Subscriber(url.netloc, url.path or "/", i % sample == 0, tally)
        await loop.create_connection(lambda p=protocol: p, host, port)
        subscribers.append(protocol)
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # do not flood the server's accept queue
    await asyncio.wait_for(asyncio.gather(*(s.subscribed for s in subscribers)), 120)
    await asyncio.sleep(0.5)  # the subscription snapshots
    print(json.dumps({"ready": clients}), flush=True)
    tally.measuring = True
    tally.started = time.perf_counter()
    await loop.run_in_executor(None, sys.stdin.read)  # until the orchestrator closes stdin
    seconds = time.perf_counter() - tally.started
    tally.measuring = False
    for subscriber in subscribers:
        if subscriber.transport is not None:
            subscriber.transport.close()
    return {
        "clients": clients,
        "sampled_clients": len(range(0, clients, sample)),
        "seconds": seconds,
        "frames": tally.frames,
        "frames_per_s": tally.frames / seconds if seconds else 0.0,
        "frames_per_client_per_s": tally.frames / seconds / clients if seconds else 0.0,
        "bytes_per_s": tally.bytes / seconds if seconds else 0.0,
        "trades_seen_by_sampled": tally.trades,
        "trade_to_client_ms": percentiles(tally.latencies_ms) if tally.latencies_ms else {},
        "closed_by_server": tally.closed,
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(spec))
    else:
        result = uvloop.run(run(spec))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
