"""Margin endpoints: the seed's five under /spot/open/sapi/v1/margin (spot shapes, acting on the
caller's isolated margin account of the pair), and tradehall's extensions under
/spot/open/sapi/v1/margin/tradehall/ (transfer, repay, account view)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from starlette.routing import Route

from tradehall import operations as ops
from tradehall.api import spot
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, Handler, endpoint
from tradehall.api.reading import Reading, reading
from tradehall.api.requests import (
    CancelRequest,
    MarginAccountQuery,
    MarginOpenOrdersQuery,
    MarginRepayRequest,
    MarginTransferRequest,
    MyTradesQuery,
    OrderQuery,
    OrderRequest,
    RequestSchema,
)
from tradehall.codes import Code
from tradehall.engine.commands import MarginRepay, MarginTransfer
from tradehall.engine.margin import MarginAccount
from tradehall.engine.markets import PairSpec
from tradehall.units import format_units

PREFIX = spot.PREFIX + "/margin"
EXTENSION = PREFIX + "/tradehall"


def margin_pair(call: Call, req: Reading) -> PairSpec:
    pair = spot.pair_of(call, req)
    if pair.symbol not in call.exchange.config.markets.margin:
        raise ApiError(Code.BAD_SYMBOL, f"margin trading is not offered on {pair.symbol}")
    return pair


def _no_account(pair: PairSpec) -> Any:
    raise ApiError(
        Code.INSUFFICIENT_BALANCE, f"no margin account on {pair.symbol}: transfer funds in first"
    )


def _no_such_order(pair: PairSpec) -> Any:
    raise ApiError(Code.NO_SUCH_ORDER, "order does not exist")


def _nothing(pair: PairSpec) -> Any:
    return []


def on_margin_account(
    handler: Handler, schema: type[RequestSchema], without: Callable[[PairSpec], Any]
) -> Handler:
    """Run a spot handler (which reads its request as ``schema``) on the caller's margin
    account of the pair; ``without`` answers when the caller has none yet."""

    async def run(call: Call) -> Any:
        pair = margin_pair(call, reading(call.params, schema))
        account = call.exchange.engine.margin.account_of(call.user, pair.symbol)
        if account is None:
            return without(pair)
        return await handler(dataclasses.replace(call, account_id=account.id))

    return run


def _amount(req: Reading, pair: PairSpec) -> tuple[str, int]:
    asset: str | None = req.value("asset")
    assert asset is not None
    if not asset.isascii():
        raise ApiError(Code.BAD_PARAM, f"{asset!r} is not an asset of {pair.symbol}")
    asset = asset.upper()
    if asset not in (pair.base, pair.quote):
        raise ApiError(Code.BAD_PARAM, f"{asset} is not an asset of {pair.symbol}")
    decimals = pair.base_decimals if asset == pair.base else pair.quote_decimals
    amount: int | None = req.value("amount", decimals=decimals)
    assert amount is not None
    return asset, amount


async def transfer(call: Call) -> Any:
    req = reading(call.params, MarginTransferRequest)
    pair = margin_pair(call, req)
    asset, amount = _amount(req, pair)
    direction = req.value("direction")
    command = MarginTransfer(call.now, call.user, pair.symbol, asset, amount, direction == "IN")
    account: MarginAccount = call.exchange.apply(command)
    return await call.once_durable(account_view(call, pair, account))


async def repay(call: Call) -> Any:
    req = reading(call.params, MarginRepayRequest)
    pair = margin_pair(call, req)
    asset, amount = _amount(req, pair)
    repaid: int = call.exchange.apply(MarginRepay(call.now, call.user, pair.symbol, asset, amount))
    account = call.exchange.engine.margin.account_of(call.user, pair.symbol)
    assert account is not None
    decimals = pair.base_decimals if asset == pair.base else pair.quote_decimals
    return await call.once_durable(
        {
            "asset": asset,
            "repaid": format_units(repaid, decimals),
            **account_view(call, pair, account),
        }
    )


async def account(call: Call) -> Any:
    pair = margin_pair(call, reading(call.params, MarginAccountQuery))
    found = call.exchange.engine.margin.account_of(call.user, pair.symbol)
    if found is None:
        await call.durable()  # the account may have been opened by a command not yet committed
        raise ApiError(Code.INSUFFICIENT_BALANCE, f"no margin account on {pair.symbol}")
    return await call.once_durable(account_view(call, pair, found))


def account_view(call: Call, pair: PairSpec, account: MarginAccount) -> dict[str, Any]:
    return ops.margin_view(call.exchange, account.user, pair.symbol)


open_orders = spot.open_orders_of(MarginOpenOrdersQuery)


def routes() -> list[Route]:
    on = on_margin_account
    seed: list[tuple[str, str, Handler, bool]] = [
        ("POST", "/order", on(spot.create_order, OrderRequest, _no_account), True),
        ("GET", "/order", on(spot.get_order, OrderQuery, _no_such_order), False),
        ("POST", "/cancel", on(spot.cancel_order, CancelRequest, _no_such_order), True),
        ("GET", "/openOrders", on(open_orders, MarginOpenOrdersQuery, _nothing), False),
        ("GET", "/myTrades", on(spot.my_trades, MyTradesQuery, _nothing), False),
    ]
    extensions: list[tuple[str, str, Handler, bool]] = [
        ("POST", "/transfer", transfer, True),
        ("POST", "/repay", repay, True),
        ("GET", "/account", account, False),
    ]
    out = []
    for prefix, table in ((PREFIX, seed), (EXTENSION, extensions)):
        for method, path, handler, trade in table:
            name = f"{method} {prefix}{path}"
            out.append(
                Route(
                    prefix + path,
                    endpoint(handler, name=name, signed=True, trade=trade),
                    methods=[method],
                )
            )
    return out
