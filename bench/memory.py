"""Part 5, memory: bytes per resting order and per account, measured in fresh processes.

- ``tracemalloc``: Python allocations still alive after placing N resting orders on one book
  (or funding M accounts), minus before, divided by N (or M). The commands and their results
  are dropped as they go, as in the server: what stays is what the engine keeps.
- RSS: the same workload in another process without tracemalloc; resident set size after minus
  before (includes allocator slack and fragmentation, so usually a little higher).

    python -m bench.memory '{"what": "orders", "n": 100000, "accounts": 10000, "mode": "trace"}'
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
import tracemalloc
from typing import Any

from bench.common import MID_TICKS, SYMBOL, python, rss_bytes, run_json
from tradehall.config import load_config
from tradehall.engine.commands import Deposit, PlaceOrder
from tradehall.engine.engine import Engine

BAND = 5000
"""Resting orders are spread over this many ticks each side of the mid."""


def resting_order(rng: random.Random, j: int, accounts: int) -> PlaceOrder:
    account = j % accounts + 1
    if j % 2 == 0:
        return PlaceOrder(
            1, account, SYMBOL, "BUY", "LIMIT", MID_TICKS - 1 - rng.randrange(BAND),
            rng.randint(1, 10) * 1000,
        )  # fmt: skip
    return PlaceOrder(
        1, account, SYMBOL, "SELL", "LIMIT", MID_TICKS + 1 + rng.randrange(BAND),
        rng.randint(1, 10) * 1000,
    )  # fmt: skip


def fund(engine: Engine, accounts: int, usdt: int, btc: int) -> None:
    for a in range(1, accounts + 1):
        engine.apply(Deposit(1, a, "USDT", usdt, f"u{a}"))
        engine.apply(Deposit(1, a, "BTC", btc, f"b{a}"))


def measure(what: str, n: int, accounts: int, mode: str) -> dict[str, Any]:
    markets = load_config().markets
    trace = mode == "trace"
    if trace:
        tracemalloc.start()
    engine = Engine(markets)
    if what == "orders":
        fund(engine, accounts, 1_000_000 * 10**8, 100 * 10**8)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0] if trace else rss_bytes()
    started = time.perf_counter()
    if what == "orders":
        rng = random.Random(5)
        for j in range(n):
            result = engine.apply(resting_order(rng, j, accounts))
            assert result.reply.status == "NEW"
        del result
    elif what == "accounts":
        fund(engine, n, 10_000 * 10**8, 10**8)
    else:
        raise ValueError(what)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if trace else rss_bytes()
    out: dict[str, Any] = {
        "what": what,
        "mode": mode,
        "n": n,
        "bytes": after - before,
        "bytes_per_item": (after - before) / n,
        "seconds": time.perf_counter() - started,
    }
    if what == "orders":
        out["accounts"] = accounts
        try:  # engine internals: may change under the engine optimiser
            book = engine.spot.books[SYMBOL]
            out["levels"] = len(book.bids.depth(10**9)) + len(book.asks.depth(10**9))
        except Exception as exc:
            out["levels"] = repr(exc)
    if trace:
        snapshot = tracemalloc.take_snapshot()
        top = snapshot.statistics("lineno")[:8]
        out["top_allocations"] = [
            {"where": str(stat.traceback), "bytes": stat.size, "count": stat.count} for stat in top
        ]
        tracemalloc.stop()
    return out


def run(orders: int, accounts_for_orders: int, accounts: int, log: Any = print) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for what, n in (("orders", orders), ("accounts", accounts)):
        for mode in ("trace", "rss"):
            job = {"what": what, "n": n, "accounts": accounts_for_orders, "mode": mode}
            results[f"{what}_{mode}"] = run_json(
                [python(), "-m", "bench.memory", json.dumps(job)], timeout=1800
            )
        log(
            f"  memory: {what}: {results[f'{what}_trace']['bytes_per_item']:.0f} B (tracemalloc),"
            f" {results[f'{what}_rss']['bytes_per_item']:.0f} B (RSS) each"
        )
    results["bytes_per_resting_order"] = results["orders_trace"]["bytes_per_item"]
    results["bytes_per_resting_order_rss"] = results["orders_rss"]["bytes_per_item"]
    results["bytes_per_account"] = results["accounts_trace"]["bytes_per_item"]
    results["bytes_per_account_rss"] = results["accounts_rss"]["bytes_per_item"]
    results["notes"] = (
        "An account here is two funded assets (USDT and BTC) through two deposits: its two"
        " balances plus the two transfer records kept for tx-id idempotency. Orders rest on one"
        f" book, spread over {BAND} ticks each side of the mid."
    )
    return results


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    print(json.dumps(measure(job["what"], job["n"], job["accounts"], job["mode"])))
