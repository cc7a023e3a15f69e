"""Margin endpoints: the seed's five under /spot/open/sapi/v1/margin (spot shapes, acting on the
caller's isolated margin account of the pair), and tradehall's extensions under
/spot/open/sapi/v1/margin/tradehall/ (transfer, repay, account view)."""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.routing import Route

from tradehall import operations as ops
from tradehall.api import spot
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, Handler, endpoint
from tradehall.codes import Code
from tradehall.engine.commands import MarginRepay, MarginTransfer
from tradehall.engine.margin import MarginAccount
from tradehall.engine.markets import PairSpec
from tradehall.units import format_units

PREFIX = spot.PREFIX + "/margin"
EXTENSION = PREFIX + "/tradehall"


def margin_pair(call: Call) -> PairSpec:
    pair = spot.pair_of(call)
    if pair.symbol not in call.exchange.config.markets.margin:
        raise ApiError(Code.BAD_SYMBOL, f"margin trading is not offered on {pair.symbol}")
    return pair


async def _no_account(call: Call) -> Any:
    pair = margin_pair(call)
    raise ApiError(
        Code.INSUFFICIENT_BALANCE, f"no margin account on {pair.symbol}: transfer funds in first"
    )


async def _no_such_order(call: Call) -> Any:
    raise ApiError(Code.NO_SUCH_ORDER, "order does not exist")


async def _nothing(call: Call) -> Any:
    return []


def on_margin_account(handler: Handler, without: Handler) -> Handler:
    """Run a spot handler on the caller's margin account of the pair; ``without`` answers
    when the caller has none yet."""

    async def run(call: Call) -> Any:
        pair = margin_pair(call)
        account = call.exchange.engine.margin.account_of(call.user, pair.symbol)
        if account is None:
            return await without(call)
        return await handler(dataclasses.replace(call, account_id=account.id))

    return run


def _amount(call: Call, pair: PairSpec) -> tuple[str, int]:
    asset = call.params.text("asset", required=True)
    assert asset is not None
    if not asset.isascii():
        raise ApiError(Code.BAD_PARAM, f"{asset!r} is not an asset of {pair.symbol}")
    asset = asset.upper()
    if asset not in (pair.base, pair.quote):
        raise ApiError(Code.BAD_PARAM, f"{asset} is not an asset of {pair.symbol}")
    decimals = pair.base_decimals if asset == pair.base else pair.quote_decimals
    amount = call.params.units("amount", decimals)
    assert amount is not None
    return asset, amount


async def transfer(call: Call) -> Any:
    pair = margin_pair(call)
    asset, amount = _amount(call, pair)
    direction = call.params.choice("direction", ("IN", "OUT"), Code.BAD_PARAM)
    command = MarginTransfer(call.now, call.user, pair.symbol, asset, amount, direction == "IN")
    account: MarginAccount = call.exchange.apply(command)
    return await call.once_durable(account_view(call, pair, account))


async def repay(call: Call) -> Any:
    pair = margin_pair(call)
    asset, amount = _amount(call, pair)
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
    pair = margin_pair(call)
    found = call.exchange.engine.margin.account_of(call.user, pair.symbol)
    if found is None:
        await call.durable()  # the account may have been opened by a command not yet committed
        raise ApiError(Code.INSUFFICIENT_BALANCE, f"no margin account on {pair.symbol}")
    return await call.once_durable(account_view(call, pair, found))


def account_view(call: Call, pair: PairSpec, account: MarginAccount) -> dict[str, Any]:
    return ops.margin_view(call.exchange, account.user, pair.symbol)


def routes() -> list[Route]:
    seed: list[tuple[str, str, Handler, bool]] = [
        ("POST", "/order", on_margin_account(spot.create_order, _no_account), True),
        ("GET", "/order", on_margin_account(spot.get_order, _no_such_order), False),
        ("POST", "/cancel", on_margin_account(spot.cancel_order, _no_such_order), True),
        ("GET", "/openOrders", on_margin_account(spot.open_orders, _nothing), False),
        ("GET", "/myTrades", on_margin_account(spot.my_trades, _nothing), False),
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
