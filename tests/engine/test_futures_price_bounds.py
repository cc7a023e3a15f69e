"""Order prices on futures contracts are bounded so that no fill can be worth nothing.

The reviewer's finding: on the inverse E-BTC-USD (1 contract = 10 USD, 0.1 USD ticks, margin
in 1e-8 BTC) one contract at ``p`` ticks is worth ``10**10 // p`` units of BTC, which is 0 for
every ``p`` above 10**10 ticks (1,000,000,000 USD), and orders were accepted up to
MAX_PRICE = 2**40 ticks. A trade there opened two positions of cost 0 and margin 0; the audit
(debug mode) found them unsound and the engine stopped. A resting order for many contracts
is worth something at such a price, but a fill of one contract against it is not, so the
bound is on the price (``ContractSpec.max_price``: one contract must be worth at least one
unit of the margin coin at any price an order may carry), not on the order's own value.

Marks are a different matter: they only value positions (unrealized P&L, maintenance,
funding) and price auto-deleveraging, which closes on both sides; a position's cost comes
from its opening fills alone, which execute at order prices. Index prices anywhere in
1..MAX_PRICE keep the state sound (checked here and in the property test).

Every command goes through ``Engine.apply`` on an engine in debug mode (the full audit after
every command).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from futures_support import BUY, CLOSE, INSURANCE_ACCOUNT, INVERSE, LINEAR, OPEN, SELL, UNIT, Rig

from tradehall.codes import Code, Reject
from tradehall.engine import audit
from tradehall.engine.commands import FuturesTick, SetIndexPrice, SetLeverage
from tradehall.engine.contracts import MAX_PRICE, ContractSpec
from tradehall.engine.events import TradeExecuted
from tradehall.engine.futures_model import ISOLATED
from tradehall.engine.orders import FILLED, LIMIT, PARTIALLY_FILLED

INVERSE_TOP = 10**10
"""E-BTC-USD: 10 USD / 1e-8 BTC = 1e9 USD per BTC = 1e10 ticks of 0.1 USD."""


def refused(rig: Rig, code: Code, *args: Any, **kw: Any) -> str:
    """Place an order that must be refused with ``code`` and change nothing."""
    before = rig.engine.state_hash()
    with pytest.raises(Reject) as info:
        rig.place(*args, **kw)
    assert info.value.code == code, info.value.msg
    assert rig.engine.state_hash() == before
    return info.value.msg


def funded_rig(btc: int = 10 * UNIT, usdt: int = 10**9 * UNIT) -> Rig:
    rig = Rig()
    for user in (1, 2, 3):
        rig.fund(user, "BTC", btc)
        rig.fund(user, "USDT", usdt)
    return rig


def contract(symbol: str) -> ContractSpec:
    return Rig().fx.contracts[symbol]


# --------------------------------------------------------------------------- the reproduction


def test_reproduction_inverse_trade_near_max_price_is_refused() -> None:
    """Before the fix the first order rested and the second traded with it at 2**40 ticks:
    value 10**10 // 2**40 = 0, two positions of cost 0, InvariantViolation."""
    rig = funded_rig()
    rig.index(INVERSE, INVERSE_TOP)
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1, MAX_PRICE)
    refused(rig, Code.PRICE_RANGE, 2, INVERSE, BUY, OPEN, 1, MAX_PRICE)
    assert rig.fx.positions == {}
    assert audit.check(rig.engine) == []


def test_reproduction_a_partial_fill_at_the_makers_price() -> None:
    """The reviewer's second case: 1000 contracts at 2**40 ticks are worth 9 units, so the
    order's own value is not 0, but one contract filled against it is."""
    rig = funded_rig()
    rig.index(INVERSE, INVERSE_TOP)
    assert contract(INVERSE).value(1000, MAX_PRICE) == 9
    assert contract(INVERSE).value(1, MAX_PRICE) == 0
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1000, MAX_PRICE)
    refused(rig, Code.PRICE_RANGE, 2, INVERSE, BUY, OPEN, 1, MAX_PRICE)
    assert rig.fx.positions == {}


# --------------------------------------------------------------------------- the bound


def test_each_contract_knows_its_highest_price() -> None:
    inverse = contract(INVERSE)
    assert inverse.max_price == inverse.value_unit == INVERSE_TOP
    assert inverse.value(1, INVERSE_TOP) == 1
    assert inverse.value(1, INVERSE_TOP + 1) == 0
    # Linear value only grows with the price: one contract at 1 tick is value_unit >= 1.
    for symbol in (LINEAR, "E-ETH-USDT"):
        linear = contract(symbol)
        assert linear.max_price == MAX_PRICE
        assert linear.value(1, 1) == linear.value_unit >= 1


