"""The subscribers of the fan-out benchmark, as a process of their own: N WebSocket clients
on one market's depth and trades, reading every frame. Every ``sample``-th client also
decodes its frames and times each trade from its command time to its arrival.

Prints ``{"ready": N}`` once every client is subscribed, then measures until its standard
input closes, and prints one JSON line of results.

    python -m bench.ws_subscribers '{"url": "ws://127.0.0.1:8080/kline-api/ws", "clients": 1000}'
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.common import percentiles

SYMBOL = "btcusdt"


class Tally:
    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0
        self.latencies_ms: list[float] = []
        self.trades = 0
        self.closed = 0
        self.measuring = False
        self.started = 0.0


async def client(url: str, index: int, sample: int, tally: Tally, ready: asyncio.Event) -> None:
    ws: ClientConnection = await connect(url, compression=None, max_size=2**24, open_timeout=60)
    decode = index % sample == 0
    for channel in (f"market_{SYMBOL}_depth_step0", f"market_{SYMBOL}_trade_ticker"):
        await ws.send(json.dumps({"event": "sub", "params": {"channel": channel}}))
    ready.set()
    try:
        async for frame in ws:
            assert isinstance(frame, bytes)
            if not tally.measuring:
                continue
            tally.frames += 1
            tally.bytes += len(frame)
            if len(frame) < 64:  # small: perhaps the server's ping
                message = json.loads(gzip.decompress(frame))
                if "ping" in message:
                    await ws.send(json.dumps({"pong": message["ping"]}))
                continue
            if decode:
                message = json.loads(gzip.decompress(frame))
                if message.get("channel", "").endswith("_trade_ticker"):
                    now = time.time() * 1000
                    for trade in message["tick"]["data"]:
                        tally.trades += 1
                        tally.latencies_ms.append(now - trade["ts"])
    except ConnectionClosed:
        tally.closed += 1


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    clients = int(spec["clients"])
    sample = max(1, int(spec.get("sample", 20)))
    tally = Tally()
    readies = [asyncio.Event() for _ in range(clients)]
    tasks = []
    for i in range(clients):
        tasks.append(asyncio.create_task(client(spec["url"], i, sample, tally, readies[i])))
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # do not flood the server's accept queue
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
    await asyncio.sleep(0.5)  # the subscription snapshots
    print(json.dumps({"ready": clients}), flush=True)
    tally.measuring = True
    tally.started = time.perf_counter()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the orchestrator closes stdin
    seconds = time.perf_counter() - tally.started
    tally.measuring = False
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
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
