"""The family's JSON shapes as frozen msgspec Structs, and their rendering from engine values.

Every response body the API sends is one of the Structs below (or a list of them). Field names
and order are exactly the family's: msgspec encodes a Struct's fields in declaration order, and
``rename="camel"`` turns ``order_id`` into ``orderId``. Amounts and prices are decimal strings at
the pair's precision, never exponent notation. The same types describe the responses in the
OpenAPI document (``tradehall.api.openapi``).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal, cast

import msgspec
from msgspec import Meta

from tradehall.engine.events import Trade
from tradehall.engine.markets import AssetSpec, PairSpec
from tradehall.engine.orders import BUY, MARKET, NEW, PARTIALLY_FILLED, OrderState
from tradehall.marketdata import Bar, PublicTrade
from tradehall.marketdata import Ticker as TickerStats
from tradehall.units import format_units, format_units_trimmed, pow10

# ------------------------------------------------------------------------- field types

DecimalText = Annotated[
    str,
    Meta(
        pattern=r"^-?[0-9]+(\.[0-9]+)?$",
        description="A decimal number as text, in plain notation (never an exponent).",
        examples=["30000.00"],
    ),
]
IdText = Annotated[
    str, Meta(pattern=r"^[0-9]+$", description="An integer id as decimal text.", examples=["17"])
]
Id = Annotated[int, Meta(ge=0, description="An integer id.")]
Millis = Annotated[int, Meta(ge=0, description="UNIX time in milliseconds.")]
MillisText = Annotated[
    str, Meta(pattern=r"^[0-9]+$", description="UNIX time in milliseconds, as decimal text.")
]
Symbol = Annotated[str, Meta(description="Canonical (upper-case) pair name.", examples=["BTCUSDT"])]
Side = Literal["BUY", "SELL"]
OrderType = Literal["LIMIT", "MARKET"]
Status = Literal["NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED", "REJECTED"]
Level = Annotated[
    list[DecimalText],
    Meta(min_length=2, max_length=2, description="An order-book level: [price, quantity]."),
]


class Wire(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """Base of every response type (immutable, camelCase names, not tracked by the GC)."""


# ------------------------------------------------------------------------- errors


class ErrorBody(Wire, frozen=True):
    """Every error: a negative code from the family's catalogue and a message."""

    code: Annotated[int, Meta(lt=0, examples=[-1121])]
    msg: str


# ------------------------------------------------------------------------- public


class Empty(Wire, frozen=True):
    """An empty object (``GET /ping``, ``POST /order/test``)."""


EMPTY = Empty()


class ServerTime(Wire, frozen=True):
    server_time: Millis
    timezone: str


class SymbolInfo(Wire, frozen=True):
    """A spot trading pair."""

    symbol: Symbol
    base_asset: str
    quote_asset: str
    price_precision: Annotated[int, Meta(ge=0, description="Decimal places of a price.")]
    quantity_precision: Annotated[int, Meta(ge=0, description="Decimal places of a quantity.")]


class Symbols(Wire, frozen=True):
    symbols: list[SymbolInfo]


class Depth(Wire, frozen=True):
    """The order book: bids best (highest) first, asks best (lowest) first."""

    time: Millis
    bids: list[Level]
    asks: list[Level]


class Ticker(Wire, frozen=True):
    """The rolling 24-hour ticker; ``rose`` is the change in percent, ``vol`` the base volume."""

    high: DecimalText
    low: DecimalText
    last: DecimalText
    vol: DecimalText
    rose: DecimalText
    time: Millis


class TickerItem(Ticker, frozen=True):
    """``GET /sapi/v2/ticker``: the ticker with the pair, its quote volume (``amount``) and
    the best bid and ask (price and quantity; ``0`` when that side of the book is empty)."""

    symbol: Symbol
    amount: DecimalText
    ask_price: DecimalText
    ask_volume: DecimalText
    bid_price: DecimalText
    bid_volume: DecimalText


class PublicTradeInfo(Wire, frozen=True):
    """A public trade; ``side`` is the taker's."""

    price: DecimalText
    qty: DecimalText
    time: Millis
    side: Side


