"""Part 1, engine only: a deterministic exchange-core style command stream on one book, applied
to ``Engine.apply`` with full accounting (holds, fees, ledger entries, events).

The stream is built up front (not timed) by a *shadow* engine: each command is chosen from the
state the previous ones left (so cancels name orders that are live, limits sit near the real
top of the book) and, since the engine is deterministic, a fresh engine given the same stream
goes through exactly the same states. Three passes then use the stream:

- the latency pass times every ``apply`` with ``time.perf_counter_ns`` and counts the mix;
- the throughput pass applies the stream with no per-command timing (commands/s);
- the profile pass runs a prefix under cProfile (where the time goes).
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import heapq
import io
import pstats
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.bare_book import bare_pass
from bench.common import MID_TICKS, SYMBOL, percentiles
from tradehall.codes import Reject
from tradehall.config import load_config
from tradehall.engine.commands import CancelOrder, Command, Deposit, PlaceOrder
from tradehall.engine.engine import Engine
from tradehall.engine.events import BalanceChanged, OrderChanged, TradeExecuted
from tradehall.engine.markets import MarketsSpec

MAX_SUPPLY = 2**63 - 1
USDT_PER_ACCOUNT = 1_000_000 * 10**8
BTC_PER_ACCOUNT = 100 * 10**8
T0 = 1_700_000_000_000

PLACE, CANCEL, IOC_CROSS, MARKET_CROSS = 0, 1, 2, 3
KIND_NAMES = ("limit_gtc", "cancel", "limit_ioc_cross", "market_cross")
OPEN = frozenset(("NEW", "PARTIALLY_FILLED"))


@dataclass(frozen=True)
class EngineSpec:
    commands: int = 1_000_000
    accounts: int = 10_000
    depth: int = 4_000
    """Target number of live orders on the book (both sides)."""
    cross_share: float = 0.10
    seed: int = 20240601
    profile_commands: int = 200_000
    rounds: int = 3
    """Throughput passes, each followed by a bare-book pass on the same stream."""


def funding_commands(accounts: int) -> list[Command]:
    if accounts * USDT_PER_ACCOUNT >= MAX_SUPPLY:
        raise ValueError("too many accounts for the per-asset supply bound")
    out: list[Command] = []
    for account in range(1, accounts + 1):
        out.append(Deposit(T0, account, "USDT", USDT_PER_ACCOUNT, f"u{account}"))
        out.append(Deposit(T0, account, "BTC", BTC_PER_ACCOUNT, f"b{account}"))
    return out


class Shadow:
    """Tracks live orders and the best prices from the engine's events (no engine internals)."""

    def __init__(self) -> None:
        self.live: list[int] = []
        self.pos: dict[int, int] = {}
        self.info: dict[int, tuple[int, int, int]] = {}
        """id -> (side 0 bid / 1 ask, price, account)."""
        self.counts: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self.heaps: tuple[list[int], list[int]] = ([], [])
        self.last_price = MID_TICKS

    def add(self, oid: int, side: int, price: int, account: int) -> None:
        self.pos[oid] = len(self.live)
        self.live.append(oid)
        self.info[oid] = (side, price, account)
        counts = self.counts[side]
        if counts.get(price, 0) == 0:
            heapq.heappush(self.heaps[side], -price if side == 0 else price)
        counts[price] = counts.get(price, 0) + 1

    def remove(self, oid: int) -> None:
        index = self.pos.pop(oid)
        last = self.live.pop()
        if last != oid:
            self.live[index] = last
            self.pos[last] = index
        side, price, _ = self.info.pop(oid)
        self.counts[side][price] -= 1

    def best(self, side: int) -> int | None:
        heap = self.heaps[side]
        counts = self.counts[side]
        while heap:
            price = -heap[0] if side == 0 else heap[0]
            if counts.get(price, 0) > 0:
                return price
            heapq.heappop(heap)
        return None

    def observe(self, events: list[Any]) -> None:
        for event in events:
            kind = type(event)
            if kind is OrderChanged:
                order = event.order
                if order.status in OPEN:
                    if order.id not in self.info:
                        side = 0 if order.side == "BUY" else 1
                        self.add(order.id, side, order.price, order.account)
                elif order.id in self.info:
                    self.remove(order.id)
            elif kind is TradeExecuted:
                self.last_price = event.trade.price


