"""The spot endpoints of the seed, under /spot/open/sapi/v1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import msgspec
from starlette.routing import Route

from tradehall.api import wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, endpoint
from tradehall.api.params import Params, parse_int
from tradehall.api.reading import Reading, reading
from tradehall.api.requests import (
    BatchCancelRequest,
    BatchOrderItem,
    BatchOrdersRequest,
    CancelRequest,
    DepthQuery,
    HistoryQuery,
    KlinesQuery,
    MarketKlineQuery,
    MyTradesQuery,
    OpenOrdersQuery,
    OrderQuery,
    OrderRequest,
    RequestSchema,
    SymbolQuery,
    TickerV2Query,
    TradesQuery,
)
from tradehall.api.usual import read_usual_place, usual_order
from tradehall.codes import Code, Reject
from tradehall.engine.book import OrderBook
from tradehall.engine.commands import CancelBatch, CancelOrder, PlaceBatch, PlaceOrder
from tradehall.engine.engine import BatchCancelReply
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import BUY, LIMIT, OrderState
from tradehall.marketdata import Interval
from tradehall.units import pow10

PREFIX = "/spot/open/sapi/v1"
PREFIX_V2 = "/spot/open/sapi/v2"
PREFIX_V3 = "/spot/open/sapi/v3"
MARKET_KLINE = "/v1/spot/market/kline"
"""The live venues' candle address on their public host (here: the server root)."""
BATCH_REFUSED = "batch rejected, no order placed: "
"""How every refusal of a batch of orders begins (what follows names the element)."""
WINDOW_MS = 7 * 24 * 3600 * 1000
"""The widest startTime..endTime window of the v3 history reads, and their default (the
last seven days), as the family has it."""


def pair_of(call: Call, req: Reading) -> PairSpec:
    """The pair named by the request's ``symbol``, required here even where the request
    type lets it be absent (for every pair) and the handler found it present."""
    symbol: str | None = req.value("symbol")
    if symbol is None:
        raise req.missing("symbol")
    pair = call.exchange.config.markets.pairs.get(symbol)
    if pair is None:
        raise ApiError(Code.BAD_SYMBOL, f"invalid symbol {symbol!r}")
    return pair


# ------------------------------------------------------------------------- public


async def ping(call: Call) -> Any:
    return wire.EMPTY


async def server_time(call: Call) -> Any:
    return wire.server_time(call.now)


async def symbols(call: Call) -> Any:
    return wire.symbols(call.exchange.config.markets.pairs.values())


_DEPTH_HEAD = b'{"time":'


DepthRender = Callable[[int, list[tuple[int, int]], list[tuple[int, int]]], Any]
"""(time, bids, asks) -> the depth answer of one market."""


def cached_depth(call: Call, symbol: str, limit: int, book: OrderBook, render: DepthRender) -> Any:
    """Formatting a hundred levels a side is most of the work, and a book changes far less
    often than it is read: the levels are rendered once per (symbol, limit) and book version
    (``Exchange.book_versions``) and only the time, the server's now, is spliced in. Serves
    spot and futures books alike."""
    exchange = call.exchange
    stamp = (exchange.book_versions.get(symbol), len(book.orders), exchange.engine)
    views = call.state.views
    view_key = ("depth", symbol, limit)
    cached = views.get(view_key)
    if cached is None or cached[0] != stamp:
        bids, asks = book.bids.depth(limit), book.asks.depth(limit)
        full = msgspec.json.encode(render(0, bids, asks))
        if not full.startswith(_DEPTH_HEAD + b"0,"):  # the shape no longer starts with time
            return render(call.now, bids, asks)
        cached = views[view_key] = (stamp, full[len(_DEPTH_HEAD) + 1 :])
    return b"".join((_DEPTH_HEAD, str(call.now).encode(), cached[1]))


async def depth(call: Call) -> Any:
    req = reading(call.params, DepthQuery)
    pair = pair_of(call, req)
    book = call.exchange.engine.spot.books[pair.symbol]
    limit: int = req.value("limit")
    return cached_depth(call, pair.symbol, limit, book, partial(wire.depth, pair))


async def ticker(call: Call) -> Any:
    pair = pair_of(call, reading(call.params, SymbolQuery))
    return wire.ticker(pair, call.exchange.marketdata.ticker(pair.symbol, call.now), call.now)


