"""Margin endpoints: the seed's five under /spot/open/sapi/v1/margin (spot shapes, acting on the
caller's isolated margin account of the pair), and tradehall's extensions under
/spot/open/sapi/v1/margin/tradehall/ (transfer, repay, account view)."""

from __future__ import annotations

import dataclasses
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from typing import Any

from starlette.routing import Route

from tradehall.api import spot, wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, Handler, endpoint
from tradehall.codes import Code
from tradehall.engine.commands import MarginRepay, MarginTransfer
from tradehall.engine.margin import MarginAccount
from tradehall.engine.markets import LEVEL_SCALE, PairSpec
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
    await call.durable()
    return account_view(call, pair, account)


async def repay(call: Call) -> Any:
    pair = margin_pair(call)
    asset, amount = _amount(call, pair)
    repaid: int = call.exchange.apply(MarginRepay(call.now, call.user, pair.symbol, asset, amount))
    await call.durable()
    account = call.exchange.engine.margin.account_of(call.user, pair.symbol)
    assert account is not None
    decimals = pair.base_decimals if asset == pair.base else pair.quote_decimals
    return {
        "asset": asset,
        "repaid": format_units(repaid, decimals),
        **account_view(call, pair, account),
    }


async def account(call: Call) -> Any:
    pair = margin_pair(call)
    await call.durable()
    found = call.exchange.engine.margin.account_of(call.user, pair.symbol)
    if found is None:
        raise ApiError(Code.INSUFFICIENT_BALANCE, f"no margin account on {pair.symbol}")
    return account_view(call, pair, found)


def _level(value: int) -> str:
    return format_units(value, 4)


def account_view(call: Call, pair: PairSpec, account: MarginAccount) -> dict[str, Any]:
    """Assets, debts, risk ratio and liquidation price of a margin account."""
    engine = call.exchange.engine
    spec = call.exchange.config.markets.margin[pair.symbol]
    assets = []
    for asset, decimals in ((pair.base, pair.base_decimals), (pair.quote, pair.quote_decimals)):
        free, locked = engine.ledger.get(account.id, asset)
        principal, interest = account.debts.get(asset, (0, 0))
        assets.append(
            {
                "asset": asset,
                "free": format_units(free, decimals),
                "locked": format_units(locked, decimals),
                "borrowed": format_units(principal, decimals),
                "interest": format_units(interest, decimals),
            }
        )
    price = engine.spot.last_price.get(pair.symbol)
    ratio = engine.margin.risk(account, price).ratio() if price else None
    status = "NORMAL"
    if ratio is not None:
        if ratio * LEVEL_SCALE <= spec.liquidation_level:
            status = "LIQUIDATION"
        elif ratio * LEVEL_SCALE <= spec.warning_level:
            status = "WARNING"
    liquidation = engine.margin.liquidation_price(account)
    return {
        "symbol": pair.symbol,
        "assets": assets,
        "riskRatio": None if ratio is None else _ratio_text(ratio),
        "riskStatus": status,
        "liquidationPrice": None
        if liquidation is None
        else _fraction_text(liquidation / 10**pair.price_precision, pair.price_precision),
        "lastPrice": None if price is None else wire.price(pair, price),
        "maxLeverage": spec.max_leverage,
        "initialLevel": _level(spec.initial_level),
        "warningLevel": _level(spec.warning_level),
        "liquidationLevel": _level(spec.liquidation_level),
    }


def _ratio_text(ratio: Fraction) -> str:
    return _fraction_text(ratio, 4)


def _fraction_text(value: Fraction, places: int) -> str:
    """A fraction as plain decimal text, rounded down to ``places``."""
    quantum = Decimal(1).scaleb(-places)
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{exact.quantize(quantum, rounding=ROUND_DOWN):f}"


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
