"""The futures endpoints of the seed, under /futures/open/fapi/v1 (with ``ticker``, ``index``
and ``ticker_all`` also at the server root, /fapi/v1), the family's extensions (``edit_lever``,
``edit_user_margin_model``, ``edit_position_margin``, ``cancel_all``, ``ticker_all``) and
tradehall's own under /futures/open/fapi/v1/tradehall (``transfer``).

Requests are read here; answers are rendered by ``futures_view`` from engine state and the
store's futures documents."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
from starlette.routing import Route

from tradehall import operations as ops
from tradehall.api import futures_view as view
from tradehall.api import wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, Handler, endpoint
from tradehall.api.reading import Reading, reading
from tradehall.api.requests import (
    ContractQuery,
    EditLeverRequest,
    EditMarginModelRequest,
    EditPositionMarginRequest,
    EditPositionModelRequest,
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
    TriggerListRequest,
)
from tradehall.api.spot import cached_depth, ping, server_time
from tradehall.codes import Code, Reject
from tradehall.engine.commands import (
    AdjustPositionMargin,
    FuturesCancel,
    FuturesCancelAll,
    FuturesPlace,
    SetLeverage,
    SetMarginMode,
)
from tradehall.engine.contracts import MONEY_DECIMALS, ContractSpec
from tradehall.engine.events import Trade
from tradehall.engine.futures_model import (
    FIRED,
    KIND_ORDER,
    KIND_POSITION,
    KIND_TRIGGER,
    OPEN,
    FuturesOrder,
    FuturesOrderState,
    Position,
    Setting,
    Trigger,
    futures_account,
)
from tradehall.engine.orders import GTC, LIMIT, MARKET
from tradehall.marketdata import Interval
from tradehall.units import format_units_trimmed

PREFIX = "/futures/open/fapi/v1"
ROOT = "/fapi/v1"
"""The seed's ``{futures_market_url}``: ticker and index (and the ticker_all extension) are
served here too."""
EXTENSION = PREFIX + "/tradehall"


def contract_of(call: Call, req: Reading, *, required: bool = True) -> ContractSpec | None:
    """The contract named by ``contractName`` (None when absent and not ``required``)."""
    name: str | None = req.value("contractName")
    if name is None:
        if required:
            raise req.missing("contractName")
        return None
    contract = call.exchange.config.markets.contracts.get(name)
    if contract is None:
        raise ApiError(Code.BAD_SYMBOL, f"invalid contract {name!r}")
    return contract


def need_contract(call: Call, req: Reading) -> ContractSpec:
    contract = contract_of(call, req)
    assert contract is not None
    return contract


# ------------------------------------------------------------------------- public


async def contracts(call: Call) -> Any:
    return view.contract_infos(call.exchange.config.markets.contracts.values())


async def depth(call: Call) -> Any:
    req = reading(call.params, FuturesDepthQuery)
    contract = need_contract(call, req)
    book = call.exchange.engine.futures.books[contract.symbol]
    limit: int = req.value("limit")
    return cached_depth(call, contract.symbol, limit, book, partial(view.depth, contract))


async def ticker(call: Call) -> Any:
    contract = need_contract(call, reading(call.params, ContractQuery))
    stats = call.exchange.marketdata.ticker(contract.symbol, call.now)
    return view.ticker(contract, stats, call.now)


async def ticker_all(call: Call) -> Any:
    marketdata = call.exchange.marketdata
    return [
        view.ticker_item(c, marketdata.ticker(c.symbol, call.now), call.now)
        for c in call.exchange.config.markets.contracts.values()
    ]


async def index(call: Call) -> Any:
    req = reading(call.params, FuturesIndexQuery)
    contract = need_contract(call, req)
    req.value("limit")  # accepted (the seed lists it); one record either way
    return view.index(call.exchange.engine.futures, contract, call.now)


async def klines(call: Call) -> Any:
    req = reading(call.params, FuturesKlinesQuery)
    contract = need_contract(call, req)
    interval: Interval = req.value("interval")
    limit: int = req.value("limit")
    bars = call.exchange.marketdata.klines(contract.symbol, interval, limit, call.now)
    return [view.kline(contract, bar) for bar in bars]


# ------------------------------------------------------------------------- orders


def place_command(
    call: Call, contract: ContractSpec, req: Reading, *, conditional: bool
) -> FuturesPlace:
    """The order of a ``FuturesOrderRequest``, or with ``conditional`` of a
    ``FuturesConditionOrderRequest``."""
    side: str | None = req.value("side")
    order_type: str | None = req.value("type")
    action: str | None = req.value("open")
    assert side is not None and order_type is not None and action is not None
    position_type: int = req.value("positionType") or 0
    client_id: str = req.value("clientOrderId")
    tif: str = GTC
    trigger_type = trigger_price = 0
    if conditional:
        trigger_type = req.value("triggerType")
        trigger_price = req.value("triggerPrice", decimals=contract.price_precision) or 0
    else:
        tif = req.value("timeInForce") or GTC
    price = volume = money = 0
    if order_type == LIMIT:
        price = req.value("price", decimals=contract.price_precision) or 0
    unit = volume_unit(req.value("orderUnit"), order_type == MARKET and action == OPEN)
    if unit == VALUE:
        money = req.value("volume", decimals=MONEY_DECIMALS) or 0
    elif unit == COIN:
        volume = contracts_of_coin(contract, req.value("volume", decimals=MONEY_DECIMALS) or 0)
    else:
        volume = req.value("volume", decimals=0) or 0
    return FuturesPlace(
        call.now,
        call.user,
        contract.symbol,
        side,
        action,
        order_type,
        price,
        volume,
        money,
        position_type,
        tif,
        client_id,
        trigger_type,
        trigger_price,
    )


COIN, CONTRACTS, VALUE = 1, 2, 3
"""The family's ``orderUnit``: what an order's ``volume`` counts."""
ORDER_UNITS = {COIN: "coin", CONTRACTS: "contracts", VALUE: "value"}


def volume_unit(unit: int | None, market_open: bool) -> int:
    """What ``volume`` counts on an order: the ``orderUnit`` the client names, else the seed's
    default (the value for a MARKET OPEN, contracts otherwise). The value is taken only on a
    MARKET OPEN, where it is a budget; elsewhere it is refused, never ignored: ignored, it
    would size the order in another unit than the client meant (100 USDT as 100 contracts)."""
    if unit is None:
        return VALUE if market_open else CONTRACTS
    if unit != VALUE or market_open:
        return unit
    raise ApiError(
        Code.BAD_PARAM,
        "orderUnit 3 (value) is taken on a MARKET OPEN only: send volume in contracts"
        " (orderUnit 2, or none) or in the contract's coin (orderUnit 1)",
    )


def contracts_of_coin(contract: ContractSpec, amount: int) -> int:
    """Whole contracts of an ``amount`` (in 10**-8) of the contract's ``multiplierCoin``; an
    amount that is not a whole number of contracts is refused rather than rounded."""
    per_contract = int(contract.multiplier.scaleb(MONEY_DECIMALS))
    contracts, rest = divmod(amount, per_contract)
    if rest:
        face = format_units_trimmed(per_contract, MONEY_DECIMALS)
        raise ApiError(
            Code.PRECISION,
            f"volume in orderUnit 1 must be a whole number of contracts of {face}"
            f" {contract.multiplier_coin}",
        )
    return contracts


async def create_order(call: Call) -> Any:
    req = reading(call.params, FuturesOrderRequest)
    contract = need_contract(call, req)
    placed: FuturesOrderState = call.exchange.apply(
        place_command(call, contract, req, conditional=False)
    )
    await call.durable()
    return wire.FuturesOrderId(str(placed.id), str(placed.id))


async def condition_order(call: Call) -> Any:
    req = reading(call.params, FuturesConditionOrderRequest)
    contract = need_contract(call, req)
    placed: Trigger = call.exchange.apply(place_command(call, contract, req, conditional=True))
    await call.durable()
    return wire.FuturesOrderId(str(placed.id), str(placed.id))


def order_ref(req: Reading) -> tuple[int | None, str | None]:
    order_id: int | None = req.value("orderId")
    client_id: str | None = req.value("clientOrderId") or None
    if order_id is None and client_id is None:
        raise ApiError(
            Code.BAD_PARAM, "mandatory parameter 'orderId' (or 'clientOrderId') was not sent"
        )
    return order_id, client_id


async def find_order(
    call: Call, contract: ContractSpec, order_id: int | None, client_id: str | None
) -> FuturesOrderState | Trigger:
    """The caller's order or conditional order on the contract: open ones from the engine,
    ended ones from the store."""
    fx = call.exchange.engine.futures
    live = fx.find_open(call.user, contract.symbol, order_id, client_id)
    if isinstance(live, FuturesOrder):
        return await call.once_durable(live.state())
    if isinstance(live, Trigger):
        return await call.once_durable(msgspec.structs.replace(live))  # a copy: it is live
    await call.durable()
    store = call.exchange.store
    found: object = None
    if order_id is not None:
        found = await call.state.read(
            store.futures_doc, KIND_ORDER, call.user, contract.symbol, order_id
        )
        if found is None:
            found = await call.state.read(
                store.futures_doc, KIND_TRIGGER, call.user, contract.symbol, order_id
            )
    elif client_id:
        found = await call.state.read(
            store.futures_by_client_id, call.user, contract.symbol, client_id
        )
    if isinstance(found, FuturesOrderState | Trigger):
        return found
    raise ApiError(Code.NO_SUCH_ORDER, "order does not exist")


async def submitted_order(call: Call, trigger: Trigger) -> FuturesOrderState | None:
    """The order a fired conditional order submitted (None if it has not fired). Firing
    stores both in one command, so the trigger found fired means its order is stored; an
    open order's state is taken from the engine before waiting, as ``find_order`` does."""
    if trigger.status != FIRED or not trigger.order_id:
        return None
    fx = call.exchange.engine.futures
    live = fx.find_open(call.user, trigger.contract, trigger.order_id, None)
    if isinstance(live, FuturesOrder):
        return await call.once_durable(live.state())
    await call.durable()
    found = await call.state.read(
        call.exchange.store.futures_doc, KIND_ORDER, call.user, trigger.contract, trigger.order_id
    )
    return found if isinstance(found, FuturesOrderState) else None


