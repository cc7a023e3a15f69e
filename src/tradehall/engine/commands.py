"""Everything that changes engine state is one of these. ``ts`` is the time (ms) the command
happened; the engine never reads a clock."""

from __future__ import annotations

import msgspec

from tradehall.engine.orders import GTC


class PlaceOrder(msgspec.Struct, frozen=True, gc=False):
    ts: int
    account: int
    symbol: str
    side: str
    type: str
    price: int = 0
    """Ticks; 0 for MARKET."""
    qty: int = 0
    """Lots; 0 for a MARKET BUY."""
    quote_qty: int = 0
    """MARKET BUY only: quote asset units to spend."""
    tif: str = GTC
    client_id: str = ""
    dry_run: bool = False
    """Validate everything (balance included) and change nothing."""


class PlaceBatch(msgspec.Struct, frozen=True, gc=False):
    """All orders are validated first (including their combined holds); if any fails,
    none is placed."""

    ts: int
    account: int
    symbol: str
    orders: tuple[PlaceOrder, ...]


class CancelOrder(msgspec.Struct, frozen=True, gc=False):
    ts: int
    account: int
    symbol: str
    order_id: int | None = None
    client_id: str | None = None


class CancelBatch(msgspec.Struct, frozen=True, gc=False):
    ts: int
    account: int
    symbol: str
    order_ids: tuple[int, ...]


class Deposit(msgspec.Struct, frozen=True, gc=False):
    ts: int
    account: int
    asset: str
    amount: int
    tx_id: str


class Withdraw(msgspec.Struct, frozen=True, gc=False):
    ts: int
    account: int
    asset: str
    amount: int
    tx_id: str


class MarginTransfer(msgspec.Struct, frozen=True, gc=False):
    """Move funds between a user's spot account and its margin account on ``symbol``."""

    ts: int
    user: int
    symbol: str
    asset: str
    amount: int
    into_margin: bool


class MarginRepay(msgspec.Struct, frozen=True, gc=False):
    """Repay margin debt in ``asset`` from the margin account's free balance."""

    ts: int
    user: int
    symbol: str
    asset: str
    amount: int


class AccrueInterest(msgspec.Struct, frozen=True, gc=False):
    """From the scheduler: charge margin interest for every whole hour passed up to ``ts``."""

    ts: int


MAX_INTEREST_HOURS = 8_760
"""The most hours of interest one ``ChargeInterest`` charges (a year)."""


class ChargeInterest(msgspec.Struct, frozen=True, gc=False):
    """From the operator (time control in a sandbox): charge ``hours`` hours of margin
    interest on every debt now, as that many hourly accruals would; the hourly schedule is
    unchanged."""

    ts: int
    hours: int = 1


class FuturesPlace(msgspec.Struct, frozen=True, gc=False):
    """A futures order (or, with ``trigger_type``, a conditional order)."""

    ts: int
    user: int
    contract: str
    side: str
    action: str
    """OPEN or CLOSE."""
    type: str
    price: int = 0
    """Ticks; 0 for MARKET."""
    volume: int = 0
    """Contracts; 0 for a MARKET OPEN sized by ``money``."""
    money: int = 0
    """MARKET OPEN sized by value (``volume`` 0): the order value in 10**-8 quote."""
    position_type: int = 0
    """1 cross, 2 isolated; 0 uses the user's setting on the contract."""
    tif: str = GTC
    client_id: str = ""
    trigger_type: int = 0
    trigger_price: int = 0


class FuturesCancel(msgspec.Struct, frozen=True, gc=False):
    """Cancel an open futures order or a waiting conditional order."""

    ts: int
    user: int
    contract: str
    order_id: int | None = None
    client_id: str | None = None


class FuturesCancelAll(msgspec.Struct, frozen=True, gc=False):
    """Cancel every open futures order and waiting conditional order of the user (on one
    contract, or on all when ``contract`` is empty)."""

    ts: int
    user: int
    contract: str = ""


class FuturesTransfer(msgspec.Struct, frozen=True, gc=False):
    """Move ``asset`` between a user's spot account and futures account."""

    ts: int
    user: int
    asset: str
    amount: int
    into_futures: bool


class SetLeverage(msgspec.Struct, frozen=True, gc=False):
    ts: int
    user: int
    contract: str
    leverage: int


class SetMarginMode(msgspec.Struct, frozen=True, gc=False):
    ts: int
    user: int
    contract: str
    position_type: int


class AdjustPositionMargin(msgspec.Struct, frozen=True, gc=False):
    """Add (amount > 0) or take out (amount < 0) isolated position margin."""

    ts: int
    user: int
    position_id: int
    amount: int


class SetIndexPrice(msgspec.Struct, frozen=True, gc=False):
    """From the operator: the index price of a contract, in ticks. Without ``feed`` it is the
    index at once (the operator's override); with it, one price of that named feed, a source
    the index ticks weigh with the others."""

    ts: int
    contract: str
    price: int
    feed: str = ""


class FuturesTick(msgspec.Struct, frozen=True, gc=False):
    """From the scheduler, every second: sample the spot pairs' band references, refresh
    index and mark prices, sample the premium, settle funding that is due, fire triggers and
    liquidate what the new prices call for."""

    ts: int


class SettleFunding(msgspec.Struct, frozen=True, gc=False):
    """From the operator (time control in a sandbox): settle funding now, at the rate the
    interval's premium samples give so far, on one contract or on every one (``contract``
    empty); the regular schedule is unchanged."""

    ts: int
    contract: str = ""


class ClosePositions(msgspec.Struct, frozen=True, gc=False):
    """From the operator (account reset): cancel the user's futures orders and close every
    one of its positions at the mark price, against opposite positions (ranked as for
    auto-deleveraging), without fees."""

    ts: int
    user: int


Command = (
    PlaceOrder
    | PlaceBatch
    | CancelOrder
    | CancelBatch
    | Deposit
    | Withdraw
    | MarginTransfer
    | MarginRepay
    | AccrueInterest
    | FuturesPlace
    | FuturesCancel
    | FuturesCancelAll
    | FuturesTransfer
    | SetLeverage
    | SetMarginMode
    | AdjustPositionMargin
    | SetIndexPrice
    | FuturesTick
    | SettleFunding
    | ClosePositions
    | ChargeInterest
)
