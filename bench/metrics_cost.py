"""What ``/metrics`` costs the placement path: signed ``POST /spot/open/sapi/v1/order``
requests driven straight into the app (ASGI, in this process: no socket, no uvicorn, so
the metrics' share is larger here than over the wire: an upper bound), with the counting
on and off in alternating windows of the same run, on one exchange (SQLite, group commit).

"Off" switches off what the metrics add to the request path: the per-endpoint counts and
latency histogram (``Monitor.detailed``) and the command and trade counts
(``ExchangeStats.enabled``); the per-commit histograms and the stream counters stay (one
observation per commit or per push: outside the placement's own work).

    python -m bench.metrics_cost             # 20 windows each way of 1,000 placements
    python -m bench.metrics_cost --quick --json

The cost is 1 - the median over the rounds of (placements per CPU-second on / off) in the
same round: CPU time, not wall time, because this machine is shared (other processes take
the CPUs at random; a window's wall rate swings by 2x where its CPU cost does not). The wall
rates are reported too. Because even CPU time swings by a quarter between windows on a busy
machine, the metrics' own work is also timed alone (``metric_work_ns``) and divided by a
placement's CPU time: ``direct_cost_share``, the steadier figure.
Target (issue 29): the metrics cost at most 3 % of placements/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from tradehall import operations as ops
from tradehall.api.app import App, create_app
from tradehall.api.http import AppState
from tradehall.api.monitor import Monitor
from tradehall.client.signing import request_path_for_signing, sign, signature_payload
from tradehall.config import load_config
from tradehall.engine.commands import PlaceOrder
from tradehall.exchange import Exchange, ExchangeStats
from tradehall.secretbox import SecretBox
from tradehall.store.sqlite import SQLiteStore

PATH = "/spot/open/sapi/v1/order"
T0 = 1_700_000_000_000
CONCURRENCY = 64
"""Requests in flight at once (group commit shares each commit among them)."""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def requests(keys: list[tuple[str, str]], count: int, start: int) -> Iterator[dict[str, Any]]:
    """``count`` signed placements, buys and sells in turn at one price (each sell fills the
    buy before it: the book stays small and trades are counted too), as ASGI scopes with
    their bodies; every one has a signature of its own (the replay guard)."""
    for n in range(start, start + count):
        api_key, secret = keys[n % len(keys)]
        body = msgspec.json.encode(
            {"symbol": "BTCUSDT", "side": "SELL" if n % 2 else "BUY", "type": "LIMIT",
             "volume": "0.001", "price": "20000"}
        )  # fmt: skip
        ts = str(T0 - (n % 4001))  # 4001 and the 64 keys: no (key, ts) twice in 256,064
        signed_path = request_path_for_signing(PATH, "")
        signature = sign(secret, signature_payload(ts, "POST", signed_path, body))
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-ch-apikey", api_key.encode()),
            (b"x-ch-ts", ts.encode()),
            (b"x-ch-sign", signature.encode()),
        ]
        scope = {"type": "http", "method": "POST", "path": PATH, "query_string": b"",
                 "headers": headers, "client": ("127.0.0.1", 5000), "root_path": ""}  # fmt: skip
        yield {"scope": scope, "body": body}


async def place_all(app: App, batch: list[dict[str, Any]]) -> tuple[float, float]:
    """Wall and CPU (this process's, every thread) seconds to answer every request of
    ``batch``, ``CONCURRENCY`` at a time."""
    queue = iter(batch)
    statuses: list[int] = []

    async def worker() -> None:
        for item in queue:
            body = item["body"]

            async def receive(body: bytes = body) -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])

            await app(dict(item["scope"]), receive, send)  # type: ignore[arg-type]

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if statuses.count(200) != len(batch):
        raise RuntimeError(f"not every placement was accepted: {set(statuses)}")
    return elapsed, cpu


def metric_work_ns(count: int = 200_000) -> float:
    """The metrics' own work on one placement, timed alone (a tight loop, minus the loop's
    cost): the two clock reads and the request's count and latency (``Monitor.observe``), the
    command's count and, every other placement, a trade's count. Contention on a shared
    machine moves this far less than it moves a whole placement's CPU time."""
    monitor, stats, kind, traded = Monitor(), ExchangeStats(), PlaceOrder, [0, 0]

    def with_metrics() -> None:
        for n in range(count):
            started = time.perf_counter()
            applied = stats.commands
            applied[kind] = applied.get(kind, 0) + 1
            if n & 1:
                traded[0] += 1
                traded[1] += 1000
            monitor.observe(PATH, "POST", 200, time.perf_counter() - started)

    def bare() -> None:
        for n in range(count):
            if n & 1:
                pass

    timings = []
    for work in (with_metrics, bare):
        started = time.perf_counter_ns()
        work()
        timings.append((time.perf_counter_ns() - started) / count)
    return timings[0] - timings[1]


