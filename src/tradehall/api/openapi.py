"""The OpenAPI 3.1 document of the whole API, served at ``GET /openapi.json``.

Generated from the routes the app serves and from types: the responses are the wire Structs of
``tradehall.api.wire`` (the very types the handlers return), the requests the Structs of
``tradehall.api.requests``, the very types the handlers read their requests through (each field
carries the ``tradehall.api.reading`` rule it is read by). Every route must have an entry in
``OPERATIONS``: building the document fails for a route without one.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from tradehall import __version__
from tradehall.api import admin, futures, margin, selfservice, spot, wire
from tradehall.api.requests import (
    AdminFundingRequest,
    AdminFuturesTransferRequest,
    AdminIndexPriceRequest,
    AdminIndexQuery,
    AdminInterestRequest,
    AdminLogQuery,
    AdminMarginQuery,
    AdminMarginTransferRequest,
    AdminUserRequest,
    AssetTransferRequest,
    BalancesQuery,
    BatchCancelRequest,
    BatchOrdersRequest,
    CancelRequest,
    ContractQuery,
    CreateAccountRequest,
    CreateKeyRequest,
    CreateUserRequest,
    DepthQuery,
    EditLeverRequest,
    EditMarginModelRequest,
    EditPositionMarginRequest,
    EditPositionModelRequest,
    FundRequest,
    FuturesCancelAllRequest,
    FuturesCancelRequest,
    FuturesConditionOrderRequest,
    FuturesDepthQuery,
    FuturesHistoryRequest,
    FuturesIndexQuery,
    FuturesKlinesQuery,
    FuturesMyTradesQuery,
    FuturesOpenOrdersQuery,
    FuturesOrderQuery,
    FuturesOrderRequest,
    FuturesTransferRequest,
    HistoryQuery,
    KlinesQuery,
    MarginAccountQuery,
    MarginOpenOrdersQuery,
    MarginRepayRequest,
    MarginTransferRequest,
    MarketKlineQuery,
    MyTradesQuery,
    NoQuery,
    OpenOrdersQuery,
    OrderQuery,
    OrderRequest,
    RequestSchema,
    RevokeKeyRequest,
    SandboxRequest,
    SignedQuery,
    SymbolQuery,
    TickerV2Query,
    TradesQuery,
    TransferQueryRequest,
    TransferRequest,
    TriggerListRequest,
)

PATH = "/openapi.json"
EXTENSION = "x-tradehall-extension"
"""Vendor key marking what this project adds to the family's API."""
_REF = "#/components/schemas/{name}"
_INT64_MAX = 2**63 - 1

# ------------------------------------------------------------------------- operations

Auth = Literal["NONE", "READ", "TRADE", "ADMIN"]
"""NONE: public. READ: signed, a read-only key suffices. TRADE: signed, trade key. ADMIN: the
admin token, from loopback."""


@dataclass(frozen=True, slots=True)
class Operation:
    operation_id: str
    summary: str
    tag: str
    auth: Auth
    response: Any
    query: type[RequestSchema] = NoQuery
    body: type[RequestSchema] | None = None
    body_required: bool = True
    extension: bool = False
    errors: tuple[str, ...] | None = None
    """HTTP statuses of the error answers; by default those of ``auth``."""
    description: str = ""


_S = spot.PREFIX
_M = margin.PREFIX
_MX = margin.EXTENSION
_A = admin.PREFIX


def _admin(op_id: str, summary: str, response: Any, **kw: Any) -> Operation:
    return Operation(op_id, summary, "Admin", "ADMIN", response, extension=True, **kw)


def _margin(op_id: str, summary: str, auth: Auth, response: Any, **kw: Any) -> Operation:
    return Operation(op_id, summary, "Margin", auth, response, **kw)


OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", f"{_S}/ping"): Operation("ping", "Connectivity check", "Public", "NONE", wire.Empty),
    ("GET", f"{_S}/time"): Operation(
        "serverTime", "Server time", "Public", "NONE", wire.ServerTime
    ),
    ("GET", f"{_S}/symbols"): Operation("symbols", "Trading pairs", "Public", "NONE", wire.Symbols),
    ("GET", f"{_S}/depth"): Operation(
        "depth", "Order book", "Public", "NONE", wire.Depth, DepthQuery
    ),
    ("GET", f"{_S}/ticker"): Operation(
        "ticker", "24-hour ticker", "Public", "NONE", wire.Ticker, SymbolQuery
    ),
    ("GET", f"{_S}/trades"): Operation(
        "trades", "Recent trades (newest first)", "Public", "NONE", wire.PublicTrades, TradesQuery
    ),
    ("GET", f"{_S}/klines"): Operation(
        "klines", "Candlesticks (oldest first)", "Public", "NONE", list[wire.Kline], KlinesQuery
    ),
    ("POST", f"{_S}/order"): Operation(
        "createOrder", "Place an order", "Trading", "TRADE", wire.OrderCreated, body=OrderRequest
    ),
    ("POST", f"{_S}/order/test"): Operation(
        "testOrder",
        "Validate an order without placing it",
        "Trading",
        "TRADE",
        wire.Empty,
        body=OrderRequest,
    ),
    ("POST", f"{_S}/batchOrders"): Operation(
        "batchOrders",
        "Place up to 10 orders",
        "Trading",
        "TRADE",
        wire.BatchIds,
        body=BatchOrdersRequest,
    ),
    ("GET", f"{_S}/order"): Operation(
        "getOrder", "One order", "Trading", "READ", wire.OrderDetail, OrderQuery
    ),
    ("POST", f"{_S}/cancel"): Operation(
        "cancelOrder",
        "Cancel an order",
        "Trading",
        "TRADE",
        wire.OrderCanceled,
        body=CancelRequest,
    ),
    ("POST", f"{_S}/batchCancel"): Operation(
        "batchCancel",
        "Cancel up to 10 orders",
        "Trading",
        "TRADE",
        wire.BatchCancelResult,
        body=BatchCancelRequest,
    ),
    ("GET", f"{_S}/openOrders"): Operation(
        "openOrders",
        "Open orders (newest first)",
        "Trading",
        "READ",
        list[wire.OpenOrder],
        OpenOrdersQuery,
        description="tradehall also accepts no `symbol`: the open orders of every pair.",
    ),
    ("GET", f"{_S}/myTrades"): Operation(
        "myTrades",
        "The account's trades (newest first)",
        "Trading",
        "READ",
        list[wire.AccountTrade],
        MyTradesQuery,
    ),
    ("GET", f"{_S}/account"): Operation(
        "account", "Balances", "Account", "READ", wire.Account, SignedQuery
    ),
    ("POST", f"{_M}/order"): _margin(
        "marginCreateOrder",
        "Place a margin order",
        "TRADE",
        wire.OrderCreated,
        body=OrderRequest,
        description="Acts on the caller's isolated margin account of the pair.",
    ),
    ("GET", f"{_M}/order"): _margin(
        "marginGetOrder", "One margin order", "READ", wire.OrderDetail, query=OrderQuery
    ),
    ("POST", f"{_M}/cancel"): _margin(
        "marginCancelOrder",
        "Cancel a margin order",
        "TRADE",
        wire.OrderCanceled,
        body=CancelRequest,
    ),
    ("GET", f"{_M}/openOrders"): _margin(
        "marginOpenOrders",
        "Open margin orders (newest first)",
        "READ",
        list[wire.OpenOrder],
        query=MarginOpenOrdersQuery,
    ),
    ("GET", f"{_M}/myTrades"): _margin(
        "marginMyTrades",
        "The margin account's trades (newest first)",
        "READ",
        list[wire.AccountTrade],
        query=MyTradesQuery,
    ),
    ("POST", f"{_MX}/transfer"): _margin(
        "marginTransfer",
        "Move funds between the spot and the margin account of a pair",
        "TRADE",
        wire.MarginAccountView,
        body=MarginTransferRequest,
        extension=True,
    ),
    ("POST", f"{_MX}/repay"): _margin(
        "marginRepay",
        "Repay borrowed funds (interest first)",
        "TRADE",
        wire.MarginRepaid,
        body=MarginRepayRequest,
        extension=True,
    ),
    ("GET", f"{_MX}/account"): _margin(
        "marginAccount",
        "The margin account of a pair",
        "READ",
        wire.MarginAccountView,
        query=MarginAccountQuery,
        extension=True,
    ),
    ("POST", f"{_A}/users"): _admin(
        "adminCreateUser",
        "Create a user",
        wire.AdminUser,
        body=CreateUserRequest,
        body_required=False,
    ),
    ("GET", f"{_A}/users"): _admin("adminListUsers", "List users", wire.AdminUsers),
    ("POST", f"{_A}/keys"): _admin(
        "adminCreateKey", "Create an API key", wire.AdminKey, body=CreateKeyRequest
    ),
    ("POST", f"{_A}/keys/revoke"): _admin(
        "adminRevokeKey", "Revoke an API key", wire.AdminKeyRevoked, body=RevokeKeyRequest
    ),
    ("POST", f"{_A}/deposit"): _admin(
        "adminDeposit", "Credit a deposit", wire.AdminTransfer, body=TransferRequest
    ),
    ("POST", f"{_A}/withdraw"): _admin(
        "adminWithdraw", "Debit a withdrawal", wire.AdminTransfer, body=TransferRequest
    ),
    ("GET", f"{_A}/balances"): _admin(
        "adminBalances", "A user's balances", wire.AdminBalances, query=BalancesQuery
    ),
    ("POST", f"{_A}/system/deposit"): _admin(
        "adminFundDeposit",
        "Fund the lending pool or insurance fund",
        wire.AdminFund,
        body=FundRequest,
    ),
    ("POST", f"{_A}/system/withdraw"): _admin(
        "adminFundWithdraw",
        "Take funds out of the lending pool or insurance fund",
        wire.AdminFund,
        body=FundRequest,
    ),
    ("GET", f"{_A}/system"): _admin(
        "adminSystem",
        "Balances of the fee account, lending pool and insurance fund",
        wire.AdminSystem,
    ),
    ("POST", f"{_A}/margin/transfer"): _admin(
        "adminMarginTransfer",
        "Move a user's funds between spot and margin",
        wire.MarginAccountView,
        body=AdminMarginTransferRequest,
    ),
    ("GET", f"{_A}/margin/account"): _admin(
        "adminMarginAccount",
        "A user's margin account on a pair",
        wire.MarginAccountView,
        query=AdminMarginQuery,
    ),
    ("POST", f"{_A}/futures/transfer"): _admin(
        "adminFuturesTransfer",
        "Move a user's funds between spot and futures",
        admin.AdminFuturesBalance,
        body=AdminFuturesTransferRequest,
    ),
    ("POST", f"{_A}/futures/index-price"): _admin(
        "adminIndexPrice",
        "Set a contract's index price, or push a named feed's price",
        admin.AdminIndexPrice,
        body=AdminIndexPriceRequest,
    ),
    ("GET", f"{_A}/futures/index"): _admin(
        "adminIndexSources",
        "A contract's index, mark, price band and index sources",
        admin.AdminIndexSources,
        query=AdminIndexQuery,
    ),
    ("GET", f"{_A}/markets"): _admin(
        "adminMarkets", "Assets, pairs and contracts", admin.AdminMarketsWithContracts
    ),
    ("GET", f"{_A}/audit"): _admin("adminAudit", "Check every invariant", wire.AdminAudit),
    ("GET", f"{_A}/storage"): _admin(
        "adminStorage", "Rows and sizes per table, and the retention in force", wire.AdminStorage
    ),
    ("GET", f"{_A}/status"): _admin("adminStatus", "Server status", wire.AdminStatus),
    ("GET", f"{_A}/sim"): _admin(
        "adminSimStatus",
        "The market simulation: markets, participants, injected faults",
        dict[str, Any],
    ),
    ("POST", f"{_A}/sim/start"): _admin(
        "adminSimStart", "Start the market simulation", dict[str, Any], body_required=False
    ),
    ("POST", f"{_A}/sim/stop"): _admin(
        "adminSimStop",
        "Stop the market simulation and cancel its participants' orders",
        dict[str, Any],
        body_required=False,
    ),
    ("POST", f"{_A}/futures/funding-now"): _admin(
        "adminFundingNow",
        "Settle funding now (time control)",
        dict[str, Any],
        body=AdminFundingRequest,
        body_required=False,
    ),
    ("POST", f"{_A}/margin/interest-now"): _admin(
        "adminInterestNow",
        "Charge margin interest now (time control)",
        dict[str, Any],
        body=AdminInterestRequest,
        body_required=False,
    ),
    ("POST", f"{_A}/accounts/reset"): _admin(
        "adminResetAccount",
        "Cancel a user's orders, close its positions at the mark, restore starting balances",
        dict[str, Any],
        body=AdminUserRequest,
    ),
    ("GET", f"{_A}/keys"): _admin("adminListKeys", "List API keys (no secrets)", admin.AdminKeys),
    ("GET", f"{_A}/admin-log"): _admin(
        "adminLog",
        "The admin audit trail: every admin action, who, when, what and the result",
        admin.AdminLog,
        query=AdminLogQuery,
    ),
    ("GET", f"{_A}/activity"): _admin(
        "adminActivity",
        "Open orders per market, request and error rates, recent errors",
        admin.AdminActivity,
    ),
    ("GET", f"{_A}/gateways"): _admin(
        "adminGateways",
        "The gateway workers the engine process heard from lately (empty for serve)",
        admin.AdminGateways,
    ),
    ("GET", PATH): Operation(
        "openapi",
        "This document",
        "Meta",
        "NONE",
        dict[str, Any],
        extension=True,
        errors=("400",),
    ),
}

