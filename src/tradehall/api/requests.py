"""The request types of the whole API: one definition for the server and its document.

Each field is a msgspec type, which the OpenAPI document (``tradehall.api.openapi``) is
generated from, annotated with the ``tradehall.api.reading`` rule the server reads that
parameter by. Handlers read their request only through these types
(``reading(call.params, SomeRequest)``): the document cannot declare a parameter no rule reads,
and a handler cannot read one the document does not declare. The msgspec type says what the
document promises (patterns, bounds, enums); the rule says how ``Params`` reads it (exact
decimals, empty strings absent, case-insensitive names, the catalogue's codes and messages);
``tests/api/test_api_request_types.py`` checks the two agree where both say something.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from tradehall.api.auth import DEFAULT_RECV_WINDOW, MAX_RECV_WINDOW
from tradehall.api.reading import (
    Addresses,
    Choice,
    ClientId,
    Flag,
    GivenText,
    Integer,
    Interval,
    Items,
    OrderId,
    SignedUnits,
    Symbol,
    Text,
    TxId,
    Units,
)
from tradehall.codes import Code
from tradehall.engine.commands import MAX_INTEREST_HOURS
from tradehall.engine.futures_model import CLOSE, CROSS, ISOLATED, OPEN
from tradehall.engine.orders import BUY, LIMIT, MARKET, SELL, TIME_IN_FORCE

_INT64_MAX = 2**63 - 1

# ------------------------------------------------------------------------- reading rules

RECV_WINDOW = Integer(minimum=1, maximum=MAX_RECV_WINDOW, default=DEFAULT_RECV_WINDOW)
PAIR = Symbol()
ANY_PAIR = Symbol(required=False)
"""Optional: every pair (or contract) when absent."""
SIDE = Choice((BUY, SELL), Code.BAD_SIDE)
ORDER_TYPE = Choice((LIMIT, MARKET), Code.BAD_ORDER_TYPE)
TIF = Choice(TIME_IN_FORCE, Code.BAD_ORDER_TYPE, required=False)
AMOUNT = Units()
TEXT = Text(required=True)
USER_ID = Integer(minimum=0, required=True)
FROM_ID = Integer(minimum=0)
MILLIS = Integer(minimum=0)
ACCOUNTS = ("EXCHANGE", "FUTURE")
SPOT_INTERVALS = Interval("1min, 5min, 15min, 30min, 60min (or 1h), 1day, 1week or 1month")
FUTURES_INTERVALS = Interval("1min, 5min, 15min, 30min, 1h (or 60min), 1day, 1week or 1month")
MAX_BATCH = 10
MAX_FUTURES_CLIENT_ID = 32


def limit(default: int, maximum: int) -> Integer:
    """``limit``: 1 to ``maximum``, ``default`` when absent."""
    return Integer(minimum=1, maximum=maximum, default=default)


# ------------------------------------------------------------------------- field types

SymbolParam = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_-]{1,40}$",
        description="Trading pair, in any case (`btcusdt` = `BTCUSDT`).",
        examples=["BTCUSDT"],
    ),
]
Pair = Annotated[SymbolParam, PAIR]
AnyPair = Annotated[SymbolParam | UnsetType, ANY_PAIR]
_DecimalString = Annotated[
    str, Meta(pattern=r"^[0-9]{1,30}(\.[0-9]{1,30})?$", examples=["0.5", "30000.00"])
]
_PositiveNumber = Annotated[float, Meta(gt=0)]
Amount = _DecimalString | _PositiveNumber
"""A decimal as a JSON number or a string; read exactly, never through binary floating point."""
Units_ = Annotated[Amount, AMOUNT]
OptionalUnits = Annotated[Amount | UnsetType, AMOUNT]
"""Optional in the document, required where read (a LIMIT order's ``price``)."""
AmountText = Annotated[Amount, TEXT]
"""An amount passed on as text to ``tradehall.operations``, which checks it."""
_IdString = Annotated[str, Meta(pattern=r"^[0-9]{1,19}$", description="At most 2^63 - 1.")]
OrderIdParam = Annotated[int, Meta(ge=1, le=_INT64_MAX, description="Order id.")]
OrderIdBody = Annotated[int, Meta(ge=1, le=_INT64_MAX)] | _IdString
UserIdParam = Annotated[
    int, Meta(ge=0, le=_INT64_MAX, description="User id (0: fee account)."), USER_ID
]
UserIdBody = Annotated[Annotated[int, Meta(ge=0, le=_INT64_MAX)] | _IdString, USER_ID]
ClientOrderId = Annotated[
    str,
    Meta(
        pattern=r"^[!-~]{1,64}$",
        max_length=64,
        description="Client order id: 1 to 64 printable ASCII characters other than the"
        " space (`!` to `~`), unique among the account's open orders on the pair.",
    ),
]
OptionalClientOrderId = Annotated[ClientOrderId | UnsetType, ClientId()]
_RecvWindow = Annotated[
    int,
    Meta(ge=1, le=60000, description="Milliseconds a signed request stays valid after X-CH-TS."),
]
RecvWindowParam = Annotated[_RecvWindow, RECV_WINDOW]
RecvWindowBody = Annotated[_RecvWindow | Annotated[str, Meta(pattern=r"^[0-9]{1,5}$")], RECV_WINDOW]
SideParam = Annotated[Literal["BUY", "SELL"], SIDE]
TypeParam = Annotated[Literal["LIMIT", "MARKET"], ORDER_TYPE]
TimeInForce = Annotated[
    Literal["GTC", "IOC", "FOK", "POST_ONLY"],
    Meta(description="Extension, LIMIT orders only: GTC (default), IOC, FOK or POST_ONLY."),
]
OptionalTimeInForce = Annotated[TimeInForce | UnsetType, TIF]
SpotInterval = Annotated[
    Literal["1min", "5min", "15min", "30min", "60min", "1h", "1day", "1week", "1month"],
    SPOT_INTERVALS,
]


Limit100 = Annotated[int, Meta(ge=1, le=100, description="1 to 100.")]
_Millis = Annotated[int, Meta(ge=0, le=_INT64_MAX, description="UNIX time in milliseconds.")]
Limit300 = Annotated[int, Meta(ge=1, le=300, description="1 to 300.")]
Limit1000 = Annotated[int, Meta(ge=1, le=1000, description="1 to 1000.")]
Text_ = Annotated[str, Meta(min_length=1), TEXT]


class RequestSchema(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of the request types: camelCase names, unknown parameters allowed (ignored)."""


# ------------------------------------------------------------------------- spot queries (GET)


class NoQuery(RequestSchema, frozen=True):
    pass


class SymbolQuery(RequestSchema, frozen=True):
    symbol: Pair


class DepthQuery(RequestSchema, frozen=True):
    symbol: Pair
    limit: Annotated[Limit100, limit(100, 100)] = 100


class TradesQuery(RequestSchema, frozen=True):
    symbol: Pair
    limit: Annotated[Limit1000, limit(100, 1000)] = 100


class KlinesQuery(RequestSchema, frozen=True):
    symbol: Pair
    interval: SpotInterval
    limit: Annotated[Limit300, limit(100, 300)] = 100


class MarketKlineQuery(RequestSchema, frozen=True):
    """``GET /v1/spot/market/kline``: ``/klines`` with the live venues' parameter name for the
    interval (``scaleType``)."""

    symbol: Pair
    scale_type: SpotInterval
    limit: Annotated[Limit300, limit(100, 300)] = 100


class TickerV2Query(RequestSchema, frozen=True):
    """``symbol`` gives one pair's ticker; without it, a list: every pair's, or those named
    in ``symbols``."""

    symbol: AnyPair = UNSET
    symbols: Annotated[
        Annotated[
            str,
            Meta(
                pattern=r"^[A-Za-z0-9_-]{1,40}(,[A-Za-z0-9_-]{1,40})*$",
                description="Comma-separated pairs, e.g. `btcusdt,ethusdt` (when no `symbol`).",
            ),
        ]
        | UnsetType,
        Text(),
    ] = UNSET


class HistoryQuery(RequestSchema, frozen=True):
    """The window: the last 7 days without ``startTime`` and ``endTime``; 7 days from the
    one given; at most 7 days with both."""

    symbol: AnyPair = UNSET
    limit: Annotated[Limit100, limit(50, 100)] = 50
    start_time: Annotated[_Millis | UnsetType, MILLIS] = UNSET
    end_time: Annotated[_Millis | UnsetType, MILLIS] = UNSET
    recv_window: RecvWindowParam = 5000


_Account = Annotated[
    Literal["EXCHANGE", "FUTURE"], Meta(description="EXCHANGE: the spot account; FUTURE: futures.")
]
AccountParam = Annotated[_Account, Choice(ACCOUNTS)]
_MillisBody = Annotated[
    _Millis | Annotated[str, Meta(pattern=r"^[0-9]{1,19}$")] | UnsetType, MILLIS
]


class AssetTransferRequest(RequestSchema, frozen=True):
    coin_symbol: Annotated[str, Meta(description="A margin coin of the futures contracts."), TEXT]
    amount: AmountText
    from_account: AccountParam
    to_account: AccountParam
    recv_window: RecvWindowBody = 5000


class TransferQueryRequest(RequestSchema, frozen=True):
    """By ``transferId``, or by direction (``fromAccount`` and ``toAccount``, then required),
    optionally ``coinSymbol``, within the 7-day window of ``startTime``/``endTime``."""

    transfer_id: Annotated[OrderIdBody | UnsetType, OrderId()] = UNSET
    coin_symbol: Annotated[str | UnsetType, Text()] = UNSET
    from_account: Annotated[_Account | UnsetType, Choice(ACCOUNTS, required=False)] = UNSET
    to_account: Annotated[_Account | UnsetType, Choice(ACCOUNTS, required=False)] = UNSET
    start_time: _MillisBody = UNSET
    end_time: _MillisBody = UNSET
    page: Annotated[
        Annotated[int, Meta(ge=1, le=1_000_000)] | Annotated[str, Meta(pattern=r"^[0-9]{1,7}$")],
        Integer(minimum=1, maximum=1_000_000, default=1),
    ] = 1
    limit: Annotated[Limit100 | Annotated[str, Meta(pattern=r"^[0-9]{1,3}$")], limit(20, 100)] = 20
    recv_window: RecvWindowBody = 5000


class SignedQuery(RequestSchema, frozen=True):
    recv_window: RecvWindowParam = 5000


class OrderQuery(RequestSchema, frozen=True):
    """Either ``orderId`` or ``newClientOrderId`` (the latest order with that id)."""

    symbol: Pair
    order_id: Annotated[OrderIdParam | UnsetType, OrderId()] = UNSET
    new_client_order_id: OptionalClientOrderId = UNSET
    recv_window: RecvWindowParam = 5000


class OpenOrdersQuery(RequestSchema, frozen=True):
    """Without ``symbol`` (an extension): the open orders of every pair."""

    symbol: AnyPair = UNSET
    limit: Annotated[Limit1000, limit(100, 1000)] = 100
    recv_window: RecvWindowParam = 5000


class MarginOpenOrdersQuery(RequestSchema, frozen=True):
    """A margin account is a pair's: ``symbol`` is required."""

    symbol: Pair
    limit: Annotated[Limit1000, limit(100, 1000)] = 100
    recv_window: RecvWindowParam = 5000


class MyTradesQuery(RequestSchema, frozen=True):
    symbol: Pair
    limit: Annotated[Limit1000, limit(100, 1000)] = 100
    from_id: Annotated[
        Annotated[
            int,
            Meta(
                ge=0,
                le=_INT64_MAX,
                description="The page holds the `limit` trades with id >= fromId closest to"
                " it; without it, the most recent ones.",
            ),
        ]
        | UnsetType,
        FROM_ID,
    ] = UNSET
    recv_window: RecvWindowParam = 5000


# ------------------------------------------------------------------------- spot bodies (POST)


class OrderRequest(RequestSchema, frozen=True):
    """A new order. LIMIT needs ``price`` and ``volume`` (base quantity); MARKET BUY's
    ``volume`` is the quote amount to spend, MARKET SELL's the base quantity."""

    symbol: Pair
    side: SideParam
    type: TypeParam
    volume: Units_
    price: OptionalUnits = UNSET
    new_client_order_id: OptionalClientOrderId = UNSET
    time_in_force: OptionalTimeInForce = UNSET
    recv_window: RecvWindowBody = 5000


class BatchOrderItem(RequestSchema, frozen=True):
    side: SideParam
    batch_type: TypeParam
    volume: Units_
    price: OptionalUnits = UNSET
    new_client_order_id: OptionalClientOrderId = UNSET
    time_in_force: OptionalTimeInForce = UNSET


class BatchOrdersRequest(RequestSchema, frozen=True):
    """1 to 10 orders, validated together: if one fails, none is placed."""

    symbol: Pair
    orders: Annotated[list[BatchOrderItem], Meta(min_length=1, max_length=10), Items(MAX_BATCH)]
    recv_window: RecvWindowBody = 5000


class CancelRequest(RequestSchema, frozen=True):
    """Either ``orderId`` or ``newClientOrderId`` (the latest order with that id)."""

    symbol: Pair
    order_id: Annotated[OrderIdBody | UnsetType, OrderId()] = UNSET
    new_client_order_id: OptionalClientOrderId = UNSET
    recv_window: RecvWindowBody = 5000


class BatchCancelRequest(RequestSchema, frozen=True):
    symbol: Pair
    order_ids: Annotated[
        list[OrderIdBody],
        Meta(
            min_length=1,
            max_length=10,
            description='Also taken as one text of ids separated by commas (`"12,13"`), as'
            " some clients of the family send them.",
        ),
        Items(MAX_BATCH, comma_text=True),
    ]
    recv_window: RecvWindowBody = 5000


# ------------------------------------------------------------------------- margin extensions

_PairAsset = Annotated[str, Meta(min_length=1, description="The pair's base or quote asset."), TEXT]


class MarginTransferRequest(RequestSchema, frozen=True):
    """Extension. ``IN`` moves funds from the spot account to the pair's margin account,
    ``OUT`` back (as far as the margin account's risk allows)."""

    symbol: Pair
    asset: _PairAsset
    amount: Units_
    direction: Annotated[Literal["IN", "OUT"], Choice(("IN", "OUT"))]
    recv_window: RecvWindowBody = 5000


class MarginRepayRequest(RequestSchema, frozen=True):
    """Extension."""

    symbol: Pair
    asset: _PairAsset
    amount: Units_
    recv_window: RecvWindowBody = 5000


class MarginAccountQuery(RequestSchema, frozen=True):
    symbol: Pair
    recv_window: RecvWindowParam = 5000


# ------------------------------------------------------------------------- admin requests

_Asset = Annotated[str, Meta(min_length=1, examples=["USDT"]), TEXT]
_TxId = Annotated[str | UnsetType, TxId()]


class CreateUserRequest(RequestSchema, frozen=True):
    name: Annotated[Annotated[str, Meta(min_length=1, max_length=64)] | UnsetType, GivenText()] = (
        UNSET
    )


class CreateKeyRequest(RequestSchema, frozen=True):
    user_id: UserIdBody
    read_only: Annotated[bool | Literal["true", "false", "1", "0"], Flag()] = False
    ips: Annotated[
        list[Annotated[str, Meta(description="An IP address or CIDR block.")]], Addresses()
    ] = msgspec.field(default_factory=list)


class RevokeKeyRequest(RequestSchema, frozen=True):
    api_key: Annotated[str, Meta(min_length=1), GivenText(required=True)]


class TransferRequest(RequestSchema, frozen=True):
    """Idempotent by ``txId`` (generated when absent)."""

    user_id: UserIdBody
    asset: _Asset
    amount: AmountText
    tx_id: _TxId = UNSET


class BalancesQuery(RequestSchema, frozen=True):
    user_id: UserIdParam


class AdminLogQuery(RequestSchema, frozen=True):
    """The admin audit trail, newest first: ``limit`` entries with an id below ``before``."""

    limit: Annotated[Limit1000, limit(100, 1000)] = 100
    before: Annotated[
        Annotated[int, Meta(ge=1, le=_INT64_MAX, description="An entry id.")] | UnsetType,
        Integer(minimum=1),
    ] = UNSET


class FundRequest(RequestSchema, frozen=True):
    """Idempotent by ``txId`` (generated when absent)."""

    account: Annotated[Literal["pool", "insurance"], TEXT]
    asset: _Asset
    amount: AmountText
    tx_id: _TxId = UNSET


class AdminMarginTransferRequest(RequestSchema, frozen=True):
    user_id: UserIdBody
    symbol: Annotated[SymbolParam, TEXT]
    asset: _PairAsset
    amount: AmountText
    from_: Annotated[Literal["spot", "margin"], Meta(description="spot or margin"), TEXT] = (
        msgspec.field(name="from")
    )
    to: Annotated[Literal["spot", "margin"], TEXT]


class AdminMarginQuery(RequestSchema, frozen=True):
    user_id: UserIdParam
    symbol: Annotated[SymbolParam, TEXT]


_MarginCoin = Annotated[str, Meta(min_length=1, description="A contract's margin coin."), TEXT]


class AdminFuturesTransferRequest(RequestSchema, frozen=True):
    user_id: UserIdBody
    asset: _MarginCoin
    amount: AmountText
    from_: Annotated[Literal["spot", "futures"], Meta(description="spot or futures"), TEXT] = (
        msgspec.field(name="from")
    )
    to: Annotated[Literal["spot", "futures"], TEXT]


class AdminUserRequest(RequestSchema, frozen=True):
    user_id: UserIdBody


class AdminInterestRequest(RequestSchema, frozen=True):
    hours: Annotated[
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_INTEREST_HOURS,
                description="Hours of interest to charge at once (1 when absent).",
            ),
        ],
        Integer(minimum=1, maximum=MAX_INTEREST_HOURS, default=1),
    ] = 1


