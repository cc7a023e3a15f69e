"""What WebSocket subscribers cost the exchange: signed placements on BTCUSDT (half resting,
half crossing: the book and the trades move all the time) against the real server, first with
no subscriber, then with N clients (default 1,000) each on that market's depth and trades,
then with none again (A/B/A, because this machine's rate drifts between runs).

Reported: the placement maximum (closed loop) in each phase and what the subscribers cost it;
p50/p99 of placements at 80 % of each phase's maximum; pushes per second received; and the
time from a trade's command to its arrival at a client (sampled clients), which includes the
commit, the coalescing interval and the delivery.

    python -m bench.ws_fanout [--clients 1000] [--duration 4] [--json]

The server gets one CPU; the load generator and the subscribers share the other(s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import REPO, affinity, cpu_plan, kill, machine, pinned, python, python_env
from bench.wire import WireSpec, brief, create_accounts, loadgen, seed_book, start_announcing


def _place(
    server: dict[str, Any],
    spec: WireSpec,
    plan: dict[str, Any],
    work: Path,
    accounts: list[list[str]],
) -> dict[str, Any]:
    result = loadgen("place", server, spec, plan, work, accounts)
    closed, at_80 = result["closed"], result["open"]["steps"][0]
    summary = brief(result)
    return {
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
        },
    }


def _start_subscribers(
    url: str, clients: int, plan: dict[str, Any], log_path: Path
) -> subprocess.Popen[str]:
    ws_url = "ws" + url.removeprefix("http") + "/kline-api/ws"
    spec = json.dumps({"url": ws_url, "clients": clients, "sample": 20})
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
    clients: int = 1000, accounts: int = 200, duration: float = 4.0, log: Any = print
) -> dict[str, Any]:
    plan = cpu_plan()
    spec = WireSpec(
        accounts=accounts,
        duration=duration,
        step_duration=duration,
        fractions=(0.8,),
        refine=0,
        p99_limit_ms=1e9,  # the sweep's pass/fail rule is not used here
        profile_server=False,
    )
    work = Path(tempfile.mkdtemp(prefix="tradehall-bench-ws-"))
    data_dir = work / "data"
    results: dict[str, Any] = {"machine": machine(), "cpu_plan": plan, "clients": clients}
    with affinity(plan["loadgen"]):
        serve = [python(), "-m", "tradehall", "serve", "--port", "0", "--json"]
        serve += ["--data-dir", str(data_dir), "--no-rate-limits"]
        proc, server = start_announcing(
            pinned(serve, plan["server"], plan), work / "server.log", "/spot/open/sapi/v1/ping"
        )
        try:
            token = (data_dir / "admin.token").read_text().strip()
            funded = create_accounts(server["url"], token, accounts)
            seed_book(server, spec, plan, work, funded)
            log("  ws fan-out: placements, no subscriber")
            before = _place(server, spec, plan, work, funded)
            log(f"  ws fan-out: {clients} subscribers connecting")
            started = time.perf_counter()
            subscribers = _start_subscribers(server["url"], clients, plan, work / "subs.log")
            results["connect_seconds"] = time.perf_counter() - started
            try:
                log("  ws fan-out: placements with the subscribers")
                during = _place(server, spec, plan, work, funded)
            finally:
                pushes = _stop_subscribers(subscribers)
            time.sleep(1.0)  # the server notices the closed connections
            log("  ws fan-out: placements, no subscriber again")
            after = _place(server, spec, plan, work, funded)
        finally:
            kill(proc)
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
            "target": "subscribers cost under 10 % of the placement rate",
        }
    )
    results["pass"] = results["placement_cost"] is not None and results["placement_cost"] < 0.10
    return results


def report(results: dict[str, Any]) -> str:
    before, after = results["without"]
    during = results["with_subscribers"]
    pushes = results["pushes"]
    latency = pushes.get("trade_to_client_ms", {})
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
        f"- Frames received: {pushes['frames_per_s']:,.0f}/s in all,"
        f" {pushes['frames_per_client_per_s']:.1f}/s per client;"
        f" {pushes['closed_by_server']} clients closed by the server.",
        f"- Trade command to client (sampled {pushes['sampled_clients']} clients,"
        f" {latency.get('count', 0)} trades): p50 {latency.get('p50', 0):.0f} ms,"
        f" p99 {latency.get('p99', 0):.0f} ms.",
        f"- {results['clients']} clients connected and subscribed in"
        f" {results['connect_seconds']:.1f} s.",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=200)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measurement")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    quiet = args.json
    results = run(
        args.clients, args.accounts, args.duration, log=(lambda _: None) if quiet else print
    )
    print(json.dumps(results) if args.json else report(results))


if __name__ == "__main__":
    main()