async def get_order(call: Call) -> Any:
    req = reading(call.params, FuturesOrderQuery)
    contract = need_contract(call, req)
    order_id, client_id = order_ref(req)
    found = await find_order(call, contract, order_id, client_id)
    if isinstance(found, Trigger):
        return view.trigger(contract, found, await submitted_order(call, found))
    return view.order(contract, found)


async def cancel_order(call: Call) -> Any:
    req = reading(call.params, FuturesCancelRequest)
    contract = need_contract(call, req)
    order_id, client_id = order_ref(req)
    command = FuturesCancel(call.now, call.user, contract.symbol, order_id, client_id)
    try:
        cancelled: FuturesOrderState | Trigger = call.exchange.apply(command)
    except Reject as exc:
        if exc.code != Code.NO_SUCH_ORDER:
            raise
        ended = await find_order(call, contract, order_id, client_id)
        if isinstance(ended, Trigger) and ended.status == FIRED and ended.order_id:
            raise ApiError(
                Code.CANNOT_CANCEL,
                f"conditional order {ended.id} has fired; the order it submitted is"
                f" {ended.order_id}",
            ) from None
        raise ApiError(
            Code.CANNOT_CANCEL, f"order {ended.id} is {ended.status}; it cannot be canceled"
        ) from None
    await call.durable()
    return wire.FuturesOrderId(str(cancelled.id), str(cancelled.id))