class AdminFundingRequest(RequestSchema, frozen=True):
    contract: Annotated[
        Annotated[
            str,
            Meta(
                pattern=r"^[A-Za-z0-9-]{1,64}$",
                description="One contract; every contract with a mark price when absent"
                " (an empty one is refused: it must not widen to every contract).",
            ),
        ]
        | UnsetType,
        GivenText(empty=False),
    ] = UNSET


_AdminContract = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9-]{1,64}$",
        description="Contract name, in any case.",
        examples=["E-BTC-USDT"],
    ),
    TEXT,
]


class AdminIndexPriceRequest(RequestSchema, frozen=True):
    contract: _AdminContract
    price: AmountText
    feed: Annotated[
        Annotated[
            str,
            Meta(
                pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$",
                description="A named feed: the price is one source among the index's"
                " (weighed, smoothed, left out when stale or far from the others). Without"
                " it, the price is the index at once (the operator's override); an empty one"
                " is refused, not taken as absent.",
                examples=["binance"],
            ),
        ]
        | UnsetType,
        GivenText(empty=False),
    ] = UNSET


class AdminIndexQuery(RequestSchema, frozen=True):
    contract: _AdminContract


# ------------------------------------------------------------------------- futures requests

ContractNameParam = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_-]{1,40}$",
        description="Contract name, in any case (`e-btc-usdt` = `E-BTC-USDT`).",
        examples=["E-BTC-USDT"],
    ),
]
Contract = Annotated[ContractNameParam, PAIR]
AnyContract = Annotated[ContractNameParam | UnsetType, ANY_PAIR]
_SignedDecimalString = Annotated[str, Meta(pattern=r"^-?[0-9]{1,30}(\.[0-9]{1,30})?$")]
SignedAmount = _SignedDecimalString | float
FuturesInterval = Annotated[
    Literal["1min", "5min", "15min", "30min", "1h", "60min", "1day", "1week", "1month"],
    FUTURES_INTERVALS,
]
PositionTypeParam = Annotated[
    Annotated[
        Literal[1, 2], Meta(description="1 cross, 2 isolated; default: the caller's setting.")
    ]
    | Literal["1", "2"]
    | UnsetType,
    Integer(minimum=CROSS, maximum=ISOLATED),
]
FromIdParam = Annotated[
    int,
    Meta(
        ge=0,
        le=_INT64_MAX,
        description="The page holds the `limit` records with id >= fromId closest to it;"
        " without it, the most recent ones.",
    ),
]
FuturesClientOrderId = Annotated[
    Annotated[
        str,
        Meta(
            pattern=r"^[!-~]{1,32}$",
            max_length=32,
            description="Client order id: 1 to 32 printable ASCII characters other than the"
            " space (`!` to `~`), unique among the account's open orders on the contract.",
        ),
    ]
    | UnsetType,
    ClientId(MAX_FUTURES_CLIENT_ID),
]
OpenParam = Annotated[Literal["OPEN", "CLOSE"], Choice((OPEN, CLOSE))]
FuturesOrderId = Annotated[OrderIdBody | UnsetType, OrderId()]


