"""Rendering engine values as the family's JSON shapes: decimal strings at the pair's precision."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from tradehall.engine.events import Trade
from tradehall.engine.markets import AssetSpec, PairSpec
from tradehall.engine.orders import BUY, MARKET, OrderState
from tradehall.marketdata import Bar, PublicTrade, Ticker
from tradehall.units import format_units, format_units_trimmed, pow10


def price(pair: PairSpec, ticks: int) -> str:
    return format_units(ticks, pair.price_precision)


def qty(pair: PairSpec, lots: int) -> str:
    return format_units(lots, pair.quantity_precision)


def quote_amount(pair: PairSpec, units: int) -> str:
    """A quote amount given at the pair's price precision (MARKET BUY volume)."""
    return format_units(
        units // pow10(pair.quote_decimals - pair.price_precision), pair.price_precision
    )


def avg_price(pair: PairSpec, filled: int, filled_quote: int) -> str:
    if not filled:
        return price(pair, 0)
    ticks = Decimal(filled_quote) / Decimal(filled * pair.quote_per_tick_lot)
    places = Decimal(1).scaleb(-pair.price_precision)
    return f"{(ticks * places).quantize(places, rounding=ROUND_HALF_EVEN):f}"


def orig_qty(pair: PairSpec, order: OrderState) -> str:
    if order.type == MARKET and order.side == BUY:
        return quote_amount(pair, order.quote_qty)
    return qty(pair, order.qty)


def order_created(pair: PairSpec, order: OrderState) -> dict[str, Any]:
    return {
        "symbol": pair.symbol,
        "orderId": str(order.id),
        "clientOrderId": order.client_id,
        "transactTime": str(order.time),
        "price": price(pair, order.price),
        "origQty": orig_qty(pair, order),
        "executedQty": qty(pair, order.filled),
        "status": order.status,
        "type": order.type,
        "side": order.side,
    }


def order_detail(pair: PairSpec, order: OrderState) -> dict[str, Any]:
    return {
        "orderId": str(order.id),
        "clientOrderId": order.client_id,
        "symbol": pair.symbol,
        "price": price(pair, order.price),
        "origQty": orig_qty(pair, order),
        "executedQty": qty(pair, order.filled),
        "avgPrice": avg_price(pair, order.filled, order.filled_quote),
        "status": order.status,
        "type": order.type,
        "side": order.side,
        "transactTime": str(order.time),
    }


def open_order(pair: PairSpec, order: OrderState) -> dict[str, Any]:
    return {
        "orderId": str(order.id),
        "symbol": pair.symbol,
        "price": price(pair, order.price),
        "origQty": orig_qty(pair, order),
        "executedQty": qty(pair, order.filled),
        "avgPrice": avg_price(pair, order.filled, order.filled_quote),
        "status": order.status,
        "type": order.type,
        "side": order.side,
        "time": str(order.time),
    }


def order_canceled(pair: PairSpec, order: OrderState) -> dict[str, Any]:
    return {
        "symbol": pair.symbol,
        "clientOrderId": order.client_id,
        "orderId": str(order.id),
        "status": order.status,
    }


def account_trade(pair: PairSpec, trade: Trade, account: int) -> dict[str, Any]:
    is_buyer = trade.bid_account == account
    if is_buyer:
        fee, fee_coin, decimals = trade.bid_fee, pair.base, pair.base_decimals
    else:
        fee, fee_coin, decimals = trade.ask_fee, pair.quote, pair.quote_decimals
    return {
        "symbol": pair.symbol,
        "id": trade.id,
        "bidId": trade.bid_order,
        "askId": trade.ask_order,
        "price": price(pair, trade.price),
        "qty": qty(pair, trade.qty),
        "time": trade.time,
        "isBuyer": is_buyer,
        "isMaker": (trade.taker_side == BUY) != is_buyer,
        "feeCoin": fee_coin,
        "fee": format_units_trimmed(fee, decimals),
    }


def public_trade(pair: PairSpec, trade: PublicTrade) -> dict[str, Any]:
    return {
        "price": price(pair, trade.price),
        "qty": qty(pair, trade.qty),
        "time": trade.time,
        "side": trade.taker_side,
    }


def ticker(pair: PairSpec, t: Ticker, now_ms: int) -> dict[str, Any]:
    return {
        "high": price(pair, t.high),
        "low": price(pair, t.low),
        "last": price(pair, t.last),
        "vol": qty(pair, t.volume),
        "rose": t.rose,
        "time": now_ms,
    }


def kline(pair: PairSpec, bar: Bar) -> dict[str, Any]:
    return {
        "idx": bar.open_time,
        "open": price(pair, bar.open),
        "close": price(pair, bar.close),
        "high": price(pair, bar.high),
        "low": price(pair, bar.low),
        "vol": qty(pair, bar.volume),
    }


def depth_levels(pair: PairSpec, levels: list[tuple[int, int]]) -> list[list[str]]:
    pp, qp = pair.price_precision, pair.quantity_precision
    return [[format_units(p, pp), format_units(q, qp)] for p, q in levels]


def balances(
    assets: dict[str, AssetSpec], amounts: dict[str, tuple[int, int]]
) -> list[dict[str, str]]:
    return [
        {
            "asset": asset,
            "free": format_units(free, assets[asset].decimals),
            "locked": format_units(locked, assets[asset].decimals),
        }
        for asset, (free, locked) in amounts.items()
    ]
