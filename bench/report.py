"""Turn results.json into the targets (pass/fail), results.md and latency.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TARGETS_DOC = {
    "engine": "engine with full accounting >= 25 % of the bare book's rate in the same run",
    "place_ratio": "signed LIMIT placement wire to wire >= 40 % of the floor's POST throughput",
    "p99_at_80": "p99 <= 10 ms at 80 % of the maximum rate",
    "depth_ratio": "public depth >= 60 % of the floor's GET throughput",
    "recovery": "recovery >= 200k open orders per second",
    "memory": "memory <= 1 KiB per resting order",
}


ENGINE_SHARE_TARGET = 0.25
"""Issue 18's decision: the engine stays interpreted Python, and its target is a ratio to the
bare book in the same run (25 %; it was 400,000 commands/s, 40 % of that book on the machine
kind it was set for)."""


def _get(d: Any, *path: Any) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target; ``measured`` None when the part did not run (or failed)."""
    rows: list[dict[str, Any]] = []

    def row(key: str, name: str, goal: str, measured: Any, ok: bool | None, shown: str) -> None:
        rows.append(
            {
                "key": key,
                "target": name,
                "goal": goal,
                "measured": measured,
                "shown": shown if measured is not None else "not measured",
                "pass": ok if measured is not None else None,
            }
        )

    cps = _get(results, "engine", "throughput", "commands_per_s")
    share = _get(results, "engine", "bare_book", "engine_share")
    row(
        "engine",
        "Engine, full accounting, one core (throughput pass) / bare book, same run",
        f">= {ENGINE_SHARE_TARGET:.0%}",
        share,
        share is not None and share >= ENGINE_SHARE_TARGET,
        (f"{share:.1%}" if share else "") + (f" ({cps:,.0f} commands/s)" if cps else ""),
    )
    ratios = _get(results, "wire", "ratios_to_floor") or {}
    place = ratios.get("place")
    row(
        "place_ratio",
        "Signed LIMIT place / floor POST (closed-loop max)",
        ">= 40 %",
        place,
        place is not None and place >= 0.40,
        f"{place:.1%}" if place is not None else "",
    )
    for name in ("place", "cancel", "depth"):
        at = _get(results, "wire", "scenarios", name, "open", "at_80pct")
        p99 = at.get("p99_ms") if at else None
        row(
            f"p99_at_80_{name}",
            f"{name}: p99 at 80 % of its closed-loop max rate"
            + (f" ({at['offered_rate']:,.0f} req/s)" if at else ""),
            "<= 10 ms, no errors",
            p99,
            bool(at and at["pass"]),
            (
                f"{p99:.2f} ms"
                + (f", {at['errors']} errors" if at["errors"] else "")
                + _floor_at_80(results, "floor_get" if name == "depth" else "floor_post")
            )
            if at and p99 is not None
            else "",
        )
    depth = ratios.get("depth")
    row(
        "depth_ratio",
        "Public depth (limit 100) / floor GET (closed-loop max)",
        ">= 60 %",
        depth,
        depth is not None and depth >= 0.60,
        f"{depth:.1%}" if depth is not None else "",
    )
    for step in _get(results, "recovery", "steps") or []:
        rate = step.get("open_orders_per_s")
        row(
            f"recovery_{step['open_orders']}",
            f"Recovery, {step['open_orders']:,} open orders + {step['history_trades']:,} trades",
            ">= 200,000 open orders/s",
            rate,
            rate is not None and rate >= 200_000,
            f"{rate:,.0f} orders/s ({step['recover_s']:.2f} s)" if rate else "",
        )
    per_order = _get(results, "memory", "bytes_per_resting_order")
    row(
        "memory",
        "Memory per resting order (tracemalloc)",
        "<= 1,024 bytes",
        per_order,
        per_order is not None and per_order <= 1024,
        f"{per_order:,.0f} bytes" if per_order is not None else "",
    )
    return rows


def _floor_at_80(results: dict[str, Any], floor: str) -> str:
    """The same rule applied to the floor itself, for reading the endpoint's figure: the bare
    stack answering a constant, at 80 % of its own closed-loop maximum."""
    at = _get(results, "wire", "scenarios", floor, "open", "at_80pct")
    if not at or at.get("p99_ms") is None:
        return ""
    method = floor.removeprefix("floor_").upper()
    return f" (the floor's {method}, at 80 % of its own maximum: {at['p99_ms']:.2f} ms)"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _fmt(x: Any, spec: str = ",.0f") -> str:
    return "" if x is None else format(x, spec)