def test_the_bound_follows_the_contracts_terms() -> None:
    """A 1 USD contract in 1e-4 USD ticks, margined in a coin of 2 decimals, is worth one
    unit at 100 USD (10**6 ticks) and 0 above; a 1000 USD contract in 0.01 USD ticks with
    8 decimals would stay worth a unit up to 10**13 ticks, so MAX_PRICE bounds it."""
    base = contract(INVERSE)
    small = replace(base, multiplier=Decimal(1), price_precision=4, margin_decimals=2)
    assert small.max_price == small.value_unit == 10**6
    assert small.value(1, small.max_price) == 1
    assert small.value(1, small.max_price + 1) == 0
    large = replace(base, multiplier=Decimal(1000), price_precision=2)
    assert large.value_unit == 10**13 > MAX_PRICE == large.max_price
    assert large.value(1, large.max_price) >= 1


def test_inverse_prices_at_the_bound_trade_and_above_it_are_refused() -> None:
    rig = funded_rig()
    rig.index(INVERSE, INVERSE_TOP)
    message = refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1, INVERSE_TOP + 1)
    assert "at most 1000000000.0 on E-BTC-USD" in message
    assert "less than 0.00000001 BTC" in message
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1, 0, type=LIMIT)
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1, -1)
    # CLOSE orders too: a resting CLOSE is a maker that an OPEN taker fills at its price.
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, CLOSE, 1, INVERSE_TOP + 1)
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, SELL, OPEN, 1, INVERSE_TOP + 1, tif="IOC")

    # At the bound: one contract is worth exactly one unit. Leverage 10 makes its margin
    # 1 // 10 = 0, the fee 0: a position of cost 1 and margin 0 is sound.
    rig.place(1, INVERSE, SELL, OPEN, 1, INVERSE_TOP)
    taker = rig.order(2, INVERSE, BUY, OPEN, 1, INVERSE_TOP)
    assert (taker.status, taker.filled_value) == (FILLED, 1)
    short, long = rig.short(1, INVERSE), rig.long(2, INVERSE)
    assert (short.cost, short.margin, long.cost, long.margin) == (1, 0, 1, 0)
    assert rig.fx.states[INVERSE].last == INVERSE_TOP


@pytest.mark.parametrize("taken", [1, 2, 7, 999])
def test_partial_fills_at_the_bound_are_worth_something(taken: int) -> None:
    """A maker of 1000 contracts at the highest price; takers of a few contracts each fill
    at the maker's price. Every fill is worth taken x 10**10 // 10**10 = taken units."""
    rig = funded_rig()
    rig.index(INVERSE, INVERSE_TOP)
    rig.apply(SetLeverage(rig.ts, 2, INVERSE, 100))
    rig.place(1, INVERSE, SELL, OPEN, 1000, INVERSE_TOP)
    taker = rig.order(2, INVERSE, BUY, OPEN, taken, INVERSE_TOP, tif="IOC")
    assert (taker.filled, taker.filled_value) == (taken, taken)
    (maker,) = rig.fx.open_orders(1, INVERSE)
    assert (maker.status, maker.filled) == (PARTIALLY_FILLED, taken)
    assert rig.long(2, INVERSE).cost == rig.short(1, INVERSE).cost == taken
    # A second taker, and a close of part of the long: costs stay positive.
    rig.place(3, INVERSE, BUY, OPEN, 1, INVERSE_TOP)
    assert rig.long(3, INVERSE).cost == 1
    if taken > 1:
        rig.place(1, INVERSE, BUY, OPEN, 1, INVERSE_TOP - 1)
        rig.place(2, INVERSE, SELL, CLOSE, 1, INVERSE_TOP - 1)
        assert rig.long(2, INVERSE).volume == taken - 1
        assert rig.long(2, INVERSE).cost > 0


def test_linear_prices_from_one_tick_are_worth_something() -> None:
    """Linear value is exact and grows with the price: one contract at 1 tick (0.1 USDT)
    is 0.001 x 0.1 = 0.0001 USDT = 10**4 units. The order's minimum value (5 USDT = 50000
    contracts at 1 tick) does not stop a 1-contract fill against it."""
    rig = funded_rig()
    rig.index(LINEAR, 1)
    rig.place(1, LINEAR, SELL, OPEN, 50_000, 1)
    refused(rig, Code.BELOW_MINIMUM, 2, LINEAR, BUY, OPEN, 1, 1)
    # At its own limit (5000.0 USDT) one contract is worth the minimum; it fills at 1 tick.
    rig.apply(SetLeverage(rig.ts, 2, LINEAR, 100))
    order = rig.order(2, LINEAR, BUY, OPEN, 1, 50_000, tif="IOC")
    assert (order.filled, order.filled_value) == (1, 10**4)
    long = rig.long(2, LINEAR)
    assert (long.cost, long.margin) == (10**4, 100)


