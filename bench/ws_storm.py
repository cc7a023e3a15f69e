"""Memory after WebSocket connection storms: a real ``tradehall serve --demo --no-sim``, then
``storms`` times ``clients`` connections that each subscribe to ``channels`` market channels
and are dropped abruptly (the TCP connection aborted, no close frame). Reports the server's
resident set size before, after each storm (once the server has let go of the connections)
and the open file descriptors, to tell a leak (RSS rising storm after storm) from the
allocator keeping its high-water mark (RSS rising once, then flat).

    python -m bench.ws_storm --storms 10 --clients 200
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import kill, python, rss_bytes
from bench.wire import start_announcing
from bench.ws_subscribers import OP_TEXT, client_frame

CHANNELS = (
    "market_btcusdt_depth_step0",
    "market_btcusdt_trade_ticker",
    "market_btcusdt_kline_1min",
    "market_btcusdt_ticker",
    "market_ethusdt_depth_step0",
)
MB = 1024 * 1024


async def connect(host: str, port: int, channels: tuple[str, ...]) -> asyncio.StreamWriter:
    """One client: the opening handshake, its subscriptions, the first frames read."""
    reader, writer = await asyncio.open_connection(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET /kline-api/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    await reader.readuntil(b"\r\n\r\n")
    for channel in channels:
        sub = {"event": "sub", "params": {"channel": channel, "cb_id": "storm"}}
        writer.write(client_frame(OP_TEXT, json.dumps(sub).encode()))
    await writer.drain()
    await reader.read(4096)  # the server answered
    return writer


async def storm(host: str, port: int, clients: int, channels: tuple[str, ...]) -> None:
    writers = await asyncio.gather(*(connect(host, port, channels) for _ in range(clients)))
    await asyncio.sleep(0.5)  # snapshots and acknowledgements are sent meanwhile
    for writer in writers:
        writer.transport.abort()  # no close frame: the connection just drops


def open_sockets(pid: int) -> int:
    """The server's open sockets (not its files: the store opens database, WAL and shared
    memory files of its own whenever a reader first needs them)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:  # closed meanwhile
            pass
    return count


def settle(pid: int, sockets: int, timeout: float = 30.0) -> int:
    """Waits until the server has closed the storm's sockets (its open sockets back to
    ``sockets``, or steady for 2 s); returns its RSS then."""
    deadline = time.monotonic() + timeout
    last, since = open_sockets(pid), time.monotonic()
    while last > sockets and time.monotonic() < deadline and time.monotonic() - since < 2.0:
        time.sleep(0.2)
        now = open_sockets(pid)
        if now != last:
            last, since = now, time.monotonic()
    time.sleep(1.0)
    return rss_bytes(pid)


def run(storms: int, clients: int, channels: int) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-storm-"))
    cmd = [python(), "-m", "tradehall", "serve", "--port", "0", "--json", "--demo", "--no-sim"]
    cmd += ["--data-dir", str(data_dir), "--no-rate-limits"]
    proc, server = start_announcing(cmd, data_dir / "server.log", "/spot/open/sapi/v1/ping")
    try:
        host, port = server["url"].removeprefix("http://").rsplit(":", 1)
        pid = server["pid"]
        chosen = CHANNELS[:channels]
        sockets_before = open_sockets(pid)
        asyncio.run(storm(host, int(port), 5, chosen))  # warm-up: the channels exist once
        before = settle(pid, sockets_before)
        after = []
        for _ in range(storms):
            asyncio.run(storm(host, int(port), clients, chosen))
            after.append(settle(pid, sockets_before))
        return {
            "clients": clients,
            "channels": len(chosen),
            "storms": storms,
            "rss_before_mb": round(before / MB, 1),
            "rss_after_each_storm_mb": [round(r / MB, 1) for r in after],
            "rss_growth_mb": round((after[-1] - before) / MB, 1),
            "rss_growth_last_half_mb": round((after[-1] - after[len(after) // 2]) / MB, 1),
            "open_sockets_before": sockets_before,
            "open_sockets_after": open_sockets(pid),
        }
    finally:
        kill(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storms", type=int, default=10)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--channels", type=int, default=5, choices=range(1, len(CHANNELS) + 1))
    args = parser.parse_args()
    print(json.dumps(run(args.storms, args.clients, args.channels)))


if __name__ == "__main__":
    main()
