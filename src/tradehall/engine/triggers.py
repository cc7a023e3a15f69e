"""Conditional futures orders: they wait for the contract's last trade price to reach their
trigger, then submit their order exactly once.

- 1 stop-loss: a BUY fires when the price is >= the trigger, a SELL when it is <=.
- 2 take-profit: the reverse (BUY when <=, SELL when >=).
- 3 trailing buy: the trigger trails the lowest price seen since placement at the initial
  distance above it; fires when the price rises back to it.
- 4 trailing sell: the trigger trails the highest price seen at the initial distance below
  it; fires when the price falls back to it.

A trigger is removed before its order is submitted, so it can never fire twice; if the order
is refused (no margin, nothing left to close) the trigger ends REJECTED.
"""

from __future__ import annotations

from tradehall.codes import Code, Reject
from tradehall.engine.commands import FuturesPlace
from tradehall.engine.futures import Futures, check_price
from tradehall.engine.futures_model import (
    BY_TRIGGER,
    FIRED,
    STOP_LOSS,
    TAKE_PROFIT,
    TRAILING_BUY,
    TRAILING_SELL,
    TRIGGER_CANCELED,
    TRIGGER_FAILED,
    WAITING,
    Trigger,
)
from tradehall.engine.orders import BUY, GTC, SELL
from tradehall.engine.trigger_book import reached

TRIGGER_TYPES = (STOP_LOSS, TAKE_PROFIT, TRAILING_BUY, TRAILING_SELL)


def place(fx: Futures, cmd: FuturesPlace) -> Trigger:
    if cmd.trigger_type not in TRIGGER_TYPES:
        raise Reject(Code.BAD_PARAM, "triggerType must be 1, 2, 3 or 4")
    if cmd.trigger_price <= 0:
        raise Reject(Code.PRICE_RANGE, "triggerPrice must be positive")
    if cmd.tif != GTC:
        raise Reject(Code.BAD_PARAM, "conditional orders take no timeInForce")
    if cmd.trigger_type == TRAILING_BUY and cmd.side != BUY:
        raise Reject(Code.BAD_SIDE, "a trailing buy (3) is a BUY order")
    if cmd.trigger_type == TRAILING_SELL and cmd.side != SELL:
        raise Reject(Code.BAD_SIDE, "a trailing sell (4) is a SELL order")
    # The order it will submit must be valid as far as it can be known now; margin and the
    # position to close are checked when it fires.
    contract, setting = fx.validate(cmd, conditional=True)
    # A trigger above the highest price the contract trades at could never be reached.
    check_price(contract, cmd.trigger_price, "triggerPrice")
    state = fx.states[contract.symbol]
    price = state.last or state.mark
    distance = 0
    best = 0
    if cmd.trigger_type in (TRAILING_BUY, TRAILING_SELL):
        if not price:
            raise Reject(Code.BAD_PARAM, "no price yet to trail: the contract has not traded")
        distance = (
            cmd.trigger_price - price
            if cmd.trigger_type == TRAILING_BUY
            else price - cmd.trigger_price
        )
        if distance <= 0:
            where = "above" if cmd.trigger_type == TRAILING_BUY else "below"
            raise Reject(Code.PRICE_RANGE, f"a trailing trigger must be {where} the last price")
        best = price
    elif price and reached(cmd.trigger_type, cmd.side, cmd.trigger_price, price):
        raise Reject(Code.PRICE_RANGE, "the trigger price is already reached")
    trigger = Trigger(
        fx.spot.next_order_id,
        cmd.user,
        contract.symbol,
        cmd.trigger_type,
        cmd.trigger_price,
        distance,
        best,
        cmd.side,
        cmd.action,
        cmd.type,
        cmd.price,
        cmd.volume,
        cmd.money,
        cmd.position_type or setting.position_type,
        setting.leverage,
        cmd.client_id,
        cmd.ts,
        WAITING,
        cmd.ts,
    )
    fx.spot.next_order_id += 1
    fx.restore_trigger(trigger)
    fx.emit_trigger(trigger)
    if setting.position_type != fx.setting(cmd.user, contract.symbol).position_type:
        # As an order does: a positionType other than the setting switches it (validate
        # allowed that: nothing was open), so the order submitted when this fires, and any
        # order or trigger placed meanwhile, meet the mode it waits in.
        fx.settings[(cmd.user, contract.symbol)] = setting
        fx.emit_setting(setting)
    return trigger


def cancel(fx: Futures, trigger: Trigger, ts: int) -> Trigger:
    fx.drop_trigger(trigger)
    trigger.status = TRIGGER_CANCELED
    trigger.updated = ts
    fx.emit_trigger(trigger)
    return trigger


def due(fx: Futures, symbol: str) -> list[Trigger]:
    """Move trailing triggers with the prices the contract traded at since its triggers were
    last looked at, in order (the last price alone when it has not traded since), and return
    the triggers any of them reaches (by id). The caller fires every one returned (they are
    out of the contract's price order)."""
    prices = fx.traded.pop(symbol, None)
    if not prices:
        last = fx.states[symbol].last
        if not last:
            return []
        prices = [last]
    book = fx.trigger_books[symbol]
    fired = book.reached_fixed(max(prices), min(prices))
    trailing = book.trailing
    for trigger_id in sorted(trailing):
        trigger = trailing[trigger_id]
        moved = reached = False
        # A trailing buy follows the lowest price from above and fires when the price rises
        # back to it; a trailing sell mirrors it. Each price is seen in turn.
        sign = 1 if trigger.trigger_type == TRAILING_BUY else -1
        for price in prices:
            if sign * (trigger.best - price) > 0:  # a new best
                trigger.best = price
                trigger.trigger_price = price + sign * trigger.distance
                moved = True
            if sign * (price - trigger.trigger_price) >= 0:
                reached = True
                break
        if moved:
            fx.emit_trigger(trigger)
        if reached:
            fired.append(trigger)
    fired.sort(key=lambda t: t.id)
    return fired


def fire(fx: Futures, trigger: Trigger, ts: int) -> None:
    fx.drop_trigger(trigger)
    trigger.updated = ts
    cmd = FuturesPlace(
        ts,
        trigger.user,
        trigger.contract,
        trigger.side,
        trigger.action,
        trigger.type,
        price=trigger.price,
        volume=trigger.volume,
        money=trigger.money,
        position_type=trigger.position_type,
        client_id=trigger.client_id,
    )
    try:
        state = fx.place(cmd, source=BY_TRIGGER, trigger_id=trigger.id)
    except Reject:
        trigger.status = TRIGGER_FAILED
    else:
        trigger.status = FIRED
        trigger.order_id = state.id
    fx.emit_trigger(trigger)
