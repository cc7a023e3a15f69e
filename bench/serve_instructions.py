"""Instructions per request of ``tradehall serve``, counted by callgrind: ``/ping`` against a
signed durable placement, the same two closed loops as ``bench.journal`` (32 connections),
as a figure that does not move with the machine's speed. ``bench.journal``'s ratio
(placements per second / pings per second) swings by a third between runs of one tree on a
shared 2-core machine (the ping rate alone went 6,500-14,800 / s within an hour); here a ping
repeats to ~1 % and a placement to ~5 % (the group commit's batch sizes and the collector's
passes fall differently in each window): enough to judge a change of 10 %, not of 1 %.

    python -m bench.serve_instructions                           # this tree
    python -m bench.serve_instructions --src ../base/src --src src --json out.json

Each tree's server runs under ``valgrind --tool=callgrind`` with instrumentation off; it is
switched on (``callgrind_control``) only while each loop runs, after a warm-up of both. Every
thread of the server is counted (the event loop, the writer), not the projector (a child
process, run natively) nor the load generator. A request's count is the loop's instructions
over the requests the server saw meanwhile (``GET /admin/v1/activity`` before and after).
What callgrind does not count: the kernel's side of the sockets and the fsync, and time spent
waiting; the timed figures stay ``bench.journal``'s.

Needs valgrind (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import kill, python_env
from bench.engine_instructions import totals
from bench.wire import (
    NO_PINNING,
    PING,
    WireSpec,
    _wait_http,
    _wait_line,
    admin_token,
    create_accounts,
    loadgen,
)
from tradehall.client import AdminClient

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = ("ping", "place")


@dataclass(frozen=True)
class ServeInstructionsSpec:
    seconds: float = 20.0
    """Each counted loop's length (the server runs ~50 times slower under valgrind)."""
    warmup: float = 3.0
    connections: int = 32
    accounts: int = 40


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=120)


def measure(src: Path, spec: ServeInstructionsSpec, work: Path) -> dict[str, Any]:
    """One tree's server: instructions per ping and per placement."""
    data_dir = Path(tempfile.mkdtemp(prefix="tradehall-bench-si-"))
    out = work / f"callgrind.{src.resolve().as_posix().replace('/', '_')}"
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p",
        sys.executable, "-m", "tradehall", "serve", "--port", "0", "--json",
        "--no-rate-limits", "--data-dir", str(data_dir),
    ]  # fmt: skip
    env = python_env()
    env["PYTHONPATH"] = f"{src}:{REPO}"
    log = (work / "serve.log").open("w")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    try:
        info = json.loads(_wait_line(proc, 600))
        _wait_http(info["url"] + PING, 600)
        info["pid"] = proc.pid
        url, token = info["url"], admin_token(info)
        accounts = create_accounts(url, token, spec.accounts)
        admin = AdminClient(url, token, timeout=120)
        wire = replace(
            WireSpec(), closed_connections=spec.connections, duration=spec.seconds, warmup=0.0
        )
        warm = replace(wire, duration=spec.warmup)
        for scenario in SCENARIOS:
            loadgen(scenario, info, warm, NO_PINNING, work, accounts, open_loop=False)
        result: dict[str, Any] = {"src": str(src)}
        for number, scenario in enumerate(SCENARIOS, start=1):
            before = int(admin.activity()["requestsTotal"])
            control("-z", str(proc.pid))
            control("-i", "on", str(proc.pid))
            answer = loadgen(scenario, info, wire, NO_PINNING, work, accounts, open_loop=False)
            control("-i", "off", str(proc.pid))
            requests = int(admin.activity()["requestsTotal"]) - before - 1
            control("-d", scenario, str(proc.pid))
            dump = Path(f"{out}.{proc.pid}.{number}")
            instructions = totals(dump)["Ir"]
            errors = answer["closed"].get("errors") or {}
            if errors or requests <= 0:
                raise RuntimeError(f"{scenario}: {requests} requests, errors {errors}")
            result[scenario] = {
                "requests": requests,
                "instructions": instructions,
                "instructions_per_request": round(instructions / requests),
            }
        result["ratio"] = (
            result["ping"]["instructions_per_request"] / result["place"]["instructions_per_request"]
        )
        return result
    finally:
        kill(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve_instructions")
    parser.add_argument("--src", type=Path, action="append", help="a tree's src (repeatable)")
    parser.add_argument("--seconds", type=float, default=ServeInstructionsSpec.seconds)
    parser.add_argument("--warmup", type=float, default=ServeInstructionsSpec.warmup)
    parser.add_argument("--accounts", type=int, default=ServeInstructionsSpec.accounts)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.exit(2, "needs valgrind (apt-get install valgrind)\n")
    trees = args.src or [REPO / "src"]
    for src in trees:
        if not (src / "tradehall" / "__init__.py").exists():
            parser.exit(2, f"{src} holds no tradehall package\n")
    spec = ServeInstructionsSpec(args.seconds, args.warmup, accounts=args.accounts)
    results = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tradehall-bench-si-") as tmp:
        for src in trees:
            result = measure(src, spec, Path(tmp))
            print(
                f"{src}: ping {result['ping']['instructions_per_request']:,}"
                f" / placement {result['place']['instructions_per_request']:,} instructions"
                f" (ratio {result['ratio']:.3f})",
                flush=True,
            )
            results.append(result)
    first = results[0]["place"]["instructions_per_request"]
    report = {
        "spec": asdict(spec),
        "trees": results,
        "placement_ratios_to_first": [
            round(r["place"]["instructions_per_request"] / first, 4) for r in results
        ],
        "seconds": round(time.perf_counter() - began, 1),
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    print(json.dumps(report["placement_ratios_to_first"]))


if __name__ == "__main__":
    main()
