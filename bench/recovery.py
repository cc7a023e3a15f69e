"""Part 4, recovery: how long a restart takes with many open orders and a long trade history.

One data folder is built and measured at each size of the open book:

1. History: ``history_trades`` trades. Through the engine and the store (``Exchange.apply`` +
   ``commit_now``: orders, trades, ledger, balances, klines) as long as, at the rate of the last
   25,000 trades, the whole history would be done within ``max_engine_minutes``; past that
   point the remaining trades are inserted with ``executemany`` straight into the store's
   tables (a trade row, one closed FILLED order row per trade, and the klines they make), which
   recovery reads the same way. The report says how many went which way. Those inserted
   trades have no ledger rows: recovery never reads the ledger.
2. Users with an API key each, funded by deposits (through the exchange).
3. Open orders, through the exchange, committed in batches of 50,000, until the next size.
4. At each size: the recovery of ``tradehall serve`` (``Exchange.recover()`` and the freeze
   that follows it) timed in a fresh process (``repeats`` times; the OS page cache is warm, as
   on a restart of a running machine), ``store.load`` timed alone, the RSS, and the wall time
   of a real ``tradehall serve`` from spawn to its first answer.

    python -m bench.recovery probe DB_PATH     # one timed recovery, prints JSON
"""

from __future__ import annotations

import gc
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    MID_TICKS,
    SYMBOL,
    kill,
    pinned,
    python,
    rss_bytes,
    run_json,
)
from tradehall.config import load_config
from tradehall.datadir import DataDir
from tradehall.engine.commands import Deposit, PlaceOrder
from tradehall.exchange import Exchange
from tradehall.marketdata import INTERVALS, bar_open
from tradehall.server import recover_for_serving
from tradehall.store.base import collector_paused
from tradehall.store.factory import open_store
from tradehall.store.sqlite import SQLiteStore

T_HISTORY = 1_690_000_000_000
TRADE_SPACING_MS = 50
COMMIT_EVERY = 50_000
BAND = 5000


@dataclass(frozen=True)
class RecoverySpec:
    open_orders: tuple[int, ...] = (100_000, 1_000_000)
    history_trades: int = 10_000_000
    accounts: int = 10_000
    repeats: int = 3
    max_engine_minutes: float = 15.0
    keep_data: bool = False


# --------------------------------------------------------------------------- measuring


def probe(db_path: str) -> dict[str, Any]:
    """One recovery in this (fresh) process, as ``tradehall serve`` does it
    (``recover_for_serving``: ``Exchange.recover()``, then what it built frozen out of the
    garbage collector's sight before the collector runs again)."""
    rss0 = rss_bytes()
    cfg = load_config()
    t0 = time.perf_counter()
    journaled = open_store("", Path(db_path).parent, synchronous=cfg.server.sqlite_synchronous)
    journaled.migrate()
    journaled.start_appending()
    box = DataDir(Path(db_path).parent).secret_box()
    exchange = Exchange(cfg, journaled, secret_box=box)
    recover_for_serving(exchange)  # the tables, then the journal after them
    recover_s = time.perf_counter() - t0
    tail = journaled.head - exchange.projected
    store = journaled.projections
    rss1 = rss_bytes()
    open_orders = sum(len(v) for v in exchange.engine.spot.by_account.values())
    t1 = time.perf_counter()
    with collector_paused():  # as in Exchange.recover
        snap = store.load(list(cfg.markets.pairs), {iv.name: 301 for iv in INTERVALS})
    load_s = time.perf_counter() - t1
    loaded = len(snap.open_orders)
    del snap
    journaled.close()
    return {
        "recover_s": recover_s,
        "journal_records_replayed": tail,
        "store_load_s": load_s,
        "open_orders": open_orders,
        "loaded_rows": loaded,
        "users": len(exchange.users),
        "rss_before": rss0,
        "rss_after_recover": rss1,
    }