class ContractQuery(RequestSchema, frozen=True):
    contract_name: Contract


class FuturesDepthQuery(RequestSchema, frozen=True):
    contract_name: Contract
    limit: Annotated[Limit100, limit(100, 100)] = 100


class FuturesIndexQuery(RequestSchema, frozen=True):
    contract_name: Contract
    limit: Annotated[Limit1000, limit(100, 1000)] = 100


class FuturesKlinesQuery(RequestSchema, frozen=True):
    contract_name: Contract
    interval: FuturesInterval
    limit: Annotated[Limit300, limit(100, 300)] = 100


OrderUnitParam = Annotated[
    Annotated[
        Literal[1, 2, 3],
        Meta(
            description="The family's unit of `volume`: 1 an amount of the contract's"
            " `multiplierCoin` (a whole number of contracts, else -1111), 2 contracts, 3 the"
            " value in the quote currency (a MARKET OPEN's budget; refused elsewhere)."
            " Absent: the value for a MARKET OPEN, contracts on every other order."
        ),
    ]
    | Literal["1", "2", "3"]
    | UnsetType,
    Integer(minimum=1, maximum=3),
]


class FuturesOrderRequest(RequestSchema, frozen=True):
    """A new futures order. ``volume`` counts what ``orderUnit`` says; without it, a number of
    contracts, except for a MARKET OPEN order: its value in the quote currency. LIMIT needs
    ``price``. BUY+OPEN opens a long,
    SELL+CLOSE reduces it; SELL+OPEN opens a short, BUY+CLOSE reduces it."""

    contract_name: Contract
    side: SideParam
    type: TypeParam
    open: OpenParam
    volume: Units_
    price: OptionalUnits = UNSET
    position_type: PositionTypeParam = UNSET
    client_order_id: FuturesClientOrderId = UNSET
    time_in_force: Annotated[Literal["IOC", "FOK", "POST_ONLY", "GTC"] | UnsetType, TIF] = UNSET
    order_unit: OrderUnitParam = UNSET
    recv_window: RecvWindowBody = 5000