class PublicTrades(Wire, frozen=True):
    """Recent trades, newest first."""

    trades: list[PublicTradeInfo] = msgspec.field(name="list")


class Kline(Wire, frozen=True):
    """A candlestick; ``idx`` is its open time in milliseconds."""

    idx: Millis
    open: DecimalText
    close: DecimalText
    high: DecimalText
    low: DecimalText
    vol: DecimalText


class MarketKline(Wire, frozen=True):
    """A candlestick of ``GET /v1/spot/market/kline``: ``id`` is its open time in
    milliseconds (as ``idx``), prices and volume decimal text at the pair's precision."""

    id: Millis
    open: DecimalText
    close: DecimalText
    high: DecimalText
    low: DecimalText
    volume: DecimalText


class MarketKlines(Wire, frozen=True):
    bars: list[MarketKline] = msgspec.field(name="data")


# ------------------------------------------------------------------------- orders


class OrderCreated(Wire, frozen=True):
    """The answer to ``POST /order``."""

    symbol: Symbol
    order_id: IdText
    order_id_string: IdText
    client_order_id: str
    transact_time: MillisText
    price: DecimalText
    orig_qty: DecimalText
    executed_qty: DecimalText
    status: Status
    type: OrderType
    side: Side


class OrderDetail(Wire, frozen=True):
    """The answer to ``GET /order``."""

    order_id: IdText
    order_id_string: IdText
    client_order_id: str
    symbol: Symbol
    price: DecimalText
    orig_qty: DecimalText
    executed_qty: DecimalText
    avg_price: DecimalText
    status: Status
    type: OrderType
    side: Side
    transact_time: MillisText


class OpenOrder(Wire, frozen=True):
    """An element of ``GET /openOrders``."""

    order_id: IdText
    order_id_string: IdText
    symbol: Symbol
    price: DecimalText
    orig_qty: DecimalText
    executed_qty: DecimalText
    avg_price: DecimalText
    status: Status
    type: OrderType
    side: Side
    time: MillisText


class HistoryOrder(Wire, frozen=True):
    """An element of ``GET /sapi/v3/historyOrders``; ``isWorking`` is true while the order
    rests in the book."""

    order_id: IdText
    order_id_string: IdText
    client_order_id: str
    symbol: Symbol
    price: DecimalText
    orig_qty: DecimalText
    executed_qty: DecimalText
    avg_price: DecimalText
    status: Status
    type: OrderType
    side: Side
    time: MillisText
    is_working: bool


class OrderCanceled(Wire, frozen=True):
    """The answer to ``POST /cancel``."""

    symbol: Symbol
    client_order_id: str
    order_id: IdText
    order_id_string: IdText
    status: Status


class BatchIds(Wire, frozen=True):
    """The answer to ``POST /batchOrders``: the ids of the orders placed, in order."""

    ids: list[Id]


class BatchCancelResult(Wire, frozen=True):
    """The answer to ``POST /batchCancel``."""

    success: list[Id]
    failed: list[Id]


class AccountTrade(Wire, frozen=True):
    """An element of ``GET /myTrades``, from the caller's side."""

    symbol: Symbol
    id: Id
    bid_id: Id
    ask_id: Id
    price: DecimalText
    qty: DecimalText
    time: Millis
    is_buyer: bool
    is_maker: bool
    fee_coin: str
    fee: DecimalText


class Balance(Wire, frozen=True):
    asset: str
    free: DecimalText
    locked: DecimalText


class Account(Wire, frozen=True):
    """The answer to ``GET /account``."""

    balances: list[Balance]


# ------------------------------------------------------------------------- margin (extension)

RiskStatus = Literal["NORMAL", "WARNING", "LIQUIDATION"]


class MarginAsset(Wire, frozen=True):
    asset: str
    free: DecimalText
    locked: DecimalText
    borrowed: DecimalText
    interest: DecimalText


class MarginAccountView(Wire, frozen=True):
    """Extension: a margin account of one pair, with its debts and risk."""

    user_id: Id
    symbol: Symbol
    assets: list[MarginAsset]
    risk_ratio: DecimalText | None
    risk_status: RiskStatus
    liquidation_price: DecimalText | None
    last_price: DecimalText | None
    max_leverage: Annotated[int, Meta(ge=1)]
    initial_level: DecimalText
    warning_level: DecimalText
    liquidation_level: DecimalText


