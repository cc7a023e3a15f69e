"""The load generator: a separate process (pinned to its own CPU by the orchestrator) that
drives one scenario against a server and prints one JSON document.

    python -m bench.loadgen SPEC.json

Scenarios: ``floor_get`` / ``floor_post`` (and ``floor_starlette_*``) against the floor app;
``ping``, ``depth``, ``place``, ``cancel`` and ``seed`` against ``tradehall serve``.

Every scenario runs a closed loop first (N keep-alive connections, each sending its next request
as soon as the previous answer arrived: the maximum rate), then, when asked, open-loop steps at
fixed offered rates derived from that maximum. In the open loop the send times are scheduled
up front (``t0 + i / rate``) independently of the responses, and each latency is measured from
the *scheduled* time, so a stalled server is charged for every request that should have been
sent meanwhile (no coordinated omission). A request due while every connection is busy waits in
the generator, and that wait is part of its latency.

Signed requests are signed when they are sent (X-CH-TS is the wall clock in ms, kept strictly
increasing per API key so that no two signatures are ever equal: the server refuses replays).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, ClassVar

from bench.common import (
    MID_TICKS,
    SYMBOL,
    Ticks,
    cpu_busy,
    cpu_seconds,
    cpu_ticks,
    percentiles,
    process_cpu_seconds,
    thread_cpu_seconds,
)
from bench.httpclient import ConnectionLost, Pool

SPOT = b"/spot/open/sapi/v1"
DEFAULT_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0, 1.1)
TARGET_FRACTION = 0.8

Make = Callable[[], tuple[bytes, str]]


def fmt_price(ticks: int) -> str:
    return f"{ticks // 100}.{ticks % 100:02d}"


def fmt_qty(lots: int) -> str:
    return f"{lots // 1_000_000}.{lots % 1_000_000:06d}"


class Signer:
    """Per-key HMAC state prepared once; each request costs one ``copy`` + ``update``."""

    def __init__(self, accounts: list[list[str]]) -> None:
        self.keys = [key.encode() for key, _ in accounts]
        self.macs = [hmac.new(secret.encode(), digestmod=hashlib.sha256) for _, secret in accounts]
        self.last = [0] * len(accounts)

    def headers(self, i: int, method_path: bytes, body: bytes) -> bytes:
        ts = time.time_ns() // 1_000_000
        if ts <= self.last[i]:
            ts = self.last[i] + 1
        self.last[i] = ts
        ts_b = str(ts).encode()
        mac = self.macs[i].copy()
        mac.update(ts_b + method_path + body)
        return (
            b"X-CH-APIKEY: "
            + self.keys[i]
            + b"\r\nX-CH-TS: "
            + ts_b
            + b"\r\nX-CH-SIGN: "
            + mac.hexdigest().encode()
            + b"\r\n"
        )


class Requests:
    """Builds every request the scenarios send."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.host = f"Host: {spec['host']}:{spec['port']}\r\n".encode()
        self.rng = random.Random(spec.get("seed", 1))
        accounts = spec.get("accounts") or []
        self.n_accounts = len(accounts)
        self.signer = Signer(accounts)
        self.mid = int(spec.get("mid", MID_TICKS))
        self.cancel_pool: deque[tuple[int, int]] = deque()
        limit = spec.get("depth_limit", 100)
        query = f"symbol={SYMBOL}" + (f"&limit={limit}" if limit else "")
        self.depth_query = query.encode()

    def get(self, path: bytes) -> bytes:
        return b"GET " + path + b" HTTP/1.1\r\n" + self.host + b"\r\n"

    def post(self, path: bytes, sign_path: bytes, account: int, body: bytes) -> bytes:
        return (
            b"POST "
            + path
            + b" HTTP/1.1\r\n"
            + self.host
            + b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n"
            + self.signer.headers(account, b"POST" + sign_path, body)
            + b"\r\n"
            + body
        )

    def place(self, path: bytes = SPOT + b"/order") -> tuple[bytes, str]:
        """Half resting (GTC, 1..100 ticks behind the mid), half crossing (IOC through the mid
        by 150 ticks, so it takes the best levels and never rests)."""
        rng = self.rng
        account = rng.randrange(self.n_accounts)
        buy = rng.random() < 0.5
        if rng.random() < 0.5:
            tag = "rest"
            offset = rng.randint(1, 100)
            price = self.mid - offset if buy else self.mid + offset
            tif = ""
        else:
            tag = "cross"
            price = self.mid + 150 if buy else self.mid - 150
            tif = ',"timeInForce":"IOC"'
        body = (
            f'{{"symbol":"{SYMBOL}","side":"{"BUY" if buy else "SELL"}","type":"LIMIT",'
            f'"volume":"{fmt_qty(rng.randint(1, 10) * 1000)}","price":"{fmt_price(price)}"{tif}}}'
        ).encode()
        return self.post(path, b"/sapi/v1/order", account, body), tag

    def cancel(self) -> tuple[bytes, str]:
        account, order_id = self.cancel_pool.popleft()
        body = b'{"symbol":"' + SYMBOL.encode() + b'","orderId":"' + str(order_id).encode() + b'"}'
        return self.post(SPOT + b"/cancel", b"/sapi/v1/cancel", account, body), "cancel"

    def batch(self, account: int, orders: list[tuple[str, int, int]]) -> bytes:
        items = ",".join(
            f'{{"price":"{fmt_price(p)}","volume":"{fmt_qty(q)}","side":"{s}","batchType":"LIMIT"}}'
            for s, p, q in orders
        )
        body = f'{{"symbol":"{SYMBOL}","orders":[{items}]}}'.encode()
        return self.post(SPOT + b"/batchOrders", b"/sapi/v1/batchOrders", account, body)

    def maker(self, scenario: str) -> Make:
        if scenario in ("floor_get", "floor_starlette_get"):
            path = b"/floor" if scenario == "floor_get" else b"/floor/starlette"
            data = self.get(path + b"?" + self.depth_query)
            return lambda: (data, "get")
        if scenario in ("floor_post", "floor_starlette_post"):
            path = b"/floor" if scenario == "floor_post" else b"/floor/starlette"
            return lambda: self.place(path)
        if scenario == "ping":
            data = self.get(SPOT + b"/ping")
            return lambda: (data, "get")
        if scenario == "depth":
            data = self.get(SPOT + b"/depth?" + self.depth_query)
            return lambda: (data, "get")
        if scenario == "place":
            return self.place
        if scenario == "cancel":
            return self.cancel
        raise ValueError(f"unknown scenario {scenario!r}")


