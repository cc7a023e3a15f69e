"""Futures engine: what one command costs as the open positions on a contract grow.

    python -m bench.futures_scaling [--positions 100,1000,10000] [--commands 1000]

For each size, a fresh engine with that many open positions on E-BTC-USDT (pairs of users
each holding one contract long and short, opened against each other at the index) and as
many waiting conditional orders (stop-losses far from the price), then, timed in CPU seconds:

- ``place_cancel``: a resting LIMIT OPEN order far from the book, then its cancel (no trade,
  no price move: the commands most of a futures venue's traffic is made of), per command;
- ``trade``: one user rests a SELL OPEN of one contract at the index, another takes it (every
  other command trades; the mark stays at the index), per command;
- ``mark_move``: the index moves by a tick and the scheduler's tick follows (the mark moves:
  liquidation looks for positions it made due, triggers are checked), per move;
- ``first_move``: the first such move, where the liquidation sweep looks at every position
  once to draw its risk bands (after a start, a recovery);
- ``funding``: a tick that settles funding (every position pays or receives, so every
  position is looked at again).

A command that may have made positions due looks for them (the liquidation sweep); these
figures show what that costs as positions grow.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from bench.common import Column, scaling_main
from tradehall.config import load_config
from tradehall.engine.commands import (
    Deposit,
    FuturesCancel,
    FuturesPlace,
    FuturesTick,
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
    for user in range(1, holders + 1):  # a stop-loss each, far below / above the price
        side, trigger = ("SELL", INDEX // 2) if user % 2 else ("BUY", INDEX * 2)
        engine.apply(
            FuturesPlace(
                T0, user, CONTRACT, side, "CLOSE", "MARKET", 0, 1, trigger_type=1,
                trigger_price=trigger - user % 1000,
            )
        )  # fmt: skip
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


def move_ms(engine: Engine, ts: int, moves: int) -> tuple[float, int]:
    """CPU ms per index move (by one tick, up and down in turn) and the tick after it."""
    apply = engine.apply
    gc.collect()
    start = time.process_time()
    for i in range(moves):
        ts += 1000
        apply(SetIndexPrice(ts, CONTRACT, INDEX + 1 + i % 2))
        apply(FuturesTick(ts))
    return (time.process_time() - start) / moves * 1e3, ts


def funding_ms(engine: Engine, ts: int) -> tuple[float, int]:
    """CPU ms of the tick that settles the next funding interval."""
    interval = engine.futures.contracts[CONTRACT].funding_interval_ms
    ts = (ts // interval + 1) * interval
    gc.collect()
    start = time.process_time()
    engine.apply(FuturesTick(ts))
    return (time.process_time() - start) * 1e3, ts


def run(sizes: list[int], commands: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        engine, spare = engine_with_positions(size)
        row: dict[str, Any] = {
            "positions": len(engine.futures.by_contract[CONTRACT]),
            "waiting_triggers": len(engine.futures.triggers),
            "place_cancel_us": place_cancel_us(engine, spare, commands),
            "trade_us": trade_us(engine, spare, commands),
        }
        ts = T0 + commands
        row["first_move_ms"], ts = move_ms(engine, ts, 1)
        row["mark_move_ms"], ts = move_ms(engine, ts, max(2, commands // 10))
        row["funding_ms"], ts = funding_ms(engine, ts)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    columns: list[Column] = [
        (
            "Open positions (and waiting triggers)",
            lambda r: f"{r['positions']:,} ({r['waiting_triggers']:,})",
        ),
        ("place + cancel, us per command", lambda r: f"{r['place_cancel_us']:.1f}"),
        ("trading, us per command", lambda r: f"{r['trade_us']:.1f}"),
        ("mark move, ms", lambda r: f"{r['mark_move_ms']:.2f}"),
        ("first move, ms", lambda r: f"{r['first_move_ms']:.1f}"),
        ("funding, ms", lambda r: f"{r['funding_ms']:.1f}"),
    ]
    scaling_main(argv, __doc__, ("--positions", "100,1000,10000"), run, columns)


if __name__ == "__main__":
    main()
