"""Conditional futures orders (triggerType 1..4) on E-BTC-USDT.

They watch the contract's last trade price. Users 8 and 9 move that price with one-contract
trades (user 8 rests a SELL, user 9 lifts it); the orders the triggers submit are placed far
from the traded range (BUY at 40,000.0, SELL at 60,000.0) so they rest without interfering.
Each trigger type must fire exactly once, at the right price and not before; trailing
triggers follow the best price; a waiting trigger can be cancelled; a trigger whose order is
refused ends REJECTED; a trigger already reached is refused when placed.
"""

from __future__ import annotations

import pytest
from futures_support import BUY, CLOSE, LINEAR, OPEN, SELL, UNIT, Rig

from tradehall.codes import Code, Reject
from tradehall.engine.commands import FuturesCancel, FuturesCancelAll, FuturesPlace
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
from tradehall.engine.orders import IOC, LIMIT, MARKET

USDT = "USDT"
PARKED = {BUY: 400_000, SELL: 600_000}
"""Limit prices of the orders triggers submit: outside the traded range, so they rest."""


def rig() -> Rig:
    r = Rig()
    for user in (1, 2, 7, 8, 9):
        r.fund(user, USDT, 100_000 * UNIT)
    r.index(LINEAR, 500_000)
    trade_at(r, 500_000)
    return r


def trade_at(r: Rig, price: int, *, stays: bool = True) -> None:
    """One contract trades at ``price``; the contract's last price becomes ``price`` (and
    ``stays`` there unless a trigger it fires trades too)."""
    r.ts += 1
    r.order(8, LINEAR, SELL, OPEN, 1, price)
    state = r.order(9, LINEAR, BUY, OPEN, 1, price, tif=IOC)
    assert state.filled == 1
    if stays:
        assert r.fx.states[LINEAR].last == price


def conditional(
    r: Rig,
    user: int,
    trigger_type: int,
    side: str,
    trigger_price: int,
    *,
    action: str = OPEN,
    type: str = LIMIT,
    volume: int = 1,
    price: int | None = None,
    client_id: str = "",
) -> Trigger:
    if price is None:
        price = PARKED[side] if type == LIMIT else 0
    reply = r.apply(
        FuturesPlace(
            r.ts,
            user,
            LINEAR,
            side,
            action,
            type,
            price,
            volume,
            client_id=client_id,
            trigger_type=trigger_type,
            trigger_price=trigger_price,
        )
    ).reply
    assert isinstance(reply, Trigger)
    assert reply.status == WAITING
    return reply


def submitted(r: Rig, trigger: Trigger) -> list[int]:
    """Ids of the open orders ``trigger`` submitted."""
    return [
        o.id
        for o in r.fx.open_orders(trigger.user, LINEAR)
        if o.trigger_id == trigger.id and o.source == BY_TRIGGER
    ]


def waiting(r: Rig, trigger: Trigger) -> bool:
    return trigger.id in r.fx.triggers and trigger in r.fx.waiting_triggers(trigger.user)


# ------------------------------------------------------------------ stop-loss, take-profit

CASES = [
    # (type, side, trigger, a price just short of it, a price past it)
    pytest.param(STOP_LOSS, BUY, 510_000, 509_999, 512_000, id="stop-loss BUY >="),
    pytest.param(STOP_LOSS, SELL, 490_000, 490_001, 488_000, id="stop-loss SELL <="),
    pytest.param(TAKE_PROFIT, BUY, 490_000, 490_001, 488_000, id="take-profit BUY <="),
    pytest.param(TAKE_PROFIT, SELL, 510_000, 509_999, 512_000, id="take-profit SELL >="),
]


@pytest.mark.parametrize(("kind", "side", "trigger_price", "short_of", "past"), CASES)
def test_fires_exactly_at_the_trigger_price_and_only_once(
    kind: int, side: str, trigger_price: int, short_of: int, past: int
) -> None:
    r = rig()
    trigger = conditional(r, 1, kind, side, trigger_price)
    assert r.fx.open_orders(1) == []

    trade_at(r, short_of)
    assert trigger.status == WAITING and waiting(r, trigger)
    assert r.fx.open_orders(1) == []

    trade_at(r, trigger_price)
    assert trigger.status == FIRED
    assert not waiting(r, trigger)
    assert submitted(r, trigger) == [trigger.order_id]
    [order] = r.fx.open_orders(1)
    assert (order.side, order.action, order.price, order.qty) == (side, OPEN, PARKED[side], 1)

    # Back and forth through the trigger again: nothing more is submitted.
    for price in (past, 500_000, trigger_price, short_of, trigger_price):
        trade_at(r, price)
    assert trigger.status == FIRED
    assert [o.id for o in r.fx.open_orders(1)] == [trigger.order_id]


