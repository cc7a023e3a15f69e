"""The journal's figures (issue 26, docs/performance.md): on one `tradehall serve` (SQLite, the
projector its child process), closed loops of 32 connections give

- signed durable placements per second against the same server's ``GET /sapi/v1/ping`` per
  second, the mean of a ping loop before and one after the placements (the ratio is what
  carries from machine to machine);
- while the placements run: the engine's commit (append) latency, mean, from ``/metrics``
  (the projector at full speed beside it), the projector's lag behind the journal (records,
  sampled every 50 ms from ``GET /admin/v1/status``) and the latency of history reads
  (``GET /sapi/v3/historyOrders`` of one account, 20 a second);
- after the load stops: how long the projector takes to catch up, and its CPU per record
  and per row (``/proc`` of the child; rows from the tables' growth).

    python -m bench.journal                      # 3 rounds
    python -m bench.journal --rounds 5 --out journal.json
    python -m bench.journal --topology gw1       # through a gateway worker and the engine

Run it with another tree's ``src`` first on PYTHONPATH to measure that tree's server (rounds
of two trees alternated by the caller); a server without a journal reports the ratio alone.
Nothing is pinned: the server, its projector and the load generator share the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.wire import NO_PINNING, WireSpec, admin_token, create_accounts, loadgen, topology
from tradehall.client import AdminClient, Client


@dataclass(frozen=True)
class JournalSpec:
    rounds: int = 3
    duration: float = 4.0
    connections: int = 32
    accounts: int = 200
    read_rate: float = 20.0
    sample_s: float = 0.05
    topology: str = "serve"
    """``serve`` (the goal's figure), or ``gw<N>``: the same loops through a gateway of N
    workers in front of ``tradehall engine`` (NATS at 127.0.0.1:4222), on the same machine."""


def child_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid``'s child processes that are projectors (``/proc``)."""
    total = 0.0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    for child in children:
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"projector" not in cmdline:
                continue
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / 100.0  # utime, stime (USER_HZ)
        except OSError:
            continue
    return total


class Watcher(threading.Thread):
    """Samples the journal's lag and times history reads while the load runs."""

    def __init__(self, url: str, token: str, account: list[str], spec: JournalSpec) -> None:
        super().__init__(daemon=True)
        self.admin = AdminClient(url, token)
        self.client = Client(url, account[0], account[1])
        self.spec = spec
        self.stop = threading.Event()
        self.lags: list[int] = []
        self.reads_ms: list[float] = []
        self.read_errors = 0

    def journal(self) -> dict[str, Any] | None:
        status: dict[str, Any] = self.admin.status()
        journal: dict[str, Any] | None = status.get("journal")
        return journal

    def run(self) -> None:
        next_read = time.monotonic()
        while not self.stop.is_set():
            journal = self.journal()
            if journal is not None:
                self.lags.append(int(journal["lag"]))
            now = time.monotonic()
            if now >= next_read:
                next_read = now + 1 / self.spec.read_rate
                began = time.perf_counter()
                try:
                    self.client.history_orders(symbol="BTCUSDT", limit=50)
                    self.reads_ms.append((time.perf_counter() - began) * 1000)
                except Exception:
                    self.read_errors += 1
            self.stop.wait(self.spec.sample_s)


def commit_figures(url: str, token: str) -> dict[str, float]:
    """The sums and counts of the commit histograms on ``/metrics`` (the engine's appends,
    with the projector running beside them)."""
    import urllib.request

    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("tradehall_commit_duration_seconds", "tradehall_commit_sync_seconds"):
            for part in ("_sum", "_count"):
                if line.startswith(name + part + " "):
                    out[name + part] = float(line.split()[1])
    return out


def mean_ms(before: dict[str, float], after: dict[str, float], name: str) -> float | None:
    count = after.get(name + "_count", 0.0) - before.get(name + "_count", 0.0)
    total = after.get(name + "_sum", 0.0) - before.get(name + "_sum", 0.0)
    return total / count * 1000 if count else None


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_round(spec: JournalSpec, work: Path) -> dict[str, Any]:
    wire = replace(WireSpec(), closed_connections=spec.connections, duration=spec.duration)
    with topology(spec.topology, work) as (target, url):
        token = admin_token(target)
        accounts = create_accounts(url, token, spec.accounts)
        ping = loadgen("ping", target, wire, NO_PINNING, work, open_loop=False)
        admin = AdminClient(url, token)
        before = admin.status().get("journal")
        cpu_before = child_cpu_seconds(target["pid"])
        watcher = Watcher(url, token, accounts[0], spec)
        watcher.start()
        commits_before = commit_figures(url, token)
        place = loadgen("place", target, wire, NO_PINNING, work, accounts, open_loop=False)
        commits_after = commit_figures(url, token)
        watcher.stop.set()
        watcher.join()
        # Pings again after the placements: the machine's speed drifts within minutes on a
        # shared host, and the ratio is judged against the mean of the pings either side.
        ping_after = loadgen("ping", target, wire, NO_PINNING, work, open_loop=False)
        pings = (ping["closed"]["throughput"], ping_after["closed"]["throughput"])
        out: dict[str, Any] = {
            "ping_per_s": statistics.fmean(pings),
            "ping_before_after_per_s": list(pings),
            "place_per_s": place["closed"]["throughput"],
            "place_p99_ms": place["closed"]["latency_ms"]["p99"],
            "place_errors": place["closed"].get("errors"),
        }
        out["ratio"] = out["place_per_s"] / out["ping_per_s"]
        out["commit_mean_ms"] = mean_ms(
            commits_before, commits_after, "tradehall_commit_duration_seconds"
        )
        out["commit_sync_mean_ms"] = mean_ms(
            commits_before, commits_after, "tradehall_commit_sync_seconds"
        )
        if before is None:
            return out
        stopped = time.perf_counter()
        after = admin.status()["journal"]
        while after["lag"] > 0 and time.perf_counter() - stopped < 120:
            time.sleep(0.02)
            after = admin.status()["journal"]
        records = after["head"] - before["head"]
        cpu = child_cpu_seconds(target["pid"]) - cpu_before
        out.update(
            {
                "journal_records": records,
                "catch_up_s": time.perf_counter() - stopped,
                "projector_cpu_s": cpu,
                "projector_cpu_us_per_placement": cpu
                / max(1.0, out["place_per_s"] * (wire.warmup + wire.duration))
                * 1e6,
                "projector_records_per_cpu_s": records / cpu if cpu else None,
                "lag_p50_records": percentile([float(x) for x in watcher.lags], 0.5),
                "lag_p99_records": percentile([float(x) for x in watcher.lags], 0.99),
                "lag_max_records": max(watcher.lags, default=None),
                "history_read_p50_ms": percentile(watcher.reads_ms, 0.5),
                "history_read_p99_ms": percentile(watcher.reads_ms, 0.99),
                "history_reads": len(watcher.reads_ms),
                "history_read_errors": watcher.read_errors,
            }
        )
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.journal")
    parser.add_argument("--rounds", type=int, default=JournalSpec.rounds)
    parser.add_argument("--duration", type=float, default=JournalSpec.duration)
    parser.add_argument("--connections", type=int, default=JournalSpec.connections)
    parser.add_argument("--accounts", type=int, default=JournalSpec.accounts)
    parser.add_argument("--topology", default=JournalSpec.topology, help="serve or gw<N>")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.topology != "serve" and not args.topology.removeprefix("gw").isdigit():
        parser.error("--topology is serve or gw<N> (N gateway workers)")
    spec = JournalSpec(
        args.rounds, args.duration, args.connections, args.accounts, topology=args.topology
    )
    rounds = []
    with tempfile.TemporaryDirectory(prefix="tradehall-bench-journal-") as tmp:
        for i in range(spec.rounds):
            result = one_round(spec, Path(tmp))
            print(f"  round {i + 1}: {json.dumps(result)}", flush=True)
            rounds.append(result)
    summary = {
        key: statistics.median(r[key] for r in rounds)
        for key in rounds[0]
        if all(isinstance(r.get(key), (int, float)) for r in rounds)
    }
    report = {"spec": spec.__dict__, "rounds": rounds, "median": summary}
    print(json.dumps(report["median"], indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