_S2 = spot.PREFIX_V2
_S3 = spot.PREFIX_V3
OPERATIONS.update(
    {
        ("GET", f"{_S2}/ticker"): Operation(
            "tickerV2",
            "24-hour tickers with the best bid and ask",
            "Public",
            "NONE",
            wire.TickerItem | list[wire.TickerItem],
            TickerV2Query,
            description="With `symbol`, one object; otherwise a list (every pair, or those in"
            " `symbols`). `amount` is the traded value in the quote asset.",
        ),
        ("GET", spot.MARKET_KLINE): Operation(
            "marketKline",
            "Candlesticks in the live venues' shape (oldest first)",
            "Public",
            "NONE",
            wire.MarketKlineAnswer,
            MarketKlineQuery,
            description="The candle address of the family's live venues (their public host;"
            " here the server root): the bars of `/sapi/v1/klines` for `scaleType`, wrapped"
            ' in the family\'s envelope (`code` "0", `msg` SUCCESS, bars in `data.data`); `id`'
            " is the open time in ms. Errors are the usual `{code, msg}`.",
        ),
        ("POST", f"{_S}/asset/transfer"): Operation(
            "assetTransfer",
            "Move funds between the spot and the futures account",
            "Account",
            "TRADE",
            wire.TransferAnswer,
            body=AssetTransferRequest,
            description='The family\'s shape: the answer wraps `data` in `code` "0" and'
            " `msg` SUCCESS.",
        ),
        ("POST", f"{_S}/asset/transferQuery"): Operation(
            "assetTransferQuery",
            "Transfers between the spot and the futures account (newest first)",
            "Account",
            "READ",
            wire.TransferQueryAnswer,
            body=TransferQueryRequest,
            body_required=False,
        ),
        ("GET", f"{_S3}/historyOrders"): Operation(
            "historyOrders",
            "The account's orders, open and ended (newest first)",
            "Trading",
            "READ",
            list[wire.HistoryOrder],
            HistoryQuery,
            description="Orders placed within the time window; every pair without `symbol`.",
        ),
        ("GET", f"{_S3}/myTrades"): Operation(
            "myTradesV3",
            "The account's trades in a time window (newest first)",
            "Trading",
            "READ",
            list[wire.AccountTrade],
            HistoryQuery,
            description="Every pair without `symbol`.",
        ),
    }
)


