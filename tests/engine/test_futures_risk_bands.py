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
from futures_support import BUY, INVERSE, LINEAR, OPEN, SELL, UNIT, Rig

from tradehall.engine import liquidation
from tradehall.engine.commands import FuturesTick
from tradehall.engine.futures_model import CROSS, ISOLATED
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
