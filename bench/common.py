"""Helpers every part shares: percentiles, the machine description, CPU pinning, process CPU
time, spawning Python subprocesses of the harness and killing them."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

SYMBOL = "BTCUSDT"
MID_TICKS = 3_000_000
"""30000.00 USDT: the reference price of every generated book (BTCUSDT has 2 price decimals)."""


# --------------------------------------------------------------------------- statistics


def percentiles(values: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    """p50/p90/p99/p99.9/p99.99/max/mean of ``values`` (times ``scale``), nearest-rank."""
    n = len(values)
    if n == 0:
        return {"count": 0}
    s = sorted(values)

    def rank(q: float) -> float:
        index = min(n - 1, max(0, int(q * n + 0.999999) - 1))
        return s[index] * scale

    return {
        "count": n,
        "mean": sum(s) / n * scale,
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "p99.9": rank(0.999),
        "p99.99": rank(0.9999),
        "max": s[-1] * scale,
    }


# --------------------------------------------------------------------------- machine


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
                break
    mem_total = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total = int(line.split()[1]) * 1024
    return {
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model or platform.processor(),
        "mem_total_bytes": mem_total,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "kernel": platform.release(),
    }


def fsync_latency(directory: Path, count: int = 200) -> dict[str, float]:
    """Milliseconds for a 4 KiB write + fsync in ``directory``: what each group commit pays
    (SQLite WAL, synchronous=FULL) before a write can be acknowledged."""
    path = directory / ".fsync-probe"
    times: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = b"x" * 4096
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return percentiles(times, 1e3)


def git_revision() -> dict[str, Any]:
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
        info["commit"] = rev.stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        )
        info["src_dirty"] = bool(status.stdout.strip())
    return info


# --------------------------------------------------------------------------- CPU pinning


def cpu_plan() -> dict[str, Any]:
    """Which CPUs the server and the load generator get. With two or more usable CPUs the
    server under test gets the first and everything else (load generator) the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    have_taskset = shutil.which("taskset") is not None
    if len(cpus) >= 2 and have_taskset:
        return {
            "pinned": True,
            "server": [cpus[0]],
            "loadgen": cpus[1:],
            "engine": [cpus[0]],
        }
    return {"pinned": False, "server": cpus, "loadgen": cpus, "engine": cpus}


def pinned(cmd: list[str], cpus: Sequence[int], plan: dict[str, Any]) -> list[str]:
    if not plan["pinned"]:
        return cmd
    return ["taskset", "-c", ",".join(str(c) for c in cpus), *cmd]


@contextlib.contextmanager
def affinity(cpus: Sequence[int]) -> Iterator[None]:
    """Run this process on ``cpus`` for the duration of the block."""
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def main_thread_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid``'s main thread (an event loop's), or
    None; the process's figure less this one is its other threads'."""
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def family(pid: int) -> list[int]:
    """``pid`` and its children (a gateway's supervisor and its workers)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *map(int, children)]


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` together (those gone count 0)."""
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


Ticks = dict[int, tuple[int, int, int, int]]


def cpu_ticks() -> Ticks:
    """Per CPU: (busy, total, steal, irq + softirq) jiffies since boot, from /proc/stat."""
    out: Ticks = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("cpu") and line[3:4].isdigit():
                name, *values = line.split()
                v = [int(x) for x in values[:8]]
                idle = v[3] + v[4]
                total = sum(v)
                out[int(name[3:])] = (total - idle, total, v[7], v[5] + v[6])
    return out


def cpu_busy(before: Ticks, after: Ticks, cpus: Sequence[int]) -> dict[str, float]:
    """Shares of ``cpus``' time (summed over them, so 1.0 = one whole CPU) between two
    ``cpu_ticks`` readings: busy, steal (by the hypervisor) and interrupt handling."""
    sums = [0, 0, 0, 0]
    for cpu in cpus:
        if cpu in before and cpu in after:
            for k in range(4):
                sums[k] += after[cpu][k] - before[cpu][k]
    busy, total, steal, irq = sums
    if total <= 0:
        return {}
    n = len(cpus)
    return {
        "busy": round(busy / total * n, 3),
        "steal": round(steal / total * n, 3),
        "irq": round(irq / total * n, 3),
    }


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of process ``pid``'s main thread (for the server: the event loop) and of
    all its other threads together (the store's writer and reader threads)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                name = "main thread" if task.name == str(pid) else "other threads"
                raw = (task / "stat").read_text()
                fields = raw[raw.rindex(")") + 2 :].split()
                seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK
                out[name] = out.get(name, 0.0) + seconds
    return out


def rss_bytes(pid: int | None = None) -> int:
    path = Path(f"/proc/{pid or 'self'}/statm")
    pages = int(path.read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------- subprocesses


def python_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRADEHALL_CHECK_INVARIANTS", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env else "")
    return env


def run_json(cmd: list[str], timeout: float) -> Any:
    """Run a harness subprocess that prints one JSON document on stdout; return it."""
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise RuntimeError(f"{cmd[:6]} did not finish within {timeout:.0f} s") from None
    finally:
        kill(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:6]} failed (exit {proc.returncode}): {err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def kill(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """Stop a process we started: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(grace)


def python() -> str:
    return sys.executable


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.start


def fresh_schema(database: str) -> tuple[str, Callable[[], None]]:
    """A new schema in the PostgreSQL ``database`` for one run: the URL that uses it, and the
    function that drops it."""
    import uuid
    from urllib.parse import quote

    import psycopg

    schema = f"tradehall_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in database else "?"
    url = f"{database}{separator}options={quote(f'-csearch_path={schema}')}"

    def drop() -> None:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    return url, drop


Rows = list[dict[str, Any]]
Column = tuple[str, Callable[[dict[str, Any]], str]]
"""A table column: its title, and how a row shows in it."""


def scaling_main(
    argv: list[str] | None,
    doc: str | None,
    sizes: tuple[str, str],
    run: Callable[[list[int], int], Rows],
    columns: list[Column],
) -> None:
    """The command line of a scaling measurement (described by the first paragraph of
    ``doc``): ``sizes`` is its (flag, default) list of sizes; prints a markdown table of
    ``columns``, or the rows as JSON."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    flag, default = sizes
    parser.add_argument(flag, dest="sizes", default=default)
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = run([int(n) for n in args.sizes.split(",")], args.commands)
    if args.json:
        print(json.dumps(rows))
        return
    print("| " + " | ".join(title for title, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(cell(row) for _, cell in columns) + " |")
