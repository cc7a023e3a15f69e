"""Futures answers rendered from engine state: the wire Structs of the futures endpoints.

Units: a price is in ticks of the contract's ``price_precision``, a volume in whole
contracts, a value (margin, P&L, fees) in units of the margin coin (``margin_decimals``),
money in 1e-8 quote, a rate in 1e-8. Numbers leave as ``wire.Num`` (exact plain decimal
text): prices at the contract's precision, values at the margin coin's decimals, rates and
ratios with up to 8 decimals without trailing zeros.

Computed fields (see docs/futures.md, "Field definitions"):

- marginRate of a position: maintenance margin / (effective margin + unrealized P&L), where
  the effective margin is the isolated margin, or for a cross position the account's cross
  equity without that position's unrealized P&L; 1 (100 %) is the liquidation point.
- totalMarginRate: cross maintenance margin / cross equity; sumMarginRate: maintenance margin
  of every position / (cross equity + isolated equity). 0 with nothing to maintain.
- returnRate: unrealized P&L / position margin.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import cast

import msgspec

from tradehall.api import wire
from tradehall.engine.contracts import MONEY_DECIMALS, RATE_ONE, ContractSpec
from tradehall.engine.events import Trade
from tradehall.engine.futures import Futures
from tradehall.engine.futures_model import (
    CROSS,
    ISOLATED,
    FuturesOrderState,
    Position,
    Trigger,
    futures_account,
)
from tradehall.engine.futures_risk import average_price, maintenance, unrealized
from tradehall.engine.liquidation import liquidation_backing, liquidation_mark
from tradehall.engine.orders import (
    BUY,
    CANCELED,
    FILLED,
    FOK,
    IOC,
    LIMIT,
    MARKET,
    NEW,
    PARTIALLY_FILLED,
    POST_ONLY,
    REJECTED,
)
from tradehall.marketdata import Bar
from tradehall.marketdata import Ticker as TickerStats
from tradehall.units import format_units, format_units_trimmed

RATE_DECIMALS = 8
ZERO = wire.Num("0")

STATUS_CODES = {NEW: 1, FILLED: 2, PARTIALLY_FILLED: 3, CANCELED: 4, REJECTED: 6}
"""Historical order ``status``: 0 init, 1 new, 2 filled, 3 partially filled, 4 canceled,
5 pending cancel, 6 expired (a POST_ONLY order refused because it would take)."""
TIF_CODES = {IOC: 3, FOK: 4, POST_ONLY: 5}
"""Historical order ``type``: 1 limit, 2 market, 3 IOC, 4 FOK, 5 POST_ONLY."""


# ------------------------------------------------------------------------- numbers


def pair_symbol(contract: ContractSpec) -> str:
    """The trading pair of a contract (``E-BTC-USDT`` -> ``BTCUSDT``)."""
    return contract.base + contract.quote


def number(units: int, decimals: int) -> wire.Num:
    return wire.Num(format_units(units, decimals))


def integer(value: int) -> wire.Num:
    return wire.Num(str(value))


def rate(units: int) -> wire.Num:
    """A rate in 1e-8 (fees, maintenance, funding), without trailing zeros."""
    return wire.Num(format_units_trimmed(units, RATE_DECIMALS))


def ratio(numerator: int, denominator: int) -> wire.Num:
    """numerator / denominator to 8 decimals (truncated toward zero); 0 when undefined."""
    if denominator == 0:
        return ZERO
    return rate(int(Fraction(numerator, denominator) * RATE_ONE))


def risk_ratio(needed: int, equity: int) -> wire.Num:
    """Maintenance margin / equity: 1 (100 %) or more is the liquidation point; 0 with
    nothing to maintain, 1 when there is no equity left to maintain it with."""
    if needed <= 0:
        return ZERO
    if equity <= 0:
        return wire.Num("1")
    return ratio(needed, equity)


def price(contract: ContractSpec, ticks: int) -> wire.Num:
    return number(ticks, contract.price_precision)


def exact_price(
    contract: ContractSpec, ticks: Decimal, rounding: str = ROUND_HALF_EVEN
) -> wire.Num:
    """A price in ticks given as an exact decimal, rounded (half-even) to the precision."""
    if ticks <= 0:
        return price(contract, 0)
    places = Decimal(1).scaleb(-contract.price_precision)
    return wire.Num(f"{(ticks * places).quantize(places, rounding=rounding):f}")


def value(contract: ContractSpec, units: int) -> wire.Num:
    """An amount of the margin coin."""
    return number(units, contract.margin_decimals)


def money(units: int) -> wire.Num:
    """An order value in the quote currency (1e-8), without trailing zeros."""
    return wire.Num(format_units_trimmed(units, MONEY_DECIMALS))


def local_time(ms: int) -> str:
    """UTC date-time text without zone (``2023-11-14T22:13:20``)."""
    moment = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def avg_price(contract: ContractSpec, volume: int, amount: int) -> wire.Num:
    return exact_price(contract, average_price(contract, volume, amount))


# ------------------------------------------------------------------------- market data


def contract_info(c: ContractSpec) -> wire.FuturesContractInfo:
    return wire.FuturesContractInfo(
        c.symbol,
        1 if c.trading else 0,
        c.type,
        0 if c.inverse else 1,
        wire.Num(f"{c.multiplier.normalize():f}"),
        c.multiplier_coin,
        c.price_precision,
        c.min_volume,
        money(c.min_money),
        c.max_market_volume,
        money(c.max_market_money),
        c.max_limit_volume,
        money(c.max_limit_money),
        c.max_valid_order,
    )


def ticker(contract: ContractSpec, t: TickerStats, now_ms: int) -> wire.FuturesTicker:
    pp = contract.price_precision
    return wire.FuturesTicker(
        now_ms,
        format_units(t.high, pp),
        format_units(t.low, pp),
        format_units(t.last, pp),
        str(t.volume),
        t.rose,
    )


def ticker_item(contract: ContractSpec, t: TickerStats, now_ms: int) -> wire.FuturesTickerItem:
    fields = msgspec.structs.asdict(ticker(contract, t, now_ms))
    return wire.FuturesTickerItem(**fields, contract_name=contract.symbol)


def kline(contract: ContractSpec, bar: Bar) -> wire.Kline:
    pp = contract.price_precision
    return wire.Kline(
        bar.open_time,
        format_units(bar.open, pp),
        format_units(bar.close, pp),
        format_units(bar.high, pp),
        format_units(bar.low, pp),
        str(bar.volume),
    )


def depth(
    contract: ContractSpec, now_ms: int, bids: list[tuple[int, int]], asks: list[tuple[int, int]]
) -> wire.Depth:
    pp = contract.price_precision

    def levels(side: list[tuple[int, int]]) -> list[wire.Level]:
        return [[format_units(p, pp), str(q)] for p, q in side]

    return wire.Depth(now_ms, levels(bids), levels(asks))


def index(fx: Futures, contract: ContractSpec, now_ms: int) -> wire.FuturesIndex:
    state = fx.states[contract.symbol]
    return wire.FuturesIndex(
        price(contract, state.index),
        price(contract, state.mark),
        contract.symbol,
        rate(state.last_funding_rate),
        now_ms,
    )


# ------------------------------------------------------------------------- orders


def orig_qty(order: FuturesOrderState | Trigger) -> wire.Num:
    """What the order's ``volume`` asked for: contracts, or for a MARKET OPEN its value in the
    quote currency."""
    if isinstance(order, FuturesOrderState):
        if order.type == MARKET and order.action == "OPEN" and order.money:
            return money(order.money)
        return integer(order.qty)
    if order.type == MARKET and order.action == "OPEN" and order.money:
        return money(order.money)
    return integer(order.volume)


def order(contract: ContractSpec, o: FuturesOrderState) -> wire.FuturesOrder:
    return wire.FuturesOrder(
        o.id,
        str(o.id),
        contract.symbol,
        pair_symbol(contract),
        price(contract, o.price),
        orig_qty(o),
        integer(o.filled),
        avg_price(contract, o.filled, o.filled_value),
        cast(wire.Status, o.status),
        cast(wire.Side, o.side),
        cast(wire.Action, o.action),
        cast(wire.OrderType, o.type),
        o.time,
    )


def trigger(
    contract: ContractSpec, t: Trigger, submitted: FuturesOrderState | None = None
) -> wire.FuturesOrder:
    """A conditional order, as an order with its trigger. Once it fired, ``submitted`` (the
    order it submitted) gives its status, ``executedQty`` and ``avgPrice``: a conditional
    order reads as its order's progress, never ``FILLED`` with nothing executed."""
    if submitted is None:
        executed, average, status = ZERO, price(contract, 0), t.status
    else:
        executed = integer(submitted.filled)
        average = avg_price(contract, submitted.filled, submitted.filled_value)
        status = submitted.status
    return wire.FuturesOrder(
        t.id,
        str(t.id),
        contract.symbol,
        pair_symbol(contract),
        price(contract, t.price),
        orig_qty(t),
        executed,
        average,
        cast(wire.Status, status),
        cast(wire.Side, t.side),
        cast(wire.Action, t.action),
        cast(wire.OrderType, t.type),
        t.time,
        t.trigger_type,
        price(contract, t.trigger_price),
    )