async def ticker_v2(call: Call) -> Any:
    """``GET /sapi/v2/ticker``: one pair's ticker with its best bid and ask and its quote
    volume, or, without ``symbol``, every pair's (``symbols=a,b`` picks some) in a list."""
    pairs = call.exchange.config.markets.pairs
    req = reading(call.params, TickerV2Query)
    if req.present("symbol"):
        return _ticker_item(call, pair_of(call, req))
    wanted: str | None = req.value("symbols")
    if wanted is None:
        return [_ticker_item(call, pair) for pair in pairs.values()]
    chosen = []
    for name in wanted.split(","):
        if not name.strip():
            raise req.malformed("symbols", "has an empty name")
        pair = pair_of(call, reading(Params({"symbol": name.strip()}), TickerV2Query))
        if pair not in chosen:
            chosen.append(pair)
    return [_ticker_item(call, pair) for pair in chosen]


def _ticker_item(call: Call, pair: PairSpec) -> wire.TickerItem:
    book = call.exchange.engine.spot.books[pair.symbol]
    marketdata = call.exchange.marketdata
    return wire.ticker_item(
        pair,
        marketdata.ticker(pair.symbol, call.now),
        book.bids.depth(1),
        book.asks.depth(1),
        call.now,
    )


async def trades(call: Call) -> Any:
    req = reading(call.params, TradesQuery)
    pair = pair_of(call, req)
    limit: int = req.value("limit")
    recent = call.exchange.marketdata.recent_trades(pair.symbol, limit)
    return wire.public_trades(pair, recent)


async def klines(call: Call) -> Any:
    req = reading(call.params, KlinesQuery)
    pair = pair_of(call, req)
    interval: Interval = req.value("interval")
    limit: int = req.value("limit")
    bars = call.exchange.marketdata.klines(pair.symbol, interval, limit, call.now)
    return [wire.kline(pair, bar) for bar in bars]


async def market_kline(call: Call) -> Any:
    """``GET /v1/spot/market/kline``: the bars of ``/klines`` in the live venues' shape."""
    req = reading(call.params, MarketKlineQuery)
    pair = pair_of(call, req)
    interval: Interval = req.value("scaleType")
    limit: int = req.value("limit")
    bars = call.exchange.marketdata.klines(pair.symbol, interval, limit, call.now)
    rendered = [wire.market_kline(pair, bar) for bar in bars]
    return wire.MarketKlineAnswer(data=wire.MarketKlines(rendered))


# ------------------------------------------------------------------------- orders


def place_command(
    call: Call,
    pair: PairSpec,
    req: Reading,
    *,
    type_name: str = "type",
    dry_run: bool = False,
) -> PlaceOrder:
    """The order of an ``OrderRequest``, or of a ``BatchOrderItem`` (``type_name``
    ``batchType``)."""
    side: str | None = req.value("side")
    order_type: str | None = req.value(type_name)
    tif: str | None = req.value("timeInForce")
    client_id: str = req.value("newClientOrderId")
    price = qty = quote_qty = 0
    if order_type == LIMIT:
        price = req.value("price", decimals=pair.price_precision) or 0
        qty = req.value("volume", decimals=pair.quantity_precision) or 0
    elif side == BUY:
        amount: int = req.value("volume", decimals=pair.price_precision) or 0
        quote_qty = amount * pow10(pair.quote_decimals - pair.price_precision)
    else:
        qty = req.value("volume", decimals=pair.quantity_precision) or 0
    assert side is not None and order_type is not None
    return PlaceOrder(
        call.now,
        call.account,
        pair.symbol,
        side,
        order_type,
        price,
        qty,
        quote_qty,
        tif or "GTC",
        client_id,
        dry_run,
    )


async def create_order(call: Call) -> Any:
    usual = read_usual_place(call.params.data)
    built = None
    if usual is not None:  # read at once (``api.usual``): the same command, fewer steps
        built = usual_order(call.exchange.config.markets.pairs, *usual, call.now, call.account)
    if built is None:
        req = reading(call.params, OrderRequest)
        pair = pair_of(call, req)
        command = place_command(call, pair, req)
    else:
        pair, command = built
    order: OrderState = call.exchange.apply(command)
    await call.durable()
    return wire.order_created(pair, order)


async def test_order(call: Call) -> Any:
    req = reading(call.params, OrderRequest)
    pair = pair_of(call, req)
    call.exchange.apply(place_command(call, pair, req, dry_run=True))
    return wire.EMPTY