class FuturesConditionOrderRequest(RequestSchema, frozen=True):
    """A conditional order: submitted once the last trade price reaches ``triggerPrice``.
    ``triggerType`` 1 stop-loss, 2 take-profit, 3 trailing buy, 4 trailing sell."""

    contract_name: Contract
    side: SideParam
    type: TypeParam
    open: OpenParam
    volume: Units_
    trigger_type: Annotated[
        Literal[1, 2, 3, 4] | Literal["1", "2", "3", "4"],
        Integer(minimum=1, maximum=4, required=True),
    ]
    trigger_price: Units_
    price: OptionalUnits = UNSET
    position_type: PositionTypeParam = UNSET
    client_order_id: FuturesClientOrderId = UNSET
    order_unit: OrderUnitParam = UNSET
    recv_window: RecvWindowBody = 5000


class FuturesCancelRequest(RequestSchema, frozen=True):
    """Either ``orderId`` or ``clientOrderId``; an order or a waiting conditional order."""

    contract_name: Contract
    order_id: FuturesOrderId = UNSET
    client_order_id: FuturesClientOrderId = UNSET
    recv_window: RecvWindowBody = 5000


class FuturesOrderQuery(RequestSchema, frozen=True):
    """Either ``orderId`` or ``clientOrderId`` (the latest order with that id)."""

    contract_name: Contract
    order_id: Annotated[OrderIdParam | UnsetType, OrderId()] = UNSET
    client_order_id: FuturesClientOrderId = UNSET
    recv_window: RecvWindowParam = 5000