def _v2_alias(op: Operation) -> Operation:
    note = "The same operation as under /sapi/v1 (the family's v2 address)."
    return dataclasses.replace(
        op, operation_id=op.operation_id + "V2", description=f"{note} {op.description}".strip()
    )


for (_method, _path), _op in list(OPERATIONS.items()):
    if _path.startswith(_S + "/"):
        OPERATIONS.setdefault((_method, _S2 + _path[len(_S) :]), _v2_alias(_op))

_F = futures.PREFIX
_FR = futures.ROOT
_FX = futures.EXTENSION


def _futures(op_id: str, summary: str, auth: Auth, response: Any, **kw: Any) -> Operation:
    return Operation(op_id, summary, "Futures", auth, response, **kw)


OPERATIONS.update(
    {
        ("GET", f"{_F}/ping"): _futures("futuresPing", "Connectivity check", "NONE", wire.Empty),
        ("GET", f"{_F}/time"): _futures("futuresTime", "Server time", "NONE", wire.ServerTime),
        ("GET", f"{_F}/contracts"): _futures(
            "futuresContracts", "Contracts", "NONE", list[wire.FuturesContractInfo]
        ),
        ("GET", f"{_F}/depth"): _futures(
            "futuresDepth", "Order book of a contract", "NONE", wire.Depth, query=FuturesDepthQuery
        ),
        ("GET", f"{_F}/ticker"): _futures(
            "futuresTicker", "24-hour ticker", "NONE", wire.FuturesTicker, query=ContractQuery
        ),
        ("GET", f"{_FR}/ticker"): _futures(
            "futuresMarketTicker",
            "24-hour ticker (at the futures market address)",
            "NONE",
            wire.FuturesTicker,
            query=ContractQuery,
        ),
        ("GET", f"{_F}/index"): _futures(
            "futuresIndex",
            "Index and mark price",
            "NONE",
            wire.FuturesIndex,
            query=FuturesIndexQuery,
        ),
        ("GET", f"{_FR}/index"): _futures(
            "futuresMarketIndex",
            "Index and mark price (at the futures market address)",
            "NONE",
            wire.FuturesIndex,
            query=FuturesIndexQuery,
        ),
        ("GET", f"{_F}/klines"): _futures(
            "futuresKlines",
            "Candlesticks (oldest first)",
            "NONE",
            list[wire.Kline],
            query=FuturesKlinesQuery,
        ),
        ("GET", f"{_F}/ticker_all"): _futures(
            "futuresTickerAll",
            "24-hour tickers of every contract",
            "NONE",
            list[wire.FuturesTickerItem],
            extension=True,
        ),
        ("GET", f"{_FR}/ticker_all"): _futures(
            "futuresMarketTickerAll",
            "24-hour tickers of every contract (at the futures market address)",
            "NONE",
            list[wire.FuturesTickerItem],
            extension=True,
        ),
        ("POST", f"{_F}/order"): _futures(
            "futuresCreateOrder",
            "Place a futures order",
            "TRADE",
            wire.FuturesOrderId,
            body=FuturesOrderRequest,
        ),
        ("POST", f"{_F}/conditionOrder"): _futures(
            "futuresConditionOrder",
            "Place a conditional order",
            "TRADE",
            wire.FuturesOrderId,
            body=FuturesConditionOrderRequest,
        ),
        ("POST", f"{_F}/cancel"): _futures(
            "futuresCancelOrder",
            "Cancel an order or a conditional order",
            "TRADE",
            wire.FuturesOrderId,
            body=FuturesCancelRequest,
        ),
        ("GET", f"{_F}/order"): _futures(
            "futuresGetOrder", "One order", "READ", wire.FuturesOrder, query=FuturesOrderQuery
        ),
        ("GET", f"{_F}/openOrders"): _futures(
            "futuresOpenOrders",
            "Open orders and waiting conditional orders (newest first)",
            "READ",
            list[wire.FuturesOrder],
            query=FuturesOpenOrdersQuery,
        ),
        ("POST", f"{_F}/orderHistorical"): _futures(
            "futuresOrderHistorical",
            "Orders (newest first)",
            "READ",
            list[wire.FuturesHistoricalOrder],
            body=FuturesHistoryRequest,
            body_required=False,
        ),
        ("POST", f"{_F}/profitHistorical"): _futures(
            "futuresProfitHistorical",
            "Closed positions (newest first)",
            "READ",
            list[wire.FuturesProfit],
            body=FuturesHistoryRequest,
            body_required=False,
        ),
        ("GET", f"{_F}/myTrades"): _futures(
            "futuresMyTrades",
            "The account's trades (newest first)",
            "READ",
            list[wire.FuturesTrade],
            query=FuturesMyTradesQuery,
        ),
        ("GET", f"{_F}/account"): _futures(
            "futuresAccount",
            "Margin accounts and positions",
            "READ",
            wire.FuturesAccount,
            query=SignedQuery,
        ),
        ("POST", f"{_F}/edit_lever"): _futures(
            "futuresEditLever",
            "Set the leverage of a contract",
            "TRADE",
            wire.FuturesSetting,
            body=EditLeverRequest,
            extension=True,
        ),
        ("POST", f"{_F}/edit_user_margin_model"): _futures(
            "futuresEditMarginModel",
            "Set the margin mode of a contract",
            "TRADE",
            wire.FuturesSetting,
            body=EditMarginModelRequest,
            extension=True,
        ),
        ("POST", f"{_F}/edit_position_margin"): _futures(
            "futuresEditPositionMargin",
            "Add or take out isolated position margin",
            "TRADE",
            wire.FuturesPosition,
            body=EditPositionMarginRequest,
            extension=True,
        ),
        ("POST", f"{_F}/cancel_all"): _futures(
            "futuresCancelAll",
            "Cancel every open order and conditional order",
            "TRADE",
            wire.FuturesCanceledAll,
            body=FuturesCancelAllRequest,
            body_required=False,
            extension=True,
        ),
        ("POST", f"{_F}/cancel_trigger_order"): _futures(
            "futuresCancelTriggerOrder",
            "Cancel a waiting conditional order",
            "TRADE",
            wire.FuturesOrderId,
            body=FuturesCancelRequest,
            description="As `/cancel`, for conditional orders only: an id naming an order"
            " gives -2013.",
            extension=True,
        ),
        ("POST", f"{_F}/trigger_order_list"): _futures(
            "futuresTriggerOrderList",
            "Waiting conditional orders (newest first)",
            "READ",
            wire.TriggerListAnswer,
            body=TriggerListRequest,
            body_required=False,
            description="The family's envelope; `count` is the number in all pages.",
            extension=True,
        ),
        ("GET", f"{_F}/positions"): _futures(
            "futuresPositions",
            "Open positions",
            "READ",
            list[wire.FuturesPositionItem],
            query=FuturesOpenOrdersQuery,
            description="Without `contractName`: every contract's. Oldest first.",
            extension=True,
        ),
        ("POST", f"{_F}/edit_user_position_model"): _futures(
            "futuresEditPositionModel",
            "Set the position mode (two-way only)",
            "TRADE",
            wire.NoDataAnswer,
            body=EditPositionModelRequest,
            extension=True,
        ),
        ("POST", f"{_FX}/transfer"): _futures(
            "futuresTransfer",
            "Move funds between the spot and the futures account",
            "TRADE",
            wire.FuturesBalance,
            body=FuturesTransferRequest,
            extension=True,
        ),
    }
)

