"""Instructions per engine command, counted by callgrind: a deterministic figure for judging an
engine change on a shared machine, where two wall-clock passes of the same tree differ by up to
10 % (and the engine's share of the bare book with them).

    python -m bench.engine_instructions                          # this tree, 20,000 commands
    python -m bench.engine_instructions --cache                  # and simulated cache misses
    python -m bench.engine_instructions --src ../base/src --src src --json out.json

The command stream is part 1's (``bench/engine_bench.py``: built by a shadow engine, the same
for every tree). Each tree's engine applies the seed and then the measured commands in a child
Python under ``valgrind --tool=callgrind``, counting only inside the measured loop: an
``itertools.starmap`` over ``Engine.apply``, which nothing else in that process calls (its own
cost, a few dozen instructions a command, is the same for every tree). Fewer instructions do
not buy a proportional wall-clock gain (the engine waits on memory: docs/performance.md), but
a change that adds instructions is a loss, and the count does not move between runs.

Needs valgrind (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import asdict
from itertools import starmap
from pathlib import Path
from typing import Any

from bench.engine_bench import EngineSpec, build_stream, fresh_engine
from tradehall.config import load_config

REPO = Path(__file__).resolve().parent.parent
CACHE_SIM = ("--cache-sim=yes", "--D1=49152,12,64", "--LL=2097152,16,64")
"""A 48 KiB L1 data cache and 2 MiB standing in for the last level a shared VM gets."""


def child(stream_file: str, measured: int) -> None:
    """In the measured process: the engine after the seed, then ``measured`` commands."""
    with open(stream_file, "rb") as f:
        spec, seed, cmds = pickle.load(f)
    engine = fresh_engine(load_config().markets, spec, seed)
    gc.collect()
    gc.freeze()
    deque(starmap(engine.apply, zip(cmds[:measured], strict=True)), 0)


def totals(callgrind_out: Path) -> dict[str, int]:
    """The event totals of a callgrind output file, by event name."""
    names: list[str] = []
    values: list[int] = []
    for line in callgrind_out.read_text().splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith(("summary:", "totals:")):
            values = [int(v) for v in line.split()[1:]]
    if not names or not values:
        raise RuntimeError(f"no event totals in {callgrind_out}")
    return dict(zip(names, values, strict=False))


def count(src: Path, stream_file: Path, measured: int, cache: bool, work: Path) -> dict[str, int]:
    out = work / f"callgrind.{os.getpid()}.{measured}.out"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": f"{src}{os.pathsep}{REPO}"}
    cmd = [
        "valgrind", "--tool=callgrind", "--toggle-collect=starmap_next",
        f"--callgrind-out-file={out}", *(CACHE_SIM if cache else ()),
        sys.executable, "-m", "bench.engine_instructions", "--child", str(stream_file),
        str(measured),
    ]  # fmt: skip
    run = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"the measured engine failed ({src}):\n{run.stderr[-3000:]}")
    try:
        return totals(out)
    finally:
        out.unlink(missing_ok=True)


def measure(src: Path, stream_file: Path, commands: int, cache: bool, work: Path) -> dict[str, Any]:
    per_command = {
        name: value / commands
        for name, value in count(src, stream_file, commands, cache, work).items()
    }
    figures: dict[str, Any] = {
        "src": str(src),
        "instructions_per_command": round(per_command["Ir"], 1),
    }
    if cache:
        figures["l1_instruction_misses_per_command"] = round(per_command["I1mr"], 1)
        figures["l1_data_misses_per_command"] = round(per_command["D1mr"] + per_command["D1mw"], 1)
        figures["last_level_misses_per_command"] = round(
            per_command["ILmr"] + per_command["DLmr"] + per_command["DLmw"], 1
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.engine_instructions", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--commands", type=int, default=20_000, help="measured commands (20,000)")
    p.add_argument("--accounts", type=int, default=EngineSpec.accounts, help="(10,000)")
    p.add_argument("--depth", type=int, default=EngineSpec.depth, help="resting orders (4,000)")
    p.add_argument(
        "--src",
        type=Path,
        action="append",
        help="a tradehall source tree to measure (the folder holding tradehall/); repeat to"
        " compare trees on one stream (default: this tree's src)",
    )
    p.add_argument("--cache", action="store_true", help="simulate the caches too (slower)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--child", nargs=2, metavar=("STREAM", "N"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if args.commands <= 0:
        p.error("--commands must be positive")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    trees = [path.resolve() for path in (args.src or [REPO / "src"])]
    for tree in trees:
        if not (tree / "tradehall" / "engine" / "engine.py").is_file():
            p.error(f"{tree} holds no tradehall package")
    spec = EngineSpec(commands=args.commands, accounts=args.accounts, depth=args.depth)
    seed, cmds, _, _ = build_stream(load_config().markets, spec)
    with tempfile.TemporaryDirectory(prefix="tradehall-instructions-") as tmp:
        work = Path(tmp)
        stream_file = work / "stream.pickle"
        with stream_file.open("wb") as f:
            pickle.dump((spec, seed, cmds), f)
        results = []
        for tree in trees:
            figures = measure(tree, stream_file, args.commands, args.cache, work)
            results.append(figures)
            print(json.dumps(figures))
    report = {"spec": asdict(spec), "trees": results}
    if len(results) > 1:
        base = results[0]["instructions_per_command"]
        report["ratios_to_first"] = [
            round(r["instructions_per_command"] / base, 4) for r in results
        ]
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