class MarginRepaid(MarginAccountView, frozen=True):
    """Extension: what a repayment paid, and the margin account after it."""

    asset: str
    repaid: DecimalText


# ------------------------------------------------------------------------- asset transfers


AccountName = Literal["EXCHANGE", "FUTURE"]


class TransferId(Wire, frozen=True):
    transfer_id: IdText


class TransferRecord(Wire, frozen=True):
    """A transfer between the spot (``EXCHANGE``) and the futures (``FUTURE``) account."""

    transfer_id: IdText
    from_account: AccountName
    to_account: AccountName
    coin_symbol: str
    create_time: Millis
    amount: DecimalText
    status: Literal["SUCCESS"]


class TransferList(Wire, frozen=True):
    records: list[TransferRecord] = msgspec.field(name="list")


class _Envelope(Wire, frozen=True, kw_only=True):
    """The family's wrapping of its asset answers: ``code`` ``"0"`` and ``msg`` ``SUCCESS``
    around ``data`` (errors are plain ``{code, msg}`` answers, as everywhere)."""

    code: Literal["0"] = "0"
    msg: Literal["SUCCESS"] = "SUCCESS"


class NoDataAnswer(_Envelope, frozen=True, kw_only=True):
    """The family's answer of a setting change: ``{"code": "0", "msg": "SUCCESS", "data":
    null}``."""

    data: None = None


class MarketKlineAnswer(_Envelope, frozen=True, kw_only=True):
    """The answer to ``GET /v1/spot/market/kline``: candlesticks oldest first, in ``data.data``."""

    data: MarketKlines


class TransferAnswer(_Envelope, frozen=True, kw_only=True):
    """The answer to ``POST /asset/transfer``."""

    data: TransferId


class TransferQueryAnswer(_Envelope, frozen=True, kw_only=True):
    """The answer to ``POST /asset/transferQuery``: newest first."""

    data: TransferList


# ------------------------------------------------------------------------- admin (extension)


class AdminUser(Wire, frozen=True):
    id: Id
    name: str
    created: Millis


class AdminUsers(Wire, frozen=True):
    users: list[AdminUser]


class AdminKey(Wire, frozen=True):
    """A new API key; the secret is shown only here."""

    api_key: str
    secret: str
    user_id: Id
    read_only: bool
    ips: list[str]


class AdminKeyRevoked(Wire, frozen=True):
    api_key: str
    user_id: Id
    revoked: bool


class AdminTransfer(Wire, frozen=True):
    """A deposit or withdrawal (``duplicate``: the ``txId`` was already applied)."""

    transfer_id: Id
    tx_id: str
    user_id: Id
    asset: str
    amount: DecimalText
    duplicate: bool
    free: DecimalText
    locked: DecimalText


class AdminBalances(Wire, frozen=True):
    user_id: Id
    balances: list[Balance]


class AdminFund(Wire, frozen=True):
    """A deposit into or withdrawal from the lending pool or the insurance fund."""

    account: Literal["pool", "insurance"]
    transfer_id: Id
    tx_id: str
    asset: str
    amount: DecimalText
    duplicate: bool
    free: DecimalText
    locked: DecimalText


class AdminSystemAccount(Wire, frozen=True):
    account: Literal["fees", "pool", "insurance"]
    user_id: Annotated[int, Meta(description="The system account's id (0, -2, -1).")]
    balances: list[Balance]


class AdminSocialized(Wire, frozen=True):
    """Losses of a contract that nobody paid (the insurance fund was empty): its clearing
    account received that much less than the closes' P&L."""

    contract: str
    asset: str
    amount: DecimalText


class AdminWrittenOff(Wire, frozen=True):
    """Margin debts in one asset that nobody paid (the account had nothing left and the
    insurance fund not enough) since the venue began: the lending pool's losses."""

    asset: str
    amount: DecimalText


class AdminSystem(Wire, frozen=True):
    """The exchange's own accounts: trading fees, margin lending pool, insurance fund; each
    contract's socialised losses; and the margin debts written off, per asset."""

    accounts: list[AdminSystemAccount]
    socialized: list[AdminSocialized]
    written_off: list[AdminWrittenOff]