def trigger_item(contract: ContractSpec, t: Trigger) -> wire.TriggerItem:
    """A waiting conditional order as ``/trigger_order_list`` lists it."""
    pp = contract.price_precision
    return wire.TriggerItem(
        str(t.id),
        str(t.id),
        t.client_id,
        contract.id,
        contract.symbol,
        contract.margin_coin,
        f"{contract.multiplier.normalize():f}",
        format_units(t.trigger_price, pp),
        format_units(t.price, pp),
        pp,
        orig_qty(t).text,
        cast(wire.Action, t.action),
        cast(wire.Side, t.side),
        cast(wire.OrderType, t.type),
        t.position_type,
        t.time,
        t.updated,
        t.trigger_type,
    )


def historical_order(contract: ContractSpec, o: FuturesOrderState) -> wire.FuturesHistoricalOrder:
    type_code = 2 if o.type == MARKET else TIF_CODES.get(o.tif, 1) if o.type == LIMIT else 1
    return wire.FuturesHistoricalOrder(
        cast(wire.Side, o.side),
        o.client_id,
        o.time,
        local_time(o.time),
        o.position_type,
        o.id,
        str(o.id),
        avg_price(contract, o.filled, o.filled_value),
        price(contract, o.price),
        integer(o.qty),
        integer(o.filled),
        value(contract, o.filled_value),
        cast(wire.Action, o.action),
        o.leverage,
        type_code,
        STATUS_CODES.get(o.status, 0),
        contract.id,
        contract.symbol,
        rate(contract.open_maker_fee),
        rate(contract.open_taker_fee),
        rate(contract.close_maker_fee),
        rate(contract.close_taker_fee),
    )