async def batch_orders(call: Call) -> Any:
    req = reading(call.params, BatchOrdersRequest)
    pair = pair_of(call, req)
    commands = []
    items: list[Any] = req.value("orders")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(Code.BAD_PARAM, f"{BATCH_REFUSED}orders[{index}] must be an object")
        try:
            order = reading(Params(item), BatchOrderItem)
            commands.append(place_command(call, pair, order, type_name="batchType"))
        except ApiError as exc:
            msg = f"{BATCH_REFUSED}orders[{index}]: {exc.msg}"
            raise ApiError(exc.code, msg, exc.status) from None
    batch = PlaceBatch(call.now, call.account, pair.symbol, tuple(commands))
    try:
        placed: list[OrderState] = call.exchange.apply(batch)
    except Reject as exc:
        raise ApiError(exc.code, BATCH_REFUSED + exc.msg) from None
    await call.durable()
    return wire.BatchIds([order.id for order in placed])


def order_ref(req: Reading) -> tuple[int | None, str | None]:
    order_id: int | None = req.value("orderId")
    client_id: str | None = req.value("newClientOrderId") or None
    if order_id is None and client_id is None:
        raise ApiError(
            Code.BAD_PARAM,
            "mandatory parameter 'orderId' (or 'newClientOrderId') was not sent or is empty",
        )
    return order_id, client_id


async def find_order(
    call: Call, pair: PairSpec, order_id: int | None, client_id: str | None
) -> OrderState:
    live = call.exchange.engine.spot.find_open(call.account, pair.symbol, order_id, client_id)
    if live is not None:
        return await call.once_durable(live.snapshot())
    await call.durable()
    stored = await call.state.read(
        call.exchange.store.find_order, call.account, pair.symbol, order_id, client_id
    )
    if stored is None:
        raise ApiError(Code.NO_SUCH_ORDER, "order does not exist")
    return stored


async def get_order(call: Call) -> Any:
    req = reading(call.params, OrderQuery)
    pair = pair_of(call, req)
    order_id, client_id = order_ref(req)
    return wire.order_detail(pair, await find_order(call, pair, order_id, client_id))


async def cancel_order(call: Call) -> Any:
    req = reading(call.params, CancelRequest)
    pair = pair_of(call, req)
    order_id, client_id = order_ref(req)
    command = CancelOrder(call.now, call.account, pair.symbol, order_id, client_id)
    try:
        order: OrderState = call.exchange.apply(command)
    except Reject as exc:
        if exc.code != Code.NO_SUCH_ORDER:
            raise
        ended = await find_order(call, pair, order_id, client_id)
        raise ApiError(
            Code.CANNOT_CANCEL, f"order {ended.id} is {ended.status}; it cannot be canceled"
        ) from None
    await call.durable()
    return wire.order_canceled(pair, order)


async def batch_cancel(call: Call) -> Any:
    req = reading(call.params, BatchCancelRequest)
    pair = pair_of(call, req)
    ids = []
    values: list[Any] = req.value("orderIds")
    for index, value in enumerate(values):
        order_id = parse_int(value) if value is not None else None
        if order_id is None or order_id <= 0:
            raise ApiError(Code.BAD_PARAM, f"orderIds[{index}] must be a positive integer id")
        ids.append(order_id)
    reply: BatchCancelReply = call.exchange.apply(
        CancelBatch(call.now, call.account, pair.symbol, tuple(ids))
    )
    await call.durable()
    return wire.BatchCancelResult(reply.success, reply.failed)


def open_orders_of(schema: type[RequestSchema]) -> Callable[[Call], Awaitable[Any]]:
    """``openOrders`` reading its request as ``schema`` (margin's requires the symbol)."""

    async def open_orders(call: Call) -> Any:
        req = reading(call.params, schema)
        symbol: str | None = req.value("symbol")
        pairs = call.exchange.config.markets.pairs
        if symbol is not None and symbol not in pairs:
            raise ApiError(Code.BAD_SYMBOL, f"invalid symbol {symbol!r}")
        limit: int = req.value("limit")
        orders = call.exchange.engine.open_orders(call.account, symbol)
        newest = orders[::-1][:limit]
        return await call.once_durable(
            [wire.open_order(pairs[o.symbol], o.snapshot()) for o in newest]
        )

    return open_orders


open_orders = open_orders_of(OpenOrdersQuery)


async def my_trades(call: Call) -> Any:
    req = reading(call.params, MyTradesQuery)
    pair = pair_of(call, req)
    limit: int = req.value("limit")
    from_id: int | None = req.value("fromId")
    await call.durable()
    rows = await call.state.read(
        call.exchange.store.account_trades, call.account, pair.symbol, limit, from_id
    )
    return [wire.account_trade(pair, trade, call.account) for trade in rows]