class AdminAsset(Wire, frozen=True):
    name: str
    decimals: Annotated[int, Meta(ge=0)]


class AdminPair(Wire, frozen=True):
    symbol: Symbol
    base_asset: str
    quote_asset: str
    price_precision: Annotated[int, Meta(ge=0)]
    quantity_precision: Annotated[int, Meta(ge=0)]
    min_quantity: DecimalText
    min_notional: DecimalText
    maker_fee: DecimalText
    taker_fee: DecimalText
    market_orders: bool
    trading: bool


class AdminMarkets(Wire, frozen=True):
    assets: list[AdminAsset]
    pairs: list[AdminPair]


class AdminAuditAsset(Wire, frozen=True):
    asset: str
    held: DecimalText
    deposits_minus_withdrawals: DecimalText
    fees: DecimalText


class AdminAudit(Wire, frozen=True):
    """``ok`` is false when any invariant or ledger check failed (listed in ``problems``)."""

    ok: bool
    problems: list[str]
    assets: list[AdminAuditAsset]


class AdminStorageTable(Wire, frozen=True):
    table: str
    rows: Annotated[int, Meta(ge=0)]
    bytes: Annotated[int, Meta(ge=0)] | None
    """With the table's indexes; null where the backend cannot tell (SQLite without dbstat)."""


class AdminRetention(Wire, frozen=True):
    """The ``[retention]`` in force (a horizon of 0 keeps that kind forever)."""

    enabled: bool
    interval_seconds: int
    batch_rows: int
    orders_days: int
    trades_days: int
    ledger_days: int
    system_ledger_hours: int
    simulation_minutes: int
    pruned_since_start: dict[str, int] | msgspec.UnsetType = msgspec.UNSET
    """Rows the server pruned since it started, per kind (not offline)."""


class AdminStorage(Wire, frozen=True):
    """``tradehall db stats``: rows and bytes per table, the backend's own space figures
    (SQLite: pages, free pages, auto_vacuum, files; PostgreSQL: autovacuum, schema) and the
    retention in force."""

    backend: str
    tables: list[AdminStorageTable]
    store: dict[str, Any]
    retention: AdminRetention


class AdminStatus(Wire, frozen=True):
    version: str
    users: Annotated[int, Meta(ge=0)]
    open_orders: Annotated[int, Meta(ge=0)]
    writable: bool
    failure: str | None


# ------------------------------------------------------------------------- rendering


def price(pair: PairSpec, ticks: int) -> str:
    return format_units(ticks, pair.price_precision)


def qty(pair: PairSpec, lots: int) -> str:
    return format_units(lots, pair.quantity_precision)


def avg_price(pair: PairSpec, filled: int, filled_quote: int) -> str:
    if not filled:
        return price(pair, 0)
    ticks = Decimal(filled_quote) / Decimal(filled * pair.quote_per_tick_lot)
    places = Decimal(1).scaleb(-pair.price_precision)
    return f"{(ticks * places).quantize(places, rounding=ROUND_HALF_EVEN):f}"


