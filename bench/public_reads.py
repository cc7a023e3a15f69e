"""Public reads through a gateway with and without its read cache (issue 18,
docs/deployment.md "Public reads on gateways"): the engine process behind one gateway worker;
64 connections read BTCUSDT's depth, ticker and trades and ETHUSDT's depth, closed loop,
while one trader places and cancels BTCUSDT orders at a steady rate (so the BTCUSDT reads
keep going stale). Reported per round: reads per second, the engine's and the gateway's CPU
per read, and how often the gateway answered from its cache.

    python -m bench.public_reads                    # 3 rounds, cache 500 ms against off
    python -m bench.public_reads --writes 0         # a market standing still
    python -m bench.public_reads --rounds 5 --out reads.json

Needs NATS on --nats (default nats://127.0.0.1:4222). Nothing is pinned: the engine, the
gateway, NATS, the trader and the readers share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import family, machine
from bench.httpclient import Pool
from bench.loadgen import CpuWindow, closed_loop
from bench.wire import NATS, admin_token, create_accounts, topology
from tradehall.client import Client

READS = [
    b"/spot/open/sapi/v1/depth?symbol=BTCUSDT&limit=100",
    b"/spot/open/sapi/v1/ticker?symbol=BTCUSDT",
    b"/spot/open/sapi/v1/trades?symbol=BTCUSDT&limit=100",
    b"/spot/open/sapi/v1/depth?symbol=ETHUSDT&limit=100",
]


def trader(url: str, key: list[str], per_second: float, stop: threading.Event) -> dict[str, int]:
    """Place and cancel BTCUSDT limit orders at ``per_second`` (each a book change)."""
    done = {"writes": 0, "errors": 0}
    if per_second <= 0:
        return done
    client = Client(url, key[0], key[1], timeout=10)
    period = 1 / per_second
    next_at = time.perf_counter()
    resting: list[str] = []
    try:
        for n in itertools.count():
            if stop.is_set():
                break
            try:
                if len(resting) < 20:
                    price = f"{19_000 + n % 500}"
                    resting.append(
                        client.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price)["orderId"]
                    )
                else:
                    client.cancel_order("BTCUSDT", resting.pop(0))
                done["writes"] += 1
            except Exception:
                done["errors"] += 1
            next_at += period
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    finally:
        client.close()
    return done


def one(cache_ms: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    gateway_args = ["--read-cache-ms", str(cache_ms)]
    with topology("gw1", work, nats=args.nats, gateway_args=gateway_args) as (target, admin_url):
        (key,) = create_accounts(admin_url, admin_token(target), 1)
        host, port = target["url"].removeprefix("http://").rsplit(":", 1)
        requests = [
            b"GET " + path + b" HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\n\r\n"
            for path in READS
        ]
        turn = itertools.cycle(requests)
        CpuWindow.watched = {"gateway": family(target["gateway_pid"])}
        stop = threading.Event()
        written: dict[str, int] = {}
        writer = threading.Thread(
            target=lambda: written.update(trader(target["url"], key, args.writes, stop))
        )
        writer.start()

        async def load() -> dict[str, Any]:
            pool = Pool(host, int(port))
            await pool.open(args.connections)
            try:
                return await closed_loop(
                    pool,
                    args.connections,
                    lambda: (next(turn), "read"),
                    args.warmup,
                    args.duration,
                    target["pid"],
                )
            finally:
                pool.close()

        try:
            result = asyncio.run(load())
        finally:
            stop.set()
            writer.join()
            CpuWindow.watched = {}
    reads = max(1, result["ok"])
    engine_s = result.get("server_cpu_s", 0.0)
    gateway_s = result.get("watched_cpu_s", {}).get("gateway", 0.0)
    return {
        "read_cache_ms": cache_ms,
        "reads_per_s": round(result["throughput"]),
        "errors": result["errors"],
        "engine_us_per_read": round(engine_s / reads * 1e6, 1),
        "gateway_us_per_read": round(gateway_s / reads * 1e6, 1),
        "engine_cpu_share": result.get("server_cpu_share"),
        "latency_ms": result["latency_ms"],
        "writes": written,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--writes", type=float, default=100.0, help="Order changes per second.")
    parser.add_argument("--cache-ms", type=int, default=500, help="The cache's max age.")
    parser.add_argument("--nats", default=NATS)
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON.")
    args = parser.parse_args(argv)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tradehall-bench-reads-") as tmp:
        for n in range(args.rounds):
            order = [args.cache_ms, 0] if n % 2 == 0 else [0, args.cache_ms]
            for cache_ms in order:
                measured = one(cache_ms, args, Path(tmp))
                rounds.append(measured)
                print(json.dumps(measured), flush=True)
    summary = {}
    for cache_ms in (args.cache_ms, 0):
        mine = [r for r in rounds if r["read_cache_ms"] == cache_ms]
        summary[f"cache_{cache_ms}ms"] = {
            name: statistics.median(r[name] for r in mine)
            for name in ("reads_per_s", "engine_us_per_read", "gateway_us_per_read")
        }
    report = {
        "machine": machine(),
        "writes_per_s": args.writes,
        "rounds": rounds,
        "summary": summary,
    }
    print(json.dumps(summary, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
