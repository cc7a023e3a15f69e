"""What WebSocket subscribers cost the exchange: signed placements on BTCUSDT (half resting,
half crossing: the book and the trades move all the time) against the real server, first with
no subscriber, then with N clients (default 1,000) each on that market's depth and trades,
then with none again (A/B/A, because this machine's rate drifts between runs).

Reported: the placement maximum (closed loop) in each phase and what the subscribers cost it;
p50/p99 of placements at 80 % of each phase's maximum; pushes per second received; and the
time from a trade's command to its arrival at a client (sampled clients), which includes the
commit, the coalescing interval and the delivery.
Each phase also runs an open-loop step at a fixed rate (``--fixed-rate``, 500/s): CPU per
placement at the same load in every phase. The JSON has, per phase and step, the engine
process's CPU (``engine_cpu_us_per_placement``, ``engine_cpu_share`` in cores) and, through
gateways, the gateways' and (with subscribers) the subscribers' process's.

    python -m bench.ws_fanout [--clients 1000] [--duration 4] [--json]
    python -m bench.ws_fanout --topology gateway --gateway-workers 2

``--topology serve`` (the default): one ``tradehall serve`` process gets one CPU; the load
generator and the subscribers share the other(s). ``--topology gateway``: ``tradehall engine``
behind ``tradehall gateway --workers N`` over NATS (``--nats``); the subscribers connect to
the gateway and the placements go through it. Nothing is pinned then (as in bench.gateway):
the engine, the gateways, NATS, the load generator and the subscribers share the machine's
CPUs, so the placement rate shows what the whole machine can do; the engine process's own
CPU per placement (all its threads, from /proc) shows whether the fan-out costs the engine
anything. Each phase also reports the gateways' CPU (the supervisor and its workers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import (
    REPO,
    affinity,
    cpu_plan,
    family,
    git_revision,
    kill,
    machine,
    pinned,
    python,
    python_env,
)
from bench.wire import (
    NATS,
    NO_PINNING,
    WireSpec,
    admin_token,
    brief,
    create_accounts,
    loadgen,
    seed_book,
    topology,
)

TOPOLOGIES = ("serve", "gateway")
SAMPLE = 100
"""Every 100th subscriber decodes its frames and times the trades in them (10 of 1,000,
hundreds of thousands of trades a run): decoding is most of a client's cost, and the
subscribers share the CPUs of what they measure."""
DEFAULT_FIXED_RATE = 500.0
"""Placements/s of the open-loop step every phase also runs: the engine's CPU per placement
at the same load with and without subscribers (it costs more per placement at lower rates,
its batches and commits being smaller, so the phases' own maxima do not compare it)."""


def _place(
    server: dict[str, Any],
    spec: WireSpec,
    plan: dict[str, Any],
    work: Path,
    accounts: list[list[str]],
    watch: dict[str, list[int]],
) -> dict[str, Any]:
    result = loadgen("place", server, spec, plan, work, accounts, extra={"watch": watch})
    closed, steps = result["closed"], result["open"]["steps"]
    at_80 = next(step for step in steps if not step.get("fixed_rate"))
    summary = brief(result)
    fixed = [
        {
            "offered_rps": step["offered_rate"],
            "achieved_rps": step["achieved_rate"],
            "p50_ms": step["latency_ms"].get("p50"),
            "p99_ms": step["latency_ms"].get("p99"),
            "errors": step["errors"],
            **_cpu(step, watch),
        }
        for step in steps
        if step.get("fixed_rate")
    ]
    return {
        "at_fixed_rate": fixed[0] if fixed else None,
        **_cpu(closed, watch),
        "closed_max_rps": closed["throughput"],
        "server_cpu_share": summary["server_cpu_share"],
        "per_server_cpu_s": summary["requests_per_server_cpu_s"],
        "bottleneck": summary["bottleneck"],
        "closed_p50_ms": closed["latency_ms"].get("p50"),
        "closed_p99_ms": closed["latency_ms"].get("p99"),
        "at_80pct": {
            "offered_rps": at_80["offered_rate"],
            "p50_ms": at_80["latency_ms"].get("p50"),
            "p99_ms": at_80["latency_ms"].get("p99"),
            "errors": at_80["errors"],
            **_cpu(at_80, watch),
        },
    }


def _cpu(window: dict[str, Any], watch: dict[str, list[int]]) -> dict[str, Any]:
    """CPU of the engine's process (``serve`` or ``tradehall engine``) and of each watched
    group in one measured window: microseconds per answered placement, and cores used."""
    ok, seconds = window.get("ok") or 0, window.get("duration_s") or 0.0
    used = {"engine": window.get("server_cpu_s"), **window.get("watched_cpu_s", {})}
    out: dict[str, Any] = {}
    for name in ("engine", *watch):
        cpu = used.get(name)
        if cpu is None:
            continue
        out[f"{name}_cpu_us_per_placement"] = round(1e6 * cpu / ok, 1) if ok else None
        out[f"{name}_cpu_share"] = round(cpu / seconds, 3) if seconds else None
    out["generator_cpu_share"] = window.get("generator_cpu_share")
    return out


def _start_subscribers(
    url: str, clients: int, plan: dict[str, Any], log_path: Path
) -> subprocess.Popen[str]:
    ws_url = "ws" + url.removeprefix("http") + "/kline-api/ws"
    spec = json.dumps({"url": ws_url, "clients": clients, "sample": SAMPLE})
    cmd = pinned([python(), "-m", "bench.ws_subscribers", spec], plan["loadgen"], plan)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=python_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line or "ready" not in json.loads(line):
        kill(proc)
        raise RuntimeError(f"the subscribers did not connect: see {log_path}")
    return proc


def _stop_subscribers(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    line = proc.stdout.readline()
    proc.wait(60)
    result: dict[str, Any] = json.loads(line)
    return result


def run(
    clients: int = 1000,
    accounts: int = 200,
    duration: float = 4.0,
    log: Any = print,
    topology_name: str = "serve",
    gateway_workers: int = 1,
    nats: str = NATS,
    fixed_rate: float = DEFAULT_FIXED_RATE,
) -> dict[str, Any]:
    gateway = topology_name == "gateway"
    plan = NO_PINNING if gateway else cpu_plan()
    kind = f"gw{gateway_workers}" if gateway else "serve"
    spec = WireSpec(
        accounts=accounts,
        duration=duration,
        step_duration=duration,
        fractions=(0.8,),
        fixed_rates=(fixed_rate,) if fixed_rate else (),
        refine=0,
        p99_limit_ms=1e9,  # the sweep's pass/fail rule is not used here
        profile_server=False,
    )
    work = Path(tempfile.mkdtemp(prefix="tradehall-bench-ws-"))
    results: dict[str, Any] = {
        "machine": machine(),
        "revision": git_revision(),
        "load_average_before": os.getloadavg(),
        "cpu_plan": plan,
        "clients": clients,
        "topology": kind,
        "fixed_rate": fixed_rate,
    }
    pinning = affinity(plan["loadgen"]) if plan["pinned"] else contextlib.nullcontext()
    try:
        with pinning, topology(kind, work, nats=nats, plan=plan) as (server, admin_url):
            watch = {"gateways": family(server["gateway_pid"])} if gateway else {}
            funded = create_accounts(admin_url, admin_token(server), accounts)
            seed_book(server, spec, plan, work, funded)
            log(f"  ws fan-out ({kind}): placements, no subscriber")
            before = _place(server, spec, plan, work, funded, watch)
            log(f"  ws fan-out ({kind}): {clients} subscribers connecting")
            started = time.perf_counter()
            subscribers = _start_subscribers(server["url"], clients, plan, work / "subs.log")
            results["connect_seconds"] = time.perf_counter() - started
            try:
                log(f"  ws fan-out ({kind}): placements with the subscribers")
                with_subs = {**watch, "subscribers": [subscribers.pid]}
                during = _place(server, spec, plan, work, funded, with_subs)
            finally:
                pushes = _stop_subscribers(subscribers)
            time.sleep(1.0)  # the server notices the closed connections
            log(f"  ws fan-out ({kind}): placements, no subscriber again")
            after = _place(server, spec, plan, work, funded, watch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = median([before["closed_max_rps"], after["closed_max_rps"]])
    per_cpu = [p["per_server_cpu_s"] for p in (before, after) if p["per_server_cpu_s"]]
    base_per_cpu = median(per_cpu) if per_cpu else None
    results.update(
        {
            "without": [before, after],
            "with_subscribers": during,
            "pushes": pushes,
            "placement_cost": 1 - during["closed_max_rps"] / base if base else None,
            "placement_cost_per_server_cpu": (
                1 - during["per_server_cpu_s"] / base_per_cpu
                if base_per_cpu and during["per_server_cpu_s"]
                else None
            ),
            "engine_cpu_cost": _growth(before, during, after, lambda p: p),
            "engine_cpu_cost_at_80pct": _growth(before, during, after, lambda p: p["at_80pct"]),
            "engine_cpu_cost_at_fixed_rate": _growth(
                before, during, after, lambda p: p["at_fixed_rate"] or {}
            ),
            "target": "subscribers cost under 10 % of the placement rate",
        }
    )
    results["pass"] = results["placement_cost"] is not None and results["placement_cost"] < 0.10
    return results


def _growth(
    before: dict[str, Any],
    during: dict[str, Any],
    after: dict[str, Any],
    pick: Callable[[dict[str, Any]], dict[str, Any]],
) -> float | None:
    """How much more engine CPU a placement took with the subscribers than without (the
    median of the two phases without), as a fraction."""
    key = "engine_cpu_us_per_placement"
    base: list[float] = [pick(p)[key] for p in (before, after) if pick(p).get(key)]
    value = pick(during).get(key)
    return float(value) / median(base) - 1 if base and value else None


def report(results: dict[str, Any]) -> str:
    if results.get("topology", "serve") != "serve":
        return gateway_report(results)
    before, after = results["without"]
    during = results["with_subscribers"]
    rows = [
        "| Phase | Placements/s (max) | per server CPU-s | server CPU | p50 at 80 %"
        " | p99 at 80 % |",
        "|---|---|---|---|---|---|",
    ]
    for name, phase in (
        ("no subscriber", before),
        (f"{results['clients']} subscribers", during),
        ("no subscriber again", after),
    ):
        at = phase["at_80pct"]
        per_cpu = phase.get("per_server_cpu_s") or 0.0
        share = phase.get("server_cpu_share") or 0.0
        rows.append(
            f"| {name} | {phase['closed_max_rps']:,.0f} | {per_cpu:,.0f} | {share * 100:.0f} % |"
            f" {at['p50_ms']:.1f} ms | {at['p99_ms']:.1f} ms |"
        )
    cost = results["placement_cost"]
    per_cpu_cost = results.get("placement_cost_per_server_cpu")
    per_cpu_text = f"{per_cpu_cost * 100:.1f} %" if per_cpu_cost is not None else "n/a"
    rows += [
        "",
        f"- Cost of the subscribers: {cost * 100:.1f} % of the placement maximum"
        f" ({'pass' if results['pass'] else 'FAIL'}: target under 10 %);"
        f" {per_cpu_text} of the placements per server CPU-second.",
        *_delivery_lines(results),
    ]
    return "\n".join(rows)


def _us(value: float | None) -> str:
    return f"{value:,.0f} us" if value is not None else "n/a"


def _cores(value: float | None) -> str:
    return f"{value * 100:.0f} %" if value is not None else "-"


def _pct(value: float | None) -> str:
    return f"{value * 100:+.1f} %" if value is not None else "n/a"


def gateway_report(results: dict[str, Any]) -> str:
    """The engine behind gateways: per phase the placement maximum, the engine process's and
    the gateways' CPU per placement and in cores, and what the subscribers cost."""
    before, after = results["without"]
    during = results["with_subscribers"]
    load = results["load_average_before"]
    rows = [
        f"Topology {results['topology']} (engine + gateway workers over NATS, nothing pinned);"
        f" load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
        "",
        "| Phase | Placements/s (max) | engine CPU per placement | gateways CPU per placement"
        " | CPU used: engine / gateways / subscribers / load generator"
        " | p50 / p99 at 80 % | engine CPU per placement at 80 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, phase in (
        ("no subscriber", before),
        (f"{results['clients']} subscribers", during),
        ("no subscriber again", after),
    ):
        at = phase["at_80pct"]
        used = " / ".join(
            _cores(phase.get(f"{part}_cpu_share"))
            for part in ("engine", "gateways", "subscribers", "generator")
        )
        rows.append(
            f"| {name} | {phase['closed_max_rps']:,.0f}"
            f" | {_us(phase.get('engine_cpu_us_per_placement'))}"
            f" | {_us(phase.get('gateways_cpu_us_per_placement'))} | {used}"
            f" | {at['p50_ms']:.1f} / {at['p99_ms']:.1f} ms"
            f" | {_us(at.get('engine_cpu_us_per_placement'))} |"
        )
    cost = results["placement_cost"]
    rows += [
        "",
        f"- What the subscribers cost (a) the placement maximum: {cost * 100:.1f} %"
        f" ({'pass' if results['pass'] else 'FAIL'}: target under 10 %; the engine, the"
        " gateways, the subscribers and the load generator share this machine's CPUs);"
        f" (b) the engine's CPU per placement: {_pct(results['engine_cpu_cost'])} in the"
        f" closed loop, {_pct(results['engine_cpu_cost_at_80pct'])} at 80 % of each phase's"
        " maximum.",
        *_fixed_rate_lines(results),
        *_delivery_lines(results),
    ]
    return "\n".join(rows)


def _delivery_lines(results: dict[str, Any]) -> list[str]:
    """Frames, trade-to-client latency and connection time: the same in both reports."""
    pushes = results["pushes"]
    latency = pushes.get("trade_to_client_ms", {})
    return [
        f"- Frames received: {pushes['frames_per_s']:,.0f}/s in all,"
        f" {pushes['frames_per_client_per_s']:.1f}/s per client;"
        f" {pushes['closed_by_server']} clients closed by the server.",
        f"- Trade command to client (sampled {pushes['sampled_clients']} clients,"
        f" {latency.get('count', 0)} trades): p50 {latency.get('p50', 0):.0f} ms,"
        f" p99 {latency.get('p99', 0):.0f} ms.",
        f"- {results['clients']} clients connected and subscribed in"
        f" {results['connect_seconds']:.1f} s.",
    ]


def _fixed_rate_lines(results: dict[str, Any]) -> list[str]:
    phases = [results["without"][0], results["with_subscribers"], results["without"][1]]
    fixed = [phase.get("at_fixed_rate") for phase in phases]
    if not all(fixed):
        return []

    def three(key: str) -> str:
        return " / ".join(_us(step.get(key)) for step in fixed if step)

    achieved = " / ".join(f"{step['achieved_rps']:,.0f}" for step in fixed if step)
    cores = " / ".join(_cores(step.get("engine_cpu_share")) for step in fixed if step)
    return [
        f"- At {results['fixed_rate']:,.0f} placements/s offered in every phase (achieved"
        f" {achieved}/s), without / with / without the subscribers: engine CPU per placement"
        f" {three('engine_cpu_us_per_placement')}"
        f" ({_pct(results['engine_cpu_cost_at_fixed_rate'])}), engine CPU used {cores};"
        f" gateways per placement {three('gateways_cpu_us_per_placement')}."
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=200)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measurement")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default="serve",
        help="serve: one process; gateway: tradehall engine behind tradehall gateway",
    )
    parser.add_argument("--gateway-workers", type=int, default=1, help="with --topology gateway")
    parser.add_argument("--nats", default=NATS, help="with --topology gateway")
    parser.add_argument(
        "--fixed-rate",
        type=float,
        default=DEFAULT_FIXED_RATE,
        help="placements/s of an open-loop step in every phase (0: none)",
    )
    args = parser.parse_args(argv)
    quiet = args.json
    results = run(
        args.clients,
        args.accounts,
        args.duration,
        log=(lambda _: None) if quiet else print,
        topology_name=args.topology,
        gateway_workers=args.gateway_workers,
        nats=args.nats,
        fixed_rate=args.fixed_rate,
    )
    print(json.dumps(results) if args.json else report(results))


if __name__ == "__main__":
    main()