_SB = selfservice


def _sandbox(op_id: str, summary: str, auth: Auth, response: Any, **kw: Any) -> Operation:
    return Operation(op_id, summary, "Sandbox", auth, response, extension=True, **kw)


_NOT_SELF_SERVICE = " -2015 (403) for an account that is not self-service."


def _own_account(op_id: str, summary: str, response: Any, description: str) -> Operation:
    """A self-service account's own signed request (nothing in its body but recvWindow)."""
    return _sandbox(
        op_id,
        summary,
        "TRADE",
        response,
        body=SandboxRequest,
        body_required=False,
        description=description + _NOT_SELF_SERVICE,
    )


OPERATIONS.update(
    {
        ("GET", _SB.INFO): _sandbox(
            "sandboxInfo",
            "What a self-service account gets, and its limits",
            "NONE",
            _SB.SandboxInfo,
        ),
        ("POST", _SB.ACCOUNTS): _sandbox(
            "sandboxCreateAccount",
            "Create a self-service account: a user, a TRADE key and its starting funds",
            "NONE",
            _SB.SandboxAccount,
            body=CreateAccountRequest,
            body_required=False,
            description="The secret is in this answer only. Refused with -1003 (429, with"
            " `Retry-After`) beyond `[limits] self_service_per_ip` or `self_service_global`,"
            " or while `[sandbox] max_accounts` accounts are live; nothing is created then.",
        ),
        ("POST", _SB.FAUCET): _own_account(
            "sandboxFaucet",
            "Top the caller's self-service account up to its starting balances",
            _SB.SandboxFaucet,
            "At most `[sandbox] faucet_per_day` times a UTC day (then -1003, 429).",
        ),
        ("POST", _SB.RESET): _own_account(
            "sandboxResetAccount",
            "Reset the caller's self-service account (orders, positions, balances)",
            _SB.SandboxReset,
            "As `tradehall account reset`.",
        ),
    }
)

_FUTURES_ORDER_EXAMPLE = {
    "contractName": "E-BTC-USDT",
    "side": "BUY",
    "type": "LIMIT",
    "open": "OPEN",
    "volume": 10,
    "price": "29000",
    "positionType": 1,
}

