"""What WebSocket subscribers cost the engine's placement rate when gateways fan out on cores
of their own (issue 15's target, measured the way the split topology scales; docs/websocket.md
"The engine's ceiling with 1,000 subscribers").

The engine process gets the first CPU alone (``taskset``, all its threads); a gateway worker,
the subscribers and the placement flood share the other(s). Placements are flooded straight
into the engine over NATS, as ``bench.gateway`` measures its ceiling (pre-admitted commands:
what gateways forward), random buys and sells around one BTCUSDT price, so the book and the
trades move all the time. Phases A/B/A, each on a fresh engine (a flood leaves a deep book):
no subscriber, then N clients (default 1,000) each on BTCUSDT's depth and trades through the
gateway, then none again.

Reported per phase: placements per second and per engine-core second, the engine's CPU share,
and with subscribers the frames per second they received. The cost is the fall of the
placement rate (and of the per-core figure) from the mean of the two phases without.

    python -m bench.ws_engine                      # 3 rounds, 1,000 clients
    python -m bench.ws_engine --rounds 1 --clients 100 --duration 2 --json

Needs two CPUs and taskset, and NATS on --nats (default nats://127.0.0.1:4222). NATS itself is
not pinned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import affinity, cpu_plan, family, machine
from bench.gateway import GatewaySpec, _flood
from bench.wire import NATS, admin_token, create_accounts, topology
from bench.ws_fanout import _start_subscribers, _stop_subscribers


def pin(pids: list[int], cpus: list[int]) -> None:
    """Every thread of every process in ``pids`` on ``cpus``."""
    for pid in pids:
        cmd = ["taskset", "-a", "-p", "-c", ",".join(map(str, cpus)), str(pid)]
        subprocess.run(cmd, check=True, capture_output=True)


def flood(spec: GatewaySpec, subject: str, keys: list[str], pid: int) -> dict[str, Any]:
    result = asyncio.run(_flood(spec, subject, keys, pid))
    share = result.get("engine_cpu_share")
    rate = result["throughput"]
    return {
        "placements_per_s": round(rate),
        "engine_cpu_share": share,
        "per_engine_core_s": round(rate / share) if share else None,
    }


def phase(
    args: argparse.Namespace, plan: dict[str, Any], work: Path, clients: int
) -> dict[str, Any]:
    """One flood into a fresh engine (a flood leaves a deep book behind: every phase starts
    from the same state), with ``clients`` subscribers on the gateway meanwhile."""
    spec = replace(GatewaySpec(), duration=args.duration, nats=args.nats)
    with topology("gw1", work, nats=args.nats) as (target, admin_url):
        engine_pid = target["pid"]
        pin([engine_pid], plan["engine"])
        pin(family(target["gateway_pid"]), plan["loadgen"])
        keys = [a[0] for a in create_accounts(admin_url, admin_token(target), spec.accounts)]
        with affinity(plan["loadgen"]):
            if not clients:
                return flood(spec, target["subject"], keys, engine_pid)
            subscribers = _start_subscribers(target["url"], clients, plan, work / "subscribers.log")
            try:
                measured = flood(spec, target["subject"], keys, engine_pid)
            finally:
                received = _stop_subscribers(subscribers)
    measured["frames_per_s"] = round(received.get("frames_per_s", 0))
    measured["clients_dropped"] = received.get("closed_by_server")
    return measured


def one_round(args: argparse.Namespace, plan: dict[str, Any], work: Path) -> dict[str, Any]:
    phases = {
        "before": phase(args, plan, work, 0),
        "with_subscribers": phase(args, plan, work, args.clients),
        "after": phase(args, plan, work, 0),
    }
    return {**phases, **cost(phases)}


def cost(phases: dict[str, Any]) -> dict[str, float | None]:
    """The fall from the mean of the phases without subscribers (negative: no fall)."""
    out: dict[str, float | None] = {}
    for name in ("placements_per_s", "per_engine_core_s"):
        without = [phases[p][name] for p in ("before", "after") if phases[p][name]]
        during = phases["with_subscribers"][name]
        base = sum(without) / len(without) if without else None
        out[f"cost_{name}"] = round(1 - during / base, 3) if base and during else None
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--nats", default=NATS)
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args(argv)
    plan = cpu_plan()
    if not plan["pinned"]:
        raise SystemExit("needs two CPUs and taskset: the engine must have a core of its own")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="tradehall-bench-ws-engine-") as tmp:
        for _ in range(args.rounds):
            rounds.append(one_round(args, plan, Path(tmp)))
            if not args.json:
                print(json.dumps(rounds[-1]), flush=True)
    summary = {
        name: median(r[name] for r in rounds if r[name] is not None)
        for name in ("cost_placements_per_s", "cost_per_engine_core_s")
        if any(r[name] is not None for r in rounds)
    }
    results = {"machine": machine(), "clients": args.clients, "rounds": rounds, **summary}
    if args.json:
        print(json.dumps(results))
    else:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