def orig_units(pair: PairSpec, order: OrderState) -> tuple[int, int]:
    """What the order asked for, as units and their decimals: the base quantity, or for a
    MARKET BUY the quote amount to spend, at the pair's price precision (rounded up: a margin
    liquidation's budget, the exact cost of the lots it buys back, has more places, and what
    it spent must not show above it)."""
    if order.type == MARKET and order.side == BUY:
        scale = pow10(pair.quote_decimals - pair.price_precision)
        return -(-order.quote_qty // scale), pair.price_precision
    return order.qty, pair.quantity_precision


def orig_qty(pair: PairSpec, order: OrderState) -> str:
    return format_units(*orig_units(pair, order))


def server_time(now_ms: int) -> ServerTime:
    return ServerTime(now_ms, "UTC")


def symbols(pairs: Iterable[PairSpec]) -> Symbols:
    return Symbols(
        [
            SymbolInfo(p.symbol, p.base, p.quote, p.price_precision, p.quantity_precision)
            for p in pairs
        ]
    )


def order_created(pair: PairSpec, order: OrderState) -> OrderCreated:
    return OrderCreated(
        pair.symbol,
        str(order.id),
        str(order.id),
        order.client_id,
        str(order.time),
        price(pair, order.price),
        orig_qty(pair, order),
        qty(pair, order.filled),
        cast(Status, order.status),
        cast(OrderType, order.type),
        cast(Side, order.side),
    )


def order_detail(pair: PairSpec, order: OrderState) -> OrderDetail:
    return OrderDetail(
        str(order.id),
        str(order.id),
        order.client_id,
        pair.symbol,
        price(pair, order.price),
        orig_qty(pair, order),
        qty(pair, order.filled),
        avg_price(pair, order.filled, order.filled_quote),
        cast(Status, order.status),
        cast(OrderType, order.type),
        cast(Side, order.side),
        str(order.time),
    )


def open_order(pair: PairSpec, order: OrderState) -> OpenOrder:
    return OpenOrder(
        str(order.id),
        str(order.id),
        pair.symbol,
        price(pair, order.price),
        orig_qty(pair, order),
        qty(pair, order.filled),
        avg_price(pair, order.filled, order.filled_quote),
        cast(Status, order.status),
        cast(OrderType, order.type),
        cast(Side, order.side),
        str(order.time),
    )


def history_order(pair: PairSpec, order: OrderState) -> HistoryOrder:
    """``order_detail``'s fields (``transactTime`` named ``time``) and ``isWorking``."""
    fields = msgspec.structs.asdict(order_detail(pair, order))
    fields["time"] = fields.pop("transact_time")
    return HistoryOrder(**fields, is_working=order.status in (NEW, PARTIALLY_FILLED))


def order_canceled(pair: PairSpec, order: OrderState) -> OrderCanceled:
    return OrderCanceled(
        pair.symbol, order.client_id, str(order.id), str(order.id), cast(Status, order.status)
    )


def account_trade(pair: PairSpec, trade: Trade, account: int) -> AccountTrade:
    is_buyer = trade.bid_account == account
    if is_buyer:
        fee, fee_coin, decimals = trade.bid_fee, pair.base, pair.base_decimals
    else:
        fee, fee_coin, decimals = trade.ask_fee, pair.quote, pair.quote_decimals
    return AccountTrade(
        pair.symbol,
        trade.id,
        trade.bid_order,
        trade.ask_order,
        price(pair, trade.price),
        qty(pair, trade.qty),
        trade.time,
        is_buyer,
        (trade.taker_side == BUY) != is_buyer,
        fee_coin,
        format_units_trimmed(fee, decimals),
    )


def public_trade(pair: PairSpec, trade: PublicTrade) -> PublicTradeInfo:
    return PublicTradeInfo(
        price(pair, trade.price), qty(pair, trade.qty), trade.time, cast(Side, trade.taker_side)
    )


def public_trades(pair: PairSpec, trades: Iterable[PublicTrade]) -> PublicTrades:
    return PublicTrades([public_trade(pair, t) for t in trades])


def ticker(pair: PairSpec, t: TickerStats, now_ms: int) -> Ticker:
    return Ticker(
        price(pair, t.high),
        price(pair, t.low),
        price(pair, t.last),
        qty(pair, t.volume),
        t.rose,
        now_ms,
    )


def ticker_item(
    pair: PairSpec,
    t: TickerStats,
    bid: list[tuple[int, int]],
    ask: list[tuple[int, int]],
    now_ms: int,
) -> TickerItem:
    """``bid``/``ask``: the best level of each side, if any; ``amount`` is the window's traded
    value in the quote asset (``t.amount``)."""
    (ask_price, ask_lots), (bid_price, bid_lots) = (ask or [(0, 0)])[0], (bid or [(0, 0)])[0]
    return TickerItem(
        price(pair, t.high),
        price(pair, t.low),
        price(pair, t.last),
        qty(pair, t.volume),
        t.rose,
        now_ms,
        pair.symbol,
        format_units(t.amount, pair.quote_decimals),
        price(pair, ask_price),
        qty(pair, ask_lots),
        price(pair, bid_price),
        qty(pair, bid_lots),
    )


def kline(pair: PairSpec, bar: Bar) -> Kline:
    return Kline(
        bar.open_time,
        price(pair, bar.open),
        price(pair, bar.close),
        price(pair, bar.high),
        price(pair, bar.low),
        qty(pair, bar.volume),
    )


def market_kline(pair: PairSpec, bar: Bar) -> MarketKline:
    return MarketKline(
        bar.open_time,
        price(pair, bar.open),
        price(pair, bar.close),
        price(pair, bar.high),
        price(pair, bar.low),
        qty(pair, bar.volume),
    )


def depth_levels(pair: PairSpec, levels: list[tuple[int, int]]) -> list[Level]:
    pp, qp = pair.price_precision, pair.quantity_precision
    return [[format_units(p, pp), format_units(q, qp)] for p, q in levels]


def depth(
    pair: PairSpec, now_ms: int, bids: list[tuple[int, int]], asks: list[tuple[int, int]]
) -> Depth:
    return Depth(now_ms, depth_levels(pair, bids), depth_levels(pair, asks))


def balances(assets: dict[str, AssetSpec], amounts: dict[str, tuple[int, int]]) -> list[Balance]:
    return [
        Balance(
            asset,
            format_units(free, assets[asset].decimals),
            format_units(locked, assets[asset].decimals),
        )
        for asset, (free, locked) in amounts.items()
    ]


def account(assets: dict[str, AssetSpec], amounts: dict[str, tuple[int, int]]) -> Account:
    return Account(balances(assets, amounts))


def to_builtins(value: Any) -> Any:
    """Plain dicts and lists (for callers that need them, e.g. the CLI's offline output); a
    futures number (``Num``) becomes a Decimal."""
    return msgspec.to_builtins(value, builtin_types=(Decimal,), enc_hook=_builtin)


def fraction_text(value: Fraction, places: int, *, up: bool = False) -> str:
    """A fraction as plain decimal text at ``places``, rounded down (or up)."""
    quantum = Fraction(1, 10**places)
    steps = -(-value // quantum) if up else value // quantum
    return format_units(int(steps), places)


# ------------------------------------------------------------------------- futures


class Num:
    """A JSON number written exactly as its plain decimal text (``30000.5``, never ``3e4``).

    Futures answers carry numbers where the seed types a field as a number; msgspec would write
    a float in the shortest form (``1e-08``), so values are kept as text and written raw by
    the API's encoder (``enc_hook``); the OpenAPI document shows them as ``number``
    (``schema_hook``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Num) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Num({self.text})"


def _builtin(value: Any) -> Any:
    if type(value) is Num:
        return Decimal(value.text)
    raise NotImplementedError(f"cannot convert {type(value).__name__}")


def enc_hook(value: Any) -> Any:
    """msgspec encoder hook of the API: a Num is written as its raw text."""
    if type(value) is Num:
        return msgspec.Raw(value.text.encode())
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def schema_hook(kind: Any) -> dict[str, Any]:
    """msgspec schema hook of the OpenAPI document: a Num is a JSON number."""
    if kind is Num:
        return {"type": "number"}
    raise NotImplementedError(f"no schema for {kind!r}")


Number = Annotated[
    Num,
    Meta(
        description="A JSON number in plain decimal notation (never an exponent).", examples=[1.5]
    ),
]
Count = Annotated[int, Meta(ge=0)]
Action = Literal["OPEN", "CLOSE"]
LocalTime = Annotated[
    str,
    Meta(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$",
        description="UTC date and time without zone, YYYY-MM-DDTHH:MM:SS.",
        examples=["2023-11-14T22:13:20"],
    ),
]
ContractName = Annotated[
    str, Meta(description="Canonical (upper-case) contract name.", examples=["E-BTC-USDT"])
]


class FuturesContractInfo(Wire, frozen=True):
    """An element of ``GET /contracts``: money (``...Money``) in the quote currency, volumes in
    whole contracts."""

    symbol: ContractName
    status: Annotated[int, Meta(ge=0, le=1, description="0 non-tradable, 1 tradable.")]
    type: Annotated[str, Meta(description="E: perpetual.")]
    side: Annotated[int, Meta(ge=0, le=1, description="0 inverse, 1 linear.")]
    multiplier: Number
    multiplier_coin: str
    price_precision: Count
    min_order_volume: Count
    min_order_money: Number
    max_market_volume: Count
    max_market_money: Number
    max_limit_volume: Count
    max_limit_money: Number
    max_valid_order: Count


class FuturesTicker(Wire, frozen=True):
    """The contract's rolling 24-hour ticker (strings, as the family's payloads): ``rose`` is
    the change in percent, ``vol`` the volume in contracts."""

    time: Millis
    high: DecimalText
    low: DecimalText
    last: DecimalText
    vol: DecimalText
    rose: DecimalText


class FuturesTickerItem(FuturesTicker, frozen=True):
    """Extension (``GET /ticker_all``): one contract's ticker."""

    contract_name: ContractName


class FuturesIndex(Wire, frozen=True):
    """Index and mark price, and the funding rate applied at the last funding time."""

    index_price: Number
    mark_price: Number
    contract_name: ContractName
    last_funding_rate: Number
    time: Millis


class FuturesOrderId(Wire, frozen=True):
    """The answer to ``POST /order``, ``/conditionOrder`` and ``/cancel``."""

    order_id: IdText
    order_id_string: IdText


class FuturesOrder(Wire, frozen=True):
    """An order (``GET /order``, elements of ``GET /openOrders``). A waiting conditional order
    shows as ``NEW`` with its ``triggerType`` and ``triggerPrice``."""

    order_id: Id
    order_id_string: IdText
    contract_name: ContractName
    symbol: Symbol
    price: Number
    orig_qty: Number
    executed_qty: Number
    avg_price: Number
    status: Status
    side: Side
    action: Action
    type: OrderType
    transact_time: Millis
    trigger_type: Annotated[int, Meta(ge=1, le=4)] | msgspec.UnsetType = msgspec.UNSET
    trigger_price: Number | msgspec.UnsetType = msgspec.UNSET


class FuturesHistoricalOrder(Wire, frozen=True):
    """An element of ``POST /orderHistorical``. ``status``: 0 init, 1 new, 2 filled,
    3 partially filled, 4 canceled, 5 pending cancel, 6 expired (a rejected POST_ONLY);
    ``type``: 1 limit, 2 market, 3 IOC, 4 FOK, 5 POST_ONLY."""

    side: Side
    client_id: str
    ctime_ms: Millis
    ctime: LocalTime
    position_type: Annotated[int, Meta(ge=1, le=2)]
    order_id: Id
    order_id_string: IdText
    avg_price: Number
    price: Number
    volume: Number
    deal_volume: Number
    deal_money: Number
    open_or_close: Action
    leverage_level: Annotated[int, Meta(ge=1)]
    type: Annotated[int, Meta(ge=1, le=5)]
    status: Annotated[int, Meta(ge=0, le=6)]
    contract_id: Id
    contract_name: ContractName
    open_maker_fee_rate: Number
    open_taker_fee_rate: Number
    close_maker_fee_rate: Number
    close_taker_fee_rate: Number


class FuturesProfit(Wire, frozen=True):
    """An element of ``POST /profitHistorical``: a closed position."""

    id: Id
    contract_id: Id
    side: Side
    position_type: Annotated[int, Meta(ge=1, le=2)]
    leverage_level: Annotated[int, Meta(ge=1)]
    volume: Number
    open_price: Number
    open_end_price: Number
    trade_fee: Number
    capital_fee: Number
    realized_amount: Number
    history_realized_amount: Number
    settle_profit: Number
    close_profit: Number
    share_amount: Number
    ctime: Millis
    mtime: Millis


class FuturesTrade(Wire, frozen=True):
    """An element of ``GET /myTrades``, from the caller's side."""

    symbol: Symbol
    id: Id
    trade_id: Id
    bid_id: Id
    ask_id: Id
    bid_user_id: Id
    ask_user_id: Id
    price: Number
    qty: Number
    amount: Number
    time: Millis
    fee: Number
    side: Side
    contract_name: ContractName
    is_maker: bool
    is_buyer: bool


class PositionConfig(Wire, frozen=True):
    """The contract of a position, where clients of the live venues read it from: its id, its
    name and its trading pair (``symbol``, as the futures order records have it)."""

    contract_id: Id
    contract_name: ContractName
    symbol: Symbol


class FuturesPosition(Wire, frozen=True):
    """An open position (``GET /account``, ``GET /positions``, ``POST /edit_position_margin``,
    the ``user_position`` push); ``config`` (an addition to the seed's fields) names its
    contract."""

    id: Id
    uid: Id
    contract_id: Id
    position_type: Annotated[int, Meta(ge=1, le=2)]
    side: Side
    volume: Number
    open_price: Number
    avg_price: Number
    close_price: Number
    leverage_level: Number
    hold_amount: Number
    close_volume: Number
    pending_close_volume: Number
    realized_amount: Number
    history_realized_amount: Number
    trade_fee: Number
    capital_fee: Number
    close_profit: Number
    share_amount: Number
    freeze_lock: Annotated[int, Meta(ge=0, le=2)]
    status: Annotated[int, Meta(ge=0, le=1)]
    ctime: LocalTime
    mtime: LocalTime
    lock_time: LocalTime | None
    broker_id: int
    margin_rate: Number
    reduce_price: Number
    return_rate: Number
    un_realized_amount: Number
    open_realized_amount: Number
    position_balance: Number
    index_price: Number
    keep_rate: Number
    max_fee_rate: Number
    config: PositionConfig


class FuturesPositionItem(FuturesPosition, frozen=True):
    """An element of ``GET /positions``: the position with its contract named."""

    contract_name: ContractName
    contract_symbol: Symbol


class FuturesPositionGroup(Wire, frozen=True):
    contract_id: Id
    contract_name: ContractName
    contract_symbol: Symbol
    positions: list[FuturesPosition]


class FuturesMarginAccount(Wire, frozen=True):
    """One margin coin of the caller's futures account."""

    margin_coin: str
    account_normal: Number
    account_lock: Number
    part_position_normal: Number
    total_position_normal: Number
    achieved_amount: Number
    unrealized_amount: Number
    total_margin_rate: Number
    total_equity: Number
    part_equity: Number
    total_cost: Number
    sum_margin_rate: Number
    position_vos: list[FuturesPositionGroup]


class FuturesAccount(Wire, frozen=True):
    """The answer to ``GET /account``."""

    account: list[FuturesMarginAccount]


class FuturesSetting(Wire, frozen=True):
    """Extension: the caller's leverage and margin mode on a contract."""

    contract_name: ContractName
    now_level: Annotated[int, Meta(ge=1)]
    position_model: Annotated[int, Meta(ge=1, le=2, description="1 cross, 2 isolated.")]


class FuturesCanceledAll(Wire, frozen=True):
    """Extension (``POST /cancel_all``): the orders and conditional orders cancelled."""

    order_ids: list[Id]


class FuturesBalance(Wire, frozen=True):
    """Extension: the caller's futures balance of one margin coin after a transfer (``free``
    available, ``locked`` order holds and position margins)."""

    user_id: Id
    account: Literal["futures"]
    asset: str
    free: DecimalText
    locked: DecimalText


class TriggerItem(Wire, frozen=True):
    """A waiting conditional order in ``POST /trigger_order_list`` (the family's fields;
    numbers as decimal text, as the family sends them). ``id`` and ``triggerOrderId`` are
    both its id; ``ctime``/``mtime`` placement and last change; ``open`` OPEN or CLOSE."""

    id: IdText
    trigger_order_id: IdText
    client_order_id: str
    contract_id: Id
    contract_name: ContractName
    margin_coin: str
    multiplier: DecimalText
    trigger_price: DecimalText
    price: DecimalText
    price_precision: Annotated[int, Meta(ge=0)]
    volume: DecimalText
    open: Action
    side: Side
    type: OrderType
    position_type: Annotated[int, Meta(ge=1, le=2)]
    ctime: Millis
    mtime: Millis
    trigger_type: Annotated[int, Meta(ge=1, le=4)]


class TriggerList(Wire, frozen=True):
    trig_order_list: list[TriggerItem]
    count: Annotated[int, Meta(ge=0, description="Waiting conditional orders in all pages.")]


class TriggerListAnswer(_Envelope, frozen=True, kw_only=True):
    """The answer to ``POST /trigger_order_list``, in the family's envelope."""

    data: TriggerList
