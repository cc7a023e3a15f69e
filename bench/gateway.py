"""Scale-out measurements (issue 18, docs/deployment.md): signed placements per second through
the single-process server against the engine process behind 1 and 2 gateway workers, and the
engine process's own ceiling (pre-admitted placement commands flooded over NATS, no gateway).

    python -m bench.gateway                  # 3 alternated rounds, 4 s windows
    python -m bench.gateway --rounds 5 --duration 6 --out gateway.json
    python -m bench.gateway --latency        # open-loop p50/p99 at 50 % and 80 % of each max
    python -m bench.gateway --flood-batch 8  # the ceiling with smaller messages
    python -m bench.gateway --batch-delay-ms 0   # gateways send only what one turn admitted
    python -m bench.gateway --only engine    # only the engine's ceiling (the flood), each round

The flood sends commands as gateways do, several to a NATS message (``Commands``), 512 in
flight in messages of ``--flood-batch`` (default 32: what a few busy gateway workers send);
the engine's CPU per placement is the whole process's, its event loop and its writer thread.
The gateways run with ``--batch-delay-ms`` (default as in the gateway: 0).

Needs NATS on --nats (default nats://127.0.0.1:4222). Nothing is pinned: on a small machine the
engine, the gateways, NATS and the load generator share the cores, so a round's figure depends
on what else runs; rounds alternate the topologies and the summary gives medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from bench.common import (
    cpu_seconds,
    family,
    machine,
    main_thread_cpu_seconds,
    process_cpu_seconds,
)
from bench.loadgen import TARGET_FRACTION
from bench.wire import (
    DEFAULT_BATCH_DELAY_MS,
    NATS,
    NO_PINNING,
    WireSpec,
    admin_token,
    create_accounts,
    loadgen,
    topology,
)

KINDS = ("serve", "gw1", "gw2", "engine")


@dataclass(frozen=True)
class GatewaySpec:
    rounds: int = 3
    duration: float = 4.0
    warmup: float = 1.0
    connections: int = 64
    accounts: int = 200
    """Each account may have 1,000 open orders on the pair: the placement floods only place,
    so ``accounts`` x 1,000 must exceed what a round places (rate x (warmup + duration)), or
    the rest is refused (-1015, "at most 1000 open orders per pair": counted apart from the
    200s, and the first few shown)."""
    in_flight: int = 512
    """Commands the engine-ceiling flood keeps outstanding."""
    flood_batch: int = 32
    """Commands per message in the flood (a gateway sends those admitted in one event-loop
    turn together)."""
    batch_delay_ms: float = DEFAULT_BATCH_DELAY_MS
    """The gateways' ``--batch-delay-ms``."""
    nats: str = NATS
    kinds: tuple[str, ...] = KINDS
    """The topologies measured each round (``--only``)."""


def _topology(
    kind: str, spec: GatewaySpec, work: Path
) -> AbstractContextManager[tuple[dict[str, Any], str]]:
    return topology(kind, work, nats=spec.nats, batch_delay_ms=spec.batch_delay_ms)


def wire_spec(spec: GatewaySpec) -> WireSpec:
    return WireSpec(
        accounts=spec.accounts,
        closed_connections=spec.connections,
        warmup=spec.warmup,
        duration=spec.duration,
        step_duration=spec.duration,
        fractions=(0.5, TARGET_FRACTION),
        refine=0,
    )


def latency_at_80(kind: str, spec: GatewaySpec, work: Path) -> dict[str, Any]:
    """The wire harness's open-loop placements at 50 % and 80 % of ``kind``'s own closed-loop
    maximum (measured first, in the same run): p50/p99 at each step."""
    with _topology(kind, spec, work) as (target, admin_url):
        accounts = create_accounts(admin_url, admin_token(target), spec.accounts)
        wire = wire_spec(spec)
        loadgen("seed", target, wire, NO_PINNING, work, accounts, extra=SEED)
        result = loadgen("place", target, wire, NO_PINNING, work, accounts)
    return {
        "closed_max": result["open"]["closed_max"],
        "steps": [
            {
                "fraction": step["fraction_of_closed_max"],
                "offered_rate": step["offered_rate"],
                "p50_ms": step["latency_ms"].get("p50"),
                "p99_ms": step["latency_ms"].get("p99"),
                "errors": step["errors"],
            }
            for step in result["open"]["steps"]
        ],
    }


