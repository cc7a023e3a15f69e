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
from tradehall.api.params import Params
from tradehall.api.spot import cached_depth, interval_of, ping, server_time
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
    CLOSE,
    CROSS,
    FIRED,
    ISOLATED,
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
from tradehall.engine.orders import BUY, FOK, GTC, IOC, LIMIT, MARKET, POST_ONLY, SELL

PREFIX = "/futures/open/fapi/v1"
ROOT = "/fapi/v1"
"""The seed's ``{futures_market_url}``: ticker and index (and the ticker_all extension) are
served here too."""
EXTENSION = PREFIX + "/tradehall"
MAX_CLIENT_ID = 32
TIME_IN_FORCE = (GTC, IOC, FOK, POST_ONLY)


def contract_of(call: Call, *, required: bool = True) -> ContractSpec | None:
    name = call.params.symbol("contractName", required=required)
    if name is None:
        return None
    contract = call.exchange.config.markets.contracts.get(name)
    if contract is None:
        raise ApiError(Code.BAD_SYMBOL, f"invalid contract {name!r}")
    return contract


def need_contract(call: Call) -> ContractSpec:
    contract = contract_of(call)
    assert contract is not None
    return contract


# ------------------------------------------------------------------------- public


async def contracts(call: Call) -> Any:
    return view.contract_infos(call.exchange.config.markets.contracts.values())


async def depth(call: Call) -> Any:
    contract = need_contract(call)
    book = call.exchange.engine.futures.books[contract.symbol]
    return cached_depth(call, contract.symbol, book, partial(view.depth, contract))


async def ticker(call: Call) -> Any:
    contract = need_contract(call)
    stats = call.exchange.marketdata.ticker(contract.symbol, call.now)
    return view.ticker(contract, stats, call.now)


async def ticker_all(call: Call) -> Any:
    marketdata = call.exchange.marketdata
    return [
        view.ticker_item(c, marketdata.ticker(c.symbol, call.now), call.now)
        for c in call.exchange.config.markets.contracts.values()
    ]


async def index(call: Call) -> Any:
    contract = need_contract(call)
    call.params.limit(100, 1000)  # accepted (the seed lists it); one record either way
    return view.index(call.exchange.engine.futures, contract, call.now)


async def klines(call: Call) -> Any:
    contract = need_contract(call)
    interval = interval_of(call, "1min, 5min, 15min, 30min, 1h (or 60min), 1day, 1week or 1month")
    limit = call.params.limit(100, 300)
    bars = call.exchange.marketdata.klines(contract.symbol, interval, limit, call.now)
    return [view.kline(contract, bar) for bar in bars]


# ------------------------------------------------------------------------- orders


def place_command(call: Call, contract: ContractSpec, *, conditional: bool) -> FuturesPlace:
    params = call.params
    side = params.choice("side", (BUY, SELL), Code.BAD_SIDE)
    order_type = params.choice("type", (LIMIT, MARKET), Code.BAD_ORDER_TYPE)
    action = params.choice("open", (OPEN, CLOSE), Code.BAD_PARAM)
    assert side is not None and order_type is not None and action is not None
    position_type = params.integer("positionType", minimum=CROSS, maximum=ISOLATED) or 0
    client_id = params.client_id("clientOrderId", MAX_CLIENT_ID)
    tif = GTC
    trigger_type = trigger_price = 0
    if conditional:
        trigger_type = params.integer("triggerType", minimum=1, maximum=4) or 0
        if not trigger_type:
            raise params.missing("triggerType")
        trigger_price = params.units("triggerPrice", contract.price_precision) or 0
    else:
        tif = (
            params.choice("timeInForce", TIME_IN_FORCE, Code.BAD_ORDER_TYPE, required=False) or GTC
        )
    price = volume = money = 0
    if order_type == LIMIT:
        price = params.units("price", contract.price_precision) or 0
        volume = params.units("volume", 0) or 0
    elif action == OPEN:
        money = params.units("volume", MONEY_DECIMALS) or 0
    else:
        volume = params.units("volume", 0) or 0
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


async def create_order(call: Call) -> Any:
    contract = need_contract(call)
    placed: FuturesOrderState = call.exchange.apply(
        place_command(call, contract, conditional=False)
    )
    await call.durable()
    return wire.FuturesOrderId(str(placed.id), str(placed.id))


async def condition_order(call: Call) -> Any:
    contract = need_contract(call)
    placed: Trigger = call.exchange.apply(place_command(call, contract, conditional=True))
    await call.durable()
    return wire.FuturesOrderId(str(placed.id), str(placed.id))


