"""Which futures positions a move of the mark can have made due, without looking at them all.

A *key* is what liquidation judges as one: an isolated position (its id), or a user's cross
positions in one margin coin (``(user, coin)``). When a sweep after a mark move finds a key not
due, the key gets a *band* on each contract where it holds positions: a range of that
contract's mark within which it provably stays not due, whatever the marks of its other
contracts do within their own bands. The next sweep after a mark move looks only at the keys
whose band the new mark has left, and at the keys changed since their bands were drawn
(``stale``: the engine names the users each command changed). A sweep is then proportional to
the keys near their liquidation, not to every open position.

Why a band is sound. Computed exactly (without rounding), a key's slack (isolated margin or
cross equity, plus unrealized P&L, less maintenance margin) is a constant plus one function per
contract of that contract's mark alone, and each of those is monotonic in the mark (linear:
a straight line; inverse: c / mark; the maintenance rate is below 100 %). So between the mark
a band was drawn at and its edge, the slack never falls by more than it does at the edge. The
slack, less an allowance for rounding (``ROUNDING`` per position, twice), is shared equally
among the key's contracts; on each side a contract's band reaches as far as the fall computed
at the edge, plus that contract's rounding, stays within its share. With every mark inside its
band the exact slack stays above the rounding, so the computed slack is positive: not due.
Any point where that check passes is a sound edge, so the search for one only has to be
quick, not exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tradehall.engine.bands import FAR, Watch
from tradehall.engine.futures_model import CROSS, ISOLATED, Position
from tradehall.engine.futures_risk import maintenance, unrealized

if TYPE_CHECKING:
    from tradehall.engine.futures import Futures

Key = int | tuple[int, str]
"""An isolated position's id, or (user, margin coin) for a user's cross positions."""

ROUNDING = 4
"""Most a position's computed unrealized P&L less maintenance margin differs from the exact
value, in units of the margin coin (the inverse value rounds down once, the maintenance
margin once more): under 3, rounded up."""
EDGE_TRIES = 8


def key_of(fx: Futures, pos: Position) -> Key:
    if pos.position_type == ISOLATED:
        return pos.id
    return pos.user, fx.contracts[pos.contract].margin_coin


class RiskBands(Watch[Key]):
    __slots__ = ()

    def changed(self, fx: Futures, users: set[int], closed: list[Position]) -> None:
        """These users' positions or futures balances changed: their keys are stale. The keys
        of ``closed`` positions that no open position holds any more are forgotten."""
        for pos in closed:
            key = key_of(fx, pos)
            if isinstance(key, int) or not _cross_open(fx, pos.user, key[1]):
                self.forget(key)
        for user in users:
            for pos in fx.by_user.get(user, {}).values():
                self.stale.add(key_of(fx, pos))

    def candidates(self, fx: Futures, symbol: str, mark: int) -> list[Position] | None:
        """The positions on ``symbol`` that may be due at ``mark``: those of stale keys and of
        keys whose band ``mark`` has left (which become stale). None: look at every position
        (the contract has no bands yet, or there are as many stale keys as positions)."""
        if symbol not in self.banded:
            return None
        # A cross key's band here holds only while its other contracts' marks stay inside
        # their own bands: a key one of them has left may be due here too (a tick moves
        # several marks at once, and a whole sweep of this contract would find it now).
        for other in self.bands:
            price = mark if other == symbol else fx.states[other].mark
            if price:
                self.flag_left(other, price)
        stale = self.stale
        positions = fx.by_contract[symbol]
        if len(stale) >= len(positions):
            return None  # (after a start, or funding) as much as looking at every position
        out: list[Position] = []
        closed: list[Key] = []
        here = fx.contracts[symbol].margin_coin
        for key in stale:
            if isinstance(key, int):
                pos = positions.get(key)
                if pos is not None:
                    out.append(pos)
                elif not any(key in held for held in fx.by_contract.values()):
                    closed.append(key)
                continue
            user, coin = key
            if coin != here:
                if not _cross_open(fx, user, coin):
                    closed.append(key)
                continue
            held = [
                p
                for p in fx.by_user.get(user, {}).values()
                if p.contract == symbol and p.position_type == CROSS
            ]
            if held:
                out.extend(held)
            elif not _cross_open(fx, user, coin):
                closed.append(key)
        for key in closed:  # no positions left: nothing to look at, no bands to keep
            self.forget(key)
        return out

    def draw_for(self, fx: Futures, pos: Position, slack: int) -> None:
        """``pos``'s key was just found not due, ``slack`` above its maintenance margin at the
        current marks: draw its bands."""
        key = key_of(fx, pos)
        groups: dict[str, list[Position]] = {}
        if pos.position_type == ISOLATED:
            groups[pos.contract] = [pos]
        else:
            coin = fx.contracts[pos.contract].margin_coin
            for p in fx.by_user.get(pos.user, {}).values():
                if p.position_type == CROSS and fx.contracts[p.contract].margin_coin == coin:
                    groups.setdefault(p.contract, []).append(p)
        count = sum(len(group) for group in groups.values())
        share = (slack - 2 * ROUNDING * count - 1) // len(groups)
        for symbol, group in groups.items():
            rounding = 2 * ROUNDING * len(group)
            part = _part(fx, symbol, group)
            low, high = _band(part, fx.states[symbol].mark, share - rounding, rounding)
            self.draw(symbol, key, low, high)


def _cross_open(fx: Futures, user: int, coin: str) -> bool:
    """Whether ``user`` holds cross positions in ``coin``."""
    return any(
        p.position_type == CROSS and fx.contracts[p.contract].margin_coin == coin
        for p in fx.by_user.get(user, {}).values()
    )


def _part(fx: Futures, symbol: str, group: list[Position]) -> Callable[[int], int]:
    """The part of a key's slack that depends on ``symbol``'s mark: its positions' unrealized
    P&L less their maintenance margins, at a given mark."""
    contract = fx.contracts[symbol]
    if len(group) == 1:  # the usual key: one position on the contract
        (pos,) = group
        return lambda mark: unrealized(contract, pos, mark) - maintenance(contract, pos, mark)

    def part(mark: int) -> int:
        return sum(unrealized(contract, p, mark) - maintenance(contract, p, mark) for p in group)

    return part


def _band(part: Callable[[int], int], now: int, allowed: int, rounding: int) -> tuple[int, int]:
    """Marks below and above ``now``, as far as quickly found, at which ``part`` has fallen by
    at most ``allowed`` (``now`` where none is found). ``rounding``: how far the computed fall
    can be from the exact one."""
    if allowed < 0 or now <= 0:
        return now, now
    base = part(now)
    step = max(1, now // 256)
    return (
        _edge(part, base, now, -1, step, allowed, rounding),
        _edge(part, base, now, 1, step, allowed, rounding),
    )


def _edge(
    part: Callable[[int], int],
    base: int,
    now: int,
    direction: int,
    step: int,
    allowed: int,
    rounding: int,
) -> int:
    """One side of ``_band``: a probe ``step`` away gives the slope. Where even the computed
    fall is a gain beyond rounding, the exact part rises that way, and being monotonic it
    never falls on that side: the band reaches the end. Otherwise it reaches where the slope
    says the fall uses up ``allowed`` (a little short of it, for rounding), halved until the
    check at the edge passes."""
    probe = now + direction * step
    if probe < 1:
        return now
    fall = base - part(probe)
    if fall < -rounding:
        return 1 if direction < 0 else FAR
    distance = step if fall <= 0 else allowed * step // (fall + fall // 64 + 2)
    for _ in range(EDGE_TRIES):
        if distance <= 0:
            break
        edge = now + direction * distance
        if edge >= 1 and base - part(edge) <= allowed:
            return edge
        distance //= 2
    return now