class FuturesOpenOrdersQuery(RequestSchema, frozen=True):
    """Without ``contractName``: the open orders of every contract."""

    contract_name: AnyContract = UNSET
    recv_window: RecvWindowParam = 5000


class FuturesHistoryRequest(RequestSchema, frozen=True):
    """Without ``contractName``: every contract."""

    contract_name: AnyContract = UNSET
    limit: Annotated[
        Limit1000 | Annotated[str, Meta(pattern=r"^[0-9]{1,4}$")], limit(100, 1000)
    ] = 100
    from_id: Annotated[FromIdParam | _IdString | UnsetType, FROM_ID] = UNSET
    recv_window: RecvWindowBody = 5000


class FuturesMyTradesQuery(RequestSchema, frozen=True):
    """Without ``contractName``: the trades of every contract."""

    contract_name: AnyContract = UNSET
    limit: Annotated[Limit1000, limit(100, 1000)] = 100
    from_id: Annotated[FromIdParam | UnsetType, FROM_ID] = UNSET
    recv_window: RecvWindowParam = 5000


_PositionModel = Annotated[
    Literal[1, 2] | Literal["1", "2"], Integer(minimum=1, maximum=2, required=True)
]


class EditLeverRequest(RequestSchema, frozen=True):
    """Extension. Only with no open position or order on the contract (else -1020)."""

    contract_name: Contract
    now_level: Annotated[
        Annotated[int, Meta(ge=1, le=125)] | Annotated[str, Meta(pattern=r"^[0-9]{1,3}$")],
        Integer(minimum=1, maximum=125, required=True),
    ]
    recv_window: RecvWindowBody = 5000