def order_ref(params: Params) -> tuple[int | None, str | None]:
    order_id = params.order_id("orderId")
    client_id = params.client_id("clientOrderId", MAX_CLIENT_ID) or None
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
    contract = need_contract(call)
    order_id, client_id = order_ref(call.params)
    found = await find_order(call, contract, order_id, client_id)
    if isinstance(found, Trigger):
        return view.trigger(contract, found, await submitted_order(call, found))
    return view.order(contract, found)


async def cancel_order(call: Call) -> Any:
    contract = need_contract(call)
    order_id, client_id = order_ref(call.params)
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
    contract = need_contract(call)
    order_id, client_id = order_ref(call.params)
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
    contract = contract_of(call, required=False)
    page = call.params.integer("page", default=1, minimum=1, maximum=1_000_000)
    limit = call.params.limit(20, 1000)
    assert page is not None
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
    contract = contract_of(call, required=False)
    command = FuturesCancelAll(call.now, call.user, contract.symbol if contract else "")
    cancelled: list[int] = call.exchange.apply(command)
    await call.durable()
    return wire.FuturesCanceledAll(cancelled)


async def open_orders(call: Call) -> Any:
    contract = contract_of(call, required=False)
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


def _history_args(call: Call) -> tuple[str | None, int | None, int]:
    contract = contract_of(call, required=False)
    limit = call.params.limit(100, 1000)
    from_id = call.params.integer("fromId", minimum=0)
    return (contract.symbol if contract else None), from_id, limit


async def order_historical(call: Call) -> Any:
    symbol, from_id, limit = _history_args(call)
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
    symbol, from_id, limit = _history_args(call)
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
    symbol, from_id, limit = _history_args(call)  # no contractName: every contract's trades
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
    contract = need_contract(call)
    level = call.params.integer("nowLevel", minimum=1, maximum=contract.max_leverage)
    if level is None:
        raise call.params.missing("nowLevel")
    setting: Setting = call.exchange.apply(SetLeverage(call.now, call.user, contract.symbol, level))
    return await call.once_durable(_setting(setting))


async def edit_margin_model(call: Call) -> Any:
    contract = need_contract(call)
    model = call.params.integer("positionModel", minimum=CROSS, maximum=ISOLATED)
    if model is None:
        raise call.params.missing("positionModel")
    setting: Setting = call.exchange.apply(
        SetMarginMode(call.now, call.user, contract.symbol, model)
    )
    return await call.once_durable(_setting(setting))


TWO_WAY = 2
"""``positionModel`` of two-way positions, the only mode tradehall keeps (1 is net)."""


async def edit_position_model(call: Call) -> Any:
    """``POST /edit_user_position_model``: positions are always two-way here, so choosing it
    is a success that changes nothing and net mode (1) is refused."""
    need_contract(call)
    model = call.params.integer("positionModel", minimum=1, maximum=TWO_WAY)
    if model is None:
        raise call.params.missing("positionModel")
    if model != TWO_WAY:
        raise ApiError(
            Code.UNSUPPORTED,
            "net position mode (positionModel 1) is not supported: positions are always"
            " two-way (positionModel 2), long and short kept apart",
        )
    return await call.once_durable(wire.NoDataAnswer())


async def positions(call: Call) -> Any:
    """``GET /positions``: the caller's open positions (of ``contractName``, or all)."""
    contract = contract_of(call, required=False)
    fx = call.exchange.engine.futures
    held = [
        view.position_item(fx, p)
        for p in sorted(fx.user_positions(call.user), key=lambda p: p.id)
        if contract is None or p.contract == contract.symbol
    ]
    return await call.once_durable(held)


async def edit_position_margin(call: Call) -> Any:
    fx = call.exchange.engine.futures
    position_id = call.params.order_id("positionId", required=True)
    assert position_id is not None
    pos = fx.position_by_id(call.user, position_id)
    if pos is None:
        raise ApiError(Code.BAD_PARAM, f"no open position {position_id}")
    decimals = fx.contracts[pos.contract].margin_decimals
    amount = call.params.signed_units("amount", decimals)
    adjusted: Position = call.exchange.apply(
        AdjustPositionMargin(call.now, call.user, position_id, amount)
    )
    return await call.once_durable(view.position(fx, adjusted))


async def transfer(call: Call) -> Any:
    params = call.params
    asset, amount, source, target = (
        str(params.text(name, required=True)) for name in ("asset", "amount", "from", "to")
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