def placements(kind: str, spec: GatewaySpec, work: Path) -> dict[str, Any]:
    """Closed-loop signed placements (the wire harness's ``place``) through ``kind``."""
    with _topology(kind, spec, work) as (target, admin_url):
        accounts = create_accounts(admin_url, admin_token(target), spec.accounts)
        wire = wire_spec(spec)
        loadgen("seed", target, wire, NO_PINNING, work, accounts, extra=SEED)
        pids = {"engine": [target["pid"]]}
        if "gateway_pid" in target:
            pids["gateways"] = family(target["gateway_pid"])
        before = {part: cpu_seconds(group) for part, group in pids.items()}
        result = loadgen("place", target, wire, NO_PINNING, work, accounts, open_loop=False)
        after = {part: cpu_seconds(group) for part, group in pids.items()}
    closed = result["closed"]
    # CPU per placement over the whole place run (its warm-up and window run at about the
    # window's rate; the load generator's own start, a fraction of a second, adds idle time).
    handled = closed["throughput"] * (spec.warmup + spec.duration)
    cpu_us = {
        f"{part}_cpu_us_per_placement": round(1e6 * (after[part] - before[part]) / handled, 1)
        for part in pids
        if handled
    }
    return {
        **cpu_us,
        "throughput": closed["throughput"],
        "errors": closed["errors"],
        "statuses": closed["statuses"],
        "latency_ms": closed["latency_ms"],
        # CPU of the process holding the engine (serve, or the engine process), in cores.
        "engine_cpu_share": closed.get("server_cpu_share"),
    }


SEED = {"levels": 60, "per_level": 2}


def engine_ceiling(spec: GatewaySpec, work: Path) -> dict[str, Any]:
    """Pre-admitted placements (what a gateway forwards after its checks) flooded straight
    into the engine process over NATS, ``in_flight`` outstanding: its own commands/s."""
    with _topology("engine", spec, work) as (info, admin_url):
        accounts = create_accounts(admin_url, admin_token(info), spec.accounts)
        keys = [a[0] for a in accounts]
        return asyncio.run(_flood(spec, info["subject"], keys, info["pid"]))