def test_linear_prices_above_max_price_are_refused() -> None:
    rig = funded_rig()
    rig.index(LINEAR, 10**12)
    refused(rig, Code.PRICE_RANGE, 1, LINEAR, SELL, OPEN, 1, MAX_PRICE + 1)
    # At MAX_PRICE one contract is 2**40 x 10**4 units, above the LIMIT money maximum.
    refused(rig, Code.BAD_PARAM, 1, LINEAR, SELL, OPEN, 1, MAX_PRICE)
    rig.place(1, LINEAR, SELL, OPEN, 1, 10**12)  # 10**8 USDT, the maximum
    order = rig.order(2, LINEAR, BUY, OPEN, 1, 10**12)
    assert order.filled_value == 10**16


def test_conditional_orders_are_bounded_too() -> None:
    rig = funded_rig()
    trigger = {"trigger_type": 1, "trigger_price": INVERSE_TOP + 1}
    message = refused(rig, Code.PRICE_RANGE, 1, INVERSE, BUY, OPEN, 1, INVERSE_TOP, **trigger)
    assert message.startswith("triggerPrice must be positive and at most 1000000000.0")
    trigger["trigger_price"] = INVERSE_TOP
    refused(rig, Code.PRICE_RANGE, 1, INVERSE, BUY, OPEN, 1, INVERSE_TOP + 1, **trigger)
    rig.place(1, INVERSE, BUY, OPEN, 1, INVERSE_TOP, **trigger)
    assert len(rig.fx.triggers) == 1


# --------------------------------------------------------------------------- the index side


@pytest.mark.parametrize("symbol", [INVERSE, LINEAR])
@pytest.mark.parametrize("isolated", [False, True])
def test_extreme_index_prices_leave_the_state_sound(symbol: str, isolated: bool) -> None:
    """Positions opened at ordinary prices, then the index (and so the mark) pushed to the
    extremes SetIndexPrice accepts: MAX_PRICE (beyond the inverse contract's highest order
    price, where its contracts are worth 0 at the mark), 1 tick, and back and forth, with
    funding falling due. The first extreme liquidates and deleverages (no insurance fund,
    empty book) every position: the shorts at MAX_PRICE, or, cross on the inverse contract,
    where a short loses at most its cost and stays, the longs at 1 tick. Every state is
    audited."""
    rig = funded_rig(btc=UNIT, usdt=10**6 * UNIT)
    price = 300_000  # 30000.0
    kw: dict[str, Any] = {"position_type": ISOLATED} if isolated else {}
    rig.index(symbol, price)
    rig.place(1, symbol, SELL, OPEN, 20, price, **kw)
    rig.place(2, symbol, BUY, OPEN, 12, price, **kw)
    rig.place(3, symbol, BUY, OPEN, 8, price, **kw)
    assert rig.oi(symbol) == (20, 20)
    for index in (MAX_PRICE, 1, MAX_PRICE, INVERSE_TOP + 1, 2, price):
        rig.apply(SetIndexPrice(rig.ts, symbol, index))
        rig.ts += 8 * 3_600_000
        rig.apply(FuturesTick(rig.ts))
        long_oi, short_oi = rig.oi(symbol)
        assert long_oi == short_oi
        for pos in rig.fx.all_positions():
            assert pos.cost > 0
    assert rig.oi(symbol) == (0, 0)
    assert audit.check(rig.engine) == []
    with pytest.raises(Reject) as info:
        rig.apply(SetIndexPrice(rig.ts, symbol, MAX_PRICE + 1))
    assert info.value.code == Code.PRICE_RANGE


def test_deleveraging_at_a_mark_above_the_inverse_bound() -> None:
    """A short liquidated with an empty book when the mark is above the inverse contract's
    highest order price: with an insurance fund it is deleveraged at the mark, where the
    contracts are worth 0 units; closes need no positive value, the state stays sound."""
    rig = funded_rig(btc=UNIT)
    rig.deposit(INSURANCE_ACCOUNT, "BTC", UNIT)
    rig.index(INVERSE, 300_000)
    # 10 contracts at 30000.0: cost 10 x 10**10 // 300000 = 333333, margin 33333.
    rig.place(1, INVERSE, SELL, OPEN, 10, 300_000, position_type=ISOLATED)
    rig.place(2, INVERSE, BUY, OPEN, 10, 300_000)
    assert rig.short(1, INVERSE).cost == 333_333
    result = rig.apply(SetIndexPrice(rig.ts, INVERSE, MAX_PRICE))
    trades = [e.trade for e in result.events if isinstance(e, TradeExecuted)]
    assert [(t.price, t.qty, t.quote) for t in trades] == [(MAX_PRICE, 10, 0)]
    assert rig.pos(1, INVERSE, SELL) is None
    assert rig.pos(2, INVERSE, BUY) is None
    assert audit.check(rig.engine) == []
