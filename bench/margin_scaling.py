"""Spot margin: what a spot command costs as the margin accounts with debt on its pair grow.

    python -m bench.margin_scaling [--accounts 0,1000,10000] [--commands 1000]

For each size, a fresh engine with that many margin accounts on BTCUSDT, each holding 1,000
USDT and a resting BUY far below the market that borrowed the rest of its value, then, timed
in CPU seconds per command, two spot accounts trading with each other (every other command
trades, at one of three prices in turn: the price moves). Every trade looks for margin
accounts it made due (the margin liquidation sweep); ``first_trade_ms`` is the first one,
which looks at every account once to draw its safe price range.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from bench.common import Column, scaling_main
from tradehall.config import load_config
from tradehall.engine.commands import Deposit, MarginTransfer, PlaceOrder
from tradehall.engine.engine import Engine
from tradehall.engine.margin import POOL_ACCOUNT

SYMBOL = "BTCUSDT"
PRICE = 3_000_000
"""30,000.00 USDT in ticks."""
T0 = 1_700_000_000_000
UNIT = 10**8


def engine_with_borrowers(accounts: int) -> Engine:
    engine = Engine(load_config().markets)
    apply = engine.apply
    apply(Deposit(T0, POOL_ACCOUNT, "USDT", 10**9 * UNIT, "pool-usdt"))
    apply(Deposit(T0, POOL_ACCOUNT, "BTC", 10**5 * UNIT, "pool-btc"))
    for user in range(1, accounts + 3):
        apply(Deposit(T0, user, "USDT", 100_000 * UNIT, f"usdt-{user}"))
        apply(Deposit(T0, user, "BTC", 10 * UNIT, f"btc-{user}"))
    apply(PlaceOrder(T0, 1, SYMBOL, "SELL", "LIMIT", PRICE, 1_000))  # a first price
    apply(PlaceOrder(T0, 2, SYMBOL, "BUY", "LIMIT", PRICE, 1_000))
    for user in range(3, accounts + 3):
        account = apply(MarginTransfer(T0, user, SYMBOL, "USDT", 1_000 * UNIT, True)).reply.id
        # 0.1 BTC at 15,000: 1,500 USDT, 500 of it borrowed.
        apply(PlaceOrder(T0, account, SYMBOL, "BUY", "LIMIT", PRICE // 2, 100_000))
    return engine


def trade_us(engine: Engine, commands: int, start: int) -> float:
    apply = engine.apply
    gc.collect()
    begin = time.process_time()
    for i in range(start, start + commands // 2):
        apply(PlaceOrder(T0 + i, 1, SYMBOL, "SELL", "LIMIT", PRICE + i % 3, 1_000))
        apply(PlaceOrder(T0 + i, 2, SYMBOL, "BUY", "LIMIT", PRICE + i % 3, 1_000))
    return (time.process_time() - begin) / (commands // 2 * 2) * 1e6


def run(sizes: list[int], commands: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        engine = engine_with_borrowers(size)
        first = trade_us(engine, 2, 0) * 2 / 1e3  # the trade and its resting order, in ms
        rows.append(
            {
                "margin_accounts": sum(a.has_debt() for a in engine.margin.accounts.values()),
                "first_trade_ms": first,
                "spot_command_us": trade_us(engine, commands, 1),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    columns: list[Column] = [
        ("Margin accounts with debt", lambda r: f"{r['margin_accounts']:,}"),
        ("spot command, us", lambda r: f"{r['spot_command_us']:.1f}"),
        ("first trade, ms", lambda r: f"{r['first_trade_ms']:.2f}"),
    ]
    scaling_main(argv, __doc__, ("--accounts", "0,1000,10000"), run, columns)


if __name__ == "__main__":
    main()