def time_window(req: Reading, now: int) -> tuple[int, int]:
    """``startTime``..``endTime`` (inclusive) of a v3 history read: the last seven days
    without either, seven days from the one given, at most seven days with both."""
    start: int | None = req.value("startTime")
    end: int | None = req.value("endTime")
    if start is None:
        end = now if end is None else end
        start = max(0, end - WINDOW_MS)
    elif end is None:
        end = start + WINDOW_MS
    if end < start:
        raise ApiError(Code.BAD_PARAM, "endTime must not be before startTime")
    if end - start > WINDOW_MS:
        raise ApiError(Code.BAD_PARAM, "startTime and endTime must be at most 7 days apart")
    return start, end


async def _windowed(call: Call, read: Callable[..., list[Any]]) -> list[Any]:
    """A v3 history read: optional ``symbol``, ``limit`` (default 50, at most 100) and the
    time window, from the store once everything applied so far is committed."""
    req = reading(call.params, HistoryQuery)
    pair = pair_of(call, req) if req.present("symbol") else None
    limit: int = req.value("limit")
    start, end = time_window(req, call.now)
    await call.durable()
    symbol = pair.symbol if pair else None
    return await call.state.read(read, call.account, symbol, start, end, limit)


async def history_orders(call: Call) -> Any:
    """``GET /sapi/v3/historyOrders``: the account's orders, open and ended, newest first."""
    pairs = call.exchange.config.markets.pairs
    rows = await _windowed(call, call.exchange.store.account_orders)
    return [wire.history_order(pairs[order.symbol], order) for order in rows]


async def my_trades_v3(call: Call) -> Any:
    """``GET /sapi/v3/myTrades``: the account's trades in a time window, newest first."""
    pairs = call.exchange.config.markets.pairs
    rows = await _windowed(call, call.exchange.store.account_trades_between)
    return [wire.account_trade(pairs[trade.symbol], trade, call.account) for trade in rows]


async def account(call: Call) -> Any:
    exchange = call.exchange
    amounts = exchange.engine.balances(call.account)
    return await call.once_durable(wire.account(exchange.config.markets.assets, amounts))


def routes() -> list[Route]:
    public = [
        ("/ping", ping),
        ("/time", server_time),
        ("/symbols", symbols),
        ("/depth", depth),
        ("/ticker", ticker),
        ("/trades", trades),
        ("/klines", klines),
    ]
    signed: list[tuple[str, str, Any, bool]] = [
        ("POST", "/order", create_order, True),
        ("POST", "/order/test", test_order, True),
        ("POST", "/batchOrders", batch_orders, True),
        ("GET", "/order", get_order, False),
        ("POST", "/cancel", cancel_order, True),
        ("POST", "/batchCancel", batch_cancel, True),
        ("GET", "/openOrders", open_orders, False),
        ("GET", "/myTrades", my_trades, False),
        ("GET", "/account", account, False),
    ]
    out = [
        Route(PREFIX + path, endpoint(fn, name=f"GET {PREFIX}{path}"), methods=["GET"])
        for path, fn in public
    ]
    out += [
        Route(
            PREFIX + path,
            endpoint(fn, name=f"{method} {PREFIX}{path}", signed=True, trade=trade),
            methods=[method],
        )
        for method, path, fn, trade in signed
    ]
    return out


def family_routes() -> list[Route]:
    """The family's newer spot reads: the v2 ticker (every pair, best bid and ask), the live
    venues' candles (``/v1/spot/market/kline``) and the v3 history reads. ``v2_aliases``
    adds the rest of v2."""
    ticker_path = PREFIX_V2 + "/ticker"
    out = [
        Route(ticker_path, endpoint(ticker_v2, name=f"GET {ticker_path}"), methods=["GET"]),
        Route(MARKET_KLINE, endpoint(market_kline, name=f"GET {MARKET_KLINE}"), methods=["GET"]),
    ]
    for path, fn in (("/historyOrders", history_orders), ("/myTrades", my_trades_v3)):
        name = f"GET {PREFIX_V3}{path}"
        out.append(Route(PREFIX_V3 + path, endpoint(fn, name=name, signed=True), methods=["GET"]))
    return out


def v2_aliases(routes: list[Route]) -> list[Route]:
    """Every spot and margin route under /sapi/v1 again under /sapi/v2, with the very same
    endpoint (so the same behaviour and the same rate-limit bucket), except where ``routes``
    already has the v2 path for that method."""
    taken = {(r.path, method) for r in routes for method in r.methods or ()}
    out = []
    for r in routes:
        if not r.path.startswith(PREFIX + "/"):
            continue
        path = PREFIX_V2 + r.path[len(PREFIX) :]
        methods = [m for m in r.methods or () if m != "HEAD" and (path, m) not in taken]
        if methods:
            out.append(Route(path, r.endpoint, methods=methods))
    return out