class Recorder:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {}
        self.service: list[float] = []
        self.lag: list[float] = []
        self.statuses: Counter[int] = Counter()
        self.errors = 0
        self.samples: dict[str, int] = {}

    def add(
        self, tag: str, latency: float, service: float, lag: float, status: int, body: bytes
    ) -> None:
        self.statuses[status] += 1
        if status != 200:
            self.error(f"{status} {body[:160].decode('utf-8', 'replace')}")
            return
        bucket = self.latency.get(tag)
        if bucket is None:
            bucket = self.latency[tag] = []
        bucket.append(latency)
        self.service.append(service)
        self.lag.append(lag)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.samples) < 8 or what in self.samples:
            self.samples[what] = self.samples.get(what, 0) + 1

    def summary(self) -> dict[str, Any]:
        everything = [x for values in self.latency.values() for x in values]
        out: dict[str, Any] = {
            "ok": len(everything),
            "errors": self.errors,
            "error_samples": self.samples,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "latency_ms": percentiles(everything, 1e3),
            "service_ms": percentiles(self.service, 1e3),
            "send_lag_ms": percentiles(self.lag, 1e3),
        }
        if len(self.latency) > 1:
            out["latency_ms_by_tag"] = {
                tag: percentiles(values, 1e3) for tag, values in sorted(self.latency.items())
            }
        return out