async def _flood(spec: GatewaySpec, subject: str, keys: list[str], pid: int) -> dict[str, Any]:
    from tradehall.cluster.link import connect
    from tradehall.cluster.protocol import (
        Commands,
        Forwarded,
        decode_answers,
        encode,
        wire_params,
    )

    prepare_place: Callable[..., Any] | None
    try:  # a gateway reads placements for the engine since issue 26 (a tree before: not)
        from tradehall.cluster.prepared import prepare_place
        from tradehall.cluster.protocol import PLACED as placed_status
    except ImportError:
        prepare_place, placed_status = None, 200

    nc = await connect(spec.nats, "bench-flood")
    rng = random.Random(7)
    statuses: dict[int, int] = {}
    refusals: list[str] = []
    """The first answers other than 200, as the engine gave them."""
    latencies: list[float] = []
    pc = time.perf_counter
    start = pc()
    measure_from = start + spec.warmup
    stop = measure_from + spec.duration
    count = 0

    def command() -> Any:
        nonlocal count
        count += 1
        side = rng.choice(("BUY", "SELL"))
        ticks = rng.randint(-20, 20) + (-25 if side == "BUY" else 25)
        params = {
            "symbol": "BTCUSDT",
            "side": side,
            "type": "LIMIT",
            "volume": f"0.{rng.randint(1, 9):03d}",
            "price": f"{20000 + ticks}.00",
        }
        command_id, path, key = f"flood-{count}", "/spot/open/sapi/v1/order", rng.choice(keys)
        if prepare_place is not None:  # what a gateway of this tree sends
            place = prepare_place(params, command_id, path, key, "127.0.0.1", "")
            if place is not None:
                return place
        return Forwarded(command_id, "POST", path, wire_params(params), key, "127.0.0.1")

    async def worker() -> None:
        while (t0 := pc()) < stop:
            batch = Commands([command() for _ in range(spec.flood_batch)], int(time.time() * 1e3))
            msg = await nc.request(f"{subject}.cmd", encode(batch), timeout=30)
            t1 = pc()
            if measure_from <= t1 <= stop:
                for answer in decode_answers(msg.data):
                    status = 200 if answer.status == placed_status else answer.status
                    statuses[status] = statuses.get(status, 0) + 1
                    if status != 200 and len(refusals) < 3:
                        refusals.append(answer.body.decode(errors="replace")[:200])
                latencies.append(t1 - t0)

    cpu: list[float | None] = []
    loop_cpu: list[float | None] = []

    async def window() -> None:
        await asyncio.sleep(measure_from - pc())
        cpu.append(process_cpu_seconds(pid))
        loop_cpu.append(main_thread_cpu_seconds(pid))
        await asyncio.sleep(stop - pc())
        cpu.append(process_cpu_seconds(pid))
        loop_cpu.append(main_thread_cpu_seconds(pid))

    try:
        workers = max(1, spec.in_flight // spec.flood_batch)
        await asyncio.gather(window(), *(worker() for _ in range(workers)))
    finally:
        await nc.close()
    share = None
    if len(cpu) == 2 and cpu[0] is not None and cpu[1] is not None:
        share = round((cpu[1] - cpu[0]) / spec.duration, 3)
    split = None
    ok = statuses.get(200, 0)
    if share is not None and ok and len(loop_cpu) == 2 and None not in loop_cpu:
        loop_s = cast(float, loop_cpu[1]) - cast(float, loop_cpu[0])
        split = {
            "event_loop": round(1e6 * loop_s / ok, 1),
            "other_threads": round(1e6 * (share * spec.duration - loop_s) / ok, 1),
        }
    latencies.sort()
    return {
        "throughput": ok / spec.duration,
        "answered_per_s": sum(statuses.values()) / spec.duration,
        "engine_cpu_share": share,
        "cpu_us_per_placement_by_thread": split,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "refusals": refusals,
        "latency_ms": {
            "p50": 1e3 * latencies[len(latencies) // 2] if latencies else None,
            "p99": 1e3 * latencies[int(len(latencies) * 0.99)] if latencies else None,
        },
    }


def _refused(result: dict[str, Any]) -> str:
    """A warning when answers other than 200 were counted (say, the open-order cap reached)."""
    others = {code: n for code, n in result.get("statuses", {}).items() if str(code) != "200"}
    if not others:
        return ""
    sample = result.get("refusals") or [""]
    return f"; not placed (HTTP status: answers): {others}, e.g. {sample[0]}"


def run(spec: GatewaySpec, work: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    rounds: list[dict[str, Any]] = []
    for number in range(spec.rounds):
        this: dict[str, Any] = {}
        kinds = spec.kinds
        order = kinds if number % 2 == 0 else tuple(reversed(kinds))
        for kind in order:
            this[kind] = (
                engine_ceiling(spec, work) if kind == "engine" else placements(kind, spec, work)
            )
            rate = this[kind]["throughput"]
            share = this[kind].get("engine_cpu_share")
            core = f" ({rate / share:.0f} per engine-core second)" if share else ""
            log(f"  round {number + 1} {kind}: {rate:.0f}/s{core}{_refused(this[kind])}")
        rounds.append(this)
    kinds = spec.kinds
    medians = {kind: statistics.median(r[kind]["throughput"] for r in rounds) for kind in kinds}
    per_core = {
        kind: statistics.median(
            r[kind]["throughput"] / r[kind]["engine_cpu_share"]
            for r in rounds
            if r[kind].get("engine_cpu_share")
        )
        for kind in kinds
        if any(r[kind].get("engine_cpu_share") for r in rounds)
    }
    cpu_us = {
        f"{kind} {name}": statistics.median(r[kind][name] for r in rounds)
        for kind in kinds
        for name in rounds[0][kind]
        if name.endswith("_cpu_us_per_placement")
    }
    for kind in kinds:  # the engine flood's CPU per placement, event loop and other threads
        splits = [r[kind].get("cpu_us_per_placement_by_thread") for r in rounds]
        for part in ("event_loop", "other_threads"):
            values = [split[part] for split in splits if split]
            if values:
                cpu_us[f"{kind} {part}"] = statistics.median(values)
    return {
        "spec": asdict(spec),
        "machine": machine(),
        "rounds": rounds,
        "median_per_s": medians,
        "median_per_engine_core_s": per_core,
        "median_cpu_us": cpu_us,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=GatewaySpec.rounds)
    parser.add_argument("--duration", type=float, default=GatewaySpec.duration)
    parser.add_argument("--accounts", type=int, default=GatewaySpec.accounts)
    parser.add_argument("--nats", default=GatewaySpec.nats)
    parser.add_argument(
        "--flood-batch",
        type=int,
        default=GatewaySpec.flood_batch,
        help="Commands per message in the engine-ceiling flood.",
    )
    parser.add_argument(
        "--batch-delay-ms",
        type=float,
        default=GatewaySpec.batch_delay_ms,
        help="The gateways' --batch-delay-ms.",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=KINDS,
        default=None,
        help="Measure only this topology (repeatable); engine: the engine process's ceiling.",
    )
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON.")
    parser.add_argument(
        "--latency",
        action="store_true",
        help="Instead: open-loop p50/p99 at 50 %% and 80 %% of each topology's own maximum.",
    )
    args = parser.parse_args(argv)
    spec = GatewaySpec(
        rounds=args.rounds,
        duration=args.duration,
        accounts=args.accounts,
        nats=args.nats,
        flood_batch=args.flood_batch,
        batch_delay_ms=args.batch_delay_ms,
        kinds=tuple(args.only) if args.only else KINDS,
    )
    with tempfile.TemporaryDirectory(prefix="tradehall-bench-gw-work-") as work:
        if args.latency:
            latency = {kind: latency_at_80(kind, spec, Path(work)) for kind in KINDS[:3]}
            text = json.dumps({"spec": asdict(spec), "latency": latency}, indent=1)
            if args.out:
                args.out.write_text(text)
            print(text)
            return
        result = run(spec, Path(work))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    medians = ("median_per_s", "median_per_engine_core_s", "median_cpu_us")
    print(json.dumps({k: result[k] for k in medians}, indent=1))


if __name__ == "__main__":
    main()