def profit(contract: ContractSpec, p: Position) -> wire.FuturesProfit:
    realized = value(contract, p.realized)
    return wire.FuturesProfit(
        p.id,
        contract.id,
        cast(wire.Side, p.side),
        p.position_type,
        p.leverage,
        integer(p.open_volume),
        avg_price(contract, p.open_volume, p.open_value),
        avg_price(contract, p.close_volume, p.close_value),
        value(contract, p.trade_fee),
        value(contract, p.capital_fee),
        realized,
        realized,
        value(contract, 0),
        value(contract, p.close_profit),
        value(contract, p.share_amount),
        p.ctime,
        p.mtime,
    )


def account_trade(contract: ContractSpec, t: Trade, user: int) -> wire.FuturesTrade:
    account = futures_account(user)
    is_buyer = t.bid_account == account
    return wire.FuturesTrade(
        pair_symbol(contract),
        t.id,
        t.id,
        t.bid_order,
        t.ask_order,
        t.bid_account - futures_account(0),
        t.ask_account - futures_account(0),
        price(contract, t.price),
        integer(t.qty),
        value(contract, t.quote),
        t.time,
        value(contract, t.bid_fee if is_buyer else t.ask_fee),
        "BUY" if is_buyer else "SELL",
        contract.symbol,
        (t.taker_side == BUY) != is_buyer,
        is_buyer,
    )


# ------------------------------------------------------------------------- positions


def position_item(fx: Futures, p: Position) -> wire.FuturesPositionItem:
    contract = fx.contracts[p.contract]
    fields = msgspec.structs.asdict(position(fx, p))
    return wire.FuturesPositionItem(
        **fields, contract_name=contract.symbol, contract_symbol=pair_symbol(contract)
    )


