"""Helpers shared by the futures engine tests: an engine in debug mode (every invariant
audited after every command) on the built-in contracts, funding, and short-hand commands.

Everything goes through ``Engine.apply``; state is read from ``engine.futures`` and
``engine.ledger`` only.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from tradehall.config import load_config
from tradehall.engine.commands import (
    Deposit,
    FuturesPlace,
    FuturesTransfer,
    SetIndexPrice,
)
from tradehall.engine.engine import Engine, Result
from tradehall.engine.futures import INSURANCE_ACCOUNT
from tradehall.engine.futures_model import (
    CLOSE,
    OPEN,
    FuturesOrderState,
    Position,
    futures_account,
)
from tradehall.engine.markets import MarketsSpec
from tradehall.engine.orders import BUY, LIMIT, MARKET, SELL
from tradehall.engine.spot import FEE_ACCOUNT

LINEAR = "E-BTC-USDT"
INVERSE = "E-BTC-USD"
UNIT = 10**8
"""One USDT or one BTC in ledger units (both have 8 decimals)."""
RATE_ONE = 10**8

__all__ = [
    "BUY",
    "CLOSE",
    "FEE_ACCOUNT",
    "INSURANCE_ACCOUNT",
    "INVERSE",
    "LINEAR",
    "OPEN",
    "SELL",
    "UNIT",
    "Rig",
    "markets",
]

_markets = None


def markets() -> Any:
    global _markets
    if _markets is None:
        _markets = load_config(None).markets
    return _markets


def without_bands(spec: MarketsSpec) -> MarketsSpec:
    """The markets with no price band on any contract and no bound on how fast an index
    moves: the examples of mechanics (triggers, liquidation, funding) move prices in jumps
    that the guards would stop; the guards have tests of their own (tests/integrity)."""
    contracts = {
        s: replace(c, price_band=0, index=replace(c.index, max_move=0))
        for s, c in spec.contracts.items()
    }
    return replace(spec, contracts=contracts)


class Rig:
    """An engine in debug mode with a clock and a few conveniences (without price bands
    unless ``bands``)."""

    def __init__(self, *, bands: bool = False) -> None:
        self.engine = Engine(
            markets() if bands else without_bands(markets()), check_invariants=True
        )
        self.fx = self.engine.futures
        self.ledger = self.engine.ledger
        self.ts = 1_000
        self._tx = itertools.count(1)

    # ------------------------------------------------------------------ commands

    def apply(self, cmd: Any) -> Result:
        return self.engine.apply(cmd)

    def deposit(self, account: int, asset: str, amount: int) -> None:
        self.apply(Deposit(self.ts, account, asset, amount, f"fut-{next(self._tx)}"))

    def fund(self, user: int, asset: str, amount: int) -> None:
        """Deposit to spot and move it all into the user's futures account."""
        self.deposit(user, asset, amount)
        self.apply(FuturesTransfer(self.ts, user, asset, amount, True))

    def index(self, contract: str, price: int) -> Result:
        return self.apply(SetIndexPrice(self.ts, contract, price))

    def place(
        self,
        user: int,
        contract: str,
        side: str,
        action: str,
        volume: int = 0,
        price: int = 0,
        **kw: Any,
    ) -> Result:
        kind = kw.pop("type", LIMIT if price else MARKET)
        return self.apply(
            FuturesPlace(self.ts, user, contract, side, action, kind, price, volume, **kw)
        )

    def order(self, *args: Any, **kw: Any) -> FuturesOrderState:
        reply = self.place(*args, **kw).reply
        assert isinstance(reply, FuturesOrderState)
        return reply

    # ------------------------------------------------------------------ reads

    def free(self, user: int, coin: str) -> int:
        return self.ledger.free(futures_account(user), coin)

    def balance(self, user: int, coin: str) -> tuple[int, int]:
        return self.ledger.get(futures_account(user), coin)

    def fund_balance(self, coin: str) -> int:
        return self.ledger.free(INSURANCE_ACCOUNT, coin)

    def fees(self, coin: str) -> int:
        return self.ledger.free(FEE_ACCOUNT, coin)

    def pos(self, user: int, contract: str, side: str) -> Position | None:
        return self.fx.positions.get((user, contract, side))

    def long(self, user: int, contract: str) -> Position:
        pos = self.pos(user, contract, BUY)
        assert pos is not None
        return pos

    def short(self, user: int, contract: str) -> Position:
        pos = self.pos(user, contract, SELL)
        assert pos is not None
        return pos

    def oi(self, contract: str) -> tuple[int, int]:
        positions = self.fx.by_contract[contract].values()
        return (
            sum(p.volume for p in positions if p.is_long),
            sum(p.volume for p in positions if not p.is_long),
        )
