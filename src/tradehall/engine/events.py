"""What the engine reports after applying a command. The store turns these into rows.

Events are frozen msgspec Structs: about three times cheaper to build than slotted classes,
which matters because every fill makes several of them.
"""

from __future__ import annotations

import msgspec

from tradehall.engine.futures_model import FuturesChanged
from tradehall.engine.orders import OrderState


class BalanceChanged(msgspec.Struct, frozen=True, gc=False):
    """One ledger entry and the balance it leaves."""

    account: int
    asset: str
    d_free: int
    d_locked: int
    free: int
    locked: int
    reason: str
    ref: int


class OrderChanged(msgspec.Struct, frozen=True, gc=False):
    order: OrderState


class Trade(msgspec.Struct, frozen=True, gc=False):
    """An execution between a taker and a resting maker. Fees are in the asset each side
    receives: the buyer pays in base, the seller in quote."""

    id: int
    symbol: str
    price: int
    qty: int
    quote: int
    time: int
    taker_side: str
    bid_order: int
    ask_order: int
    bid_account: int
    ask_account: int
    bid_fee: int
    ask_fee: int


class TradeExecuted(msgspec.Struct, frozen=True, gc=False):
    trade: Trade


class TransferDone(msgspec.Struct, frozen=True, gc=False):
    """A deposit (amount > 0) or withdrawal (amount < 0) from outside the exchange."""

    id: int
    tx_id: str
    account: int
    asset: str
    amount: int
    time: int


class MarginAccountOpened(msgspec.Struct, frozen=True, gc=False):
    id: int
    user: int
    symbol: str


class DebtChanged(msgspec.Struct, frozen=True, gc=False):
    """The debt of a margin account in one asset, after a change."""

    account: int
    asset: str
    principal: int
    interest: int
    reason: str
    ref: int


class InterestAccrued(msgspec.Struct, frozen=True, gc=False):
    hour: int
    """Interest has been charged for every hour up to and including this one (ts // 1 h)."""


class WrittenOff(msgspec.Struct, frozen=True, gc=False):
    """A margin debt nobody could pay (the lending pool's loss), and the pool's total of such
    losses in ``asset`` since the venue began."""

    asset: str
    amount: int
    total: int


class Liquidated(msgspec.Struct, frozen=True, gc=False):
    account: int
    symbol: str
    deficit_covered: int
    """Quote-valued debt the insurance fund paid."""
    written_off: int
    """Quote-valued debt nobody could pay (the lending pool's loss)."""
    time: int


Event = (
    BalanceChanged
    | OrderChanged
    | TradeExecuted
    | TransferDone
    | MarginAccountOpened
    | DebtChanged
    | InterestAccrued
    | WrittenOff
    | Liquidated
    | FuturesChanged
)
