"""Measure the store's side of signed placements and cancels (not a test; run it by hand):

    python tests/store/measure_placements.py [--variant v3 --variant v4] [--rounds 3]
        [--mode place|cancel]

Each variant is a schema: ``v3`` is the database as migrations 1-3 leave it, ``v4`` as
migration 4 leaves it; ``NAME=vN+SQL;SQL`` runs extra statements after migrating to N
(``--variant "partial=v4+DROP INDEX orders_open;CREATE INDEX ..."`` for instance). For each
variant, in rounds (A, B, A, B..., so that a change of load on the machine falls on every
variant alike):

1. a fresh SQLite store (``synchronous=FULL``, as ``tradehall serve``) in a temporary folder;
   1,000 funded accounts; a book seeded with 2 orders on each of 120 levels each side;
2. ``--warm`` placements committed in batches of ``--batch`` (the tables grow as on the wire);
3. ``--batches`` batches measured, each committed on this thread: CPU time of the commit
   (``time.thread_time``: the SQL, the WAL writes and the fsync's system time), its wall time,
   and the WAL frames it appended (the WAL file is truncated by a checkpoint every 10 commits,
   outside the timed part, as the server's background checkpointer does).

The placements are the wire benchmark's mix (``bench/loadgen.py``): a random account of 1,000,
half resting GTC 1-100 ticks behind the mid, half IOC 150 ticks through it, 1-10 lots of 1,000.
``--mode cancel`` measures cancels of resting orders placed beforehand instead.
Printed: per variant, the medians over rounds of the per-round medians.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tradehall.codes import Reject
from tradehall.config import load_config
from tradehall.engine.commands import CancelOrder, Deposit, PlaceOrder
from tradehall.exchange import Exchange
from tradehall.secretbox import SecretBox
from tradehall.store.sqlite import SQLiteStore

SYMBOL = "BTCUSDT"
MID = 3_000_000
ACCOUNTS = 1000
T0 = 1_700_000_000_000


def open_variant(path: Path, variant: str) -> SQLiteStore:
    version, _, extra = variant.partition("+")
    store = SQLiteStore(path, "full")
    store.migrate(int(version.removeprefix("v")))
    conn = store._write_conn()
    for statement in filter(None, (s.strip() for s in extra.split(";"))):
        conn.execute(statement)
    return store


class Driver:
    def __init__(self, root: Path, variant: str, seed: int) -> None:
        self.path = root / "tradehall.db"
        self.store = open_variant(self.path, variant)
        self.exchange = Exchange(load_config(), self.store, secret_box=SecretBox(b"k" * 32))
        self.exchange.recover()
        self.rng = random.Random(seed)
        self.ts = T0
        self.resting: list[tuple[int, int]] = []
        ex = self.exchange
        for i in range(ACCOUNTS):
            user = ex.create_user(f"u{i}", T0)
            ex.create_key(user.id, False, [], T0)
            ex.apply(Deposit(T0, user.id, "USDT", 1_000_000 * 10**8, f"u{i}"))
            ex.apply(Deposit(T0, user.id, "BTC", 100 * 10**8, f"b{i}"))
        ex.commit_now()
        for level in range(1, 121):
            for side, price in (("BUY", MID - level), ("SELL", MID + level)):
                for _ in range(2):
                    self.apply(PlaceOrder(T0, self.account(), SYMBOL, side, "LIMIT", price, 10_000))
        ex.commit_now()

    def account(self) -> int:
        return self.rng.randrange(ACCOUNTS) + 1

    def apply(self, cmd: Any) -> Any:
        try:
            return self.exchange.apply(cmd)
        except Reject:
            return None

    def place(self) -> None:
        rng = self.rng
        self.ts += 1
        buy = rng.random() < 0.5
        side = "BUY" if buy else "SELL"
        qty = rng.randint(1, 10) * 1000
        if rng.random() < 0.5:
            offset = rng.randint(1, 100)
            price = MID - offset if buy else MID + offset
            self.apply(PlaceOrder(self.ts, self.account(), SYMBOL, side, "LIMIT", price, qty))
        else:
            price = MID + 150 if buy else MID - 150
            cmd = PlaceOrder(self.ts, self.account(), SYMBOL, side, "LIMIT", price, qty, tif="IOC")
            self.apply(cmd)

    def far_order(self) -> None:
        """A resting order far from the top, to be cancelled later (the cancel scenario)."""
        rng = self.rng
        account = self.account()
        buy = rng.random() < 0.5
        price = MID - 2000 - rng.randint(0, 499) if buy else MID + 2000 + rng.randint(0, 499)
        side = "BUY" if buy else "SELL"
        reply = self.apply(PlaceOrder(self.ts, account, SYMBOL, side, "LIMIT", price, 1000))
        if reply is not None:
            self.resting.append((account, reply.id))

    def cancel(self) -> None:
        account, order_id = self.resting.pop(self.rng.randrange(len(self.resting)))
        self.ts += 1
        self.apply(CancelOrder(self.ts, account, SYMBOL, order_id))

    def wal_bytes(self) -> int:
        try:
            return os.path.getsize(f"{self.path}-wal")
        except OSError:
            return 0

    def truncate_wal(self) -> None:
        self.store._write_conn().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def commit(self) -> tuple[float, float, int]:
        batch = self.exchange.take_pending()
        wal = self.wal_bytes()
        cpu, wall = time.thread_time(), time.perf_counter()
        self.store.commit(batch)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        frames = (self.wal_bytes() - wal) // (4096 + 24)
        return cpu, wall, frames


def run_variant(variant: str, args: argparse.Namespace, seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="measure-placements-") as tmp:
        d = Driver(Path(tmp), variant, seed)
        step = d.far_order if args.mode == "cancel" else d.place
        for n in range(args.warm):
            step()
            if n % args.batch == args.batch - 1:
                d.exchange.commit_now()
                if n % (args.batch * 10) == 0:
                    d.truncate_wal()
        d.exchange.commit_now()
        if args.mode == "cancel":
            for _ in range(args.batch * args.batches - len(d.resting)):
                d.far_order()
            d.exchange.commit_now()
        d.truncate_wal()
        cpus, walls, frames = [], [], []
        for n in range(args.batches):
            for _ in range(args.batch):
                d.cancel() if args.mode == "cancel" else d.place()
            cpu, wall, pages = d.commit()
            cpus.append(cpu)
            walls.append(wall)
            frames.append(pages)
            if n % 10 == 9:
                d.truncate_wal()
        d.store.close()
        return {
            "cpu_us_per_request": statistics.median(cpus) / args.batch * 1e6,
            "wall_ms_per_commit": statistics.median(walls) * 1e3,
            "wal_pages_per_commit": statistics.median(frames),
            "db_mib": Path(tmp, "tradehall.db").stat().st_size / 2**20,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", help="repeat; default v3 and v4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("place", "cancel"), default="place")
    parser.add_argument("--warm", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=60)
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    variants: dict[str, str] = {}
    for v in args.variant or ("v3", "v4"):
        name, eq, variant = v.partition("=")
        variants[name] = variant if eq else v
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, variant in variants.items():
            result = run_variant(variant, args, seed=r)
            runs[name].append(result)
            print(
                f"round {r + 1} {name:<12} " + "  ".join(f"{k} {v:.2f}" for k, v in result.items())
            )
    print(f"\n{args.mode}, batches of {args.batch}: medians over {args.rounds} rounds")
    for name, results in runs.items():
        keys = results[0].keys()
        line = "  ".join(f"{k} {statistics.median(r[k] for r in results):.2f}" for k in keys)
        print(f"{name:<12} {line}")


if __name__ == "__main__":
    main()