_MarginModel = Annotated[
    Literal[1, 2] | Literal["1", "2"] | UnsetType, Integer(minimum=1, maximum=2)
]


class EditMarginModelRequest(RequestSchema, frozen=True):
    """Extension: the margin mode of the caller's positions on the contract, 1 cross or 2
    isolated, in ``positionModel`` or, as some of the family's documents name it,
    ``marginModel`` (either; both must agree). Only with no open position or order on the
    contract (else -1020)."""

    contract_name: Contract
    position_model: _MarginModel = UNSET
    margin_model: _MarginModel = UNSET
    recv_window: RecvWindowBody = 5000


class EditPositionModelRequest(RequestSchema, frozen=True):
    """Positions are always two-way: 2 succeeds and changes nothing, 1 (net) gives -1020."""

    contract_name: Contract
    position_model: _PositionModel
    recv_window: RecvWindowBody = 5000


class TriggerListRequest(RequestSchema, frozen=True):
    """Without ``contractName``: every contract."""

    contract_name: AnyContract = UNSET
    page: Annotated[
        Annotated[int, Meta(ge=1, le=1_000_000)] | Annotated[str, Meta(pattern=r"^[0-9]{1,7}$")],
        Integer(minimum=1, maximum=1_000_000, default=1),
    ] = 1
    limit: Annotated[Limit1000 | Annotated[str, Meta(pattern=r"^[0-9]{1,4}$")], limit(20, 1000)] = (
        20
    )
    recv_window: RecvWindowBody = 5000