_ORDER_EXAMPLE = {
    "symbol": "BTCUSDT",
    "side": "BUY",
    "type": "LIMIT",
    "volume": "0.01",
    "price": "29000",
}
_TRANSFER_EXAMPLE = {"userId": 1, "asset": "USDT", "amount": "1000", "txId": "bank-4711"}
EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", f"{_S}/depth"): {"symbol": "BTCUSDT", "limit": 10},
    ("GET", f"{_S}/ticker"): {"symbol": "BTCUSDT"},
    ("GET", f"{_S}/trades"): {"symbol": "BTCUSDT", "limit": 10},
    ("GET", f"{_S}/klines"): {"symbol": "BTCUSDT", "interval": "1min", "limit": 10},
    ("POST", f"{_S}/order"): _ORDER_EXAMPLE,
    ("POST", f"{_S}/order/test"): _ORDER_EXAMPLE,
    ("POST", f"{_S}/batchOrders"): {
        "symbol": "BTCUSDT",
        "orders": [
            {"side": "BUY", "batchType": "LIMIT", "volume": "0.01", "price": "29000"},
            {"side": "SELL", "batchType": "MARKET", "volume": "0.01"},
        ],
    },
    ("GET", f"{_S}/order"): {"symbol": "BTCUSDT", "orderId": 1},
    ("POST", f"{_S}/cancel"): {"symbol": "BTCUSDT", "orderId": "1"},
    ("POST", f"{_S}/batchCancel"): {"symbol": "BTCUSDT", "orderIds": [1, "2"]},
    ("GET", f"{_S}/openOrders"): {"symbol": "BTCUSDT", "limit": 10},
    ("GET", f"{_S}/myTrades"): {"symbol": "BTCUSDT", "limit": 10, "fromId": 1},
    ("POST", f"{_M}/order"): _ORDER_EXAMPLE,
    ("GET", f"{_M}/order"): {"symbol": "BTCUSDT", "orderId": 1},
    ("POST", f"{_M}/cancel"): {"symbol": "BTCUSDT", "orderId": "1"},
    ("GET", f"{_M}/openOrders"): {"symbol": "BTCUSDT", "limit": 10},
    ("GET", f"{_M}/myTrades"): {"symbol": "BTCUSDT", "limit": 10},
    ("POST", f"{_MX}/transfer"): {
        "symbol": "BTCUSDT",
        "asset": "USDT",
        "amount": "1000",
        "direction": "IN",
    },
    ("POST", f"{_MX}/repay"): {"symbol": "BTCUSDT", "asset": "USDT", "amount": "10"},
    ("GET", f"{_MX}/account"): {"symbol": "BTCUSDT"},
    ("POST", f"{_A}/users"): {"name": "alice"},
    ("POST", f"{_A}/keys"): {"userId": 1, "readOnly": False, "ips": ["127.0.0.1/32"]},
    ("POST", f"{_A}/keys/revoke"): {"apiKey": "0123456789abcdef0123456789abcdef"},
    ("POST", f"{_A}/deposit"): _TRANSFER_EXAMPLE,
    ("POST", f"{_A}/withdraw"): {**_TRANSFER_EXAMPLE, "amount": "10", "txId": "payout-17"},
    ("GET", f"{_A}/balances"): {"userId": 1},
    ("POST", f"{_A}/futures/transfer"): {
        "userId": 1,
        "asset": "USDT",
        "amount": "1000",
        "from": "spot",
        "to": "futures",
    },
    ("POST", f"{_A}/futures/index-price"): {"contract": "E-BTC-USD", "price": "30000.5"},
    ("GET", f"{_A}/futures/index"): {"contract": "E-BTC-USDT"},
    ("POST", f"{_A}/futures/funding-now"): {"contract": "E-BTC-USDT"},
    ("POST", f"{_A}/accounts/reset"): {"userId": 1},
}
"""A valid request of each operation with parameters (body, or query values)."""
EXAMPLES.update(
    {
        ("GET", f"{_S2}/ticker"): {"symbols": "BTCUSDT,ETHUSDT"},
        ("GET", spot.MARKET_KLINE): {"symbol": "BTCUSDT", "scaleType": "1min", "limit": 10},
        ("GET", f"{_S3}/historyOrders"): {"symbol": "BTCUSDT", "limit": 10},
        ("POST", f"{_S}/asset/transfer"): {
            "coinSymbol": "USDT",
            "amount": "100",
            "fromAccount": "EXCHANGE",
            "toAccount": "FUTURE",
        },
        ("POST", f"{_S}/asset/transferQuery"): {
            "fromAccount": "EXCHANGE",
            "toAccount": "FUTURE",
            "coinSymbol": "USDT",
            "limit": 10,
        },
        ("GET", f"{_S3}/myTrades"): {"symbol": "BTCUSDT", "limit": 10},
    }
)
for (_method, _path), _example in list(EXAMPLES.items()):
    if _path.startswith(_S + "/"):
        EXAMPLES.setdefault((_method, _S2 + _path[len(_S) :]), _example)

EXAMPLES.update(
    {
        ("GET", f"{_F}/depth"): {"contractName": "E-BTC-USDT", "limit": 10},
        ("GET", f"{_F}/ticker"): {"contractName": "E-BTC-USDT"},
        ("GET", f"{_FR}/ticker"): {"contractName": "E-BTC-USDT"},
        ("GET", f"{_F}/index"): {"contractName": "E-BTC-USDT"},
        ("GET", f"{_FR}/index"): {"contractName": "E-BTC-USDT"},
        ("GET", f"{_F}/klines"): {"contractName": "E-BTC-USDT", "interval": "1h", "limit": 10},
        ("POST", f"{_F}/order"): _FUTURES_ORDER_EXAMPLE,
        ("POST", f"{_F}/conditionOrder"): {
            **_FUTURES_ORDER_EXAMPLE,
            "side": "SELL",
            "open": "CLOSE",
            "triggerType": "1",
            "triggerPrice": "28000",
        },
        ("POST", f"{_F}/cancel"): {"contractName": "E-BTC-USDT", "orderId": "1"},
        ("GET", f"{_F}/order"): {"contractName": "E-BTC-USDT", "orderId": 1},
        ("GET", f"{_F}/openOrders"): {"contractName": "E-BTC-USDT"},
        ("POST", f"{_F}/orderHistorical"): {"contractName": "E-BTC-USDT", "limit": "10"},
        ("POST", f"{_F}/profitHistorical"): {"contractName": "E-BTC-USDT", "limit": "10"},
        ("GET", f"{_F}/myTrades"): {"contractName": "E-BTC-USDT", "limit": 10},
        ("POST", f"{_F}/edit_lever"): {"contractName": "E-BTC-USDT", "nowLevel": 20},
        ("POST", f"{_F}/edit_user_margin_model"): {
            "contractName": "E-BTC-USDT",
            "positionModel": 2,
        },
        ("POST", f"{_F}/edit_position_margin"): {"positionId": 1, "amount": "-10"},
        ("POST", f"{_F}/cancel_all"): {"contractName": "E-BTC-USDT"},
        ("POST", f"{_F}/cancel_trigger_order"): {"contractName": "E-BTC-USDT", "orderId": "7"},
        ("POST", f"{_F}/trigger_order_list"): {"contractName": "E-BTC-USDT", "limit": 10},
        ("GET", f"{_F}/positions"): {"contractName": "E-BTC-USDT"},
        ("POST", f"{_F}/edit_user_position_model"): {
            "contractName": "E-BTC-USDT",
            "positionModel": 2,
        },
        ("POST", f"{_FX}/transfer"): {
            "asset": "USDT",
            "amount": "1000",
            "from": "spot",
            "to": "futures",
        },
    }
)