class CpuWindow:
    """CPU use over a measurement window: the server process, this generator, and how busy
    the CPUs each of them is pinned to were in total (the difference is other processes)."""

    server_cpus: ClassVar[list[int]] = []
    loadgen_cpus: ClassVar[list[int]] = []
    watched: ClassVar[dict[str, list[int]]] = {}
    """Other processes to account for, by name (e.g. the gateways in front of the engine)."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.threads: dict[str, float] = {}
        self.start: tuple[float, float | None, float, Ticks] | None = None
        self.watched0: dict[str, float] = {}

    def begin(self) -> None:
        self.threads = thread_cpu_seconds(self.server_pid) if self.server_pid else {}
        self.watched0 = {name: cpu_seconds(pids) for name, pids in self.watched.items()}
        self.start = (
            time.perf_counter(),
            process_cpu_seconds(self.server_pid) if self.server_pid else None,
            time.process_time(),
            cpu_ticks(),
        )

    def end(self) -> dict[str, Any]:
        assert self.start is not None
        wall0, server0, gen0, ticks0 = self.start
        wall = time.perf_counter() - wall0
        ticks1 = cpu_ticks()
        out: dict[str, Any] = {"generator_cpu_share": round((time.process_time() - gen0) / wall, 3)}
        server1 = process_cpu_seconds(self.server_pid) if self.server_pid else None
        if server0 is not None and server1 is not None:
            out["server_cpu_share"] = round((server1 - server0) / wall, 3)
            out["server_cpu_s"] = round(server1 - server0, 3)
            after = thread_cpu_seconds(self.server_pid) if self.server_pid else {}
            out["server_threads_cpu_share"] = {
                name: round((seconds - self.threads.get(name, 0.0)) / wall, 3)
                for name, seconds in after.items()
                if seconds - self.threads.get(name, 0.0) > 0
            }
        if self.server_cpus:
            busy = cpu_busy(ticks0, ticks1, self.server_cpus)
            out["server_cpus_busy"] = busy.get("busy")
            out["server_cpus_steal"] = busy.get("steal")
            out["server_cpus_irq"] = busy.get("irq")
            if "server_cpu_share" in out and busy:
                others = busy["busy"] - busy["irq"] - busy["steal"] - out["server_cpu_share"]
                out["others_on_server_cpus"] = round(max(0.0, others), 3)
        if self.watched:
            out["watched_cpu_s"] = {
                name: round(cpu_seconds(pids) - self.watched0.get(name, 0.0), 3)
                for name, pids in self.watched.items()
            }
        if self.loadgen_cpus:
            busy = cpu_busy(ticks0, ticks1, self.loadgen_cpus)
            out["loadgen_cpus_busy"] = busy.get("busy")
        return out


async def _sleep_until(t: float) -> None:
    delay = t - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def closed_loop(
    pool: Pool,
    connections: int,
    make: Make,
    warmup: float,
    duration: float,
    server_pid: int | None,
) -> dict[str, Any]:
    pc = time.perf_counter
    rec = Recorder()
    start = pc()
    measure_from = start + warmup
    stop = measure_from + duration
    state = {"exhausted_at": 0.0, "completed": 0}
    cpu = CpuWindow(server_pid)

    async def worker(index: int) -> None:
        while True:
            t0 = pc()
            if t0 >= stop:
                return
            try:
                data, tag = make()
            except IndexError:  # the cancel pool ran dry: the window ends here
                if not state["exhausted_at"]:
                    state["exhausted_at"] = t0
                return
            conn = await pool.get(index)
            try:
                status, body = await conn.request(data)
            except ConnectionLost as exc:
                if pc() >= measure_from:
                    rec.error(f"connection: {exc}")
                continue
            t1 = pc()
            if measure_from <= t1 <= stop:
                rec.add(tag, t1 - t0, t1 - t0, 0.0, status, body)

    async def window() -> None:
        await _sleep_until(measure_from)
        cpu.begin()
        await _sleep_until(stop)

    timer = asyncio.create_task(window())
    await asyncio.gather(*(worker(i) for i in range(connections)))
    if not timer.done():
        timer.cancel()
    usage = cpu.end() if cpu.start else {}
    end = min(stop, state["exhausted_at"] or stop)
    measured = max(1e-9, end - measure_from)
    summary = rec.summary()
    return {
        "mode": "closed",
        "connections": connections,
        "warmup_s": warmup,
        "duration_s": round(measured, 3),
        "pool_exhausted": bool(state["exhausted_at"]),
        "throughput": summary["ok"] / measured,
        **summary,
        **usage,
    }


async def open_loop(
    pool: Pool,
    connections: int,
    make: Make,
    rate: float,
    duration: float,
    max_drain: float,
    server_pid: int | None,
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    pc = time.perf_counter
    n = max(1, round(rate * duration))
    interval = 1.0 / rate
    backlog: deque[float] = deque()
    idle: list[asyncio.Future[float | None]] = []
    rec = Recorder()
    state = {"scheduling": True, "last_done": 0.0}
    cpu = CpuWindow(server_pid)

    async def worker(index: int) -> None:
        while True:
            if backlog:
                scheduled: float | None = backlog.popleft()
            else:
                if not state["scheduling"]:
                    return
                fut: asyncio.Future[float | None] = loop.create_future()
                idle.append(fut)
                scheduled = await fut
                if scheduled is None:
                    return
            try:
                data, tag = make()
            except IndexError:
                rec.error("cancel pool exhausted")
                continue
            conn = await pool.get(index)
            sent = pc()
            try:
                status, body = await conn.request(data)
            except ConnectionLost as exc:
                rec.error(f"connection: {exc}")
                continue
            done = pc()
            state["last_done"] = done
            assert scheduled is not None
            rec.add(tag, done - scheduled, done - sent, sent - scheduled, status, body)

    workers = [asyncio.create_task(worker(i)) for i in range(connections)]
    await asyncio.sleep(0)
    t0 = pc() + 0.01
    cpu.begin()
    i = 0
    while i < n:
        now = pc()
        due = min(n, int((now - t0) / interval) + 1) if now >= t0 else 0
        while i < due:
            scheduled = t0 + i * interval
            if idle:
                idle.pop().set_result(scheduled)
            else:
                backlog.append(scheduled)
            i += 1
        if i < n:
            # The event loop's timers have 1 ms resolution: dispatch in ~1 ms batches. A
            # request sent after its scheduled time is charged the difference (send_lag).
            await asyncio.sleep(max(0.001, t0 + i * interval - pc()))
    state["scheduling"] = False
    for fut in idle:
        fut.set_result(None)
    idle.clear()
    _, pending = await asyncio.wait(workers, timeout=max_drain)
    timed_out = len(backlog)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
        timed_out += len(pending)
        for conn in pool.conns:  # an abandoned request leaves its connection unusable
            conn.close()
    usage = cpu.end()
    summary = rec.summary()
    elapsed = max(1e-9, (state["last_done"] or pc()) - t0)
    return {
        "mode": "open",
        "connections": connections,
        "offered_rate": rate,
        "scheduled": n,
        "duration_s": duration,
        "achieved_rate": summary["ok"] / elapsed,
        "timed_out": timed_out,
        **summary,
        **usage,
    }


def step_passes(step: dict[str, Any], p99_limit_ms: float) -> bool:
    return bool(
        step["errors"] == 0
        and step["timed_out"] == 0
        and step["ok"] == step["scheduled"]
        and step["latency_ms"].get("p99", 1e9) <= p99_limit_ms
    )


async def refill(pool: Pool, reqs: Requests, count: int, connections: int) -> dict[str, Any]:
    """Place resting orders far from the top (never crossed) through batchOrders, so that the
    cancel scenario always names live orders of their owners."""
    rng = reqs.rng
    started = time.perf_counter()
    placed = 0
    errors: Counter[str] = Counter()
    batches = (count + 9) // 10
    queue = deque(range(batches))

    async def worker(index: int) -> None:
        nonlocal placed
        while queue:
            b = queue.popleft()
            account = b % reqs.n_accounts
            orders = []
            for _ in range(10):
                if rng.random() < 0.5:
                    orders.append(("BUY", reqs.mid - 2000 - rng.randint(0, 499), 1000))
                else:
                    orders.append(("SELL", reqs.mid + 2000 + rng.randint(0, 499), 1000))
            conn = await pool.get(index)
            try:
                status, body = await conn.request(reqs.batch(account, orders))
            except ConnectionLost as exc:
                errors[str(exc)] += 1
                continue
            if status != 200:
                errors[body[:120].decode("utf-8", "replace")] += 1
                continue
            for order_id in json.loads(body)["ids"]:
                reqs.cancel_pool.append((account, int(order_id)))
                placed += 1

    await asyncio.gather(*(worker(i) for i in range(min(connections, batches))))
    return {"placed": placed, "seconds": time.perf_counter() - started, "errors": dict(errors)}


async def seed_book(pool: Pool, reqs: Requests, levels: int, per_level: int) -> dict[str, Any]:
    """Rest ``per_level`` orders on each of ``levels`` prices each side of the mid."""
    started = time.perf_counter()
    rng = reqs.rng
    orders = [
        (side, reqs.mid - lv if side == "BUY" else reqs.mid + lv, rng.randint(5, 20) * 1000)
        for lv in range(1, levels + 1)
        for side in ("BUY", "SELL")
        for _ in range(per_level)
    ]
    rng.shuffle(orders)
    errors = 0
    placed = 0
    for start in range(0, len(orders), 10):
        chunk = orders[start : start + 10]
        conn = await pool.get(0)
        status, _ = await conn.request(reqs.batch((start // 10) % reqs.n_accounts, chunk))
        if status == 200:
            placed += len(chunk)
        else:
            errors += 1
    return {"placed": placed, "errors": errors, "seconds": time.perf_counter() - started}


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    scenario = spec["scenario"]
    CpuWindow.server_cpus = list(spec.get("server_cpus") or [])
    CpuWindow.loadgen_cpus = list(spec.get("loadgen_cpus") or [])
    CpuWindow.watched = {name: list(pids) for name, pids in (spec.get("watch") or {}).items()}
    reqs = Requests(spec)
    closed_spec = spec.get("closed") or {}
    open_spec = spec.get("open")
    server_pid = spec.get("server_pid")
    size = max(int(closed_spec.get("connections", 1)), int((open_spec or {}).get("connections", 1)))
    pool = Pool(spec["host"], int(spec["port"]))
    await pool.open(size)
    out: dict[str, Any] = {"scenario": scenario}
    try:
        if scenario == "seed":
            out["seed"] = await seed_book(pool, reqs, spec["levels"], spec["per_level"])
            return out
        make = reqs.maker(scenario)
        warmup = float(closed_spec.get("warmup", 1.0))
        duration = float(closed_spec.get("duration", 4.0))
        if scenario == "cancel":
            guess = float(spec.get("cancel_rate_guess", 5000))
            out["refill_closed"] = await refill(
                pool, reqs, int(guess * (warmup + duration) * 1.2) + 100, 32
            )
        closed = await closed_loop(
            pool, int(closed_spec.get("connections", 64)), make, warmup, duration, server_pid
        )
        out["closed"] = closed
        if not open_spec:
            return out
        out["open"] = await sweep(pool, reqs, make, scenario, open_spec, closed, server_pid)
        out["reconnects"] = pool.reconnects
        return out
    finally:
        pool.close()


async def sweep(
    pool: Pool,
    reqs: Requests,
    make: Make,
    scenario: str,
    spec: dict[str, Any],
    closed: dict[str, Any],
    server_pid: int | None,
) -> dict[str, Any]:
    """Open-loop steps at fractions of the closed-loop maximum, upwards until a step fails
    (p99 over the limit, errors, or not all sent requests answered); the step at 80 % of the
    maximum always runs; then a few bisection steps between the last pass and the first fail."""
    limit = float(spec.get("p99_limit_ms", 10.0))
    duration = float(spec.get("duration", 4.0))
    connections = int(spec.get("connections", 128))
    max_drain = float(spec.get("max_drain", duration + 10.0))
    fractions = sorted(set(spec.get("fractions") or DEFAULT_FRACTIONS) | {TARGET_FRACTION})
    max_rate = max(1.0, float(closed["throughput"]))
    steps: list[dict[str, Any]] = []

    async def step(rate: float, fraction: float) -> dict[str, Any]:
        if scenario == "cancel":
            need = int(rate * duration * 1.02) + 50 - len(reqs.cancel_pool)
            if need > 0:
                await refill(pool, reqs, need, 32)
        await pool.open(connections)
        result = await open_loop(pool, connections, make, rate, duration, max_drain, server_pid)
        result["fraction_of_closed_max"] = fraction
        result["pass"] = step_passes(result, limit)
        steps.append(result)
        await asyncio.sleep(min(0.3, duration))  # let the server finish its commits
        return result

    first_fail: float | None = None
    for fraction in fractions:
        result = await step(max_rate * fraction, fraction)
        if not result["pass"] and first_fail is None:
            first_fail = fraction
        if first_fail is not None and fraction >= TARGET_FRACTION:
            break
    for _ in range(int(spec.get("refine", 2))):
        passed = [s["fraction_of_closed_max"] for s in steps if s["pass"]]
        failed = [s["fraction_of_closed_max"] for s in steps if not s["pass"]]
        if not passed or not failed:
            break
        lo = max(passed)
        hi = min((f for f in failed if f > lo), default=None)
        if hi is None or hi - lo < 0.02:
            break
        mid = (lo + hi) / 2
        await step(max_rate * mid, mid)
    for rate in spec.get("rates") or []:
        (await step(float(rate), float(rate) / max_rate))["fixed_rate"] = True
    steps.sort(key=lambda s: s["offered_rate"])
    passing = [s for s in steps if s["pass"] and not s.get("fixed_rate")]
    at_target = next(
        s
        for s in steps
        if s["fraction_of_closed_max"] == TARGET_FRACTION and not s.get("fixed_rate")
    )
    return {
        "p99_limit_ms": limit,
        "closed_max": max_rate,
        "steps": steps,
        "max_rate_p99_ok": max((s["offered_rate"] for s in passing), default=0.0),
        "at_80pct": {
            "offered_rate": at_target["offered_rate"],
            "p99_ms": at_target["latency_ms"].get("p99"),
            "errors": at_target["errors"],
            "pass": at_target["pass"],
        },
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0]) as f:
        spec = json.load(f)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(spec))
        result["loop"] = "asyncio"
    else:
        result = uvloop.run(run(spec))
        result["loop"] = "uvloop"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