def switch(state: AppState, on: bool) -> None:
    state.monitor.detailed = on
    state.exchange.stats.enabled = on


async def measure(folder: Path, rounds: int, per_window: int) -> dict[str, Any]:
    store = SQLiteStore(folder / "bench.db", "normal")
    store.migrate()
    exchange = Exchange(load_config(), store, secret_box=SecretBox(b"b" * 32))
    exchange.recover()
    keys = []
    for _ in range(64):
        user = ops.create_user(exchange, None, T0)
        key = ops.create_key(exchange, user["id"], False, [], T0)
        ops.transfer(exchange, "deposit", user["id"], "USDT", "100000000", None, T0)
        ops.transfer(exchange, "deposit", user["id"], "BTC", "10000", None, T0)
        keys.append((key["apiKey"], key["secret"]))
    exchange.commit_now()
    app = create_app(exchange, clock=Clock(), run_scheduler=False)
    assert isinstance(app, App)
    state: AppState = app.state.tradehall
    made = 0
    windows: list[dict[str, Any]] = []
    async with app.router.lifespan_context(app):
        # Warm-up (not counted): code paths, the book's first levels.
        await place_all(app, list(requests(keys, per_window // 4, made)))
        made += per_window // 4
        for round_ in range(rounds):
            # Alternate which goes first, so that the book's growth hits both alike.
            for on in (True, False) if round_ % 2 == 0 else (False, True):
                switch(state, on)
                batch = list(requests(keys, per_window, made))
                made += per_window
                seconds, cpu = await place_all(app, batch)
                windows.append(
                    {"round": round_, "metrics": on, "rate": per_window / seconds,
                     "per_cpu_second": per_window / cpu}
                )  # fmt: skip
        switch(state, True)
    exchange.store.close()

    def median(key: str, on: bool) -> int:
        return round(statistics.median(float(w[key]) for w in windows if w["metrics"] == on))

    def cost(key: str) -> float:
        ratios = []
        for round_ in range(rounds):
            pair = {w["metrics"]: w[key] for w in windows if w["round"] == round_}
            ratios.append(float(pair[True]) / float(pair[False]))
        return round(1 - statistics.median(ratios), 4)

    direct = statistics.median(metric_work_ns() for _ in range(5))
    cpu_per_placement_ns = 1e9 / median("per_cpu_second", False)
    return {
        "metric_work_ns_per_placement": round(direct),
        "cpu_ns_per_placement": round(cpu_per_placement_ns),
        "direct_cost_share": round(direct / cpu_per_placement_ns, 4),
        "placements_per_window": per_window,
        "rounds": rounds,
        "rate_on_median": median("rate", True),
        "rate_off_median": median("rate", False),
        "per_cpu_second_on_median": median("per_cpu_second", True),
        "per_cpu_second_off_median": median("per_cpu_second", False),
        "cost_share": cost("per_cpu_second"),
        "cost_share_wall": cost("rate"),
        "target_share": 0.03,
        "windows": [
            {**w, "rate": round(w["rate"]), "per_cpu_second": round(w["per_cpu_second"])}
            for w in windows
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.metrics_cost", description=__doc__)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--placements", type=int, default=1000, help="per window")
    p.add_argument("--quick", action="store_true", help="2 rounds of 500: the harness works")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rounds, per_window = (2, 500) if args.quick else (args.rounds, args.placements)
    with tempfile.TemporaryDirectory() as folder:
        result = asyncio.run(measure(Path(folder), rounds, per_window))
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"placements per CPU-second: metrics on {result['per_cpu_second_on_median']}, off"
            f" {result['per_cpu_second_off_median']} (medians); cost"
            f" {result['cost_share']:.1%} (target <= 3 %); wall placements/s on"
            f" {result['rate_on_median']}, off {result['rate_off_median']}; the metrics' own"
            f" work {result['metric_work_ns_per_placement']} ns of"
            f" {result['cpu_ns_per_placement']} ns per placement"
            f" ({result['direct_cost_share']:.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