# ------------------------------------------------------------------------- document parts

_ERRORS: dict[str, tuple[str, str]] = {
    "400": ("BadRequest", "Malformed or invalid request (the code says which check failed)."),
    "401": ("Unauthorized", "Missing or unknown key, bad signature or timestamp (or token)."),
    "403": ("Forbidden", "The key lacks the permission, or the caller's IP is not allowed."),
    "404": ("NotFound", "Unknown path (-1020)."),
    "405": ("MethodNotAllowed", "Method not supported on this path (-1020)."),
    "418": ("Banned", "The IP is banned for ignoring 429 answers."),
    "429": ("TooManyRequests", "Rate limited (-1003)."),
    "503": ("Unavailable", "The store failed: nothing is acknowledged until a restart (-1001)."),
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before the next request.",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
_STATUSES: dict[Auth, tuple[str, ...]] = {
    "NONE": ("400", "418", "429", "503"),
    "READ": ("400", "401", "403", "418", "429", "503"),
    "TRADE": ("400", "401", "403", "418", "429", "503"),
    "ADMIN": ("400", "401", "403", "503"),
}
_SECURITY: dict[Auth, list[dict[str, list[str]]]] = {
    "READ": [{"ApiKey": [], "Timestamp": [], "Signature": []}],
    "TRADE": [{"ApiKey": [], "Timestamp": [], "Signature": []}],
    "ADMIN": [{"AdminToken": []}],
}
_AUTH_NOTE: dict[Auth, str] = {
    "NONE": "Public: no credentials.",
    "READ": "Signed (USER_DATA): a read-only key suffices.",
    "TRADE": "Signed (TRADE): needs a key with the trade permission.",
    "ADMIN": "Admin API (extension): loopback only, `Authorization: Bearer <admin token>`.",
}
_SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-CH-APIKEY",
        "description": "The API key (case-sensitive).",
    },
    "Timestamp": {
        "type": "apiKey",
        "in": "header",
        "name": "X-CH-TS",
        "description": "UNIX time in milliseconds when the request was signed; accepted when"
        " `ts < serverTime + 1000` and `serverTime - ts <= recvWindow` (the 1000 ms is the"
        " server's `[server] max_clock_ahead_ms`, 1000 by default).",
    },
    "Signature": {
        "type": "apiKey",
        "in": "header",
        "name": "X-CH-SIGN",
        "description": "Hex HMAC-SHA256, keyed with the API secret, of X-CH-TS + upper-case"
        " method + requestPath + body. requestPath is the URL path without the `/spot/open`"
        " or `/futures/open` gateway prefix, followed by `?` and the raw query string when"
        " there is one; body is the request body bytes exactly as sent (empty for GET). Each"
        " signature is accepted once.",
    },
    "AdminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The content of `<data-dir>/admin.token`; loopback callers only.",
    },
}
_TAGS = [
    {"name": "Public", "description": "Market data; no credentials."},
    {"name": "Trading", "description": "Orders and trades; signed."},
    {"name": "Account", "description": "Balances; signed."},
    {
        "name": "Margin",
        "description": "Isolated margin, per pair; signed. The seed's five endpoints under"
        " /margin, and tradehall's extensions under /margin/tradehall.",
    },
    {
        "name": "Admin",
        "description": "Extension (not part of the family's API): the local operator API under"
        " /admin/v1, reachable from loopback only with the admin token.",
        EXTENSION: True,
    },
    {
        "name": "Futures",
        "description": "Perpetual futures under /futures/open/fapi/v1 (ticker and index also"
        " at /fapi/v1); public market data, signed trading and account. The family's"
        " extensions (edit_lever, edit_user_margin_model, edit_position_margin, cancel_all,"
        " ticker_all, cancel_trigger_order, trigger_order_list, positions,"
        " edit_user_position_model) and tradehall's under /tradehall are marked as extensions.",
    },
    {
        "name": "Sandbox",
        "description": "Extension: self-service accounts under /sandbox/v1, served only with"
        " `[sandbox] self_service = true`.",
        EXTENSION: True,
    },
    {"name": "Meta", "description": "Extension: this document.", EXTENSION: True},
]
_DESCRIPTION = """\
The ChainUp-style open REST API as tradehall serves it (spot, margin, futures), plus the admin API
(extension). Generated from the server's own types.

- POST bodies are JSON objects sent with `Content-Type: application/json`. Numbers may be
  sent as JSON numbers or strings; `null` counts as absent; unknown parameters are ignored.
- Signed endpoints need the headers `X-CH-APIKEY`, `X-CH-TS` and `X-CH-SIGN` (see the security
  schemes).
- Every error answers `{"code": <negative int>, "msg": "..."}`; unknown paths answer 404 and
  wrong methods 405, both with code -1020.
- What tradehall adds to the family's API is marked `x-tradehall-extension`.
"""


