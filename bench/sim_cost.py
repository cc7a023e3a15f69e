"""What the default market simulation costs the server: the rate of signed placements (the
wire benchmark's ``place`` scenario, closed loop) against ``tradehall serve --demo --no-sim``
and against ``tradehall serve --demo`` (the simulation on every demo market), alternated over
a few rounds so that the machine's drift hits both alike.

    python -m bench.sim_cost            # 3 rounds of 6 s each way (about 2 minutes)
    python -m bench.sim_cost --rounds 1 --duration 2 --json

The server is pinned to one CPU and the load generator to the others (as ``python -m bench``
does). The cost is read per server CPU-second (placements / the server's CPU time), which a
machine shared with other work disturbs far less than the raw rate; both are printed, and the
simulation's own share of the event loop under the load (``busySeconds`` of ``sim status``).
Target (issue 16): the simulation costs under 10 % of the placement rate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import affinity, cpu_plan, kill, machine, pinned, python
from bench.wire import (
    WireSpec,
    brief,
    create_accounts,
    loadgen,
    seed_book,
    start_announcing,
)
from tradehall.client import AdminClient

TARGET = 0.10


def measure(sim: bool, spec: WireSpec, plan: dict[str, Any], work: Path) -> dict[str, Any]:
    """One server, fresh data folder: accounts, a seeded book, a closed loop of placements."""
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-sim-"))
    serve = [python(), "-m", "tradehall", "serve", "--port", "0", "--json", "--demo"]
    serve += ["--data-dir", str(data_dir), "--no-rate-limits"] + ([] if sim else ["--no-sim"])
    proc, server = start_announcing(
        pinned(serve, plan["server"], plan), work / "server.log", "/spot/open/sapi/v1/ping"
    )
    try:
        token = (data_dir / "admin.token").read_text().strip()
        accounts = create_accounts(server["url"], token, spec.accounts)
        seed_book(server, spec, plan, work, accounts)
        with AdminClient(server["url"], token) as admin:
            before = admin.sim_status()
            began = time.monotonic()
            result = loadgen("place", server, spec, plan, work, accounts, open_loop=False)
            wall = time.monotonic() - began
            status = admin.sim_status()
            audit_ok = admin.audit()["ok"]
        figures = brief(result)
        busy = status.get("busySeconds", 0.0) - before.get("busySeconds", 0.0)
        return {
            "simulation": sim,
            "placements_per_s": figures["closed_max_rps"],
            "placements_per_server_cpu_s": figures["requests_per_server_cpu_s"],
            "server_cpu_share": figures["server_cpu_share"],
            "others_on_server_cpu": figures["others_on_server_cpu"],
            "sim_loop_share": busy / wall,
            "sim_orders": sum(p["orders"] for p in status.get("participants", []))
            - sum(p["orders"] for p in before.get("participants", [])),
            "audit_ok": audit_ok,
        }
    finally:
        kill(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sim_cost", description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=6.0, help="closed-loop window, s")
    p.add_argument("--accounts", type=int, default=200)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    spec = WireSpec(accounts=args.accounts, duration=args.duration, warmup=2.0)
    plan = cpu_plan()
    work = Path(tempfile.mkdtemp(prefix="tradehall-bench-sim-work-"))
    runs: list[dict[str, Any]] = []
    with affinity(plan["loadgen"]):
        for i in range(args.rounds):
            for sim in (False, True):
                run = measure(sim, spec, plan, work)
                if not args.json:
                    state = "on " if sim else "off"
                    print(
                        f"round {i + 1}: simulation {state}"
                        f" {run['placements_per_s']:6.0f} placements/s,"
                        f" {run['placements_per_server_cpu_s'] or 0:6.0f} per server CPU-s;"
                        f" sim {run['sim_loop_share']:.1%} of the loop,"
                        f" {run['sim_orders']} sim orders; audit ok {run['audit_ok']}"
                    )
                runs.append(run)
    shutil.rmtree(work, ignore_errors=True)

    def median(key: str, sim: bool) -> float:
        return statistics.median(r[key] or 0.0 for r in runs if r["simulation"] == sim)

    off, on = median("placements_per_s", False), median("placements_per_s", True)
    cpu_off = median("placements_per_server_cpu_s", False)
    cpu_on = median("placements_per_server_cpu_s", True)
    loop = median("sim_loop_share", True)
    cost = 1 - cpu_on / cpu_off if cpu_off else 1.0
    result = {
        "machine": machine(),
        "cpu_plan": plan,
        "rounds": args.rounds,
        "duration_s": args.duration,
        "placements_per_s_without_sim": off,
        "placements_per_s_with_sim": on,
        "placements_per_server_cpu_s_without_sim": cpu_off,
        "placements_per_server_cpu_s_with_sim": cpu_on,
        "cost": cost,
        "sim_loop_share_under_load": loop,
        "target": TARGET,
        "pass": cost < TARGET,
        "runs": runs,
    }
    if args.json:
        print(json.dumps(result))
    else:
        verdict = "pass" if cost < TARGET else "FAIL"
        print(
            f"median placements/s: without simulation {off:.0f}, with {on:.0f}\n"
            f"median placements per server CPU-second: without {cpu_off:.0f}, with {cpu_on:.0f}:"
            f" cost {cost:.1%} (target < {TARGET:.0%}: {verdict})\n"
            f"the simulation's own commands took {loop:.1%} of the server's event loop"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
