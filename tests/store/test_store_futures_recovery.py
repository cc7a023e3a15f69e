"""Restart in the middle of futures trading: positions, margins, resting and conditional
orders, settings, prices and funding state come back exactly (same state hash), and the
recovered exchange carries on exactly as one that never stopped."""

from __future__ import annotations

import random
from pathlib import Path

from store_support import run
from support import Backend
from tradehall.engine.commands import (
    AdjustPositionMargin,
    Command,
    Deposit,
    FuturesCancel,
    FuturesPlace,
    FuturesTick,
    FuturesTransfer,
    SetIndexPrice,
    SetMarginMode,
)
from tradehall.engine.futures_model import ISOLATED

USERS = (1, 2, 3, 4)
HOUR = 3_600_000
CONTRACTS = {"E-BTC-USDT": ("USDT", 600_000), "E-BTC-USD": ("BTC", 600_000)}


def setup() -> list[Command]:
    commands: list[Command] = [Deposit(0, -1, "USDT", 10**12, "fund-usdt")]
    commands.append(Deposit(0, -1, "BTC", 10**8, "fund-btc"))
    for user in USERS:
        commands.append(Deposit(0, user, "USDT", 10**12, f"usdt-{user}"))
        commands.append(Deposit(0, user, "BTC", 10**9, f"btc-{user}"))
        commands.append(FuturesTransfer(0, user, "USDT", 2 * 10**11, True))
        commands.append(FuturesTransfer(0, user, "BTC", 2 * 10**8, True))
    for contract in CONTRACTS:
        commands.append(SetMarginMode(0, 3, contract, ISOLATED))
        commands.append(SetMarginMode(0, 4, contract, ISOLATED))
        commands.append(SetIndexPrice(0, contract, CONTRACTS[contract][1]))
    return commands


def stream(seed: int, length: int, start: int = 1) -> list[Command]:
    rng = random.Random(seed)
    out: list[Command] = []
    ts = start * 1000
    for _ in range(length):
        ts += rng.choice((1, 10, 1000, 60_000))
        contract = rng.choice(list(CONTRACTS))
        base = CONTRACTS[contract][1]
        user = rng.choice(USERS)
        roll = rng.random()
        if roll < 0.55:
            price = base + rng.randint(-30, 30) * 100
            out.append(
                FuturesPlace(
                    ts,
                    user,
                    contract,
                    rng.choice(("BUY", "SELL")),
                    rng.choice(("OPEN", "OPEN", "CLOSE")),
                    "LIMIT",
                    price=price,
                    volume=rng.randint(1, 40),
                    tif=rng.choice(("GTC", "GTC", "IOC", "POST_ONLY")),
                )
            )
        elif roll < 0.65:
            out.append(
                FuturesPlace(
                    ts,
                    user,
                    contract,
                    rng.choice(("BUY", "SELL")),
                    "CLOSE",
                    "MARKET",
                    volume=rng.randint(1, 10),
                )
            )
        elif roll < 0.72:
            side = rng.choice(("BUY", "SELL"))
            kind = rng.choice((1, 2))
            rising = (kind == 1) == (side == "BUY")
            trigger = base + (1 if rising else -1) * rng.randint(5, 30) * 100
            out.append(
                FuturesPlace(
                    ts,
                    user,
                    contract,
                    side,
                    "OPEN",
                    "LIMIT",
                    price=trigger,
                    volume=rng.randint(1, 5),
                    trigger_type=kind,
                    trigger_price=trigger,
                )
            )
        elif roll < 0.8:
            out.append(FuturesCancel(ts, user, contract, order_id=rng.randint(1, 400)))
        elif roll < 0.86:
            out.append(SetIndexPrice(ts, contract, base + rng.randint(-400, 400) * 100))
        elif roll < 0.9:
            out.append(AdjustPositionMargin(ts, user, rng.randint(1, 40), rng.randint(1, 10**8)))
        else:
            ts += rng.choice((60_000, HOUR, 8 * HOUR))
            out.append(FuturesTick(ts))
    return out


def test_futures_restart_restores_everything(backend: Backend, tmp_path: Path) -> None:
    db = tmp_path / "live"
    commands = setup() + stream(21, 700)
    live = backend.exchange(db)
    try:
        run(live, commands, 9)
        fx = live.engine.futures
        assert list(fx.all_positions()), "the stream should leave open positions"
        assert any(book.orders for book in fx.books.values())
        assert fx.triggers, "the stream should leave waiting conditional orders"
        assert any(s.funding_time for s in fx.states.values())
        live_hash = live.engine.state_hash()
    finally:
        live.store.close()
    recovered = backend.exchange(db)
    try:
        assert recovered.engine.state_hash() == live_hash
        tail = stream(22, 250, start=10**7)
        run(recovered, tail, 4)
        reference = backend.exchange(tmp_path / "reference")
        run(reference, commands + tail, 13)
        assert recovered.engine.state_hash() == reference.engine.state_hash()
        reference.store.close()
    finally:
        recovered.store.close()
