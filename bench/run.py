"""The harness's one command.

    python -m bench                 # everything, full sizes (about 15-20 minutes)
    python -m bench --quick         # everything, small sizes (under a minute)
    python -m bench --parts engine,memory
    python -m bench --help

Writes bench/results/<timestamp>/results.json, results.md (targets with pass/fail) and
latency.png (p50/p99 against offered load, per endpoint and the floor).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.common import REPO, affinity, cpu_plan, git_revision, machine

PARTS = ("engine", "wire", "recovery", "memory")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: checks the harness works")
    p.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}"
    )
    p.add_argument("--out", type=Path, help="results folder (default bench/results/<timestamp>)")
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        help="scheduling niceness for the harness and every process it starts (negative values"
        " need root; use on a shared machine so the measured processes get their CPUs)",
    )
    g = p.add_argument_group("engine")
    g.add_argument("--engine-commands", type=int, help="commands measured (default 1,000,000)")
    g.add_argument("--engine-accounts", type=int, help="accounts (default 10,000)")
    g.add_argument(
        "--engine-rounds", type=int, help="alternated engine / bare-book passes (default 3)"
    )
    g.add_argument("--profile-commands", type=int, help="commands under cProfile (200,000)")
    g = p.add_argument_group("wire")
    g.add_argument("--wire-accounts", type=int, help="accounts with keys (default 1,000)")
    g.add_argument("--wire-duration", type=float, help="closed-loop window, s (default 4)")
    g.add_argument("--wire-step", type=float, help="open-loop step length, s (default 4)")
    g.add_argument(
        "--wire-fractions", help="open-loop steps as fractions of the closed-loop max (0.8 always)"
    )
    g.add_argument(
        "--wire-database",
        help="run the server under test on PostgreSQL (a postgresql:// URL; a fresh schema is"
        " created and dropped) instead of SQLite",
    )
    g = p.add_argument_group("recovery")
    g.add_argument("--recovery-orders", help="open-order sizes (default 100000,1000000)")
    g.add_argument("--history-trades", type=int, help="trades of history (default 10,000,000)")
    g.add_argument("--recovery-accounts", type=int, help="accounts (default 10,000)")
    g.add_argument(
        "--history-engine-minutes",
        type=float,
        help="time budget for history through the engine; the rest by executemany (15)",
    )
    g.add_argument("--keep-data", action="store_true", help="keep the recovery data folder")
    g = p.add_argument_group("memory")
    g.add_argument("--memory-orders", type=int, help="resting orders (default 200,000)")
    g.add_argument("--memory-accounts", type=int, help="accounts (default 100,000)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        p.error(f"unknown parts: {', '.join(sorted(unknown))}")
    return args


def specs(args: argparse.Namespace) -> dict[str, Any]:
    from bench.engine_bench import EngineSpec
    from bench.recovery import RecoverySpec
    from bench.wire import WireSpec

    if args.quick:
        engine = EngineSpec(
            commands=20_000, accounts=500, depth=1_000, profile_commands=5_000, rounds=2
        )
        wire = WireSpec(
            accounts=20,
            closed_connections=16,
            open_connections=32,
            warmup=0.2,
            duration=0.5,
            step_duration=0.4,
            fractions=(0.25, 0.5, 0.8, 1.0),
            refine=0,
            seed_levels=110,
            seed_per_level=1,
            info_scenarios=(),
            profile_server=False,
        )
        recovery = RecoverySpec(
            open_orders=(2_000, 5_000),
            history_trades=20_000,
            accounts=100,
            repeats=1,
        )
        memory = {"orders": 5_000, "accounts": 2_000, "accounts_for_orders": 500}
    else:
        engine = EngineSpec()
        wire = WireSpec()
        recovery = RecoverySpec()
        memory = {"orders": 200_000, "accounts": 100_000, "accounts_for_orders": 10_000}
    engine = replace(
        engine,
        **{
            k: v
            for k, v in {
                "commands": args.engine_commands,
                "accounts": args.engine_accounts,
                "rounds": args.engine_rounds,
                "profile_commands": args.profile_commands,
            }.items()
            if v is not None
        },
    )
    wire = replace(
        wire,
        **{
            k: v
            for k, v in {
                "accounts": args.wire_accounts,
                "duration": args.wire_duration,
                "step_duration": args.wire_step,
                "database": args.wire_database,
                "fractions": tuple(float(x) for x in args.wire_fractions.split(","))
                if args.wire_fractions
                else None,
            }.items()
            if v is not None
        },
    )
    rec_changes: dict[str, Any] = {"keep_data": args.keep_data or recovery.keep_data}
    if args.recovery_orders:
        rec_changes["open_orders"] = tuple(int(x) for x in args.recovery_orders.split(","))
    if args.history_trades is not None:
        rec_changes["history_trades"] = args.history_trades
    if args.recovery_accounts is not None:
        rec_changes["accounts"] = args.recovery_accounts
    if args.history_engine_minutes is not None:
        rec_changes["max_engine_minutes"] = args.history_engine_minutes
    recovery = replace(recovery, **rec_changes)
    if args.memory_orders is not None:
        memory["orders"] = args.memory_orders
    if args.memory_accounts is not None:
        memory["accounts"] = args.memory_accounts
    return {"engine": engine, "wire": wire, "recovery": recovery, "memory": memory}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    parts = [p for p in PARTS if p in args.parts.split(",")]
    # SIGTERM unwinds like an error: every started process is stopped, temporary folders go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    restore_group_nice = raise_priority(args.nice) if args.nice else None
    try:
        return _main(args, parts)
    finally:
        if restore_group_nice is not None:
            _write_group_nice(restore_group_nice)


AUTOGROUP = Path("/proc/self/autogroup")


def _write_group_nice(nice: int) -> None:
    with contextlib.suppress(OSError):
        AUTOGROUP.write_text(str(nice))


def raise_priority(nice: int) -> int | None:
    """Give the harness and every process it starts (they inherit it) niceness ``nice``.
    With the kernel's autogroup scheduling on, niceness only ranks processes inside one
    session, and sessions share the CPUs equally: so the session's group niceness is set too
    (and put back at the end). Returns the group niceness to restore, if it was changed."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        before = int(AUTOGROUP.read_text().split("nice")[1])
        AUTOGROUP.write_text(str(nice))
    except (OSError, ValueError, IndexError):
        return None
    return before