@pytest.mark.parametrize(("kind", "side", "trigger_price", "short_of", "past"), CASES)
def test_fires_when_the_price_jumps_past_the_trigger(
    kind: int, side: str, trigger_price: int, short_of: int, past: int
) -> None:
    r = rig()
    trigger = conditional(r, 1, kind, side, trigger_price)
    trade_at(r, past)
    assert trigger.status == FIRED
    assert submitted(r, trigger) == [trigger.order_id]


def test_stop_loss_market_close_closes_the_position() -> None:
    r = rig()
    r.order(8, LINEAR, SELL, OPEN, 2, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 2, 500_000)
    pos = r.long(1, LINEAR)
    trigger = conditional(r, 1, STOP_LOSS, SELL, 490_000, action=CLOSE, type=MARKET, volume=2)
    # A conditional CLOSE does not reserve the position (it is checked when it fires).
    assert pos.pending_close == 0
    r.order(7, LINEAR, BUY, OPEN, 2, 489_000)
    trade_at(r, 495_000)
    assert trigger.status == WAITING and r.pos(1, LINEAR, BUY) is pos
    trade_at(r, 490_000, stays=False)
    # Fired: MARKET SELL CLOSE 2 into the bid at 48,900.0:
    #   P&L 2 x 0.001 x (48,900 - 50,000) = -2.2 USDT.
    assert trigger.status == FIRED
    assert r.pos(1, LINEAR, BUY) is None
    assert pos.close_profit == -220_000_000
    assert r.fx.states[LINEAR].last == 489_000


def test_market_open_by_value_when_fired() -> None:
    r = rig()
    r.order(7, LINEAR, SELL, OPEN, 5, 520_000)
    trigger = r.apply(
        FuturesPlace(
            r.ts,
            1,
            LINEAR,
            BUY,
            OPEN,
            MARKET,
            money=104 * UNIT,
            trigger_type=STOP_LOSS,
            trigger_price=510_000,
        )
    ).reply
    assert isinstance(trigger, Trigger)
    trade_at(r, 510_000, stays=False)
    # 104 USDT at an ask of 52,000.0 (52 USDT a contract) buys 2 contracts.
    assert trigger.status == FIRED
    assert r.long(1, LINEAR).volume == 2


# ------------------------------------------------------------------ trailing


def test_trailing_buy_follows_the_lowest_price() -> None:
    r = rig()
    # Last 50,000.0, trigger 50,500.0: it trails 500.0 above the lowest price seen.
    trigger = conditional(r, 1, TRAILING_BUY, BUY, 505_000)
    assert (trigger.distance, trigger.best) == (5_000, 500_000)
    trade_at(r, 504_999)
    assert trigger.status == WAITING and trigger.trigger_price == 505_000
    trade_at(r, 490_000)  # new low: the trigger follows to 49,500.0
    assert (trigger.best, trigger.trigger_price) == (490_000, 495_000)
    trade_at(r, 494_000)  # a rise below the trigger does not move it
    assert (trigger.best, trigger.trigger_price) == (490_000, 495_000)
    trade_at(r, 480_000)
    assert (trigger.best, trigger.trigger_price) == (480_000, 485_000)
    trade_at(r, 484_999)
    assert trigger.status == WAITING and r.fx.open_orders(1) == []
    trade_at(r, 485_000)
    assert trigger.status == FIRED
    assert submitted(r, trigger) == [trigger.order_id]
    for price in (470_000, 485_000, 500_000):
        trade_at(r, price)
    assert [o.id for o in r.fx.open_orders(1)] == [trigger.order_id]


def test_trailing_sell_follows_the_highest_price() -> None:
    r = rig()
    trigger = conditional(r, 1, TRAILING_SELL, SELL, 495_000)
    assert (trigger.distance, trigger.best) == (5_000, 500_000)
    trade_at(r, 495_001)
    assert trigger.status == WAITING
    trade_at(r, 510_000)
    assert (trigger.best, trigger.trigger_price) == (510_000, 505_000)
    trade_at(r, 506_000)
    assert (trigger.best, trigger.trigger_price) == (510_000, 505_000)
    trade_at(r, 520_000)
    assert trigger.trigger_price == 515_000
    trade_at(r, 515_001)
    assert trigger.status == WAITING and r.fx.open_orders(1) == []
    trade_at(r, 515_000)
    assert trigger.status == FIRED
    assert submitted(r, trigger) == [trigger.order_id]
    for price in (530_000, 500_000):
        trade_at(r, price)
    assert [o.id for o in r.fx.open_orders(1)] == [trigger.order_id]