def markdown(results: dict[str, Any]) -> str:
    meta = results.get("meta", {})
    m = meta.get("machine", {})
    lines = [
        f"# tradehall benchmark, {meta.get('started', '')}",
        "",
        f"Machine: {m.get('cpu_model', '?')}, {m.get('nproc', '?')} CPUs,"
        f" {m.get('mem_total_bytes', 0) / 2**30:.0f} GiB, Python {m.get('python', '?')}"
        f" ({m.get('platform', '')}). Run: {'quick' if meta.get('quick') else 'full'},"
        f" commit {str(meta.get('git', {}).get('commit', '?'))[:12]}"
        f"{' (src modified)' if meta.get('git', {}).get('src_dirty') else ''}.",
        "",
    ]
    load = meta.get("load_average")
    if load:
        lines += [
            f"Load average at start {load.get('start')}, at end {load.get('end')}; harness"
            f" niceness {meta.get('nice', 0)} (other processes on the machine compete for the"
            " same CPUs: see the CPU columns).",
            "",
        ]
    lines += [
        "## Targets",
        "",
        "| Target | Goal | Measured | Result |",
        "|---|---|---|---|",
    ]
    for t in results.get("targets", []):
        lines.append(f"| {t['target']} | {t['goal']} | {t['shown']} | {_verdict(t['pass'])} |")
    lines.append("")
    for part, value in results.items():
        if isinstance(value, dict) and "error" in value:
            lines += [f"**{part} failed**: `{value['error'].splitlines()[-1]}`", ""]
    lines += _engine_md(results.get("engine"))
    lines += _wire_md(results.get("wire"))
    lines += _recovery_md(results.get("recovery"))
    lines += _memory_md(results.get("memory"))
    return "\n".join(lines) + "\n"


def _bare_md(bare: dict[str, Any] | None) -> list[str]:
    if not bare:
        return []
    return [
        f"- Reference, the same stream on a bare pure-Python book (matching only, no accounting,"
        f" `bench/bare_book.py`): {bare['commands_per_s']:,.0f} commands/s"
        f" ({_fmt(bare.get('commands_per_cpu_s'))} per CPU-second; same final book as the"
        f" engine: {bare['same_book_as_engine']}). The engine runs at"
        f" **{bare['engine_share']:.1%}** of it; the target is {ENGINE_SHARE_TARGET:.0%}"
        " (issue 18: an interpreted engine, judged against the bare book in the same run)."
    ]


def _engine_md(e: dict[str, Any] | None) -> list[str]:
    if not e or "error" in e:
        return []
    lat = e["latency"]
    tp = e["throughput"]
    out = [
        "## Engine only",
        "",
        f"{e['spec']['commands']:,} commands on {e['symbol']}, {e['spec']['accounts']:,} accounts,"
        f" book kept near {e['spec']['depth']:,} live orders"
        f" ({e['book_before'].get('orders', '?')} before, {e['book_after'].get('orders', '?')}"
        " after).",
        "",
        f"- Throughput pass: **{tp['commands_per_s']:,.0f} commands/s**"
        f" ({tp['mean_ns_per_command'] / 1000:.2f} us each; CPU share {tp['cpu_share']:.0%},"
        f" {_fmt(tp.get('commands_per_cpu_s'))} commands per CPU-second).",
        *_bare_md(e.get("bare_book")),
        f"- Latency pass (perf_counter_ns around each apply; timer overhead"
        f" {e['timer_overhead_ns']} ns, not subtracted): "
        + ", ".join(f"{k} {lat['latency_us'][k]:.1f} us" for k in ("p50", "p99", "p99.9", "max")),
        f"- Work done: {lat['trades']:,} trades, {lat['ledger_entries']:,} ledger entries,"
        f" {lat['events']:,} events; rejects {sum(lat['rejects'].values()):,};"
        f" deterministic replay of the shadow run: {e['deterministic_replay']}.",
        f"- GC during the latency pass: {lat['gc']['collections']} collections,"
        f" {lat['gc']['total_ms']:.1f} ms total, longest {lat['gc']['max_ms']:.2f} ms.",
        "",
        "| Command kind | Count | p50 us | p99 us | p99.9 us | max us |",
        "|---|---|---|---|---|---|",
    ]
    for kind, p in lat["latency_us_by_kind"].items():
        out.append(
            f"| {kind} | {p['count']:,} | {p['p50']:.1f} | {p['p99']:.1f} | {p['p99.9']:.1f} |"
            f" {p['max']:.0f} |"
        )
    out += ["", "Outcomes: " + ", ".join(f"{k} {v:,}" for k, v in lat["outcomes"].items()), ""]
    prof = e.get("profile")
    if prof:
        out += [
            f"### Where the time goes (cProfile, first {prof['commands']:,} commands)",
            "",
            "| Function | Calls | Own time share | Own ns/command | Cumulative s |",
            "|---|---|---|---|---|",
        ]
        for r in prof["top_tottime"][:15]:
            out.append(
                f"| `{r['function']}` | {r['ncalls']:,} | {r['tottime_share']:.1%} |"
                f" {r['ns_per_command']:,.0f} | {r['cumtime_s']:.3f} |"
            )
        out.append("")
    return out


