"""Part 2 and 3, wire to wire: the real ``tradehall serve`` process and the floor, each driven
by the load generator running as a separate process on loopback.

With two or more CPUs the server under test (and the floor) is pinned to one CPU with
``taskset`` and the load generator (and this orchestrator) to the others, so the server gets a
whole core and the generator cannot steal it. Both servers run the same uvicorn configuration.
"""

from __future__ import annotations

import contextlib
import io
import json
import pstats
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    affinity,
    cpu_plan,
    fresh_schema,
    fsync_latency,
    kill,
    pinned,
    python,
    python_env,
    run_json,
)
from bench.loadgen import DEFAULT_FRACTIONS
from tradehall.client import AdminClient
from tradehall.cluster import DEFAULT_BATCH_DELAY

ENDPOINTS = {
    "floor_get": "GET /floor (bare ASGI, constant)",
    "floor_post": "POST /floor (bare ASGI, body read, constant)",
    "floor_starlette_get": "GET /floor/starlette (Starlette route, constant)",
    "floor_starlette_post": "POST /floor/starlette (Starlette route, constant)",
    "ping": "GET /spot/open/sapi/v1/ping",
    "depth": "GET /spot/open/sapi/v1/depth?symbol=BTCUSDT&limit=100",
    "place": "POST /spot/open/sapi/v1/order (signed LIMIT, half resting GTC, half crossing IOC)",
    "cancel": "POST /spot/open/sapi/v1/cancel (signed, live order of the caller)",
}


@dataclass(frozen=True)
class WireSpec:
    accounts: int = 1000
    closed_connections: int = 64
    open_connections: int = 128
    warmup: float = 1.0
    duration: float = 4.0
    step_duration: float = 4.0
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    fixed_rates: tuple[float, ...] = ()
    """Open-loop steps at these rates (requests/s) too, after the sweep: the same load in runs
    whose maxima differ."""
    refine: int = 2
    p99_limit_ms: float = 10.0
    seed_levels: int = 120
    seed_per_level: int = 2
    depth_limit: int = 100
    info_scenarios: tuple[str, ...] = field(
        default=("floor_starlette_get", "floor_starlette_post", "ping")
    )
    """Closed loop only, for information (not compared with the targets)."""
    database: str = ""
    """Empty: the server under test uses SQLite in a temporary folder. A postgresql:// URL:
    it runs on PostgreSQL, in a fresh schema of that database dropped afterwards."""
    profile_server: bool = True
    """Afterwards, a separate server under cProfile takes a closed loop of signed placements:
    where the event loop's time goes (not used for any figure)."""


# --------------------------------------------------------------------------- processes


def _wait_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not selector.select(timeout):
            raise RuntimeError(f"no announcement within {timeout:.0f} s")
    finally:
        selector.close()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError("process exited before announcing itself")
    return line


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                response.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.05)


