"""The spot endpoints of the seed, under /spot/open/sapi/v1."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
from starlette.routing import Route

from tradehall.api import wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, endpoint
from tradehall.api.params import Params, parse_int
from tradehall.codes import Code, Reject
from tradehall.engine.book import OrderBook
from tradehall.engine.commands import CancelBatch, CancelOrder, PlaceBatch, PlaceOrder
from tradehall.engine.engine import BatchCancelReply
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import BUY, LIMIT, MARKET, SELL, TIME_IN_FORCE, OrderState
from tradehall.marketdata import Interval, parse_interval
from tradehall.units import pow10

PREFIX = "/spot/open/sapi/v1"
PREFIX_V2 = "/spot/open/sapi/v2"
PREFIX_V3 = "/spot/open/sapi/v3"
MAX_BATCH = 10
WINDOW_MS = 7 * 24 * 3600 * 1000
"""The widest startTime..endTime window of the v3 history reads, and their default (the
last seven days), as the family has it."""


def pair_of(call: Call, params: Params | None = None) -> PairSpec:
    symbol = (params or call.params).symbol()
    assert symbol is not None
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


def cached_depth(call: Call, symbol: str, book: OrderBook, render: DepthRender) -> Any:
    """Formatting a hundred levels a side is most of the work, and a book changes far less
    often than it is read: the levels are rendered once per (symbol, limit) and book version
    (``Exchange.book_versions``) and only the time, the server's now, is spliced in. Serves
    spot and futures books alike."""
    limit = call.params.limit(100, 100)
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
    pair = pair_of(call)
    book = call.exchange.engine.spot.books[pair.symbol]
    return cached_depth(call, pair.symbol, book, partial(wire.depth, pair))


def interval_of(call: Call, names: str) -> Interval:
    """The ``interval`` parameter of a klines request; ``names`` lists the accepted ones
    for the error message."""
    name = call.params.text("interval", required=True)
    assert name is not None
    try:
        return parse_interval(name)
    except ValueError:
        raise ApiError(Code.BAD_PARAM, f"invalid interval {name!r}; expected {names}") from None


async def ticker(call: Call) -> Any:
    pair = pair_of(call)
    return wire.ticker(pair, call.exchange.marketdata.ticker(pair.symbol, call.now), call.now)


async def ticker_v2(call: Call) -> Any:
    """``GET /sapi/v2/ticker``: one pair's ticker with its best bid and ask and its quote
    volume, or, without ``symbol``, every pair's (``symbols=a,b`` picks some) in a list."""
    pairs = call.exchange.config.markets.pairs
    if call.params.present("symbol"):
        return _ticker_item(call, pair_of(call))
    wanted = call.params.text("symbols")
    if wanted is None:
        return [_ticker_item(call, pair) for pair in pairs.values()]
    chosen = []
    for name in wanted.split(","):
        if not name.strip():
            raise call.params.malformed("symbols", "has an empty name")
        pair = pair_of(call, Params({"symbol": name.strip()}))
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
    pair = pair_of(call)
    limit = call.params.limit(100, 1000)
    recent = call.exchange.marketdata.recent_trades(pair.symbol, limit)
    return wire.public_trades(pair, recent)


async def klines(call: Call) -> Any:
    pair = pair_of(call)
    interval = interval_of(call, "1min, 5min, 15min, 30min, 60min (or 1h), 1day, 1week or 1month")
    limit = call.params.limit(100, 300)
    bars = call.exchange.marketdata.klines(pair.symbol, interval, limit, call.now)
    return [wire.kline(pair, bar) for bar in bars]


# ------------------------------------------------------------------------- orders


def place_command(
    call: Call,
    pair: PairSpec,
    params: Params,
    *,
    type_name: str = "type",
    dry_run: bool = False,
) -> PlaceOrder:
    side = params.choice("side", (BUY, SELL), Code.BAD_SIDE)
    order_type = params.choice(type_name, (LIMIT, MARKET), Code.BAD_ORDER_TYPE)
    tif = params.choice("timeInForce", TIME_IN_FORCE, Code.BAD_ORDER_TYPE, required=False)
    client_id = params.client_id("newClientOrderId")
    price = qty = quote_qty = 0
    if order_type == LIMIT:
        price = params.units("price", pair.price_precision) or 0
        qty = params.units("volume", pair.quantity_precision) or 0
    elif side == BUY:
        amount = params.units("volume", pair.price_precision) or 0
        quote_qty = amount * pow10(pair.quote_decimals - pair.price_precision)
    else:
        qty = params.units("volume", pair.quantity_precision) or 0
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
    pair = pair_of(call)
    order: OrderState = call.exchange.apply(place_command(call, pair, call.params))
    await call.durable()
    return wire.order_created(pair, order)