def _main(args: argparse.Namespace, parts: list[str]) -> int:
    started = datetime.now(UTC)
    out = args.out or REPO / "bench" / "results" / started.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    log_file = (out / "run.log").open("a")

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, file=sys.stderr, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    plan = cpu_plan()
    cfg = specs(args)
    results: dict[str, Any] = {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "quick": args.quick,
            "parts": parts,
            "argv": args.argv,
            "machine": machine(),
            "git": git_revision(),
            "cpu_plan": plan,
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "autogroup": AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None,
            "load_average": {"start": [round(x, 2) for x in os.getloadavg()]},
            "seconds": {},
        }
    }

    def save() -> None:
        results["targets"] = report.evaluate(results)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))

    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "engine": lambda: _engine(cfg["engine"], plan, log),
        "wire": lambda: _wire(cfg["wire"], out, log),
        "recovery": lambda: _recovery(cfg["recovery"], plan, log),
        "memory": lambda: _memory(cfg["memory"], plan, log),
    }
    failed = False
    log(f"results in {out}")
    for part in parts:
        log(f"{part}: start")
        t0 = time.perf_counter()
        try:
            results[part] = runners[part]()
        except Exception:
            failed = True
            results[part] = {"error": traceback.format_exc()}
            log(f"{part}: FAILED\n{results[part]['error']}")
        results["meta"]["seconds"][part] = round(time.perf_counter() - t0, 1)
        log(f"{part}: done in {results['meta']['seconds'][part]:.0f} s")
        save()
    results["meta"]["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
    profile = results.get("engine", {}).get("profile", {})
    if "text" in profile:
        (out / "engine_profile.txt").write_text(profile.pop("text"))
    save()
    problem = report.plot(results, out / "latency.png")
    if problem:
        results["meta"]["plot"] = f"latency.png not written: {problem}"
        log(results["meta"]["plot"])
        save()
    (out / "results.md").write_text(report.markdown(results))
    log_file.close()
    print(report.markdown(results).split("\n## Engine")[0])
    print(f"results: {out}")
    return 1 if failed else 0


def _engine(spec: Any, plan: dict[str, Any], log: Any) -> dict[str, Any]:
    from bench import engine_bench

    with affinity(plan["engine"]):
        return engine_bench.run(spec, log)


def _wire(spec: Any, out: Path, log: Any) -> dict[str, Any]:
    from bench import wire

    return wire.run(spec, out, log)


def _recovery(spec: Any, plan: dict[str, Any], log: Any) -> dict[str, Any]:
    from bench import recovery

    with affinity(plan["engine"]):
        return recovery.run(spec, plan, log)


def _memory(cfg: dict[str, Any], plan: dict[str, Any], log: Any) -> dict[str, Any]:
    from bench import memory

    with affinity(plan["engine"]):
        return memory.run(cfg["orders"], cfg["accounts_for_orders"], cfg["accounts"], log)


if __name__ == "__main__":
    sys.exit(main())