def build_stream(
    markets: MarketsSpec, spec: EngineSpec
) -> tuple[list[Command], list[Command], bytes, Engine]:
    """(seed commands, measured commands, their kinds, the shadow engine at the end)."""
    rng = random.Random(spec.seed)
    engine = Engine(markets)
    for deposit in funding_commands(spec.accounts):
        engine.apply(deposit)
    shadow = Shadow()
    accounts = spec.accounts

    def apply(cmd: Command) -> None:
        try:
            result = engine.apply(cmd)
        except Reject:
            return
        shadow.observe(result.events)

    seed: list[Command] = []
    for i in range(spec.depth):
        side = "BUY" if i % 2 == 0 else "SELL"
        offset = rng.randint(1, 10)
        price = MID_TICKS - offset if side == "BUY" else MID_TICKS + offset
        seed_order = PlaceOrder(
            T0, rng.randint(1, accounts), SYMBOL, side, "LIMIT", price, rng.randint(1, 50) * 1000
        )
        seed.append(seed_order)
        apply(seed_order)

    cmds: list[Command] = []
    kinds = bytearray(spec.commands)
    for i in range(spec.commands):
        ts = T0 + 1 + i
        account = rng.randint(1, accounts)
        r = rng.random()
        n_live = len(shadow.live)
        p_cancel = 0.48 if n_live > spec.depth else 0.33
        buy = rng.random() < 0.5
        side = "BUY" if buy else "SELL"
        bid, ask = shadow.best(0), shadow.best(1)
        cmd: Command
        if r < spec.cross_share:
            if rng.random() < 0.6:
                opposite = ask if buy else bid
                if opposite is None:
                    opposite = shadow.last_price
                price = opposite + 2 if buy else opposite - 2
                qty = rng.randint(1, 60) * 1000
                cmd = PlaceOrder(ts, account, SYMBOL, side, "LIMIT", price, qty, tif="IOC")
                kinds[i] = IOC_CROSS
            else:
                if buy:
                    quote = rng.randint(30, 1800) * 10**8
                    cmd = PlaceOrder(ts, account, SYMBOL, side, "MARKET", quote_qty=quote)
                else:
                    qty = rng.randint(1, 60) * 1000
                    cmd = PlaceOrder(ts, account, SYMBOL, side, "MARKET", qty=qty)
                kinds[i] = MARKET_CROSS
        elif r < spec.cross_share + p_cancel and n_live:
            oid = shadow.live[rng.randrange(n_live)]
            cmd = CancelOrder(ts, shadow.info[oid][2], SYMBOL, oid)
            kinds[i] = CANCEL
        else:
            own = bid if buy else ask
            if own is None:
                other = ask if buy else bid
                ref = other if other is not None else shadow.last_price
                own = ref - 1 if buy else ref + 1
            if rng.random() < 0.08:
                price = own + 1 if buy else own - 1
            else:
                k = rng.randint(0, 4)
                price = own - k if buy else own + k
            qty = rng.randint(1, 50) * 1000
            cmd = PlaceOrder(ts, account, SYMBOL, side, "LIMIT", max(1, price), qty)
            kinds[i] = PLACE
        cmds.append(cmd)
        apply(cmd)
    return seed, cmds, bytes(kinds), engine


def fresh_engine(markets: MarketsSpec, spec: EngineSpec, seed: list[Command]) -> Engine:
    engine = Engine(markets)
    for cmd in funding_commands(spec.accounts):
        engine.apply(cmd)
    for cmd in seed:
        with contextlib.suppress(Reject):
            engine.apply(cmd)
    return engine


def timer_overhead_ns() -> int:
    pc = time.perf_counter_ns
    best = 10**9
    for _ in range(20_000):
        a = pc()
        b = pc()
        best = min(best, b - a)
    return best


class GcWatch:
    """Counts the garbage collector's pauses (they land in the latency tail)."""

    def __init__(self) -> None:
        self.pauses: list[int] = []
        self._start = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.pauses.append(time.perf_counter_ns() - self._start)

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def summary(self) -> dict[str, Any]:
        return {
            "collections": len(self.pauses),
            "total_ms": sum(self.pauses) / 1e6,
            "max_ms": max(self.pauses, default=0) / 1e6,
            "over_100us": sum(1 for p in self.pauses if p > 100_000),
        }


def cpu_share(cpu_s: float, wall_s: float) -> float:
    return round(cpu_s / wall_s, 3) if wall_s > 0 else 0.0


