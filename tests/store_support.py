"""Helpers shared by the store tests (tests/store/): a reproducible random spot command
stream, a runner that applies any command stream with a commit every so many commands, and a
venue populated with users, keys and a stream's history, with its fingerprint (state hash,
audit, users, keys) to compare stores by."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from support import Backend
from tradehall import operations as ops
from tradehall.codes import Reject
from tradehall.engine import audit
from tradehall.engine.commands import CancelOrder, Command, Deposit, PlaceOrder, Withdraw
from tradehall.engine.orders import FOK, GTC, IOC, POST_ONLY
from tradehall.exchange import Exchange
from tradehall.store.schema import TABLES

TS = 1_700_000_000_000


def command_stream(seed: int, length: int) -> list[Command]:
    rng = random.Random(seed)
    commands: list[Command] = []
    ts = 1_700_000_000_000
    for account in (1, 2, 3):
        commands.append(Deposit(ts, account, "USDT", 10_000_000 * 10**8, f"d-usdt-{account}"))
        commands.append(Deposit(ts, account, "BTC", 100 * 10**8, f"d-btc-{account}"))
    for i in range(length):
        ts += rng.randint(0, 2000)
        account = rng.randint(1, 3)
        roll = rng.random()
        if roll < 0.65:
            commands.append(
                PlaceOrder(
                    ts, account, "BTCUSDT", rng.choice(["BUY", "SELL"]), "LIMIT",
                    price=rng.randint(2_999_000, 3_001_000), qty=rng.randint(10, 200_000),
                    tif=rng.choice([GTC, GTC, GTC, IOC, FOK, POST_ONLY]),
                )
            )  # fmt: skip
        elif roll < 0.75:
            side = rng.choice(["BUY", "SELL"])
            commands.append(
                PlaceOrder(ts, account, "BTCUSDT", side, "MARKET", qty=rng.randint(10, 50_000))
                if side == "SELL"
                else PlaceOrder(
                    ts, account, "BTCUSDT", side, "MARKET", quote_qty=rng.randint(6, 5000) * 10**8
                )
            )
        elif roll < 0.95:
            commands.append(CancelOrder(ts, account, "BTCUSDT", order_id=rng.randint(1, i + 1)))
        else:
            commands.append(Withdraw(ts, account, "USDT", rng.randint(1, 1000) * 10**8, f"w{i}"))
    return commands


def run(exchange: Exchange, commands: list[Command], commit_every: int) -> None:
    for i, command in enumerate(commands):
        with contextlib.suppress(Reject):
            exchange.apply(command)
        if i % commit_every == 0:
            exchange.commit_now()
    exchange.commit_now()


def populate(exchange: Exchange) -> None:
    for name in ("ann", "bob", "cy"):
        exchange.create_user(name, TS)
    exchange.create_key(1, False, ["10.0.0.0/8", "127.0.0.1"], TS)
    revoked = exchange.create_key(2, True, [], TS)
    exchange.revoke_key(revoked.api_key, TS + 1)
    run(exchange, command_stream(21, 700), 9)


def fingerprint(exchange: Exchange) -> tuple[Any, ...]:
    report = ops.audit(exchange)
    assert report["ok"], report["problems"]
    assert audit.check(exchange.engine) == []
    return (
        exchange.engine.state_hash(),
        report,
        sorted(exchange.users.values(), key=lambda u: u.id),
        sorted((k.row for k in exchange.keys.values()), key=lambda r: r.api_key),
    )


def table_rows(
    backend: Backend, data_dir: Path, names: Iterable[str] = TABLES
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of the tables ``names`` (default: all), in key order, read directly from
    ``data_dir``'s database."""
    return {
        t.name: [
            tuple(row)
            for row in backend.query(
                data_dir, f"SELECT {t.column_list} FROM {t.name} ORDER BY {', '.join(t.key)}"
            )
        ]
        for t in (TABLES[name] for name in names)
    }