def _query_parameters(query: type[RequestSchema]) -> list[dict[str, Any]]:
    schema = msgspec.json.schema(query)
    definition = schema["$defs"][query.__name__]
    required = set(definition.get("required", ()))
    out = []
    for name, prop in definition.get("properties", {}).items():
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required}
        prop = dict(prop)
        if "description" in prop:
            param["description"] = prop.pop("description")
        param["schema"] = prop
        out.append(param)
    return out


def _operation(
    op: Operation, response: dict[str, Any], body: Any, example: dict[str, Any] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": f"{op.description} {_AUTH_NOTE[op.auth]}".strip(),
        "tags": [op.tag],
    }
    parameters = _query_parameters(op.query)
    for param in parameters:
        if example is not None and param["name"] in example:
            param["example"] = example[param["name"]]
    if parameters:
        out["parameters"] = parameters
    if body is not None:
        media: dict[str, Any] = {"schema": body}
        if example is not None:
            media["examples"] = {"example": {"value": example}}
        out["requestBody"] = {"required": op.body_required, "content": {"application/json": media}}
    responses: dict[str, Any] = {
        "200": {"description": "Success.", "content": {"application/json": {"schema": response}}}
    }
    for status in _STATUSES[op.auth] if op.errors is None else op.errors:
        responses[status] = {"$ref": f"#/components/responses/{_ERRORS[status][0]}"}
    out["responses"] = responses
    if op.auth in _SECURITY:
        out["security"] = _SECURITY[op.auth]
    if op.extension:
        out[EXTENSION] = True
    return out


def served_operations(routes: Iterable[BaseRoute]) -> list[tuple[str, str]]:
    """``(METHOD, path)`` of every operation the routes serve (HEAD, implied by GET, aside;
    WebSocket routes, which OpenAPI does not describe, aside: see docs/websocket.md; routes
    marked ``include_in_schema=False``, the web pages, are no API operations)."""
    out = []
    for route in routes:
        if isinstance(route, WebSocketRoute):
            continue
        if not isinstance(route, Route):
            raise TypeError(f"cannot describe route {route!r}")
        if not route.include_in_schema:  # the web pages and their files
            continue
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                out.append((method, route.path))
    return out


def build_document(operations: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The document describing ``operations`` (``(METHOD, path)`` pairs, all in OPERATIONS)."""
    missing = [f"{m} {p}" for m, p in operations if (m, p) not in OPERATIONS]
    if missing:
        raise LookupError(f"no OpenAPI description for {', '.join(missing)}")
    ops = [(method, path, OPERATIONS[method, path]) for method, path in operations]
    types: list[Any] = [wire.ErrorBody]
    for _, _, op in ops:
        types += [op.response] if op.body is None else [op.response, op.body]
    schemas, components = msgspec.json.schema_components(
        types, ref_template=_REF, schema_hook=wire.schema_hook
    )
    # Either orderId or newClientOrderId identifies the order to cancel.
    if "CancelRequest" in components:
        components["CancelRequest"]["anyOf"] = [
            {"required": ["orderId"]},
            {"required": ["newClientOrderId"]},
        ]
    paths: dict[str, dict[str, Any]] = {}
    position = 1
    for method, path, op in ops:
        response = schemas[position]
        body = None if op.body is None else schemas[position + 1]
        position += 1 if op.body is None else 2
        example = EXAMPLES.get((method, path))
        paths.setdefault(path, {})[method.lower()] = _operation(op, response, body, example)
    error_ref = {"$ref": _REF.format(name="ErrorBody")}
    responses: dict[str, Any] = {}
    for status, (name, description) in _ERRORS.items():
        response_object: dict[str, Any] = {
            "description": description,
            "content": {"application/json": {"schema": error_ref}},
        }
        if status in ("418", "429"):
            response_object["headers"] = _RETRY_AFTER
        responses[name] = response_object
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tradehall",
            "version": __version__,
            "description": _DESCRIPTION,
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "tags": _TAGS,
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "responses": responses,
            "securitySchemes": _SECURITY_SCHEMES,
        },
    }


@functools.lru_cache(maxsize=8)
def document_bytes(operations: tuple[tuple[str, str], ...]) -> bytes:
    """The encoded document, built once per route table."""
    return msgspec.json.encode(build_document(operations))


def route(routes: Sequence[BaseRoute]) -> Route:
    """``GET /openapi.json``: unsigned, not rate-limited, served even after a store failure,
    and by a gateway itself (its routes are the API it serves; nothing to ask the engine).

    ``routes`` is the app's own (live) route list, which this route joins: the document is
    built from it at the first request, then served from the cache.
    """

    cache: list[bytes] = []

    async def serve(request: Request) -> Response:
        if not cache:
            cache.append(document_bytes(tuple(served_operations(routes))))
        return Response(cache[0], media_type="application/json")

    return Route(PATH, serve, methods=["GET"])


__all__ = [
    "EXAMPLES",
    "EXTENSION",
    "OPERATIONS",
    "PATH",
    "Operation",
    "RequestSchema",
    "build_document",
    "document_bytes",
    "route",
    "served_operations",
]