def server_restart(data_dir: Path, plan: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Spawn ``tradehall serve`` on the folder; seconds until it announces and answers."""
    from bench.wire import start_announcing

    cmd = [python(), "-m", "tradehall", "serve", "--port", "0", "--json"]
    cmd += ["--data-dir", str(data_dir)]
    t0 = time.perf_counter()
    proc, _ = start_announcing(
        pinned(cmd, plan["server"], plan),
        data_dir.parent / "server-restart.log",
        "/spot/open/sapi/v1/ping",
        timeout,
    )
    ready = time.perf_counter() - t0
    try:
        from bench.common import process_cpu_seconds

        cpu = process_cpu_seconds(proc.pid)
        rss = rss_bytes(proc.pid)
    finally:
        kill(proc, grace=60)
    return {"spawn_to_first_answer_s": ready, "server_cpu_s": cpu, "server_rss": rss}


# --------------------------------------------------------------------------- building


class Builder:
    def __init__(self, root: Path, spec: RecoverySpec, log: Any) -> None:
        self.root = root
        self.spec = spec
        self.log = log
        self.data_dir = root / "data"
        self.data_dir.mkdir(parents=True)
        self.db_path = self.data_dir / "tradehall.db"
        self.cfg = load_config()
        self.rng = random.Random(11)
        self.exchange: Exchange | None = None
        self.placed = 0

    def open_exchange(self) -> Exchange:
        store = SQLiteStore(self.db_path, "normal")
        store.migrate()
        exchange = Exchange(self.cfg, store, secret_box=DataDir(self.data_dir).secret_box())
        exchange.recover()
        self.exchange = exchange
        return exchange

    # ---------------------------------------------------------------- history

    def history_through_engine(
        self, exchange: Exchange, trades: int, accounts: int, budget_s: float
    ) -> dict[str, Any]:
        """Trades through the exchange and the store: each a resting SELL taken by a crossing
        BUY of another account. Stops early once, at the rate of the last 25,000 trades,
        finishing would take longer than ``budget_s`` in all."""
        started = time.perf_counter()
        chunk_start = started
        rng = self.rng
        rates: list[float] = []
        projected = 0.0
        done = 0
        for i in range(trades):
            ts = T_HISTORY + i * TRADE_SPACING_MS
            price = MID_TICKS + rng.randint(-200, 200)
            qty = rng.randint(1, 20) * 1000
            seller = rng.randint(1, accounts)
            buyer = seller % accounts + 1
            exchange.apply(PlaceOrder(ts, seller, SYMBOL, "SELL", "LIMIT", price, qty))
            exchange.apply(PlaceOrder(ts, buyer, SYMBOL, "BUY", "LIMIT", price, qty))
            done = i + 1
            if done % 5000 == 0:
                exchange.commit_now()
            if done % 25_000 == 0 and done < trades:
                now = time.perf_counter()
                rates.append(25_000 / (now - chunk_start))
                chunk_start = now
                projected = now - started + (trades - done) / rates[-1]
                if projected > budget_s:
                    break
        exchange.commit_now()
        seconds = time.perf_counter() - started
        return {
            "trades": done,
            "seconds": seconds,
            "trades_per_s": done / seconds if seconds else None,
            "first_chunk_trades_per_s": rates[0] if rates else None,
            "last_chunk_trades_per_s": rates[-1] if rates else None,
            "projected_total_s": projected or seconds,
        }

    def history_through_sql(self, trades: int) -> float:
        """Trade, closed-order and kline rows straight into the tables, after whatever is
        there (no exchange may have the folder open: reopen it afterwards, so that its id
        counters start after these rows)."""
        started = time.perf_counter()
        conn = sqlite3.connect(self.db_path, isolation_level=None)
        first_trade = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM trades").fetchone()[0]
        first_order = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM orders").fetchone()[0]
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-1000000")
        # Bulk load: drop the secondary indexes of the two big tables and build them again
        # afterwards from their own definitions (same end state, much faster than growing
        # them row by row).
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name IN ('trades', 'orders') AND sql IS NOT NULL"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        pair = self.cfg.markets.pairs[SYMBOL]
        rng = self.rng
        accounts = self.spec.accounts
        minute: dict[int, list[int]] = {}
        price = MID_TICKS
        chunk = 200_000
        trade_sql = (
            "INSERT INTO trades (id, symbol, price, qty, quote, time, taker_side, bid_order,"
            " ask_order, bid_account, ask_account, bid_fee, ask_fee)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
        )
        order_sql = (
            "INSERT INTO orders (id, account, symbol, side, type, tif, price, qty, quote_qty,"
            " filled, filled_quote, held, status, client_id, time, updated)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        )
        fee = 10**8
        end = first_trade + trades - 1
        order_offset = first_order - first_trade
        for start in range(first_trade, end + 1, chunk):
            trade_rows = []
            order_rows = []
            for i in range(start, min(end, start + chunk - 1) + 1):
                price += rng.randint(-3, 3)
                qty = rng.randint(1, 50) * 1000
                quote = price * qty * pair.quote_per_tick_lot
                base = qty * pair.base_per_lot
                ts = T_HISTORY + (i - 1) * TRADE_SPACING_MS
                buy = i & 1
                taker_acct = rng.randint(1, accounts)
                maker_acct = rng.randint(1, accounts)
                bid_acct, ask_acct = (taker_acct, maker_acct) if buy else (maker_acct, taker_acct)
                bid_fee = base * (pair.taker_fee if buy else pair.maker_fee) // fee
                ask_fee = quote * (pair.maker_fee if buy else pair.taker_fee) // fee
                order_id = i + order_offset
                maker_id = max(1, order_id - 1)
                bid_order, ask_order = (order_id, maker_id) if buy else (maker_id, order_id)
                side = "BUY" if buy else "SELL"
                trade_rows.append(
                    (i, SYMBOL, price, qty, quote, ts, side, bid_order, ask_order,
                     bid_acct, ask_acct, bid_fee, ask_fee)
                )  # fmt: skip
                order_rows.append(
                    (order_id, taker_acct, SYMBOL, side, "LIMIT", "GTC", price, qty, 0, qty,
                     quote, 0, "FILLED", "", ts, ts)
                )  # fmt: skip
                bar = minute.get(ts - ts % 60_000)
                if bar is None:
                    minute[ts - ts % 60_000] = [price, price, price, price, qty]
                else:
                    bar[1] = max(bar[1], price)
                    bar[2] = min(bar[2], price)
                    bar[3] = price
                    bar[4] += qty
            conn.execute("BEGIN")
            conn.executemany(trade_sql, trade_rows)
            conn.executemany(order_sql, order_rows)
            conn.execute("COMMIT")
            done = min(end, start + chunk - 1) - first_trade + 1
            if done % 2_000_000 < chunk:
                rate = done / (time.perf_counter() - started)
                self.log(f"  recovery: history {done:,} trades ({rate:,.0f}/s)")
        self.log(f"  recovery: history rows in; building {len(indexes)} indexes")
        for _, sql in indexes:
            conn.execute(sql)
        bars: dict[tuple[str, int], list[int]] = {}
        for open_time in sorted(minute):
            o, h, lo, c, v = minute[open_time]
            for interval in INTERVALS:
                key = (interval.name, bar_open(interval, open_time))
                agg = bars.get(key)
                if agg is None:
                    bars[key] = [o, h, lo, c, v]
                else:
                    agg[1] = max(agg[1], h)
                    agg[2] = min(agg[2], lo)
                    agg[3] = c
                    agg[4] += v
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO klines (symbol, interval, open_time, open, high, low, close, volume)"
            " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (symbol, interval, open_time) DO UPDATE SET"
            " high = MAX(high, excluded.high), low = MIN(low, excluded.low),"
            " close = excluded.close, volume = volume + excluded.volume",
            [(SYMBOL, name, t, *agg) for (name, t), agg in bars.items()],
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return time.perf_counter() - started

    # ---------------------------------------------------------------- users, open orders

    def _users(self, exchange: Exchange, accounts: int) -> None:
        for i in range(accounts):
            user = exchange.create_user(f"bench-{i}", T_HISTORY)
            exchange.create_key(user.id, False, [], T_HISTORY)
            exchange.apply(Deposit(T_HISTORY, user.id, "USDT", 1_000_000 * 10**8, f"u{user.id}"))
            exchange.apply(Deposit(T_HISTORY, user.id, "BTC", 100 * 10**8, f"b{user.id}"))
            if (i + 1) % COMMIT_EVERY == 0:
                exchange.commit_now()
        exchange.commit_now()

    def open_orders_until(self, exchange: Exchange, total: int) -> float:
        started = time.perf_counter()
        rng = self.rng
        accounts = self.spec.accounts
        ts = T_HISTORY + (self.spec.history_trades + 10) * TRADE_SPACING_MS
        while self.placed < total:
            j = self.placed
            account = j % accounts + 1
            qty = rng.randint(1, 10) * 1000
            if j % 2 == 0:
                price = MID_TICKS - 1 - rng.randrange(BAND)
                cmd = PlaceOrder(ts + j, account, SYMBOL, "BUY", "LIMIT", price, qty)
            else:
                price = MID_TICKS + 1 + rng.randrange(BAND)
                cmd = PlaceOrder(ts + j, account, SYMBOL, "SELL", "LIMIT", price, qty)
            exchange.apply(cmd)
            self.placed += 1
            if self.placed % COMMIT_EVERY == 0:
                exchange.commit_now()
        exchange.commit_now()
        return time.perf_counter() - started

    def checkpoint(self) -> None:
        conn = sqlite3.connect(self.db_path, isolation_level=None)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()


# --------------------------------------------------------------------------- the part


def run(spec: RecoverySpec, plan: dict[str, Any], log: Any = print) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="tradehall-bench-recovery-"))
    out: dict[str, Any] = {"spec": asdict(spec), "data_folder": str(root)}
    try:
        builder = Builder(root, spec, log)
        per_order_cap = 1000  # the engine's open-order cap per account and pair
        if max(spec.open_orders, default=0) > spec.accounts * per_order_cap:
            raise ValueError("more open orders than the accounts may hold")
        exchange = builder.open_exchange()
        builder._users(exchange, spec.accounts)
        budget = spec.max_engine_minutes * 60
        engine = builder.history_through_engine(
            exchange, spec.history_trades, spec.accounts, budget
        )
        rest = spec.history_trades - engine["trades"]
        sql_s = 0.0
        if rest:
            log(
                f"  recovery: engine+store path at {engine['last_chunk_trades_per_s']:,.0f}"
                f" trades/s would need {engine['projected_total_s'] / 60:.0f} min for"
                f" {spec.history_trades:,} trades (budget {spec.max_engine_minutes:g} min):"
                f" {rest:,} trades inserted with executemany"
            )
            exchange.store.close()
            sql_s = builder.history_through_sql(rest)
            exchange = builder.open_exchange()
        out["history"] = {
            "trades": spec.history_trades,
            "through_engine": engine,
            "through_sql": {"trades": rest, "seconds": sql_s},
            "generation_s": engine["seconds"] + sql_s,
            "method": "engine" if not rest else "engine, then executemany",
            "why": (
                "through Exchange.apply + commit_now (engine and store)"
                if not rest
                else f"the engine+store path ran at {engine['trades_per_s']:,.0f} trades/s"
                f" (last {engine['last_chunk_trades_per_s']:,.0f}/s) and would have needed about"
                f" {engine['projected_total_s'] / 60:.1f} min, over the"
                f" {spec.max_engine_minutes:g} min budget: after {engine['trades']:,} trades"
                " through it, the remaining trade, closed-order and kline rows were inserted"
                " with executemany (recovery reads them the same way; no ledger rows for them)"
            ),
        }
        steps = []
        for total in spec.open_orders:
            seconds = builder.open_orders_until(exchange, total)
            gc.collect()
            builder.checkpoint()
            log(f"  recovery: {total:,} open orders in the store; measuring")
            runs = [
                run_json([python(), "-m", "bench.recovery", "probe", str(builder.db_path)], 3600)
                for _ in range(max(1, spec.repeats))
            ]
            times = [r["recover_s"] for r in runs]
            median = statistics.median(times)
            orders = runs[0]["open_orders"]
            restart = server_restart(builder.data_dir, plan)
            step = {
                "open_orders": orders,
                "history_trades": spec.history_trades,
                "accounts": spec.accounts,
                "generation_s": seconds,
                "recover_s_runs": times,
                "recover_s": median,
                "open_orders_per_s": orders / median if median else None,
                "us_per_open_order": median / orders * 1e6 if orders else None,
                "store_load_s": statistics.median(r["store_load_s"] for r in runs),
                "rss_after_recover": runs[0]["rss_after_recover"],
                "rss_delta": runs[0]["rss_after_recover"] - runs[0]["rss_before"],
                "db_bytes": sum(p.stat().st_size for p in builder.data_dir.glob("tradehall.db*")),
                "server_restart": restart,
            }
            steps.append(step)
            log(
                f"  recovery: {orders:,} open orders recovered in {median:.2f} s"
                f" ({step['open_orders_per_s']:,.0f}/s); serve answers after"
                f" {restart['spawn_to_first_answer_s']:.2f} s"
            )
        exchange.store.close()
        out["steps"] = steps
        return out
    finally:
        if not spec.keep_data:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        print(json.dumps(probe(sys.argv[2])))
