"""Shared fixtures for the engine tests: an engine on the built-in markets with funded accounts,
a way to fund more, and a deep snapshot of everything the engine holds (to prove that a refused
command changed nothing)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from tradehall.config import load_config
from tradehall.engine.commands import Deposit
from tradehall.engine.engine import Engine
from tradehall.engine.markets import MarketsSpec

FUNDS = {
    "BTC": 10 * 10**8,  # 10 BTC
    "ETH": 100 * 10**8,  # 100 ETH
    "USDT": 1_000_000 * 10**8,  # 1,000,000 USDT
}
"""What each of the funded accounts (1, 2 and 3) starts with, in asset units."""

FUNDED_ACCOUNTS = (1, 2, 3)

_tx_ids = itertools.count(1)


def fund_account(engine: Engine, account: int, asset: str, amount: int) -> None:
    engine.apply(Deposit(0, account, asset, amount, f"fixture-{next(_tx_ids)}"))


def build_engine(markets: MarketsSpec, *, funded: bool = True) -> Engine:
    engine = Engine(markets)
    if funded:
        for account in FUNDED_ACCOUNTS:
            for asset, amount in FUNDS.items():
                fund_account(engine, account, asset, amount)
    return engine


def with_pair(markets: MarketsSpec, symbol: str, **changes: Any) -> MarketsSpec:
    """``markets`` with some fields of one pair replaced (e.g. trading=False)."""
    pairs = dict(markets.pairs)
    pairs[symbol] = dataclasses.replace(pairs[symbol], **changes)
    return MarketsSpec(assets=dict(markets.assets), pairs=pairs)


def _order_tuple(order: Any) -> tuple[Any, ...]:
    return (
        order.id,
        order.account,
        order.symbol,
        order.side,
        order.type,
        order.tif,
        order.price,
        order.qty,
        order.quote_qty,
        order.filled,
        order.filled_quote,
        order.held,
        order.status,
        order.client_id,
        order.time,
        order.updated,
        None if order.prev is None else order.prev.id,
        None if order.next is None else order.next.id,
    )


def engine_state(engine: Engine) -> dict[str, Any]:
    """A deep, comparable copy of all engine state."""
    books = {}
    for symbol, book in engine.spot.books.items():
        sides = {}
        for name, side in (("bids", book.bids), ("asks", book.asks)):
            sides[name] = (
                list(side.keys),
                sorted(side.levels),
                [
                    (level.price, level.total, [_order_tuple(o) for o in level.orders()])
                    for level in side.iter_levels()
                ],
            )
        books[symbol] = (sides, sorted(book.orders))
    return {
        "balances": {key: tuple(value) for key, value in engine.ledger.balances.items()},
        "external": dict(engine.ledger.external),
        "books": books,
        "by_account": {acct: list(orders) for acct, orders in engine.spot.by_account.items()},
        "by_client_id": {key: order.id for key, order in engine.spot.by_client_id.items()},
        "next_order_id": engine.spot.next_order_id,
        "next_trade_id": engine.spot.next_trade_id,
        "transfers": dict(engine.transfers),
        "next_transfer_id": engine.next_transfer_id,
    }


@pytest.fixture(scope="session")
def markets() -> MarketsSpec:
    return load_config().markets


@pytest.fixture
def engine(markets: MarketsSpec) -> Engine:
    """Accounts 1, 2 and 3 funded with FUNDS; no orders."""
    return build_engine(markets)


@pytest.fixture
def funds() -> dict[str, int]:
    return dict(FUNDS)


@pytest.fixture
def fund() -> Callable[[Engine, int, str, int], None]:
    return fund_account


@pytest.fixture
def state() -> Callable[[Engine], dict[str, Any]]:
    return engine_state


@pytest.fixture
def make_engine(markets: MarketsSpec) -> Callable[..., Engine]:
    """make_engine(symbol=..., **pair_changes) -> a funded engine with one pair altered."""

    def make(symbol: str | None = None, *, funded: bool = True, **changes: Any) -> Engine:
        spec = markets if symbol is None else with_pair(markets, symbol, **changes)
        return build_engine(spec, funded=funded)

    return make
