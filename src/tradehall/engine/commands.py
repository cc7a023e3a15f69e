"""Everything that changes engine state is one of these. ``ts`` is the time (ms) the command
happened; the engine never reads a clock."""

from __future__ import annotations

from dataclasses import dataclass

from tradehall.engine.orders import GTC


@dataclass(frozen=True, slots=True)
class PlaceOrder:
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


@dataclass(frozen=True, slots=True)
class PlaceBatch:
    """All orders are validated first (including their combined holds); if any fails,
    none is placed."""

    ts: int
    account: int
    symbol: str
    orders: tuple[PlaceOrder, ...]


@dataclass(frozen=True, slots=True)
class CancelOrder:
    ts: int
    account: int
    symbol: str
    order_id: int | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class CancelBatch:
    ts: int
    account: int
    symbol: str
    order_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Deposit:
    ts: int
    account: int
    asset: str
    amount: int
    tx_id: str


@dataclass(frozen=True, slots=True)
class Withdraw:
    ts: int
    account: int
    asset: str
    amount: int
    tx_id: str


@dataclass(frozen=True, slots=True)
class MarginTransfer:
    """Move funds between a user's spot account and its margin account on ``symbol``."""

    ts: int
    user: int
    symbol: str
    asset: str
    amount: int
    into_margin: bool


@dataclass(frozen=True, slots=True)
class MarginRepay:
    """Repay margin debt in ``asset`` from the margin account's free balance."""

    ts: int
    user: int
    symbol: str
    asset: str
    amount: int


@dataclass(frozen=True, slots=True)
class AccrueInterest:
    """From the scheduler: charge margin interest for every whole hour passed up to ``ts``."""

    ts: int


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
)
