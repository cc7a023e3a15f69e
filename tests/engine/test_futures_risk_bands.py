"""The risk bands: after a move of the mark only the positions near their liquidation are
looked at, and that finds exactly what looking at every position finds.

Each scenario runs twice, on an engine as it is and on one whose every sweep looks at every
position (``whole``), and the two must go through the same states; the scenarios are built so
that the bands matter: a cross user holding positions on two contracts whose marks fall in
turn (the slack is shared between the contracts' bands), an inverse contract (where P&L is
not a straight line in the price), and many bystanders far from their liquidation.
"""

from __future__ import annotations

from typing import Any

import pytest
from futures_support import BUY, CLOSE, INVERSE, LINEAR, OPEN, SELL, UNIT, Rig

from tradehall.engine import liquidation
from tradehall.engine.commands import FuturesTick, PlaceOrder, SetLeverage
from tradehall.engine.futures_model import (
    BY_LIQUIDATION,
    CROSS,
    ISOLATED,
    FuturesChanged,
    FuturesOrderState,
)
from tradehall.engine.orders import LIMIT
from tradehall.engine.risk_bands import RiskBands

ETH = "E-ETH-USDT"
START = {LINEAR: 300_000, ETH: 200_000, INVERSE: 300_000}
"""30,000.0 / 2,000.00 / 30,000.0 in ticks."""