def latency_pass(engine: Engine, cmds: list[Command], kinds: bytes) -> dict[str, Any]:
    n = len(cmds)
    lat = [0] * n
    apply = engine.apply
    rejects: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    counters = [0, 0, 0]
    gc.collect()
    watch = GcWatch()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with watch:
        _timed_loop(apply, cmds, kinds, lat, rejects, outcomes, counters)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    trades, ledger, events_total = counters
    by_kind: dict[str, list[int]] = {name: [] for name in KIND_NAMES}
    for i in range(n):
        by_kind[KIND_NAMES[kinds[i]]].append(lat[i])
    total_ns = sum(lat)
    return {
        "commands": n,
        "sum_of_apply_ns": total_ns,
        "commands_per_s_from_sum": n / (total_ns / 1e9) if total_ns else None,
        "latency_us": percentiles(lat, 1e-3),
        "latency_us_by_kind": {k: percentiles(v, 1e-3) for k, v in by_kind.items() if v},
        "outcomes": dict(sorted(outcomes.items())),
        "rejects": dict(sorted(rejects.items())),
        "trades": trades,
        "ledger_entries": ledger,
        "events": events_total,
        "gc": watch.summary(),
        "cpu_share": cpu_share(cpu, wall),
    }


def _timed_loop(
    apply: Any,
    cmds: list[Command],
    kinds: bytes,
    lat: list[int],
    rejects: Counter[str],
    outcomes: Counter[str],
    counters: list[int],
) -> None:
    pc = time.perf_counter_ns
    trades = ledger = events_total = 0
    for i in range(len(cmds)):
        cmd = cmds[i]
        t0 = pc()
        try:
            res = apply(cmd)
            t1 = pc()
        except Reject as exc:
            t1 = pc()
            lat[i] = t1 - t0
            rejects[f"{KIND_NAMES[kinds[i]]}:{exc.code.name}"] += 1
            continue
        lat[i] = t1 - t0
        events = res.events
        events_total += len(events)
        for event in events:
            kind = type(event)
            if kind is TradeExecuted:
                trades += 1
            elif kind is BalanceChanged:
                ledger += 1
        reply = res.reply
        status = getattr(reply, "status", "OK")
        outcomes[f"{KIND_NAMES[kinds[i]]}:{status}"] += 1
    counters[:] = [trades, ledger, events_total]


def throughput_pass(engine: Engine, cmds: list[Command]) -> dict[str, Any]:
    apply = engine.apply
    gc.collect()
    watch = GcWatch()
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    rejected = 0
    with watch:
        for cmd in cmds:
            try:
                apply(cmd)
            except Reject:
                rejected += 1
    elapsed = time.perf_counter_ns() - t0
    cpu = time.process_time() - cpu0
    return {
        "commands": len(cmds),
        "seconds": elapsed / 1e9,
        "cpu_seconds": cpu,
        "commands_per_s": len(cmds) / (elapsed / 1e9),
        "commands_per_cpu_s": len(cmds) / cpu if cpu > 0 else None,
        "cpu_share": cpu_share(cpu, elapsed / 1e9),
        "mean_ns_per_command": elapsed / len(cmds),
        "rejected": rejected,
        "gc": watch.summary(),
    }