async def cancel_trigger_order(call: Call) -> Any:
    """``POST /cancel_trigger_order``: ``/cancel`` for conditional orders only."""
    req = reading(call.params, FuturesCancelRequest)
    contract = need_contract(call, req)
    order_id, client_id = order_ref(req)
    fx = call.exchange.engine.futures
    found: object = fx.find_open(call.user, contract.symbol, order_id, client_id)
    if found is None:
        found = await find_order(call, contract, order_id, client_id)
    if not isinstance(found, Trigger):
        assert isinstance(found, FuturesOrder | FuturesOrderState)
        raise ApiError(
            Code.NO_SUCH_ORDER,
            f"{found.id} is an order, not a conditional order: cancel it with /cancel",
        )
    return await cancel_order(call)


async def trigger_order_list(call: Call) -> Any:
    """``POST /trigger_order_list``: the caller's waiting conditional orders, newest first,
    a page at a time, in the family's envelope."""
    req = reading(call.params, TriggerListRequest)
    contract = contract_of(call, req, required=False)
    page: int = req.value("page")
    limit: int = req.value("limit")
    fx = call.exchange.engine.futures
    waiting = sorted(
        fx.waiting_triggers(call.user, contract.symbol if contract else None),
        key=lambda t: t.id,
        reverse=True,
    )
    shown = waiting[(page - 1) * limit : page * limit]
    items = [view.trigger_item(fx.contracts[t.contract], t) for t in shown]
    return await call.once_durable(
        wire.TriggerListAnswer(data=wire.TriggerList(items, len(waiting)))
    )


async def cancel_all(call: Call) -> Any:
    contract = contract_of(call, reading(call.params, FuturesCancelAllRequest), required=False)
    command = FuturesCancelAll(call.now, call.user, contract.symbol if contract else "")
    cancelled: list[int] = call.exchange.apply(command)
    await call.durable()
    return wire.FuturesCanceledAll(cancelled)


