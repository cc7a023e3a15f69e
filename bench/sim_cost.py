"""What the default market simulation costs the server: the rate of signed placements (the
wire benchmark's ``place`` scenario, closed loop) with the simulation running on every demo
market and without it. By default one ``tradehall serve --demo`` takes every window, its
simulation stopped and started between them (in alternating order), so that the machine's
drift hits both alike; ``--fresh-servers`` starts ``serve --demo --no-sim`` and ``serve
--demo`` anew for each window instead.

    python -m bench.sim_cost            # 3 rounds of 6 s each way (about 2 minutes)
    python -m bench.sim_cost --rounds 1 --duration 2 --json

The server is pinned to one CPU and the load generator to the others (as ``python -m bench``
does). The cost is 1 - the median over the rounds of (rate with / rate without) in the same
round; the medians of the raw rates and of placements per server CPU-second are printed too,
and the simulation's own share of the event loop under the load (``busySeconds`` of ``sim
status``), the direct measure of what it takes.
Target (issue 16): the simulation costs under 10 % of the placement rate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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


@contextlib.contextmanager
def serve(sim: bool, spec: WireSpec, plan: dict[str, Any], work: Path) -> Iterator[Server]:
    """A server on a fresh data folder with accounts and a seeded book; stopped on exit."""
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-sim-"))
    cmd = [python(), "-m", "tradehall", "serve", "--port", "0", "--json", "--demo"]
    cmd += ["--data-dir", str(data_dir), "--no-rate-limits"] + ([] if sim else ["--no-sim"])
    proc, server = start_announcing(
        pinned(cmd, plan["server"], plan), work / "server.log", "/spot/open/sapi/v1/ping"
    )
    try:
        token = (data_dir / "admin.token").read_text().strip()
        accounts = create_accounts(server["url"], token, spec.accounts)
        seed_book(server, spec, plan, work, accounts)
        with AdminClient(server["url"], token) as admin:
            yield Server(server, admin, accounts)
    finally:
        kill(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


@dataclass
class Server:
    info: dict[str, Any]
    admin: AdminClient
    accounts: list[list[str]]


def window(
    sim: bool, server: Server, spec: WireSpec, plan: dict[str, Any], work: Path
) -> dict[str, Any]:
    """One closed loop of placements; the simulation's share of the loop meanwhile."""
    before = server.admin.sim_status()
    began = time.monotonic()
    result = loadgen("place", server.info, spec, plan, work, server.accounts, open_loop=False)
    wall = time.monotonic() - began
    after = server.admin.sim_status()
    figures = brief(result)
    busy = after.get("busySeconds", 0.0) - before.get("busySeconds", 0.0)
    return {
        "simulation": sim,
        "placements_per_s": figures["closed_max_rps"],
        "placements_per_server_cpu_s": figures["requests_per_server_cpu_s"],
        "server_cpu_share": figures["server_cpu_share"],
        "others_on_server_cpu": figures["others_on_server_cpu"],
        "sim_loop_share": busy / wall,
        "sim_orders": sum(p["orders"] for p in after.get("participants", []))
        - sum(p["orders"] for p in before.get("participants", [])),
    }


def fresh_servers(
    rounds: int, spec: WireSpec, plan: dict[str, Any], work: Path, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Each window on a server of its own: ``serve --demo --no-sim`` or ``serve --demo``."""
    runs = []
    for i in range(rounds):
        for sim in (False, True):
            with serve(sim, spec, plan, work) as server:
                run = window(sim, server, spec, plan, work)
                run["audit_ok"] = server.admin.audit()["ok"]
            say(line(i, run))
            runs.append(run)
    return runs


def one_server(
    rounds: int, spec: WireSpec, plan: dict[str, Any], work: Path, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Every window on one ``serve --demo``, the simulation stopped and started between them
    (in alternating order): same process, same data, the machine's drift shared."""
    runs = []
    with serve(True, spec, plan, work) as server:
        window(True, server, spec, plan, work)  # warm-up, not counted: the first is slower
        for i in range(rounds):
            for sim in (True, False) if i % 2 == 0 else (False, True):
                if sim:
                    server.admin.sim_start()
                    time.sleep(1.0)  # the ladders are back
                else:
                    server.admin.sim_stop()
                run = window(sim, server, spec, plan, work)
                say(line(i, run))
                runs.append(run)
        audit_ok = server.admin.audit()["ok"]
    for run in runs:
        run["audit_ok"] = audit_ok
    return runs


def line(i: int, run: dict[str, Any]) -> str:
    state = "on " if run["simulation"] else "off"
    return (
        f"round {i + 1}: simulation {state} {run['placements_per_s']:6.0f} placements/s,"
        f" {run['placements_per_server_cpu_s'] or 0:6.0f} per server CPU-s;"
        f" sim {run['sim_loop_share']:.1%} of the loop, {run['sim_orders']} sim orders"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sim_cost", description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=6.0, help="closed-loop window, s")
    p.add_argument("--accounts", type=int, default=200)
    p.add_argument(
        "--fresh-servers",
        action="store_true",
        help="a server of its own for each window (serve --demo --no-sim / serve --demo)"
        " instead of one server whose simulation is stopped and started between windows",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    spec = WireSpec(accounts=args.accounts, duration=args.duration, warmup=2.0)
    plan = cpu_plan()
    work = Path(tempfile.mkdtemp(prefix="tradehall-bench-sim-work-"))

    def say(text: str) -> None:
        if not args.json:
            print(text, flush=True)

    driver = fresh_servers if args.fresh_servers else one_server
    with affinity(plan["loadgen"]):
        runs = driver(args.rounds, spec, plan, work, say)
    shutil.rmtree(work, ignore_errors=True)

    def median(key: str, sim: bool) -> float:
        return statistics.median(r[key] or 0.0 for r in runs if r["simulation"] == sim)

    off, on = median("placements_per_s", False), median("placements_per_s", True)
    cpu_off = median("placements_per_server_cpu_s", False)
    cpu_on = median("placements_per_server_cpu_s", True)
    loop = median("sim_loop_share", True)
    # Each round has one window each way: the median of the rounds' ratios is the figure,
    # which the machine's drift between rounds does not move.
    ratios = [
        on_run["placements_per_s"] / off_run["placements_per_s"]
        for i in range(args.rounds)
        for on_run in [runs[2 * i + (0 if runs[2 * i]["simulation"] else 1)]]
        for off_run in [runs[2 * i + (1 if runs[2 * i]["simulation"] else 0)]]
    ]
    cost = 1 - statistics.median(ratios)
    result = {
        "machine": machine(),
        "cpu_plan": plan,
        "rounds": args.rounds,
        "duration_s": args.duration,
        "mode": "fresh servers"
        if args.fresh_servers
        else "one server, simulation stopped and started between windows",
        "audit_ok": all(r["audit_ok"] for r in runs),
        "placements_per_s_without_sim": off,
        "placements_per_s_with_sim": on,
        "placements_per_server_cpu_s_without_sim": cpu_off,
        "placements_per_server_cpu_s_with_sim": cpu_on,
        "round_ratios": ratios,
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
            f"median placements per server CPU-second: without {cpu_off:.0f}, with {cpu_on:.0f}\n"
            f"median of the rounds' ratios (with / without): cost {cost:.1%}"
            f" (target < {TARGET:.0%}: {verdict})\n"
            f"the simulation's own commands took {loop:.1%} of the server's event loop"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
