"""The state of the futures engine: orders, positions, conditional orders, per-user settings
and per-contract price state.

Positions, triggers, settings and contract states are mutable msgspec Structs: the engine
changes them in place and reports a copy in a ``FuturesChanged`` event; the store keeps the
copy as a JSON document and recovery decodes it straight back into the live object.
"""

from __future__ import annotations

from typing import Final

import msgspec

from tradehall.engine.orders import Order

OPEN: Final = "OPEN"
CLOSE: Final = "CLOSE"
CROSS: Final = 1
ISOLATED: Final = 2

# What placed an order.
BY_USER: Final = "user"
BY_TRIGGER: Final = "trigger"
BY_LIQUIDATION: Final = "liquidation"
BY_ADL: Final = "adl"
BY_RESET: Final = "reset"
"""The operator's account reset (``ClosePositions``): the account's closes at the mark and
those of the opposite positions it closes against; not auto-deleveraging."""

# Conditional order trigger types (the seed's triggerType).
STOP_LOSS: Final = 1
TAKE_PROFIT: Final = 2
TRAILING_BUY: Final = 3
TRAILING_SELL: Final = 4

# Trigger statuses.
WAITING: Final = "NEW"
FIRED: Final = "FILLED"
TRIGGER_CANCELED: Final = "CANCELED"
TRIGGER_FAILED: Final = "REJECTED"
"""Fired, but the order it submitted was refused (no margin, nothing to close...)."""

# Kinds of FuturesChanged documents (the store's ``kind`` column).
KIND_ORDER: Final = "order"
KIND_POSITION: Final = "position"
KIND_TRIGGER: Final = "trigger"
KIND_SETTING: Final = "setting"
KIND_CONTRACT: Final = "contract"
KIND_FUNDING: Final = "funding"
KIND_TRANSFER: Final = "transfer"
KIND_REFERENCE: Final = "reference"
"""A spot pair's reference price for its price band (kept with the futures documents)."""

FUTURES_ACCOUNT_BASE = 2 * 10**15
"""A user's futures account is ``FUTURES_ACCOUNT_BASE + user``: one ledger account per user,
holding each margin coin as an asset (free = available, locked = order holds + position
margins). Above every margin account id."""

CLEARING_ACCOUNT_BASE = -1000
"""Contract ``c`` settles realized P&L through ledger account ``CLEARING_ACCOUNT_BASE - c``.
Its balance is the one balance allowed below zero: it always equals, in the margin coin,
the entry cost of open short contracts minus that of open long ones (reversed for inverse),
minus the losses socialised on the contract."""


def futures_account(user: int) -> int:
    return FUTURES_ACCOUNT_BASE + user


def clearing_account(contract_id: int) -> int:
    return CLEARING_ACCOUNT_BASE - contract_id


class FuturesOrder(Order):
    """A futures order on a book. ``qty``/``filled`` are contracts, ``filled_quote`` is the
    value filled in the margin coin, ``held`` what the order still holds (initial margin
    plus the open fee, for OPEN orders; CLOSE orders hold nothing)."""

    __slots__ = ("action", "leverage", "position_type", "source", "trigger_id", "user")

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
        *,
        user: int,
        action: str,
        position_type: int,
        leverage: int,
        source: str = BY_USER,
        trigger_id: int = 0,
    ) -> None:
        super().__init__(
            id, account, symbol, side, type, tif, price, qty, quote_qty, client_id, time
        )
        self.user = user
        self.action = action
        self.position_type = position_type
        self.leverage = leverage
        self.source = source
        self.trigger_id = trigger_id

    def state(self) -> FuturesOrderState:
        return FuturesOrderState(
            self.id,
            self.user,
            self.symbol,
            self.side,
            self.action,
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
            self.position_type,
            self.leverage,
            self.source,
            self.trigger_id,
            self.time,
            self.updated,
        )

    @classmethod
    def from_state(cls, s: FuturesOrderState) -> FuturesOrder:
        order = cls(
            s.id,
            futures_account(s.user),
            s.contract,
            s.side,
            s.type,
            s.tif,
            s.price,
            s.qty,
            s.money,
            s.client_id,
            s.time,
            user=s.user,
            action=s.action,
            position_type=s.position_type,
            leverage=s.leverage,
            source=s.source,
            trigger_id=s.trigger_id,
        )
        order.filled = s.filled
        order.filled_quote = s.filled_value
        order.held = s.held
        order.status = s.status
        order.updated = s.updated
        return order


class FuturesOrderState(msgspec.Struct, frozen=True, gc=False):
    id: int
    user: int
    contract: str
    side: str
    action: str
    type: str
    tif: str
    price: int
    """Ticks; 0 for MARKET."""
    qty: int
    """Contracts (for a MARKET OPEN sized by value: what its money bought, known when it is
    placed)."""
    money: int
    """A MARKET OPEN sized by value: the order value asked for, in 10**-8 quote (else 0)."""
    filled: int
    filled_value: int
    """Margin-coin value of the fills."""
    held: int
    status: str
    client_id: str
    position_type: int
    leverage: int
    source: str
    trigger_id: int
    """The conditional order that submitted it (0 if none)."""
    time: int
    updated: int


