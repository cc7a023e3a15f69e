"""The fan-out's own cost, in isolation: the server's CPU per frame per client.

A server process (pinned to the first CPU) runs the real stream endpoints (``Fanout``,
``Connection``, the routes, uvicorn as ``tradehall serve`` configures it) with no exchange
behind them: every channel opens at once and a publisher pushes a depth-like frame and a
trades-like frame ``--rate`` times a second, as the hub's flusher would. The subscribers of
``bench.ws_fanout`` (pinned to the other CPUs) follow both channels. Reported: the server
process's CPU over the measured window divided by the frames the clients received.

    python -m bench.ws_write [--clients 1000] [--rate 10] [--duration 10] [--ws auto]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from bench.common import REPO, cpu_plan, kill, pinned, python, python_env

DEPTH, TRADES = "market_btcusdt_depth_step0", "market_btcusdt_trade_ticker"


def _frames() -> tuple[bytes, bytes]:
    """Two frames of the sizes the real pushes have (30 levels a side; a few trades)."""
    from tradehall.stream.frames import gzip_json

    rng = random.Random(1)
    depth = {
        "channel": DEPTH,
        "ts": 1700000000000,
        "tick": {
            side: [[f"{30000 + rng.random() * 100:.2f}", round(rng.random(), 4)] for _ in range(30)]
            for side in ("asks", "buys")
        },
    }
    trade = {
        "id": 1,
        "side": "BUY",
        "price": 30000.5,
        "vol": 0.01,
        "amount": 300.0,
        "ts": 1,
        "ds": "2026-11-26 00:00:00",
    }
    trades = {
        "channel": TRADES,
        "ts": 1700000000000,
        "tick": {"id": 3, "ts": 1, "data": [trade] * 3},
    }
    return gzip_json(depth), gzip_json(trades)


def serve(port: int, rate: float, ws: str, direct: bool) -> None:
    """The server process: stream routes only, a publisher at ``rate`` pushes a second."""
    import uvicorn
    from starlette.applications import Starlette

    from tradehall.api.app import App
    from tradehall.api.replay import MemoryReplayGuard
    from tradehall.config import WebSocketSettings
    from tradehall.server import uvicorn_config
    from tradehall.stream.connection import Connection
    from tradehall.stream.fanout import Fanout, Opened
    from tradehall.stream.routes import routes

    class Publisher(Fanout):
        async def open(self, kind: str, params: dict[str, Any], opened: Opened) -> None:
            opened(str(params["channel"]), None)

    hub = Publisher(lambda: int(time.time() * 1000), WebSocketSettings())
    depth, trades = _frames()

    async def publish() -> None:
        while True:
            await asyncio.sleep(1 / rate)
            hub.publish(DEPTH, depth)
            hub.publish(TRADES, trades)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(publish())
        yield
        task.cancel()

    Connection.direct = direct
    app = App(routes=list(routes(hub, MemoryReplayGuard(), 1000)), lifespan=lifespan)
    config = uvicorn_config(app)
    config.host, config.port = "127.0.0.1", port
    if ws != "auto":
        config.ws = ws
    uvicorn.Server(config).run()


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run(
    clients: int,
    rate: float,
    duration: float,
    ws: str,
    log: Callable[[str], None],
    subscribers: str = "bench.ws_subscribers",
    direct: bool = True,
) -> Any:
    plan = cpu_plan()
    port = _free_port()
    spec = json.dumps({"port": port, "rate": rate, "ws": ws, "direct": direct})
    server = subprocess.Popen(
        pinned([python(), "-m", "bench.ws_write", "--serve", spec], plan["server"], plan),
        cwd=REPO,
        env=python_env(),
    )
    subs: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        url = json.dumps({"url": f"ws://127.0.0.1:{port}/kline-api/ws", "clients": clients})
        subs = subprocess.Popen(
            pinned([python(), "-m", subscribers, url], plan["loadgen"], plan),
            cwd=REPO,
            env=python_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert subs.stdin is not None and subs.stdout is not None
        if "ready" not in json.loads(subs.stdout.readline()):
            raise RuntimeError("the subscribers did not connect")
        log(f"  {clients} clients subscribed; measuring {duration:.0f} s")
        server_before, subs_before = _cpu_seconds(server.pid), _cpu_seconds(subs.pid)
        started = time.perf_counter()
        time.sleep(duration)
        server_cpu = _cpu_seconds(server.pid) - server_before
        subs_cpu = _cpu_seconds(subs.pid) - subs_before
        seconds = time.perf_counter() - started
        subs.stdin.close()
        pushes = json.loads(subs.stdout.readline())
        subs.wait(30)
    finally:
        if subs is not None and subs.poll() is None:
            kill(subs)
        kill(server)
    frames = pushes["frames"]
    return {
        "clients": clients,
        "rate": rate,
        "ws": ws,
        "direct": direct,
        "load_average_before": os.getloadavg(),
        "frames_per_s": pushes["frames_per_s"],
        "closed_by_server": pushes["closed_by_server"],
        "server_cpu_share": server_cpu / seconds,
        "server_us_per_frame": 1e6 * server_cpu / frames if frames else None,
        "subscribers_cpu_share": subs_cpu / seconds,
        "subscribers_us_per_frame": 1e6 * subs_cpu / frames if frames else None,
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--serve"]:
        spec = json.loads(args[1])
        serve(spec["port"], spec["rate"], spec["ws"], spec.get("direct", True))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=10.0, help="pushes/s per channel")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--ws", default="auto", help="uvicorn's ws implementation")
    parser.add_argument("--subscribers", default="bench.ws_subscribers", help="their module")
    parser.add_argument(
        "--asgi", action="store_true", help="frames through ASGI, not straight to the socket"
    )
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(args)
    result = run(
        options.clients,
        options.rate,
        options.duration,
        options.ws,
        (lambda _: None) if options.json else print,
        options.subscribers,
        not options.asgi,
    )
    if options.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['frames_per_s']:,.0f} frames/s ({options.ws},"
            f" {'asgi' if options.asgi else 'direct'}), load"
            f" {result['load_average_before'][0]:.2f}: server {result['server_us_per_frame']:.2f}"
            f" us per frame ({result['server_cpu_share'] * 100:.0f} % of a core), subscribers"
            f" {result['subscribers_us_per_frame']:.2f} us per frame"
            f" ({result['subscribers_cpu_share'] * 100:.0f} %); dropped"
            f" {result['closed_by_server']}"
        )


if __name__ == "__main__":
    main()