# ------------------------------------------------------------------ cancel


def test_cancel_by_id_and_by_client_id() -> None:
    r = rig()
    by_id = conditional(r, 1, STOP_LOSS, BUY, 510_000)
    by_client = conditional(r, 1, TAKE_PROFIT, SELL, 510_000, client_id="tp-1")
    reply = r.apply(FuturesCancel(r.ts, 1, LINEAR, order_id=by_id.id)).reply
    assert reply is by_id and by_id.status == TRIGGER_CANCELED
    r.apply(FuturesCancel(r.ts, 1, LINEAR, client_id="tp-1"))
    assert by_client.status == TRIGGER_CANCELED
    assert r.fx.waiting_triggers(1) == []
    trade_at(r, 515_000)
    assert r.fx.open_orders(1) == []
    assert (by_id.status, by_client.status) == (TRIGGER_CANCELED, TRIGGER_CANCELED)
    # Neither can be cancelled again; the client id is free for a new one.
    with pytest.raises(Reject) as info:
        r.apply(FuturesCancel(r.ts, 1, LINEAR, order_id=by_id.id))
    assert info.value.code == Code.NO_SUCH_ORDER
    conditional(r, 1, TAKE_PROFIT, SELL, 520_000, client_id="tp-1")


def test_another_user_cannot_cancel_a_trigger() -> None:
    r = rig()
    trigger = conditional(r, 1, STOP_LOSS, BUY, 510_000)
    with pytest.raises(Reject):
        r.apply(FuturesCancel(r.ts, 2, LINEAR, order_id=trigger.id))
    assert waiting(r, trigger)


def test_cancel_all_cancels_triggers_and_a_fired_trigger_cannot_be_cancelled() -> None:
    r = rig()
    first = conditional(r, 1, STOP_LOSS, BUY, 510_000)
    second = conditional(r, 1, TRAILING_SELL, SELL, 490_000)
    resting = r.order(1, LINEAR, BUY, OPEN, 1, 450_000)
    trade_at(r, 510_000)
    assert first.status == FIRED
    with pytest.raises(Reject):
        r.apply(FuturesCancel(r.ts, 1, LINEAR, order_id=first.id))
    cancelled = r.apply(FuturesCancelAll(r.ts, 1, LINEAR)).reply
    assert sorted(cancelled) == sorted([first.order_id, second.id, resting.id])
    assert second.status == TRIGGER_CANCELED
    assert r.fx.open_orders(1) == [] and r.fx.waiting_triggers(1) == []
    trade_at(r, 480_000)
    assert r.fx.open_orders(1) == []


# ------------------------------------------------------------------ refused when fired


def test_fired_close_without_a_position_ends_rejected() -> None:
    r = rig()
    trigger = conditional(r, 1, STOP_LOSS, SELL, 490_000, action=CLOSE, type=MARKET, volume=5)
    other = conditional(r, 1, STOP_LOSS, SELL, 490_000)
    trade_at(r, 490_000)
    assert trigger.status == TRIGGER_FAILED
    assert trigger.order_id == 0
    assert not waiting(r, trigger)
    # The other trigger reached at the same price still fired.
    assert other.status == FIRED
    assert [o.id for o in r.fx.open_orders(1)] == [other.order_id]
    trade_at(r, 480_000)
    assert trigger.status == TRIGGER_FAILED


def test_fired_open_without_margin_ends_rejected() -> None:
    r = rig()
    r.fund(5, USDT, 10 * UNIT)
    # BUY OPEN 10 @ 40,000.0 needs 40 USDT of margin + 0.08 fee; user 5 has 10.
    trigger = conditional(r, 5, STOP_LOSS, BUY, 510_000, volume=10)
    trade_at(r, 510_000)
    assert trigger.status == TRIGGER_FAILED
    assert r.fx.open_orders(5) == []
    assert r.balance(5, USDT) == (10 * UNIT, 0)


# ------------------------------------------------------------------ refused when placed