async def open_orders(call: Call) -> Any:
    contract = contract_of(call, reading(call.params, FuturesOpenOrdersQuery), required=False)
    symbol = contract.symbol if contract else None
    fx = call.exchange.engine.futures
    records = [
        (o.id, view.order(fx.contracts[o.symbol], o.state()))
        for o in fx.open_orders(call.user, symbol)
    ]
    records += [
        (t.id, view.trigger(fx.contracts[t.contract], t))
        for t in fx.waiting_triggers(call.user, symbol)
    ]
    records.sort(key=lambda item: item[0], reverse=True)
    return await call.once_durable([record for _, record in records])


def _history_args(call: Call, req: Reading) -> tuple[str | None, int | None, int]:
    contract = contract_of(call, req, required=False)
    limit: int = req.value("limit")
    from_id: int | None = req.value("fromId")
    return (contract.symbol if contract else None), from_id, limit


async def order_historical(call: Call) -> Any:
    symbol, from_id, limit = _history_args(call, reading(call.params, FuturesHistoryRequest))
    await call.durable()
    docs = await call.state.read(
        call.exchange.store.futures_history, KIND_ORDER, call.user, symbol, from_id, limit, None
    )
    contracts = call.exchange.config.markets.contracts
    return [
        view.historical_order(contracts[d.contract], d)
        for d in docs
        if isinstance(d, FuturesOrderState) and d.contract in contracts
    ]


async def profit_historical(call: Call) -> Any:
    symbol, from_id, limit = _history_args(call, reading(call.params, FuturesHistoryRequest))
    await call.durable()
    docs = await call.state.read(
        call.exchange.store.futures_history,
        KIND_POSITION,
        call.user,
        symbol,
        from_id,
        limit,
        False,
    )
    contracts = call.exchange.config.markets.contracts
    return [
        view.profit(contracts[d.contract], d)
        for d in docs
        if isinstance(d, Position) and d.contract in contracts
    ]


async def my_trades(call: Call) -> Any:
    # No contractName: every contract's trades.
    symbol, from_id, limit = _history_args(call, reading(call.params, FuturesMyTradesQuery))
    await call.durable()
    contracts = call.exchange.config.markets.contracts
    account = futures_account(call.user)
    rows = []
    for name in [symbol] if symbol else list(contracts):  # each read is one index range
        rows += await call.state.read(
            call.exchange.store.account_trades, account, name, limit, from_id
        )
    return [
        view.account_trade(contracts[trade.symbol], trade, call.user)
        for trade in one_page(rows, limit, from_id)
    ]


def one_page(rows: list[Trade], limit: int, from_id: int | None) -> list[Trade]:
    """The page the contract's fromId rule gives, from the pages of several symbols: the
    ``limit`` newest, or with ``from_id`` the ``limit`` closest above it; newest first."""
    if from_id is None:
        return sorted(rows, key=lambda t: t.id, reverse=True)[:limit]
    return sorted(rows, key=lambda t: t.id)[:limit][::-1]


async def account(call: Call) -> Any:
    return await call.once_durable(view.account(call.exchange.engine.futures, call.user))


# ------------------------------------------------------------------------- extensions


def _setting(setting: Setting) -> wire.FuturesSetting:
    return wire.FuturesSetting(setting.contract, setting.leverage, setting.position_type)


async def edit_lever(call: Call) -> Any:
    req = reading(call.params, EditLeverRequest)
    contract = need_contract(call, req)
    level: int = req.value("nowLevel", maximum=contract.max_leverage)
    setting: Setting = call.exchange.apply(SetLeverage(call.now, call.user, contract.symbol, level))
    return await call.once_durable(_setting(setting))


async def edit_margin_model(call: Call) -> Any:
    req = reading(call.params, EditMarginModelRequest)
    contract = need_contract(call, req)
    models = {req.value("positionModel"), req.value("marginModel")} - {None}
    if not models:
        raise ApiError(
            Code.BAD_PARAM, "mandatory parameter 'positionModel' (or 'marginModel') was not sent"
        )
    if len(models) > 1:
        raise ApiError(Code.BAD_PARAM, "positionModel and marginModel disagree: send one")
    setting: Setting = call.exchange.apply(
        SetMarginMode(call.now, call.user, contract.symbol, models.pop())
    )
    return await call.once_durable(_setting(setting))


