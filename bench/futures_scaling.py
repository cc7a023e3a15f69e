"""Futures engine: what one command costs as the open positions on a contract grow.

    python -m bench.futures_scaling [--positions 100,1000,10000] [--commands 1000]

For each size, a fresh engine with that many open positions on E-BTC-USDT (pairs of users
each holding one contract long and short, opened against each other at the index), then,
timed in CPU seconds per command:

- ``place_cancel``: a resting LIMIT OPEN order far from the book, then its cancel (no trade,
  no price move: the commands most of a futures venue's traffic is made of);
- ``trade``: one user rests a SELL OPEN of one contract at the index, another takes it (every
  other command trades; the mark stays at the index).

A command that may have made positions due looks for them (the liquidation sweep); these
figures show what that costs as positions grow. The mark never moves here, so what a sweep
of every position costs after a real price move is not in them.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

from tradehall.config import load_config
from tradehall.engine.commands import (
    Deposit,
    FuturesCancel,
    FuturesPlace,
    FuturesTransfer,
    SetIndexPrice,
)
from tradehall.engine.engine import Engine

CONTRACT = "E-BTC-USDT"
INDEX = 300_000
"""30,000.0 in ticks of 0.1."""
T0 = 1_700_000_000_000
FUNDS = 1_000_000 * 10**8


def engine_with_positions(positions: int) -> tuple[Engine, int]:
    """An engine with ``positions`` open positions (rounded up to even) and two more funded
    users with none; returns it and the first of those two users."""
    engine = Engine(load_config().markets)
    engine.apply(SetIndexPrice(T0, CONTRACT, INDEX))
    holders = positions + positions % 2
    for user in range(1, holders + 3):
        engine.apply(Deposit(T0, user, "USDT", FUNDS, f"scaling-{user}"))
        engine.apply(FuturesTransfer(T0, user, "USDT", FUNDS, True))
    for user in range(1, holders, 2):
        engine.apply(FuturesPlace(T0, user, CONTRACT, "BUY", "OPEN", "LIMIT", INDEX, 1))
        engine.apply(FuturesPlace(T0, user + 1, CONTRACT, "SELL", "OPEN", "LIMIT", INDEX, 1))
    return engine, holders + 1


def place_cancel_us(engine: Engine, user: int, commands: int) -> float:
    apply = engine.apply
    gc.collect()
    start = time.process_time()
    for i in range(commands // 2):
        placed = apply(
            FuturesPlace(T0 + i, user, CONTRACT, "BUY", "OPEN", "LIMIT", INDEX - 1000 - i % 50, 1)
        )
        apply(FuturesCancel(T0 + i, user, CONTRACT, placed.reply.id))
    return (time.process_time() - start) / (commands // 2 * 2) * 1e6


def trade_us(engine: Engine, maker: int, commands: int) -> float:
    apply = engine.apply
    gc.collect()
    start = time.process_time()
    for i in range(commands // 2):
        apply(FuturesPlace(T0 + i, maker, CONTRACT, "SELL", "OPEN", "LIMIT", INDEX, 1))
        apply(FuturesPlace(T0 + i, maker + 1, CONTRACT, "BUY", "OPEN", "LIMIT", INDEX, 1))
    return (time.process_time() - start) / (commands // 2 * 2) * 1e6


def run(sizes: list[int], commands: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        engine, spare = engine_with_positions(size)
        open_positions = len(engine.futures.by_contract[CONTRACT])
        rows.append(
            {
                "positions": open_positions,
                "place_cancel_us": place_cancel_us(engine, spare, commands),
                "trade_us": trade_us(engine, spare, commands),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", default="100,1000,10000")
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = run([int(n) for n in args.positions.split(",")], args.commands)
    if args.json:
        print(json.dumps(rows))
        return
    print("| Open positions | place + cancel, us per command | trading, us per command |")
    print("|---|---|---|")
    for row in rows:
        print(f"| {row['positions']:,} | {row['place_cancel_us']:.1f} | {row['trade_us']:.1f} |")


if __name__ == "__main__":
    main()