class Position(msgspec.Struct, gc=False):
    """One side of one user's holding in a contract. Open while ``volume`` > 0; once closed
    it is never reopened (a new position gets a new id) and stays as a P&L record."""

    id: int
    user: int
    contract: str
    side: str
    """BUY long, SELL short."""
    position_type: int
    leverage: int
    volume: int = 0
    cost: int = 0
    """Entry value of the open volume, in the margin coin."""
    margin: int = 0
    """Position margin, held in the account's locked balance."""
    pending_close: int = 0
    """Contracts in open CLOSE orders against this position."""
    open_volume: int = 0
    """Contracts ever opened (for the entry price over the position's life)."""
    open_value: int = 0
    close_volume: int = 0
    close_value: int = 0
    close_profit: int = 0
    """P&L realized by closing (before fees and funding)."""
    trade_fee: int = 0
    capital_fee: int = 0
    """Funding: positive received, negative paid."""
    share_amount: int = 0
    """Loss taken by auto-deleveraging: what this position's closes against a bankrupt
    counterparty, at its bankruptcy price, got less than at the mark (>= 0)."""
    settled_by_others: int = 0
    """Of this position's closes, what its account did not pay or receive itself: a loss
    past what backed it, paid by the insurance fund or socialised (positive), less what a
    liquidation's fills left over bankruptcy, taken by the fund (negative)."""
    liquidated: bool = False
    ctime: int = 0
    mtime: int = 0

    @property
    def is_long(self) -> bool:
        return self.side == "BUY"

    @property
    def realized(self) -> int:
        """What the account gained (or lost) by the position: its closes' P&L less fees, its
        funding, and what others settled for it."""
        return self.close_profit - self.trade_fee + self.capital_fee + self.settled_by_others


class Trigger(msgspec.Struct, gc=False):
    """A conditional order waiting for its trigger price."""

    id: int
    user: int
    contract: str
    trigger_type: int
    trigger_price: int
    """Current trigger in ticks (trailing triggers move)."""
    distance: int
    """Trailing types: ticks between the best price seen and the trigger."""
    best: int
    """Trailing types: the best price seen since placement."""
    side: str
    action: str
    type: str
    price: int
    volume: int
    money: int
    position_type: int
    leverage: int
    client_id: str
    time: int
    status: str
    updated: int
    order_id: int = 0
    """The order it submitted when it fired."""


class Setting(msgspec.Struct, gc=False):
    """A user's leverage and margin mode on one contract."""

    user: int
    contract: str
    leverage: int
    position_type: int


class IndexSource(msgspec.Struct, gc=False):
    """One source of a contract's index: its samples of the smoothing window, and what the
    last index tick made of it."""

    samples: list[tuple[int, int]] = msgspec.field(default_factory=list)
    """(ts, price in the contract's ticks), oldest first, within the window."""
    fed: int = 0
    """An operator feed's last pushed price (0: a spot source, or never pushed)."""
    fed_at: int = 0
    value: int = 0
    """The smoothed value at the last tick (0: none)."""
    status: str = ""
    """At the last tick: ``used``, or why not (``stale``, ``outlier``, ``thin``, ``none``)."""


class PriceReference(msgspec.Struct, gc=False):
    """A spot pair's reference price, what its price band is measured from: the time-weighted
    median of its last trade price over a window (``spot_reference``)."""

    symbol: str
    samples: list[tuple[int, int]] = msgspec.field(default_factory=list)
    """(ts, last trade price in ticks) change points, oldest first, within the window."""
    value: int = 0
    """The reference at the last tick (0: none yet)."""


class ContractState(msgspec.Struct, gc=False):
    """Price and funding state of one contract."""

    contract: str
    index: int = 0
    """Index price in ticks (0: none yet)."""
    operator_index: int = 0
    """The last index price the operator set (an override: the index until its sources move
    it)."""
    basis_ema: int = 0
    """Moving average of (mid - index), in 1e-4 ticks."""
    basis_samples: int = 0
    premium_sum: int = 0
    """Sum of the interval's premium samples ((mid - index) / index, in 1e-8)."""
    premium_samples: int = 0
    sample_minute: int = 0
    """Minute (ts // 60 000) of the last premium sample."""
    last_funding_rate: int = 0
    """Rate applied at the last funding time, in 1e-8."""
    funding_time: int = 0
    """Start (ms) of the current funding interval; funding is due at its end."""
    mark: int = 0
    last: int = 0
    """Price of the contract's last trade."""
    socialized: int = 0
    """Losses nobody could pay, taken out of the clearing account (see its docstring)."""
    sources: dict[str, IndexSource] = msgspec.field(default_factory=dict)
    """The index's sources by name (``mid``, ``last``, operator feeds)."""
    index_time: int = 0
    """The last tick at which the sources set the index (its next move is bounded by the
    time since), or when the operator set it."""


class FundingRecord(msgspec.Struct, frozen=True, gc=False):
    contract: str
    time: int
    rate: int
    mark: int
    paid: int
    """Total paid by the paying side (equals the total received)."""


class AccountTransfer(msgspec.Struct, frozen=True, gc=False):
    """A move between a user's spot and futures accounts (its ledger entries carry ``id`` as
    their ref). Stored as a document of its own, under the asset, never loaded at recovery."""

    id: int
    user: int
    asset: str
    amount: int
    into_futures: bool
    time: int


FuturesDoc = (
    FuturesOrderState
    | Position
    | Trigger
    | Setting
    | ContractState
    | FundingRecord
    | AccountTransfer
    | PriceReference
)
"""A futures document (``FuturesChanged.doc``; stored as ``futures_docs.doc``)."""


class FuturesChanged(msgspec.Struct, frozen=True, gc=False):
    """A futures document after a change: the store upserts it under (kind, user, contract,
    id); ``live`` marks what recovery must load (open orders, open positions, waiting
    triggers, settings, contract states)."""

    kind: str
    user: int
    contract: str
    id: int
    live: bool
    doc: FuturesDoc