TWO_WAY = 2
"""``positionModel`` of two-way positions, the only mode tradehall keeps (1 is net)."""


async def edit_position_model(call: Call) -> Any:
    """``POST /edit_user_position_model``: positions are always two-way here, so choosing it
    is a success that changes nothing and net mode (1) is refused."""
    req = reading(call.params, EditPositionModelRequest)
    need_contract(call, req)
    model: int = req.value("positionModel")
    if model != TWO_WAY:
        raise ApiError(
            Code.UNSUPPORTED,
            "net position mode (positionModel 1) is not supported: positions are always"
            " two-way (positionModel 2), long and short kept apart",
        )
    return await call.once_durable(wire.NoDataAnswer())


async def positions(call: Call) -> Any:
    """``GET /positions``: the caller's open positions (of ``contractName``, or all)."""
    contract = contract_of(call, reading(call.params, FuturesOpenOrdersQuery), required=False)
    fx = call.exchange.engine.futures
    held = [
        view.position_item(fx, p)
        for p in sorted(fx.user_positions(call.user), key=lambda p: p.id)
        if contract is None or p.contract == contract.symbol
    ]
    return await call.once_durable(held)


async def edit_position_margin(call: Call) -> Any:
    fx = call.exchange.engine.futures
    req = reading(call.params, EditPositionMarginRequest)
    position_id: int | None = req.value("positionId")
    assert position_id is not None
    pos = fx.position_by_id(call.user, position_id)
    if pos is None:
        raise ApiError(Code.BAD_PARAM, f"no open position {position_id}")
    decimals = fx.contracts[pos.contract].margin_decimals
    amount: int = req.value("amount", decimals=decimals)
    adjusted: Position = call.exchange.apply(
        AdjustPositionMargin(call.now, call.user, position_id, amount)
    )
    return await call.once_durable(view.position(fx, adjusted))


async def transfer(call: Call) -> Any:
    req = reading(call.params, FuturesTransferRequest)
    asset, amount, source, target = (
        str(req.value(name)) for name in ("asset", "amount", "from", "to")
    )
    result = ops.futures_transfer(call.exchange, call.user, asset, amount, source, target, call.now)
    await call.durable()
    return result


# ------------------------------------------------------------------------- routes


def routes() -> list[Route]:
    public: list[tuple[str, str, Handler]] = [
        (PREFIX, "/ping", ping),
        (PREFIX, "/time", server_time),
        (PREFIX, "/contracts", contracts),
        (PREFIX, "/depth", depth),
        (PREFIX, "/ticker", ticker),
        (PREFIX, "/index", index),
        (PREFIX, "/klines", klines),
        (PREFIX, "/ticker_all", ticker_all),
        (ROOT, "/ticker", ticker),
        (ROOT, "/index", index),
        (ROOT, "/ticker_all", ticker_all),
    ]
    signed: list[tuple[str, str, str, Handler, bool]] = [
        ("POST", PREFIX, "/order", create_order, True),
        ("POST", PREFIX, "/conditionOrder", condition_order, True),
        ("POST", PREFIX, "/cancel", cancel_order, True),
        ("GET", PREFIX, "/order", get_order, False),
        ("GET", PREFIX, "/openOrders", open_orders, False),
        ("POST", PREFIX, "/orderHistorical", order_historical, False),
        ("POST", PREFIX, "/profitHistorical", profit_historical, False),
        ("GET", PREFIX, "/myTrades", my_trades, False),
        ("GET", PREFIX, "/account", account, False),
        ("POST", PREFIX, "/edit_lever", edit_lever, True),
        ("POST", PREFIX, "/edit_user_margin_model", edit_margin_model, True),
        ("POST", PREFIX, "/edit_position_margin", edit_position_margin, True),
        ("POST", PREFIX, "/cancel_all", cancel_all, True),
        ("POST", PREFIX, "/cancel_trigger_order", cancel_trigger_order, True),
        ("POST", PREFIX, "/trigger_order_list", trigger_order_list, False),
        ("GET", PREFIX, "/positions", positions, False),
        ("POST", PREFIX, "/edit_user_position_model", edit_position_model, True),
        ("POST", EXTENSION, "/transfer", transfer, True),
    ]
    out = [
        Route(prefix + path, endpoint(fn, name=f"GET {prefix}{path}"), methods=["GET"])
        for prefix, path, fn in public
    ]
    out += [
        Route(
            prefix + path,
            endpoint(fn, name=f"{method} {prefix}{path}", signed=True, trade=trade),
            methods=[method],
        )
        for method, prefix, path, fn, trade in signed
    ]
    return out
