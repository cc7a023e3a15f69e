"""Measure what the open-orders index costs the orders table's writes (not a test; run it by
hand), at schema version 5 (``(status, id)``: every order) and 6 (a partial index holding the
open orders alone):

    python tests/store/measure_open_index.py [--rows N] [--rounds R]

Each store commits the same batches of 1,000 order upserts: half new resting orders, a tenth
filled on arrival, the rest ending (cancelled) orders that rested earlier, at random. Printed:
the process CPU per order row of each round, alternating the versions.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import msgspec

from tradehall.engine.orders import OrderState
from tradehall.store.batch import Batch
from tradehall.store.sqlite import SQLiteStore

BATCH = 1000


def batches(rows: int, seed: int = 1) -> list[Batch]:
    rng = random.Random(seed)
    resting: list[OrderState] = []
    out: list[Batch] = []
    next_id = 1
    for _ in range(rows // BATCH):
        batch = Batch()
        for _ in range(BATCH):
            draw = rng.random()
            ts = 1_700_000_000_000 + next_id
            if draw < 0.5 or (draw >= 0.6 and not resting):
                order = OrderState(
                    next_id, rng.randint(1, 10_000), "BTCUSDT", "BUY", "LIMIT", "GTC",
                    3_000_000, 10_000, 0, 0, 0, 30_000_000_000, "NEW", "", ts, ts,
                )  # fmt: skip
                resting.append(order)
                batch.orders[next_id] = order
                next_id += 1
            elif draw < 0.6:
                batch.orders[next_id] = OrderState(
                    next_id, rng.randint(1, 10_000), "BTCUSDT", "SELL", "LIMIT", "IOC",
                    3_000_000, 10_000, 0, 10_000, 30_000_000_000, 0, "FILLED", "", ts, ts,
                )  # fmt: skip
                next_id += 1
            else:
                ended = resting.pop(rng.randrange(len(resting)))
                batch.orders[ended.id] = msgspec.structs.replace(
                    ended, held=0, status="CANCELED", updated=ts
                )
        out.append(batch)
    return out


def cpu_per_row(version: int, work: list[Batch], folder: Path) -> float:
    store = SQLiteStore(folder / f"v{version}-{time.monotonic_ns()}.db", "normal")
    try:
        store.migrate(version)
        start = time.process_time()
        for batch in work:
            store.commit(batch)
        return (time.process_time() - start) / sum(len(b.orders) for b in work) * 1e6
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = batches(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            figures = {v: cpu_per_row(v, work, Path(tmp)) for v in (5, 6)}
            print(
                f"round {number + 1}: version 5 {figures[5]:.2f} us per order row,"
                f" version 6 {figures[6]:.2f} ({figures[6] / figures[5] - 1:+.1%})"
            )


if __name__ == "__main__":
    main()
