"""What the engine reports after applying a command. The store turns these into rows."""

from __future__ import annotations

from tradehall.engine.orders import OrderState


class BalanceChanged:
    """One ledger entry and the balance it leaves."""

    __slots__ = ("account", "asset", "d_free", "d_locked", "free", "locked", "reason", "ref")

    def __init__(
        self,
        account: int,
        asset: str,
        d_free: int,
        d_locked: int,
        free: int,
        locked: int,
        reason: str,
        ref: int,
    ) -> None:
        self.account = account
        self.asset = asset
        self.d_free = d_free
        self.d_locked = d_locked
        self.free = free
        self.locked = locked
        self.reason = reason
        self.ref = ref


class OrderChanged:
    __slots__ = ("order",)

    def __init__(self, order: OrderState) -> None:
        self.order = order


class Trade:
    """An execution between a taker and a resting maker. Fees are in the asset each side
    receives: the buyer pays in base, the seller in quote."""

    __slots__ = (
        "ask_account",
        "ask_fee",
        "ask_order",
        "bid_account",
        "bid_fee",
        "bid_order",
        "id",
        "price",
        "qty",
        "quote",
        "symbol",
        "taker_side",
        "time",
    )

    def __init__(
        self,
        id: int,
        symbol: str,
        price: int,
        qty: int,
        quote: int,
        time: int,
        taker_side: str,
        bid_order: int,
        ask_order: int,
        bid_account: int,
        ask_account: int,
        bid_fee: int,
        ask_fee: int,
    ) -> None:
        self.id = id
        self.symbol = symbol
        self.price = price
        self.qty = qty
        self.quote = quote
        self.time = time
        self.taker_side = taker_side
        self.bid_order = bid_order
        self.ask_order = ask_order
        self.bid_account = bid_account
        self.ask_account = ask_account
        self.bid_fee = bid_fee
        self.ask_fee = ask_fee


class TradeExecuted:
    __slots__ = ("trade",)

    def __init__(self, trade: Trade) -> None:
        self.trade = trade


class TransferDone:
    """A deposit (amount > 0) or withdrawal (amount < 0) from outside the exchange."""

    __slots__ = ("account", "amount", "asset", "id", "time", "tx_id")

    def __init__(
        self, id: int, tx_id: str, account: int, asset: str, amount: int, time: int
    ) -> None:
        self.id = id
        self.tx_id = tx_id
        self.account = account
        self.asset = asset
        self.amount = amount
        self.time = time


Event = BalanceChanged | OrderChanged | TradeExecuted | TransferDone