@pytest.mark.parametrize(
    ("kind", "side", "trigger_price"),
    [
        pytest.param(STOP_LOSS, BUY, 500_000, id="stop-loss BUY at last"),
        pytest.param(STOP_LOSS, BUY, 499_000, id="stop-loss BUY below last"),
        pytest.param(STOP_LOSS, SELL, 500_000, id="stop-loss SELL at last"),
        pytest.param(STOP_LOSS, SELL, 501_000, id="stop-loss SELL above last"),
        pytest.param(TAKE_PROFIT, BUY, 500_000, id="take-profit BUY at last"),
        pytest.param(TAKE_PROFIT, BUY, 501_000, id="take-profit BUY above last"),
        pytest.param(TAKE_PROFIT, SELL, 500_000, id="take-profit SELL at last"),
        pytest.param(TAKE_PROFIT, SELL, 499_000, id="take-profit SELL below last"),
        pytest.param(TRAILING_BUY, BUY, 500_000, id="trailing buy at last"),
        pytest.param(TRAILING_BUY, BUY, 499_000, id="trailing buy below last"),
        pytest.param(TRAILING_SELL, SELL, 500_000, id="trailing sell at last"),
        pytest.param(TRAILING_SELL, SELL, 501_000, id="trailing sell above last"),
    ],
)
def test_a_trigger_already_reached_is_refused(kind: int, side: str, trigger_price: int) -> None:
    r = rig()
    before = r.engine.state_hash()
    with pytest.raises(Reject) as info:
        conditional(r, 1, kind, side, trigger_price)
    assert info.value.code == Code.PRICE_RANGE
    assert r.engine.state_hash() == before
    assert r.fx.waiting_triggers(1) == []


@pytest.mark.parametrize(
    ("kind", "side", "trigger_price"),
    [
        pytest.param(TRAILING_BUY, SELL, 510_000, id="trailing buy must BUY"),
        pytest.param(TRAILING_SELL, BUY, 490_000, id="trailing sell must SELL"),
        pytest.param(5, BUY, 510_000, id="unknown type"),
        pytest.param(STOP_LOSS, BUY, 0, id="no trigger price"),
    ],
)
def test_bad_conditional_orders_are_refused(kind: int, side: str, trigger_price: int) -> None:
    r = rig()
    before = r.engine.state_hash()
    with pytest.raises(Reject):
        conditional(r, 1, kind, side, trigger_price)
    assert r.engine.state_hash() == before


def test_trailing_needs_a_price() -> None:
    r = Rig()
    r.fund(1, USDT, 1_000 * UNIT)
    with pytest.raises(Reject):
        conditional(r, 1, TRAILING_BUY, BUY, 510_000)
    # Stop-loss and take-profit may wait on a contract that has not traded yet.
    trigger = conditional(r, 1, STOP_LOSS, BUY, 510_000)
    assert waiting(r, trigger)


def sweep(r: Rig, side: str, prices: list[int]) -> None:
    """One order of user 9 (``side``) takes one contract at each of ``prices``, in that order,
    resting at them for user 8 first: one command, several trade prices."""
    r.ts += 1
    resting = BUY if side == SELL else SELL
    for price in prices:
        r.order(8, LINEAR, resting, OPEN, 1, price)
    state = r.order(9, LINEAR, side, OPEN, len(prices), prices[-1], tif=IOC)
    assert state.filled == len(prices)
    assert r.fx.states[LINEAR].last == prices[-1]


def test_triggers_see_every_price_of_a_sweep_not_only_the_last() -> None:
    r = rig()
    # Last 50,000.0. A trailing sell 500.0 below the highest price seen, and a stop-loss BUY
    # at 50,500.0 (fires when the price rises to it).
    trailing = conditional(r, 1, TRAILING_SELL, SELL, 495_000)
    stop = conditional(r, 2, STOP_LOSS, BUY, 505_000)
    # One SELL sweeps bids at 52,000.0 then 51,600.0: the trailing trigger follows 52,000.0
    # (to 51,500.0) although the command ended at 51,600.0, and the stop fired on the way.
    sweep(r, SELL, [520_000, 516_000])
    assert (trailing.best, trailing.trigger_price, trailing.status) == (520_000, 515_000, WAITING)
    assert stop.status == FIRED
    # The next sweep touches 51,400.0 after 51,800.0: the trailing trigger fires.
    sweep(r, SELL, [518_000, 514_000])
    assert trailing.status == FIRED
    assert submitted(r, trailing) == [trailing.order_id]


def test_a_trailing_trigger_walks_a_sweep_in_its_order() -> None:
    r = rig()
    trailing = conditional(r, 1, TRAILING_SELL, SELL, 495_000)
    # A BUY sweeps asks at 50,500.0 then 51,500.0: the trigger follows each in turn (to
    # 50,000.0, then 51,000.0) and no price of the sweep is at or below it when it is seen.
    sweep(r, BUY, [505_000, 515_000])
    assert (trailing.best, trailing.trigger_price, trailing.status) == (515_000, 510_000, WAITING)