def whole_sweeps(monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = liquidation.sweep

    def every_position(fx: Any, symbols: list[str], ts: int, users: Any = None) -> int:
        return sweep(fx, symbols, ts, whole=True)

    monkeypatch.setattr(liquidation, "sweep", every_position)


def build(rig: Rig, index: dict[str, int], bystanders: int) -> None:
    for contract, price in index.items():
        rig.index(contract, price)
    for user in range(1, 4 + bystanders):
        rig.fund(user, "USDT", (2_000 if user == 1 else 100_000) * UNIT)
        rig.fund(user, "BTC", 10 * UNIT)
    # User 1: cross longs on BTC and ETH with little cash behind them, against user 2.
    for contract, volume in ((LINEAR, 300), (ETH, 300)):
        rig.place(2, contract, SELL, OPEN, volume, index[contract], position_type=CROSS)
        rig.place(1, contract, BUY, OPEN, volume, index[contract], position_type=CROSS)
    # User 3: an isolated inverse short at high leverage, against user 2.
    rig.place(2, INVERSE, BUY, OPEN, 500, index[INVERSE], position_type=CROSS)
    rig.place(3, INVERSE, SELL, OPEN, 500, index[INVERSE], position_type=ISOLATED)
    # Bystanders: small, well-margined positions on every contract.
    for user in range(4, 4 + bystanders, 2):
        for contract in index:
            rig.place(user, contract, BUY, OPEN, 1, index[contract], position_type=CROSS)
            rig.place(user + 1, contract, SELL, OPEN, 1, index[contract], position_type=CROSS)


def walk(rig: Rig) -> list[str]:
    """The marks wander: BTC and ETH fall in turn, the inverse contract rises; a tick after
    each move. Returns the state hash after every command."""
    hashes = []
    prices = dict(START)
    per_unit = {LINEAR: -750, ETH: -500, INVERSE: 600}  # -0.25 %, -0.25 %, +0.2 % of the start
    for step in range(60):
        contract = (LINEAR, ETH, INVERSE)[step % 3]
        prices[contract] += (1 + step % 7) * per_unit[contract]
        rig.ts += 1_000
        rig.index(contract, prices[contract])
        hashes.append(rig.engine.state_hash())
        rig.apply(FuturesTick(rig.ts))
        hashes.append(rig.engine.state_hash())
    return hashes


@pytest.mark.parametrize("bystanders", [2, 40])
def test_bands_find_what_a_whole_sweep_finds(
    monkeypatch: pytest.MonkeyPatch, bystanders: int
) -> None:
    banded = Rig()
    build(banded, START, bystanders)
    looked_at: list[int] = []
    candidates = RiskBands.candidates

    def counted(self: RiskBands, fx: Any, symbol: str, mark: int) -> Any:
        found = candidates(self, fx, symbol, mark)
        if found is not None:
            looked_at.append(len(found))
        return found

    monkeypatch.setattr(RiskBands, "candidates", counted)
    with_bands = walk(banded)
    assert banded.pos(1, LINEAR, BUY) is None and banded.pos(1, ETH, BUY) is None  # liquidated
    assert banded.pos(3, INVERSE, SELL) is None
    # Most moves looked at far fewer positions than the contract holds.
    assert looked_at and sorted(looked_at)[len(looked_at) // 2] <= 2, looked_at

    monkeypatch.undo()
    whole_sweeps(monkeypatch)
    reference = Rig()
    build(reference, START, bystanders)
    assert walk(reference) == with_bands


def one_tick_moves_two_contracts(rig: Rig) -> list[tuple[int, str]]:
    """User 1 is cross long on BTC (its first position) and ETH; user 3 isolated long on BTC
    at 100x; user 4 bids just below. Then spot trades drop BTCUSDT by 1.2 % and ETHUSDT by
    32 %, and one tick moves both marks (both contracts take their index from spot). ETH's
    fall makes user 1 due: a whole sweep of BTC, the first contract, finds user 1 there first
    (the lower position id), though BTC's own move is small. Returns the liquidation orders'
    (user, contract), in order, and appends the state after every command to ``hashes``."""
    rig.index(LINEAR, 300_000)
    rig.index(ETH, 200_000)
    rig.fund(1, "USDT", 2_000 * UNIT)
    for user in (2, 3, 4):
        rig.fund(user, "USDT", 100_000 * UNIT)
    for contract in (LINEAR, ETH):
        rig.place(2, contract, SELL, OPEN, 300, START[contract], position_type=CROSS)
        rig.place(1, contract, BUY, OPEN, 300, START[contract], position_type=CROSS)
    rig.apply(SetLeverage(rig.ts, 3, LINEAR, 100))
    rig.place(2, LINEAR, SELL, OPEN, 100, 300_000, position_type=CROSS)
    rig.place(3, LINEAR, BUY, OPEN, 100, 300_000, position_type=ISOLATED)
    rig.place(4, LINEAR, BUY, OPEN, 100, 299_000, position_type=CROSS)
    rig.ts += 1_000
    rig.apply(FuturesTick(rig.ts))  # every band drawn
    rig.deposit(10, "BTC", 10 * UNIT)
    rig.deposit(10, "ETH", 100 * UNIT)
    rig.deposit(11, "USDT", 10**6 * UNIT)
    for symbol, price, qty in (("BTCUSDT", 2_964_000, 1_000), ("ETHUSDT", 136_000, 100)):
        rig.apply(PlaceOrder(rig.ts, 10, symbol, SELL, LIMIT, price, qty))
        rig.apply(PlaceOrder(rig.ts, 11, symbol, BUY, LIMIT, price, qty))
    rig.ts += 1_000
    events = rig.apply(FuturesTick(rig.ts)).events
    return [
        (e.doc.user, e.doc.contract)
        for e in events
        if isinstance(e, FuturesChanged)
        and isinstance(e.doc, FuturesOrderState)
        and e.doc.source == BY_LIQUIDATION
        and e.doc.status != "NEW"
    ]


def test_a_tick_that_moves_two_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    banded = Rig()
    order = one_tick_moves_two_contracts(banded)
    assert order[0] == (1, LINEAR) and (3, LINEAR) in order, order
    whole_sweeps(monkeypatch)
    reference = Rig()
    assert one_tick_moves_two_contracts(reference) == order
    assert reference.engine.state_hash() == banded.engine.state_hash()


def test_positions_opened_and_closed_keep_the_bands_small() -> None:
    """A new position does not make the contract's next move look at every position again,
    and the bands of closed positions are dropped (isolated ones included, whose keys no open
    position names any more)."""
    rig = Rig()
    rig.index(LINEAR, START[LINEAR])
    for user in (1, 2, 3, 4):
        rig.fund(user, "USDT", 100_000 * UNIT)
    rig.place(3, LINEAR, SELL, OPEN, 5, START[LINEAR], position_type=CROSS)
    rig.place(4, LINEAR, BUY, OPEN, 5, START[LINEAR], position_type=CROSS)
    bands = rig.fx.risk_bands
    for i in range(60):
        rig.ts += 1_000
        rig.index(LINEAR, START[LINEAR] + 1 + i % 2)  # a move: every position has bands
        assert LINEAR in bands.banded
        rig.place(2, LINEAR, SELL, OPEN, 1, START[LINEAR], position_type=ISOLATED)
        rig.place(1, LINEAR, BUY, OPEN, 1, START[LINEAR], position_type=ISOLATED)
        assert LINEAR in bands.banded  # a new position: stale, not a reason to look at all
        rig.place(2, LINEAR, BUY, CLOSE, 1, START[LINEAR])
        rig.place(1, LINEAR, SELL, CLOSE, 1, START[LINEAR])
    assert rig.pos(1, LINEAR, BUY) is None and rig.pos(2, LINEAR, SELL) is None
    drawn = sum(len(b.drawing) for b in bands.bands.values())
    assert drawn <= 4, drawn  # users 3 and 4, and what the last round left
