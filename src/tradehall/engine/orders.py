"""Orders as the engine holds them, and immutable snapshots of them for events and replies."""

from __future__ import annotations

from typing import Any, Final

import msgspec

BUY: Final = "BUY"
SELL: Final = "SELL"
LIMIT: Final = "LIMIT"
MARKET: Final = "MARKET"

GTC: Final = "GTC"
IOC: Final = "IOC"
FOK: Final = "FOK"
POST_ONLY: Final = "POST_ONLY"
TIME_IN_FORCE = (GTC, IOC, FOK, POST_ONLY)

NEW: Final = "NEW"
PARTIALLY_FILLED: Final = "PARTIALLY_FILLED"
FILLED: Final = "FILLED"
CANCELED: Final = "CANCELED"
REJECTED: Final = "REJECTED"
OPEN_STATUSES = frozenset((NEW, PARTIALLY_FILLED))


class Order:
    """A live order. Resting orders are linked into their price level (``prev``/``next``)."""

    __slots__ = (
        "account",
        "balance",
        "client_id",
        "filled",
        "filled_quote",
        "held",
        "id",
        "next",
        "open_orders",
        "prev",
        "price",
        "qty",
        "quote_qty",
        "side",
        "status",
        "symbol",
        "tif",
        "time",
        "type",
        "updated",
    )

    def __init__(
        self,
        id: int,
        account: int,
        symbol: str,
        side: str,
        type: str,
        tif: str,
        price: int,
        qty: int,
        quote_qty: int,
        client_id: str,
        time: int,
    ) -> None:
        self.id = id
        self.account = account
        self.symbol = symbol
        self.side = side
        self.type = type
        self.tif = tif
        self.price = price
        """Limit price in ticks; 0 for MARKET."""
        self.qty = qty
        """Quantity in lots; for a MARKET BUY 0 (it is sized by ``quote_qty``)."""
        self.quote_qty = quote_qty
        """MARKET BUY only: quote asset units to spend."""
        self.client_id = client_id
        self.time = time
        self.updated = time
        self.filled = 0
        """Lots executed."""
        self.filled_quote = 0
        """Quote asset units executed (before fees)."""
        self.held = 0
        """What the order still holds locked, in the asset it sells (quote for BUY)."""
        self.status: str = NEW
        self.prev: Order | None = None
        self.next: Order | None = None
        self.balance: list[int] | None = None
        """Spot: the [free, locked] ledger record of what the order holds, once it holds
        (records are never replaced, so it saves the lookup when the order ends)."""
        self.open_orders: dict[int, Order] | None = None
        """Spot: the account's open-order index the order sits in while it rests."""

    @property
    def remaining(self) -> int:
        return self.qty - self.filled

    def snapshot(self) -> OrderState:
        return OrderState(
            self.id,
            self.account,
            self.symbol,
            self.side,
            self.type,
            self.tif,
            self.price,
            self.qty,
            self.quote_qty,
            self.filled,
            self.filled_quote,
            self.held,
            self.status,
            self.client_id,
            self.time,
            self.updated,
        )


class OrderState(msgspec.Struct, frozen=True, gc=False):
    """An immutable copy of an order at one moment (events, replies, history)."""

    id: int
    account: int
    symbol: str
    side: str
    type: str
    tif: str
    price: int
    qty: int
    quote_qty: int
    filled: int
    filled_quote: int
    held: int
    status: str
    client_id: str
    time: int
    updated: int

    def as_tuple(self) -> tuple[Any, ...]:
        return msgspec.structs.astuple(self)