class EditPositionMarginRequest(RequestSchema, frozen=True):
    """Extension: add (positive ``amount``) or take out (negative) an isolated position's
    margin, in the margin coin."""

    position_id: Annotated[OrderIdBody, OrderId(required=True)]
    amount: Annotated[SignedAmount, SignedUnits()]
    recv_window: RecvWindowBody = 5000


class FuturesCancelAllRequest(RequestSchema, frozen=True):
    """Extension. Without ``contractName``: every contract."""

    contract_name: AnyContract = UNSET
    recv_window: RecvWindowBody = 5000


class FuturesTransferRequest(RequestSchema, frozen=True):
    """Extension: move a margin coin between the caller's spot and futures accounts."""

    asset: _MarginCoin
    amount: AmountText
    from_: Annotated[Literal["spot", "futures"], Meta(description="spot or futures"), TEXT] = (
        msgspec.field(name="from")
    )
    to: Annotated[Literal["spot", "futures"], TEXT]
    recv_window: RecvWindowBody = 5000


# ------------------------------------------------------------------------- self-service accounts


class CreateAccountRequest(RequestSchema, frozen=True):
    """Extension (``[sandbox] self_service``): nothing to send; fields are ignored."""


class SandboxRequest(RequestSchema, frozen=True):
    """Extension (``[sandbox] self_service``): a self-service account's own request, signed
    with its key; nothing to send but the signature's window."""

    recv_window: RecvWindowBody = 5000