async def test_order(call: Call) -> Any:
    pair = pair_of(call)
    call.exchange.apply(place_command(call, pair, call.params, dry_run=True))
    return wire.EMPTY


async def batch_orders(call: Call) -> Any:
    pair = pair_of(call)
    commands = []
    for index, item in enumerate(call.params.list("orders", MAX_BATCH)):
        if not isinstance(item, dict):
            raise ApiError(Code.BAD_PARAM, f"orders[{index}] must be an object")
        try:
            commands.append(place_command(call, pair, Params(item), type_name="batchType"))
        except ApiError as exc:
            raise ApiError(exc.code, f"orders[{index}]: {exc.msg}", exc.status) from None
    batch = PlaceBatch(call.now, call.account, pair.symbol, tuple(commands))
    try:
        placed: list[OrderState] = call.exchange.apply(batch)
    except Reject as exc:
        raise ApiError(exc.code, f"batch rejected, no order placed: {exc.msg}") from None
    await call.durable()
    return wire.BatchIds([order.id for order in placed])


def order_ref(params: Params) -> tuple[int | None, str | None]:
    order_id = params.order_id("orderId")
    client_id = params.client_id("newClientOrderId") or None
    if order_id is None and client_id is None:
        raise params.missing("orderId")
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
    pair = pair_of(call)
    order_id, client_id = order_ref(call.params)
    return wire.order_detail(pair, await find_order(call, pair, order_id, client_id))


async def cancel_order(call: Call) -> Any:
    pair = pair_of(call)
    order_id, client_id = order_ref(call.params)
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
    pair = pair_of(call)
    ids = []
    for index, value in enumerate(call.params.list("orderIds", MAX_BATCH)):
        order_id = parse_int(value) if value is not None else None
        if order_id is None or order_id <= 0:
            raise ApiError(Code.BAD_PARAM, f"orderIds[{index}] must be a positive integer id")
        ids.append(order_id)
    reply: BatchCancelReply = call.exchange.apply(
        CancelBatch(call.now, call.account, pair.symbol, tuple(ids))
    )
    await call.durable()
    return wire.BatchCancelResult(reply.success, reply.failed)


async def open_orders(call: Call) -> Any:
    symbol = call.params.symbol(required=False)
    pairs = call.exchange.config.markets.pairs
    if symbol is not None and symbol not in pairs:
        raise ApiError(Code.BAD_SYMBOL, f"invalid symbol {symbol!r}")
    limit = call.params.limit(100, 1000)
    orders = call.exchange.engine.open_orders(call.account, symbol)
    newest = orders[::-1][:limit]
    return await call.once_durable([wire.open_order(pairs[o.symbol], o.snapshot()) for o in newest])


async def my_trades(call: Call) -> Any:
    pair = pair_of(call)
    limit = call.params.limit(100, 1000)
    from_id = call.params.integer("fromId", minimum=0)
    await call.durable()
    rows = await call.state.read(
        call.exchange.store.account_trades, call.account, pair.symbol, limit, from_id
    )
    return [wire.account_trade(pair, trade, call.account) for trade in rows]


def time_window(call: Call) -> tuple[int, int]:
    """``startTime``..``endTime`` (inclusive) of a v3 history read: the last seven days
    without either, seven days from the one given, at most seven days with both."""
    start = call.params.integer("startTime", minimum=0)
    end = call.params.integer("endTime", minimum=0)
    if start is None:
        end = call.now if end is None else end
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
    pair = pair_of(call) if call.params.present("symbol") else None
    limit = call.params.limit(50, 100)
    start, end = time_window(call)
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
    """The family's newer spot reads: the v2 ticker (every pair, best bid and ask) and the
    v3 history reads. ``v2_aliases`` adds the rest of v2."""
    ticker_path = PREFIX_V2 + "/ticker"
    out = [Route(ticker_path, endpoint(ticker_v2, name=f"GET {ticker_path}"), methods=["GET"])]
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