def start_announcing(
    cmd: list[str], log_path: Path, ready_path: str, timeout: float = 60.0
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start a server that prints one JSON line with its ``url``; wait until it answers."""
    log = log_path.open("w")
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=python_env(), stdout=subprocess.PIPE, stderr=log, text=True
    )
    log.close()
    try:
        info = json.loads(_wait_line(proc, timeout))
        _wait_http(info["url"] + ready_path, timeout)
    except BaseException:
        kill(proc)
        raise
    info["pid"] = proc.pid
    return proc, info


def serve_supports_no_rate_limits() -> bool:
    out = subprocess.run(
        [python(), "-m", "tradehall", "serve", "--help"],
        cwd=REPO,
        env={**python_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "--no-rate-limits" in out.stdout


PING = "/spot/open/sapi/v1/ping"
NO_PINNING: dict[str, Any] = {"pinned": False, "server": [], "loadgen": []}
NATS = "nats://127.0.0.1:4222"
DEFAULT_BATCH_DELAY_MS = DEFAULT_BATCH_DELAY * 1000


@contextlib.contextmanager
def topology(
    kind: str,
    work: Path,
    *,
    nats: str = NATS,
    batch_delay_ms: float = DEFAULT_BATCH_DELAY_MS,
    plan: dict[str, Any] = NO_PINNING,
    gateway_args: Sequence[str] = (),
) -> Iterator[tuple[dict[str, Any], str]]:
    """(load target, admin URL) of ``serve``, ``engine`` (no gateway) or ``gw<N>`` (the engine
    process behind ``tradehall gateway --workers N``, over NATS at ``nats``, with
    ``gateway_args`` added). ``serve`` runs on ``plan``'s server CPUs; the split topologies are
    not pinned. In the split ones the target's ``pid`` is the engine process's (the CPU the
    load generator reports) and ``gateway_pid`` the gateway's supervisor."""
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-gw-"))
    procs = []
    try:
        if kind == "serve":
            cmd = [python(), "-m", "tradehall", "serve", "--port", "0", "--json"]
            cmd += ["--no-rate-limits", "--data-dir", str(data_dir)]
            proc, info = start_announcing(
                pinned(cmd, plan["server"], plan), work / "serve.log", PING
            )
            procs.append(proc)
            yield info, info["url"]
            return
        subject = f"bench-{uuid.uuid4().hex[:12]}"
        cmd = [python(), "-m", "tradehall", "engine", "--json", "--data-dir", str(data_dir)]
        cmd += ["--nats", nats, "--engine-subject", subject]
        engine, engine_info = start_announcing(cmd, work / "engine.log", "/openapi.json")
        procs.append(engine)
        engine_info["subject"] = subject
        if kind == "engine":
            yield engine_info, engine_info["url"]
            return
        workers = int(kind.removeprefix("gw"))
        cmd = [python(), "-m", "tradehall", "gateway", "--port", "0", "--json", "--no-rate-limits"]
        cmd += ["--nats", nats, "--engine-subject", subject, "--workers", str(workers)]
        cmd += ["--batch-delay-ms", str(batch_delay_ms), *gateway_args]
        gateway, info = start_announcing(cmd, work / "gateway.log", PING)
        procs.append(gateway)
        info["gateway_pid"] = gateway.pid
        info["subject"] = subject
        info["pid"] = engine.pid  # the CPU share the load generator reports: the engine's
        info["dataDir"] = engine_info["dataDir"]
        yield info, engine_info["url"]
    finally:
        for proc in reversed(procs):
            kill(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def admin_token(info: dict[str, Any]) -> str:
    return (Path(info["dataDir"]) / "admin.token").read_text().strip()


# --------------------------------------------------------------------------- setup


def create_accounts(url: str, token: str, count: int) -> list[list[str]]:
    """Users, trading keys and funds through the admin API (``tradehall.client.AdminClient``),
    16 at a time so that group commit batches them."""
    local = threading.local()
    clients: list[AdminClient] = []
    lock = threading.Lock()

    def admin() -> AdminClient:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = AdminClient(url, token, timeout=60)
            with lock:
                clients.append(client)
        return client

    def one(i: int) -> list[str]:
        a = admin()
        user = a.create_user(f"bench-{i}")
        key = a.create_key(user["id"])
        a.deposit(user["id"], "USDT", "1000000", f"bench-usdt-{i}")
        a.deposit(user["id"], "BTC", "100", f"bench-btc-{i}")
        return [key["apiKey"], key["secret"]]

    try:
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(one, range(count)))
    finally:
        for client in clients:
            client.close()


# --------------------------------------------------------------------------- load generator


def loadgen(
    scenario: str,
    target: dict[str, Any],
    spec: WireSpec,
    plan: dict[str, Any],
    work: Path,
    accounts: list[list[str]] | None = None,
    open_loop: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    host, port = target["url"].removeprefix("http://").rsplit(":", 1)
    max_drain = spec.step_duration + 5.0
    config: dict[str, Any] = {
        "scenario": scenario,
        "host": host,
        "port": int(port),
        "server_pid": target["pid"],
        "server_cpus": plan["server"] if plan["pinned"] else [],
        "loadgen_cpus": plan["loadgen"] if plan["pinned"] else [],
        "accounts": accounts or [],
        "depth_limit": spec.depth_limit,
        "seed": 7,
        "closed": {
            "connections": spec.closed_connections,
            "warmup": spec.warmup,
            "duration": spec.duration,
        },
        "open": {
            "connections": spec.open_connections,
            "duration": spec.step_duration,
            "fractions": list(spec.fractions),
            "rates": list(spec.fixed_rates),
            "refine": spec.refine,
            "p99_limit_ms": spec.p99_limit_ms,
            "max_drain": max_drain,
        }
        if open_loop
        else None,
        **(extra or {}),
    }
    spec_path = work / f"loadgen-{scenario}.json"
    spec_path.write_text(json.dumps(config))
    steps = len(spec.fractions) + len(spec.fixed_rates) + 1 + spec.refine if open_loop else 0
    timeout = 120 + spec.warmup + spec.duration + steps * (spec.step_duration + max_drain + 3)
    cmd = pinned([python(), "-m", "bench.loadgen", str(spec_path)], plan["loadgen"], plan)
    result: dict[str, Any] = run_json(cmd, timeout)
    return result


def seed_book(
    server: dict[str, Any],
    spec: WireSpec,
    plan: dict[str, Any],
    work: Path,
    accounts: list[list[str]],
) -> dict[str, Any]:
    """The book the placement scenarios start from (``spec.seed_levels`` a side)."""
    extra = {"levels": spec.seed_levels, "per_level": spec.seed_per_level}
    seeded: dict[str, Any] = loadgen("seed", server, spec, plan, work, accounts, extra=extra)[
        "seed"
    ]
    return seeded


def server_core_share(closed: dict[str, Any]) -> float | None:
    """CPU the server used, counting the interrupt handling (loopback networking) on its CPU."""
    server = closed.get("server_cpu_share")
    if server is None:
        return None
    return float(server) + float(closed.get("server_cpus_irq") or 0.0)


def bottleneck(closed: dict[str, Any]) -> str:
    server = server_core_share(closed)
    generator = closed.get("generator_cpu_share", 0.0)
    others = closed.get("others_on_server_cpus") or 0.0
    if server is not None and server >= 0.9:
        return "server CPU"
    if others >= 0.1:
        return f"server CPU shared with other processes ({others:.0%} of it went elsewhere)"
    if generator >= 0.9:
        return "load generator CPU"
    return "neither CPU saturated (waits: commits, scheduling)"


def brief(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of one scenario that the report and the targets use."""
    closed = result.get("closed", {})
    share = server_core_share(closed)
    out: dict[str, Any] = {
        "endpoint": ENDPOINTS.get(result["scenario"], result["scenario"]),
        "closed_max_rps": closed.get("throughput"),
        "closed_p50_ms": closed.get("latency_ms", {}).get("p50"),
        "closed_p99_ms": closed.get("latency_ms", {}).get("p99"),
        "closed_errors": closed.get("errors"),
        "server_cpu_share": closed.get("server_cpu_share"),
        "server_irq_share": closed.get("server_cpus_irq"),
        "server_threads_cpu_share": closed.get("server_threads_cpu_share"),
        "others_on_server_cpu": closed.get("others_on_server_cpus"),
        "generator_cpu_share": closed.get("generator_cpu_share"),
        "requests_per_server_cpu_s": closed["throughput"] / share if share else None,
        "bottleneck": bottleneck(closed),
    }
    sweep = result.get("open")
    if sweep:
        out["max_rate_p99_ok"] = sweep["max_rate_p99_ok"]
        out["at_80pct"] = sweep["at_80pct"]
    return out


# --------------------------------------------------------------------------- the part


def run(spec: WireSpec, out_dir: Path, log: Any = print) -> dict[str, Any]:
    plan = cpu_plan()
    work = out_dir / "wire"
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"spec": asdict(spec), "cpu_plan": plan, "scenarios": {}}
    scenarios: dict[str, Any] = results["scenarios"]
    cleanups: list[Callable[[], None]] = []
    with affinity(plan["loadgen"]):
        # ---------------------------------------------------------------- the floor
        floor_cmd = pinned([python(), "-m", "bench.floor_app", "--port", "0"], plan["server"], plan)
        proc, floor = start_announcing(floor_cmd, work / "floor.log", "/floor")
        try:
            for name in ("floor_get", "floor_post"):
                log(f"  wire: {name}")
                scenarios[name] = loadgen(name, floor, spec, plan, work, [["k", "s"]] * 64)
            for name in spec.info_scenarios:
                if name.startswith("floor"):
                    log(f"  wire: {name} (closed loop only)")
                    scenarios[name] = loadgen(
                        name, floor, spec, plan, work, [["k", "s"]] * 64, open_loop=False
                    )
        finally:
            kill(proc)

        # ---------------------------------------------------------------- tradehall serve
        flag = serve_supports_no_rate_limits()
        results["rate_limits"] = (
            "switched off with --no-rate-limits"
            if flag
            else "serve has no --no-rate-limits flag in this build; rate limits are off by"
            " default in the server (create_app without limits), so none applied"
        )
        data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-wire-"))
        results["fsync_ms"] = fsync_latency(data_dir)
        serve = [python(), "-m", "tradehall", "serve", "--port", "0", "--json"]
        serve += ["--data-dir", str(data_dir)] + (["--no-rate-limits"] if flag else [])
        results["database"] = "postgresql" if spec.database else "sqlite"
        if spec.database:
            url, drop_schema = fresh_schema(spec.database)
            cleanups.append(drop_schema)
            serve += ["--database", url]
        proc, server = start_announcing(
            pinned(serve, plan["server"], plan), work / "server.log", "/spot/open/sapi/v1/ping"
        )
        try:
            token = (data_dir / "admin.token").read_text().strip()
            started = time.perf_counter()
            accounts = create_accounts(server["url"], token, spec.accounts)
            results["setup"] = {
                "accounts": len(accounts),
                "accounts_seconds": time.perf_counter() - started,
            }
            log(f"  wire: {len(accounts)} accounts funded")
            results["setup"]["seed_book"] = seed_book(server, spec, plan, work, accounts)
            if "ping" in spec.info_scenarios:
                log("  wire: ping (closed loop only)")
                scenarios["ping"] = loadgen("ping", server, spec, plan, work, open_loop=False)
            for name in ("depth", "place", "cancel"):
                log(f"  wire: {name}")
                extra = None
                if name == "cancel":
                    guess = scenarios["place"]["closed"]["throughput"] * 3
                    extra = {"cancel_rate_guess": max(200.0, guess)}
                scenarios[name] = loadgen(name, server, spec, plan, work, accounts, extra=extra)
            with contextlib.suppress(Exception), AdminClient(server["url"], token) as admin:
                results["server_status"] = admin.status()
                report = admin.audit()
                results["audit_after_load"] = {
                    "ok": report.get("ok"),
                    "problems": report.get("problems", [])[:5],
                }
        finally:
            kill(proc)
            shutil.rmtree(data_dir, ignore_errors=True)
            for cleanup in cleanups:
                cleanup()

        if spec.profile_server:
            log("  wire: place against a server under cProfile (for the profile only)")
            results["server_profile"] = profile_server(spec, plan, work)

    results["summary"] = {name: brief(r) for name, r in scenarios.items()}
    floor_get = scenarios["floor_get"]["closed"]["throughput"]
    floor_post = scenarios["floor_post"]["closed"]["throughput"]
    results["ratios_to_floor"] = {
        name: r["closed"]["throughput"] / (floor_get if _is_get(name) else floor_post)
        for name, r in scenarios.items()
        if "closed" in r
    }
    sustained: dict[str, float] = {}
    for name in ("depth", "place", "cancel"):
        base = scenarios["floor_get" if _is_get(name) else "floor_post"]["open"]
        rate = scenarios[name]["open"]["max_rate_p99_ok"]
        if base["max_rate_p99_ok"]:
            sustained[name] = rate / base["max_rate_p99_ok"]
    results["ratios_to_floor_p99_ok"] = sustained
    summary = results["summary"]
    per_cpu = {name: s.get("requests_per_server_cpu_s") for name, s in summary.items()}
    if per_cpu.get("floor_get") and per_cpu.get("floor_post"):
        results["ratios_to_floor_per_server_cpu_s"] = {
            name: value / (per_cpu["floor_get"] if _is_get(name) else per_cpu["floor_post"])
            for name, value in per_cpu.items()
            if value
        }
    results["rate_limited_responses"] = sum(
        phase.get("statuses", {}).get("429", 0)
        for r in scenarios.values()
        for phase in [r.get("closed", {}), *r.get("open", {}).get("steps", [])]
    )
    return results


def profile_server(spec: WireSpec, plan: dict[str, Any], work: Path) -> dict[str, Any]:
    """``tradehall serve`` under ``python -m cProfile`` (its main thread: the event loop, where
    requests are parsed, authenticated, applied and answered; the store's writer thread is not
    in it), a few funded accounts, a seeded book, then a closed loop of ``place``."""
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-profile-"))
    prof = work / "server.prof"
    serve = [python(), "-m", "cProfile", "-o", str(prof), "-m", "tradehall", "serve"]
    serve += ["--port", "0", "--json", "--data-dir", str(data_dir)]
    if serve_supports_no_rate_limits():  # measuring placements, not the rate limiter
        serve.append("--no-rate-limits")
    proc, server = start_announcing(
        pinned(serve, plan["server"], plan), work / "server-profiled.log", "/spot/open/sapi/v1/ping"
    )
    try:
        token = (data_dir / "admin.token").read_text().strip()
        accounts = create_accounts(server["url"], token, min(spec.accounts, 200))
        extra = {"levels": spec.seed_levels, "per_level": spec.seed_per_level}
        loadgen("seed", server, spec, plan, work, accounts, extra=extra)
        run = loadgen("place", server, spec, plan, work, accounts, open_loop=False)
    finally:
        kill(proc, grace=60)
        shutil.rmtree(data_dir, ignore_errors=True)
    summary = summarize_profile(prof, work / "server_profile.txt")
    statuses = run["closed"].get("statuses", {})
    summary["place_closed_loop_rps_under_profiler"] = run["closed"]["throughput"]
    summary["place_closed_loop_statuses"] = statuses
    if set(statuses) - {"200"}:  # refused placements would profile the refusal instead
        summary["warning"] = f"placements were not all accepted: {statuses}"
    return summary


def summarize_profile(prof: Path, text_path: Path) -> dict[str, Any]:
    stats = pstats.Stats(str(prof))
    raw: dict[Any, Any] = {
        key: value
        for key, value in stats.stats.items()  # type: ignore[attr-defined]
        # A coroutine suspended for the server's whole life (the lifespan) shows its wait as
        # own time with no cumulative time: not work, so left out.
        if not value[2] > value[3]
    }
    total = sum(v[2] for v in raw.values())
    rows = [
        {
            "function": f"{_short(path)}:{line}({name})",
            "ncalls": ncalls,
            "tottime_share": round(tottime / total, 4) if total else 0.0,
            "cumtime_share": round(cumtime / total, 4) if total else 0.0,
        }
        for (path, line, name), (_cc, ncalls, tottime, cumtime, _c) in raw.items()
    ]
    text = io.StringIO()
    pstats.Stats(str(prof), stream=text).sort_stats("tottime").print_stats(50)
    text_path.write_text(text.getvalue())
    return {
        "note": "cProfile of the server's main thread (event loop) during account setup and a"
        " closed loop of signed placements; shares of the profiled time (the event loop's idle"
        " waits are not in it); cProfile slows Python code more than C code, so read the"
        " ranking, not absolute costs",
        "top_tottime": sorted(rows, key=lambda r: r["tottime_share"], reverse=True)[:30],
        "top_cumtime": sorted(rows, key=lambda r: r["cumtime_share"], reverse=True)[:30],
    }


def _short(path: str) -> str:
    for marker in ("/src/", "site-packages/", "/lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _is_get(name: str) -> bool:
    return name.endswith("_get") or name in ("ping", "depth")
