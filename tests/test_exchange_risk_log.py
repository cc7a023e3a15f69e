"""Forced closes are logged (logger ``tradehall.risk``) by the engine that made them, once:
a liquidation and the auto-deleveraging it leads to, each order a line naming whose position
it closed, and a margin liquidation's end with its amounts; a replay of the same journal
records (a standby, the projector, a restart) logs nothing again."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from support import make_exchange
from tradehall.engine.commands import (
    Deposit,
    FuturesPlace,
    FuturesTransfer,
    MarginTransfer,
    PlaceOrder,
    SetIndexPrice,
)
from tradehall.engine.margin import POOL_ACCOUNT
from tradehall.engine.orders import BUY, LIMIT, MARKET, SELL
from tradehall.store.journal import Entry

BTC_F = "E-BTC-USDT"
UNIT = 10**8
TS = 1_800_000_000_000


def test_a_liquidation_and_its_deleveraging_are_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ex = make_exchange(tmp_path / "tradehall.db")
    for user in (101, 102):
        ex.apply(Deposit(TS, user, "USDT", 10_000 * UNIT, f"fund-{user}"))
        ex.apply(FuturesTransfer(TS, user, "USDT", 10_000 * UNIT, True))
    ex.apply(SetIndexPrice(TS, BTC_F, 500_000))  # 50,000.0: the operator's override
    ex.apply(FuturesPlace(TS, 102, BTC_F, SELL, "OPEN", LIMIT, 500_000, 10))
    # User 101: long 10 contracts at 10x, isolated (bankrupt at 45,000.0).
    ex.apply(FuturesPlace(TS, 101, BTC_F, BUY, "OPEN", MARKET, 0, 10, 0, 2))
    entries: list[Entry] = list(ex.pending.entries)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="tradehall.risk"):
        # The index gaps to 44,000.0 and nothing bids: the long is liquidated, and what the
        # book could not take is deleveraged against user 102's short.
        liquidating = SetIndexPrice(TS + 1_000, BTC_F, 440_000)
        ex.apply(liquidating)
    lines = [r.getMessage() for r in caplog.records if r.name == "tradehall.risk"]
    assert len(lines) == 2, lines
    deleveraged, liquidated = lines  # the counterparty's close ends first
    assert liquidated.startswith("futures liquidation: order ")
    assert liquidated.endswith("of 10 contracts of user 101's long on E-BTC-USDT (FILLED)")
    assert deleveraged.startswith("futures auto-deleveraging: order ")
    assert deleveraged.endswith(
        "closed 10 of 10 contracts of user 102's short on E-BTC-USDT (FILLED)"
    )
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "tradehall.risk")

    # The same records replayed elsewhere do the same and say nothing.
    caplog.clear()
    replica = make_exchange(tmp_path / "replica.db")
    with caplog.at_level(logging.INFO, logger="tradehall.risk"):
        replica.replay([*entries, liquidating], 1)
    assert not replica.engine.futures.user_positions(101)
    assert [r for r in caplog.records if r.name == "tradehall.risk"] == []


def test_a_margin_liquidation_is_logged_with_its_amounts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A margin account bought 0.1 BTC at 50,000 with 4,000 USDT borrowed; a trade at 44,000
    liquidates it into a bid there: one line, the amounts in USDT."""
    ex = make_exchange(tmp_path / "tradehall.db")
    pool = 10_000_000 * UNIT
    ex.apply(Deposit(TS, POOL_ACCOUNT, "USDT", pool, "pool"))
    ex.apply(Deposit(TS, 201, "USDT", 1_000 * UNIT, "alice"))
    ex.apply(Deposit(TS, 202, "BTC", 10 * UNIT, "maker-btc"))
    ex.apply(Deposit(TS, 202, "USDT", 1_000_000 * UNIT, "maker-usdt"))
    ex.apply(Deposit(TS, 203, "BTC", UNIT, "seller-btc"))
    ex.apply(MarginTransfer(TS, 201, "BTCUSDT", "USDT", 1_000 * UNIT, True))
    account = ex.engine.margin.account_of(201, "BTCUSDT")
    assert account is not None
    ex.apply(PlaceOrder(TS, 202, "BTCUSDT", SELL, LIMIT, 5_000_000, 100_000))
    ex.apply(PlaceOrder(TS, account.id, "BTCUSDT", BUY, LIMIT, 5_000_000, 100_000))
    ex.apply(PlaceOrder(TS, 202, "BTCUSDT", BUY, LIMIT, 4_400_000, 200_000))
    with caplog.at_level(logging.INFO, logger="tradehall.risk"):
        ex.apply(PlaceOrder(TS, 203, "BTCUSDT", SELL, LIMIT, 4_400_000, 1_000))
    lines = [r.getMessage() for r in caplog.records if r.name == "tradehall.risk"]
    assert lines == [
        f"margin liquidation done: account {account.id} of user 201 on BTCUSDT (insurance fund"
        " paid 0.00000000 USDT, written off 0.00000000 USDT; debts in BTC valued at the last"
        " price)"
    ]
