"""Measure one group commit on each backend (not a test; run it by hand):

    python tests/store/measure_commit.py [--pg URL] [--batches N] [--orders K]

A batch is K order upserts + K/2 trades + 3K ledger rows + balance and kline upserts. The
default K = 200 (200 orders, 100 trades, 600 ledger rows, 60 balances, 8 klines) is about what
one commit carries under load; K = 1 is an idle server's commit of a single request. Each
backend gets a fresh store (PostgreSQL: a scratch schema, dropped afterwards); the median and
p90 of the commit time are printed, with the ratio to SQLite (synchronous=FULL).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tradehall.engine.events import Trade
from tradehall.engine.orders import OrderState
from tradehall.marketdata import Bar
from tradehall.store.base import Store
from tradehall.store.batch import Batch, LedgerRow
from tradehall.store.postgres import PgConnection, PostgresStore
from tradehall.store.sqlite import SQLiteStore


def realistic_batch(n: int, orders: int = 200) -> Batch:
    batch = Batch()
    base_order, base_trade = n * orders + 1, n * orders + 1
    ts = 1_700_000_000_000 + n * 1000
    accounts = min(30, orders)
    for i in range(orders):
        oid = base_order + i
        batch.orders[oid] = OrderState(
            oid, 1 + i % 30, "BTCUSDT", "BUY" if i % 2 else "SELL", "LIMIT", "GTC",
            3_000_000 + i, 10_000, 0, 5_000 * (i % 3), 0, 30_000_000_000, "NEW",
            f"client-{oid}", ts, ts,
        )  # fmt: skip
    for i in range(orders // 2):
        tid = base_trade + i
        batch.trades.append(
            Trade(tid, "BTCUSDT", 3_000_000, 5_000, 15_000_000_000, ts, "BUY",
                  base_order + 2 * i, base_order + 2 * i + 1, 1 + i % 30, 2 + i % 30, 5, 15_000)
        )  # fmt: skip
    for i in range(3 * orders):
        batch.ledger.append(
            LedgerRow(1 + i % accounts, "USDT" if i % 2 else "BTC", -(2**40) + i, 2**40, "trade",
                      base_trade + i // 6, ts)
        )  # fmt: skip
    for account in range(1, accounts + 1):
        for asset in ("BTC", "USDT"):
            batch.balances[(account, asset)] = (2**62 + n, 2**40)
    for k, interval in enumerate(("1min", "5min", "15min", "30min", "60min", "1day", "1week")):
        batch.bars[("BTCUSDT", interval, k)] = Bar(k, 3_000_000, 3_000_100, 2_999_900, 3_000_050, n)
    batch.bars[("BTCUSDT", "1month", 0)] = Bar(0, 1, 2, 1, 2, n)
    return batch


class PerTablePostgres(PostgresStore):
    """The variant without the outer pipeline: each executemany syncs on its own."""

    @contextmanager
    def _batch_transaction(self, conn: PgConnection) -> Iterator[None]:
        with conn.transaction():
            yield


@contextmanager
def pg_schema(url: str) -> Iterator[str]:
    schema = f"measure_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in url else "?"
            yield f"{url}{sep}options=-csearch_path%3D{schema}"
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def measure(store: Store, batches: int, orders: int) -> list[float]:
    store.migrate()
    for n in range(5):  # warm up: connection, ledger id, prepared statements
        store.commit(realistic_batch(n, orders))
    times = []
    for n in range(5, batches + 5):
        batch = realistic_batch(n, orders)
        start = time.perf_counter()
        store.commit(batch)
        times.append((time.perf_counter() - start) * 1000)
    store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default="postgresql://127.0.0.1:5432/test")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--orders", type=int, default=200)
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("full", "normal"):
            store = SQLiteStore(Path(tmp) / f"{sync}.db", sync)
            results[f"sqlite synchronous={sync}"] = measure(store, args.batches, args.orders)
    variants: list[tuple[str, Callable[[str], Store]]] = [
        ("postgresql, one pipeline per commit", PostgresStore),
        ("postgresql, executemany per table", PerTablePostgres),
    ]
    for name, make in variants:
        with pg_schema(args.pg) as url:
            results[name] = measure(make(url), args.batches, args.orders)
    reference = statistics.median(results["sqlite synchronous=full"])
    print(f"{'store':<40} {'median ms':>10} {'p90 ms':>8} {'vs sqlite full':>15}")
    for name, times in results.items():
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{name:<40} {median:>10.2f} {p90:>8.2f} {median / reference:>14.2f}x")


if __name__ == "__main__":
    main()