def _wire_md(w: dict[str, Any] | None) -> list[str]:
    if not w or "error" in w:
        return []
    plan = w["cpu_plan"]
    out = [
        "## Wire to wire",
        "",
        f"Server pinned to CPU {plan['server']}, load generator to {plan['loadgen']}"
        if plan["pinned"]
        else "No CPU pinning (fewer than two CPUs or no taskset).",
        f"; rate limits: {w.get('rate_limits')}; 429 responses seen: "
        f"{w.get('rate_limited_responses')}; audit after the load:"
        f" {_get(w, 'audit_after_load', 'ok')}; the store commits with synchronous=FULL and a"
        f" 4 KiB write+fsync in its folder takes p50 {_fmt(_get(w, 'fsync_ms', 'p50'), '.2f')} ms,"
        f" p99 {_fmt(_get(w, 'fsync_ms', 'p99'), '.2f')} ms.",
        "",
        "| Endpoint | Closed-loop max req/s | Ratio to floor | Req per server CPU-s (ratio) |"
        " Max rate with p99 <= 10 ms | p99 at 80 % of max | Server CPU + irq | Others on server"
        " CPU | Generator CPU | Bottleneck |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = w.get("ratios_to_floor", {})
    normalized = w.get("ratios_to_floor_per_server_cpu_s", {})
    for name, s in w.get("summary", {}).items():
        at = s.get("at_80pct")
        server = (s.get("server_cpu_share") or 0.0) + (s.get("server_irq_share") or 0.0)
        per_cpu = s.get("requests_per_server_cpu_s")
        out.append(
            f"| {s['endpoint']} | {_fmt(s['closed_max_rps'])} | {ratios.get(name, 0):.1%} |"
            f" {_fmt(per_cpu)} ({normalized.get(name, 0):.1%}) |"
            f" {_best_rate(s)} |"
            f" {'' if not at else format(at['p99_ms'] or 0, '.2f') + ' ms'} |"
            f" {server:.0%} |"
            f" {_fmt(s.get('others_on_server_cpu'), '.0%')} |"
            f" {_fmt(s.get('generator_cpu_share'), '.0%')} | {s['bottleneck']} |"
        )
    threads = {
        name: s.get("server_threads_cpu_share")
        for name, s in w.get("summary", {}).items()
        if name in ("place", "cancel") and s.get("server_threads_cpu_share")
    }
    if threads:
        out += [""]
        for name, shares in threads.items():
            out.append(
                f"Server CPU by thread during the {name} closed loop: "
                + ", ".join(f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda x: -x[1]))
                + "."
            )
    out += ["", "Open-loop steps (latency from the scheduled send time):", ""]
    out += [
        "| Endpoint | Offered req/s | Achieved | p50 ms | p99 ms | p99.9 ms | Errors |"
        " Server CPU | Others | Pass |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in w.get("scenarios", {}).items():
        for st in (r.get("open") or {}).get("steps", []):
            lat = st["latency_ms"]
            out.append(
                f"| {name} | {st['offered_rate']:,.0f} | {st['achieved_rate']:,.0f} |"
                f" {_fmt(lat.get('p50'), '.2f')} | {_fmt(lat.get('p99'), '.2f')} |"
                f" {_fmt(lat.get('p99.9'), '.2f')} | {st['errors'] + st['timed_out']} |"
                f" {_fmt(st.get('server_cpu_share'), '.0%')} |"
                f" {_fmt(st.get('others_on_server_cpus'), '.0%')} | {_verdict(st['pass'])} |"
            )
    out.append("")
    prof = w.get("server_profile")
    if prof:
        out += [
            "### Where the server's time goes (cProfile of the event loop, signed placements)",
            "",
            f"{prof['note']}. Placement rate under the profiler:"
            f" {prof['place_closed_loop_rps_under_profiler']:,.0f} req/s.",
            "",
            "| Function | Calls | Own time share | Cumulative share |",
            "|---|---|---|---|",
        ]
        for r in prof["top_tottime"][:20]:
            out.append(
                f"| `{r['function']}` | {r['ncalls']:,} | {r['tottime_share']:.1%} |"
                f" {r['cumtime_share']:.1%} |"
            )
        out.append("")
    return out


def _best_rate(s: dict[str, Any]) -> str:
    if "max_rate_p99_ok" not in s:
        return "(closed loop only)"
    return _fmt(s["max_rate_p99_ok"]) if s["max_rate_p99_ok"] else "none of the steps"


def _recovery_md(r: dict[str, Any] | None) -> list[str]:
    if not r or "error" in r:
        return []
    h = r["history"]
    out = [
        "## Recovery",
        "",
        f"History: {h['trades']:,} trades generated in {h['generation_s']:.0f} s"
        f" ({h['through_engine']['trades']:,} through the engine and store in"
        f" {h['through_engine']['seconds']:.0f} s, {h['through_sql']['trades']:,} with"
        f" executemany in {h['through_sql']['seconds']:.0f} s): {h['why']}.",
        "",
        "| Open orders | Generation s | Recover s (median) | Open orders/s | us per order |"
        " store.load s | RSS after | RSS growth per open order | serve: spawn to first answer"
        " s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in r.get("steps", []):
        out.append(
            f"| {s['open_orders']:,} | {s['generation_s']:.1f} | {s['recover_s']:.2f} |"
            f" {_fmt(s['open_orders_per_s'])} | {_fmt(s['us_per_open_order'], '.2f')} |"
            f" {s['store_load_s']:.2f} | {s['rss_after_recover'] / 2**20:,.0f} MiB |"
            f" {s['rss_delta'] / s['open_orders']:,.0f} B |"
            f" {s['server_restart']['spawn_to_first_answer_s']:.2f} |"
        )
    out.append("")
    return out


def _memory_md(m: dict[str, Any] | None) -> list[str]:
    if not m or "error" in m:
        return []
    return [
        "## Memory",
        "",
        f"- Per resting order: **{m['bytes_per_resting_order']:,.0f} bytes** (tracemalloc),"
        f" {m['bytes_per_resting_order_rss']:,.0f} bytes (RSS delta);"
        f" {m['orders_trace']['n']:,} orders over {m['orders_trace'].get('levels', '?')} levels.",
        f"- Per account: **{m['bytes_per_account']:,.0f} bytes** (tracemalloc),"
        f" {m['bytes_per_account_rss']:,.0f} bytes (RSS delta); {m['accounts_trace']['n']:,}"
        " accounts.",
        f"- {m['notes']}",
        "",
    ]


def plot(results: dict[str, Any], path: Path) -> str | None:
    """latency.png: p50 and p99 against offered load, per endpoint and the floor. Returns an
    explanation when the plot could not be made."""
    scenarios = _get(results, "wire", "scenarios")
    if not scenarios:
        return "no wire results"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]')"
    fig, ax = plt.subplots(figsize=(11, 6.5))
    colors = {
        "floor_get": "#7f7f7f",
        "floor_post": "#000000",
        "depth": "#1f77b4",
        "place": "#d62728",
        "cancel": "#2ca02c",
    }
    for name, r in scenarios.items():
        steps = (r.get("open") or {}).get("steps", [])
        if not steps:
            continue
        xs = [s["offered_rate"] for s in steps]
        p50 = [s["latency_ms"].get("p50", float("nan")) for s in steps]
        p99 = [s["latency_ms"].get("p99", float("nan")) for s in steps]
        color = colors.get(name)
        ax.plot(xs, p99, "-o", color=color, label=f"{name} p99", markersize=4)
        ax.plot(xs, p50, "--", color=color, label=f"{name} p50", alpha=0.7)
        for x, y, s in zip(xs, p99, steps, strict=True):
            if not s["pass"]:
                ax.plot([x], [y], "x", color=color, markersize=9)
    ax.axhline(10, color="orange", linewidth=1, label="10 ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (requests/s, open loop)")
    ax.set_ylabel("latency from scheduled send (ms)")
    meta = results.get("meta", {})
    ax.set_title(
        "tradehall wire-to-wire latency vs offered load"
        f" ({meta.get('machine', {}).get('cpu_model', '')}, {meta.get('started', '')})"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