def _short(path: str) -> str:
    for marker in ("/src/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1].split("site-packages/", 1)[-1]
    return path


def profile_pass(engine: Engine, cmds: list[Command], top: int = 30) -> dict[str, Any]:
    apply = engine.apply
    profiler = cProfile.Profile()
    gc.collect()
    rejected = 0
    profiler.enable()
    for cmd in cmds:
        try:
            apply(cmd)
        except Reject:
            rejected += 1
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    rows = []
    for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        rows.append(
            {
                "function": f"{_short(path)}:{line}({name})",
                "ncalls": ncalls,
                "tottime_s": round(tottime, 4),
                "cumtime_s": round(cumtime, 4),
                "tottime_share": round(tottime / total, 4) if total else 0.0,
                "ns_per_command": round(tottime / len(cmds) * 1e9, 1),
            }
        )
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    by_cum = sorted(rows, key=lambda r: r["cumtime_s"], reverse=True)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(40)
    return {
        "commands": len(cmds),
        "profiled_total_s": round(total, 3),
        "top_tottime": rows[:top],
        "top_cumtime": by_cum[:top],
        "text": text.getvalue(),
    }


def live_book(engine: Engine) -> dict[str, Any]:
    """Orders and levels on the book (read through the engine's query methods where they exist)."""
    out: dict[str, Any] = {}
    try:
        book = engine.spot.books[SYMBOL]
        out["orders"] = len(book.orders)
        out["bid_levels"] = len(book.bids.depth(10**9))
        out["ask_levels"] = len(book.asks.depth(10**9))
    except Exception as exc:  # internals may change under the engine optimiser
        out["error"] = repr(exc)
    return out


def run(spec: EngineSpec, log: Any = print) -> dict[str, Any]:
    markets = load_config().markets
    started = time.perf_counter()
    seed, cmds, kinds, shadow = build_stream(markets, spec)
    build_s = time.perf_counter() - started
    log(f"  engine: stream of {len(cmds):,} commands built in {build_s:.1f} s")
    # The pre-built stream would not exist in a server: keep it (and the shadow) out of the
    # collector's scans. Engines created from here on are collected as usual.
    gc.collect()
    gc.freeze()
    planned = Counter(KIND_NAMES[k] for k in kinds)

    engine = fresh_engine(markets, spec, seed)
    book_before = live_book(engine)
    latency = latency_pass(engine, cmds, kinds)
    book_after = live_book(engine)
    log(
        f"  engine: latency pass p50 {latency['latency_us']['p50']:.1f} us,"
        f" p99 {latency['latency_us']['p99']:.1f} us"
    )
    same = _same_state(engine, shadow)
    del engine
    gc.collect()

    # Rounds alternate the engine and the bare book, so that both see the same machine (on a
    # shared one, a single pass of either moves by +-10 %); the figures are the medians.
    rounds: list[dict[str, Any]] = []
    replays: list[bool | None] = []
    same_book = True
    first_id = Engine(markets).spot.next_order_id
    lot_cost = markets.pairs[SYMBOL].quote_per_tick_lot
    for number in range(spec.rounds):
        engine = fresh_engine(markets, spec, seed)
        tp = throughput_pass(engine, cmds)
        replays.append(_same_state(engine, shadow))
        engine_live = set(engine.spot.books[SYMBOL].orders)
        del engine
        gc.collect()
        bare, bare_live = bare_pass(seed, cmds, lot_cost, first_id)
        same_book = same_book and bare_live == engine_live
        share = _share(tp, bare)
        rounds.append({"engine": tp, "bare_book": bare, "engine_share": share})
        log(
            f"  engine: round {number + 1}: {tp['commands_per_s']:,.0f} commands/s, bare book"
            f" {bare['commands_per_s']:,.0f} (the engine does {share:.1%} of that)"
        )
        gc.collect()
    same_tp = None if None in replays else all(replays)
    throughput = _median_pass([r["engine"] for r in rounds])
    bare = _median_pass([r["bare_book"] for r in rounds])
    bare["same_book_as_engine"] = same_book
    bare["engine_share"] = statistics.median(r["engine_share"] for r in rounds)
    log(
        f"  engine: medians of {len(rounds)} rounds: {throughput['commands_per_s']:,.0f}"
        f" commands/s, bare book {bare['commands_per_s']:,.0f}"
        f" (the engine does {bare['engine_share']:.1%} of that)"
    )

    k = min(spec.profile_commands, len(cmds))
    engine = fresh_engine(markets, spec, seed)
    profile = profile_pass(engine, cmds[:k])
    del engine, shadow
    gc.unfreeze()
    gc.collect()
    return {
        "spec": spec.__dict__,
        "symbol": SYMBOL,
        "stream_build_s": build_s,
        "seed_orders": len(seed),
        "planned_mix": dict(planned),
        "planned_mix_share": {k: v / len(cmds) for k, v in planned.items()},
        "book_before": book_before,
        "book_after": book_after,
        "timer_overhead_ns": timer_overhead_ns(),
        "latency": latency,
        "throughput": throughput,
        "bare_book": bare,
        "rounds": rounds,
        "deterministic_replay": {"latency_pass": same, "throughput_pass": same_tp},
        "profile": profile,
    }


def _median_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """The pass with the median commands per CPU-second (per second when CPU time is missing)."""
    cpu = all(p.get("commands_per_cpu_s") for p in passes)
    key = "commands_per_cpu_s" if cpu else "commands_per_s"
    ranked = sorted(passes, key=lambda p: p[key])
    return dict(ranked[len(ranked) // 2])


def _share(throughput: dict[str, Any], bare: dict[str, Any]) -> float:
    """The engine's rate as a share of the bare book's, per CPU-second when both have it."""
    if throughput.get("commands_per_cpu_s") and bare.get("commands_per_cpu_s"):
        return float(throughput["commands_per_cpu_s"] / bare["commands_per_cpu_s"])
    return float(throughput["commands_per_s"] / bare["commands_per_s"])


def _same_state(engine: Engine, shadow: Engine) -> bool | None:
    digest = getattr(engine, "state_hash", None)
    if digest is None:
        return None
    return bool(digest() == shadow.state_hash())
