"""The operator's sandbox commands: settling funding now (time control) and closing a
user's positions at the mark price (account reset). Both conserve every asset and keep
long and short open interest equal."""

from __future__ import annotations

import pytest
from futures_support import BUY, LINEAR, OPEN, SELL, UNIT, Rig

from tradehall.codes import Reject
from tradehall.engine import audit
from tradehall.engine.commands import ClosePositions, SettleFunding
from tradehall.engine.futures_model import BY_RESET, FuturesChanged, FuturesOrderState

USDT = "USDT"


def sound(r: Rig) -> None:
    assert audit.check(r.engine) == []
    for contract in r.fx.contracts:
        longs, shorts = r.oi(contract)
        assert longs == shorts, contract


def traded(r: Rig) -> None:
    """User 1 long 10 @ 50,000.0 against user 2 short 6 and user 3 short 4; user 1 also
    has a resting order."""
    for user in (1, 2, 3):
        r.fund(user, USDT, 100_000 * UNIT)
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 6, 500_000)
    r.order(3, LINEAR, SELL, OPEN, 4, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 1, 400_000)


def test_settle_funding_now_moves_money_from_longs_to_shorts_and_nets_to_zero() -> None:
    r = Rig()
    traded(r)
    before = {u: sum(r.balance(u, USDT)) for u in (1, 2, 3)}
    r.ts += 1
    reply = r.apply(SettleFunding(r.ts, LINEAR)).reply
    assert reply == [LINEAR]
    after = {u: sum(r.balance(u, USDT)) for u in (1, 2, 3)}
    # No premium samples: the rate is the interest rate, 0.01 %, longs pay shorts.
    paid = before[1] - after[1]
    assert paid == 10 * 500_000 * r.fx.contracts[LINEAR].value_unit // 10_000
    assert (after[2] - before[2]) + (after[3] - before[3]) == paid
    assert r.fx.states[LINEAR].last_funding_rate == r.fx.contracts[LINEAR].interest_rate
    sound(r)


def test_settle_funding_on_every_contract_skips_those_without_a_price() -> None:
    r = Rig()
    traded(r)
    assert r.apply(SettleFunding(r.ts)).reply == [LINEAR]
    with pytest.raises(Reject):
        r.apply(SettleFunding(r.ts, "E-ETH-USDT"))
    with pytest.raises(Reject):
        r.apply(SettleFunding(r.ts, "E-NOPE-USDT"))
    sound(r)


def test_close_positions_at_mark_cancels_orders_and_closes_against_opposite_positions() -> None:
    r = Rig()
    traded(r)
    r.index(LINEAR, 510_000)  # the mark follows the index: user 1 gains
    mark = r.fx.states[LINEAR].mark
    cash = sum(r.balance(1, USDT))
    result = r.apply(ClosePositions(r.ts, 1))
    assert result.reply == 1
    assert r.fx.user_positions(1) == []
    assert r.fx.open_orders(1) == []
    assert r.pos(2, LINEAR, SELL) is None and r.pos(3, LINEAR, SELL) is None
    orders = {
        e.doc.id: e.doc
        for e in result.events
        if isinstance(e, FuturesChanged) and isinstance(e.doc, FuturesOrderState)
    }
    # The reset's closes, its own and the opposite positions': not auto-deleveraging (the
    # metrics and the ADL alert count those).
    closing = [o for o in orders.values() if o.source == BY_RESET]
    assert closing and all(o.status == "FILLED" for o in closing)
    assert {o.user for o in closing} == {1, 2, 3}
    assert all(o.source == BY_RESET for o in orders.values() if o.status == "FILLED")
    gain = 10 * (mark - 500_000) * r.fx.contracts[LINEAR].value_unit
    assert sum(r.balance(1, USDT)) == cash + gain  # no fee on a close at the mark
    assert r.balance(1, USDT)[1] == 0
    sound(r)


def test_close_positions_refuses_without_a_mark_and_does_nothing_without_positions() -> None:
    r = Rig()
    r.fund(1, USDT, 1_000 * UNIT)
    assert r.apply(ClosePositions(r.ts, 1)).reply == 0
    sound(r)