def position(fx: Futures, p: Position) -> wire.FuturesPosition:
    contract = fx.contracts[p.contract]
    mark = fx.states[p.contract].mark
    upnl = unrealized(contract, p, mark)
    margin = liquidation_backing(fx, p)
    liquidation, falling = liquidation_mark(fx, p)
    entry = avg_price(contract, p.volume, p.cost)
    realized = value(contract, p.realized)
    return wire.FuturesPosition(
        p.id,
        p.user,
        contract.id,
        p.position_type,
        cast(wire.Side, p.side),
        integer(p.volume),
        entry,
        entry,
        avg_price(contract, p.close_volume, p.close_value),
        integer(p.leverage),
        value(contract, p.margin),
        integer(p.close_volume),
        integer(p.pending_close),
        realized,
        realized,
        value(contract, p.trade_fee),
        value(contract, p.capital_fee),
        value(contract, p.close_profit),
        value(contract, p.share_amount),
        0,
        1 if p.volume > 0 else 0,
        local_time(p.ctime),
        local_time(p.mtime),
        None,
        0,
        risk_ratio(maintenance(contract, p, mark), margin + upnl),
        # The first mark price on the tick grid at which the position is liquidated: at or
        # below it (rounded down: a long's), or at or above it (rounded up: a short's).
        exact_price(contract, liquidation, ROUND_FLOOR if falling else ROUND_CEILING),
        ratio(upnl, p.margin),
        value(contract, upnl),
        value(contract, upnl),
        value(contract, contract.value(p.volume, mark) if mark > 0 else 0),
        price(contract, mark),
        rate(contract.maintenance_rate),
        rate(contract.close_taker_fee),
        position_config(contract),
    )


def position_config(contract: ContractSpec) -> wire.PositionConfig:
    return wire.PositionConfig(contract.id, contract.symbol, pair_symbol(contract))


def margin_coins(fx: Futures) -> list[str]:
    """Margin coins in the order of the contracts."""
    return list(dict.fromkeys(c.margin_coin for c in fx.contracts.values()))


def margin_account(fx: Futures, user: int, coin: str) -> wire.FuturesMarginAccount | None:
    """The account record of one margin coin; None when the user has nothing in it."""
    free, locked = fx.ledger.get(futures_account(user), coin)
    positions = [p for p in fx.user_positions(user) if fx.contracts[p.contract].margin_coin == coin]
    if not (free or locked or positions):
        return None
    decimals = next(c.margin_decimals for c in fx.contracts.values() if c.margin_coin == coin)
    holds = sum(o.held for o in fx.open_orders(user) if fx.contracts[o.symbol].margin_coin == coin)
    iso_margin = cross_margin = realized = upnl_total = iso_equity = cross_cost = 0
    iso_needed = 0
    groups: dict[str, list[wire.FuturesPosition]] = {}
    for p in positions:
        contract = fx.contracts[p.contract]
        mark = fx.states[p.contract].mark
        upnl = unrealized(contract, p, mark)
        realized += p.realized
        upnl_total += upnl
        if p.position_type == ISOLATED:
            iso_margin += p.margin
            iso_equity += p.margin + upnl
            iso_needed += maintenance(contract, p, mark)
        elif p.position_type == CROSS:
            cross_margin += p.margin
            cross_cost += p.cost
        groups.setdefault(p.contract, []).append(position(fx, p))
    equity, cross_needed = fx.cross_equity(user, coin)
    vos = [
        wire.FuturesPositionGroup(
            fx.contracts[symbol].id,
            symbol,
            pair_symbol(fx.contracts[symbol]),
            records,
        )
        for symbol, records in groups.items()
    ]
    return wire.FuturesMarginAccount(
        coin,
        number(fx.available(user, coin), decimals),
        number(holds, decimals),
        number(iso_margin, decimals),
        number(cross_margin, decimals),
        number(realized, decimals),
        number(upnl_total, decimals),
        risk_ratio(cross_needed, equity),
        number(equity, decimals),
        number(iso_equity, decimals),
        number(cross_cost, decimals),
        risk_ratio(cross_needed + iso_needed, equity + iso_equity),
        vos,
    )


def account(fx: Futures, user: int) -> wire.FuturesAccount:
    records = (margin_account(fx, user, coin) for coin in margin_coins(fx))
    return wire.FuturesAccount([r for r in records if r is not None])


def contract_infos(contracts: Iterable[ContractSpec]) -> list[wire.FuturesContractInfo]:
    return [contract_info(c) for c in contracts]
