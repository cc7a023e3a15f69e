"""Liquidation of futures positions, the insurance fund and auto-deleveraging (ADL).

- Isolated: a position is liquidated when margin + unrealized P&L <= maintenance margin.
- Cross: all of a user's cross positions in a margin coin are liquidated when the cross
  equity (free cash, order holds and cross margins, plus cross unrealized P&L) is at or
  below the sum of their maintenance margins.

Liquidating a position cancels the user's open orders and waiting conditional orders on the
contract (cross: on every contract of the margin coin), then closes it through the book with
an IOC order no worse than the bankruptcy price. What the fills leave over the bankruptcy
price goes to the insurance fund; a deficit (the close fee, rounding) is paid from it. Volume
the book cannot take at that price is closed against opposite positions ranked by profit x
effective leverage (ADL): at the mark price when the insurance fund can pay the difference
between mark and bankruptcy, otherwise at the bankruptcy price, so no loss is left unpaid.
"""

from __future__ import annotations

from decimal import Decimal

from tradehall.engine import triggers
from tradehall.engine.contracts import ContractSpec
from tradehall.engine.futures import INSURANCE_ACCOUNT, Futures, opposite
from tradehall.engine.futures_model import (
    BY_ADL,
    BY_LIQUIDATION,
    BY_RESET,
    CLOSE,
    CROSS,
    ISOLATED,
    FuturesOrder,
    Position,
    futures_account,
)
from tradehall.engine.futures_risk import (
    bankruptcy_limit,
    group_liquidation_price,
    maintenance,
    unrealized,
)
from tradehall.engine.orders import BUY, CANCELED, FILLED, GTC, IOC, LIMIT, MARKET, SELL

MAX_ROUNDS = 1000
"""Bound on liquidation rounds per command (each round liquidates at least one position)."""


def cross_margin_for(fx: Futures, pos: Position) -> int:
    """The margin standing behind a cross position: the account's cross equity without
    this position's own unrealized P&L."""
    contract = fx.contracts[pos.contract]
    equity, _ = fx.cross_equity(pos.user, contract.margin_coin)
    return equity - unrealized(contract, pos, fx.states[pos.contract].mark)


def effective_margin(fx: Futures, pos: Position) -> int:
    return pos.margin if pos.position_type == ISOLATED else cross_margin_for(fx, pos)


def liquidation_backing(fx: Futures, pos: Position) -> int:
    """What stands between ``pos`` and its liquidation, the account's other positions held
    at their marks: isolated, its margin; cross, the cross equity without this position's
    P&L, less the other cross positions' maintenance margins (the account is liquidated when
    its cross equity falls to all of them together)."""
    if pos.position_type == ISOLATED:
        return pos.margin
    contract = fx.contracts[pos.contract]
    mark = fx.states[pos.contract].mark
    equity, needed = fx.cross_equity(pos.user, contract.margin_coin)
    others_maintenance = needed - maintenance(contract, pos, mark)
    return equity - unrealized(contract, pos, mark) - others_maintenance


def liquidation_mark(fx: Futures, pos: Position) -> tuple[Decimal, bool]:
    """The mark at which ``pos`` is liquidated, the account's positions on other contracts
    held at their marks, and whether at or below it (True) or at or above it; ``NO_PRICE``
    if no mark is. Isolated: its own margin. Cross: the account's cross positions on this
    contract together (a long and a short there move with one mark), against the cross
    equity without their P&L, less the other contracts' maintenance margins."""
    contract = fx.contracts[pos.contract]
    if pos.position_type == ISOLATED:
        return group_liquidation_price(contract, [pos], pos.margin)
    mark = fx.states[pos.contract].mark
    equity, needed = fx.cross_equity(pos.user, contract.margin_coin)
    group = [
        q
        for q in fx.user_positions(pos.user)
        if q.contract == pos.contract and q.position_type != ISOLATED
    ]
    for q in group:
        equity -= unrealized(contract, q, mark)
        needed -= maintenance(contract, q, mark)
    return group_liquidation_price(contract, group, equity - needed)


def sweep(
    fx: Futures,
    symbols: list[str],
    ts: int,
    users: set[int] | None = None,
    *,
    whole: bool = False,
) -> int:
    """Liquidate every position the current marks call for, until none is left.
    Returns how many liquidations ran.

    ``users``: the only users whose positions can have become due (the caller knows that
    nothing else changed since the last sweep: no mark moved, and only these users' positions
    or futures balances changed). The first look is then at their positions alone, which
    finds what a look at every position would (the others were not due and still are not).
    Without ``users`` the first look is at the positions the risk bands name (the caller has
    told ``fx.risk_bands`` which users changed), or, with ``whole``, at every position.
    Once a liquidation has run (it can move anyone's equity, by ADL), every position is looked
    at again."""
    for count in range(MAX_ROUNDS):
        first = count == 0
        target = _next_due(fx, symbols, users if first else None, whole=whole or not first)
        if target is None:
            return count
        kind, pos = target
        if kind == ISOLATED:
            liquidate_isolated(fx, pos, ts)
        else:
            liquidate_cross(fx, pos.user, fx.contracts[pos.contract].margin_coin, ts)
    raise AssertionError("liquidation did not settle")


def _next_due(
    fx: Futures, symbols: list[str], users: set[int] | None = None, *, whole: bool = False
) -> tuple[int, Position] | None:
    """The first position (by id) due at the current marks, on the first of ``symbols`` that
    has one. The positions looked at: ``users``' if given; else those the risk bands name
    (the rest are provably not due), drawing new bands for the keys found not due; else, with
    ``whole`` or on a contract without bands yet, every position (drawing bands unless
    ``whole``)."""
    bands = fx.risk_bands
    checked_cross: set[tuple[int, str]] = set()
    for symbol in symbols:
        contract = fx.contracts[symbol]
        mark = fx.states[symbol].mark
        if not mark:
            continue
        draw = False
        if users is not None:
            candidates = [p for u in users for p in fx.user_positions(u) if p.contract == symbol]
        else:
            named = None if whole else bands.candidates(fx, symbol, mark)
            candidates = list(fx.by_contract[symbol].values()) if named is None else named
            draw = not whole
        for pos in sorted(candidates, key=lambda p: p.id):
            if pos.position_type == ISOLATED:
                slack = pos.margin + unrealized(contract, pos, mark)
                slack -= maintenance(contract, pos, mark)
                if slack <= 0:
                    return ISOLATED, pos
                if draw:
                    bands.draw_for(fx, pos, slack)
                continue
            key = (pos.user, contract.margin_coin)
            if key in checked_cross:
                continue
            checked_cross.add(key)
            equity, needed = fx.cross_equity(pos.user, contract.margin_coin)
            if equity <= needed:
                return CROSS, pos
            if draw:
                bands.draw_for(fx, pos, equity - needed)
        if draw:
            bands.banded.add(symbol)  # every key on it now has bands, or is stale
    return None


def liquidate_isolated(fx: Futures, pos: Position, ts: int) -> None:
    _cancel_everything(fx, pos.user, pos.contract, ts)
    _close_out(fx, pos, ts)


def liquidate_cross(fx: Futures, user: int, coin: str, ts: int) -> None:
    for symbol, contract in fx.contracts.items():
        if contract.margin_coin == coin:
            _cancel_everything(fx, user, symbol, ts)
    cross = [
        pos
        for pos in fx.user_positions(user)
        if pos.position_type == CROSS and fx.contracts[pos.contract].margin_coin == coin
    ]
    # Gains first, so that they are in the account's cash before the losses draw on it.
    cross.sort(key=lambda p: (-unrealized(fx.contracts[p.contract], p, fx.mark(p.contract)), p.id))
    for pos in cross:
        if pos.volume:  # auto-deleveraging may have closed it against the account's other side
            _close_out(fx, pos, ts)
    # The account was bankrupt at the bankruptcy prices: what its cross cash still holds
    # is the surplus of closing better than that, and goes to the fund.
    account = futures_account(user)
    left = fx.ledger.free(account, coin)
    if left > 0:
        fx.ledger.change(account, coin, -left, 0, "liquidation", user)
        fx.ledger.change(INSURANCE_ACCOUNT, coin, left, 0, "liquidation", user)


def _cancel_everything(fx: Futures, user: int, symbol: str, ts: int) -> None:
    """The user's open orders and waiting conditional orders on ``symbol``: a stop left
    behind would fire against a position that is gone (and end REJECTED), or open a new one
    the user set up for the position it no longer has."""
    fx.cancel_user(user, ts, symbol)
    for trigger in sorted(fx.waiting_triggers(user, symbol), key=lambda t: t.id):
        triggers.cancel(fx, trigger, ts)


def _close_out(fx: Futures, pos: Position, ts: int) -> None:
    contract = fx.contracts[pos.contract]
    pos.liquidated = True
    limit = bankruptcy_limit(contract, pos, effective_margin(fx, pos))
    edge = fx.band_edge(contract, SELL if pos.is_long else BUY)
    if edge:  # never past the price band: what the book cannot take there is deleveraged
        limit = max(limit, edge) if pos.is_long else min(limit or edge, edge)
    if limit:
        order = _closing_order(fx, pos, LIMIT, IOC, limit, pos.volume, BY_LIQUIDATION, ts)
    else:
        order = _closing_order(fx, pos, MARKET, GTC, 0, pos.volume, BY_LIQUIDATION, ts)
    fx.match(contract, fx.books[contract.symbol], order)
    if order.filled < order.qty:
        deleverage(fx, contract, order, pos, ts)
    order.status = FILLED if order.filled == order.qty else CANCELED
    fx.end(order)
    fx.emit_order(order)


def _closing_order(
    fx: Futures,
    pos: Position,
    type: str,
    tif: str,
    price: int,
    qty: int,
    source: str,
    ts: int,
) -> FuturesOrder:
    """An order the engine places to close ``qty`` of ``pos`` (counted as pending close)."""
    order = FuturesOrder(
        fx.spot.next_order_id,
        futures_account(pos.user),
        pos.contract,
        opposite(pos.side),
        type,
        tif,
        price,
        qty,
        0,
        "",
        ts,
        user=pos.user,
        action=CLOSE,
        position_type=pos.position_type,
        leverage=pos.leverage,
        source=source,
    )
    fx.spot.next_order_id += 1
    pos.pending_close += qty
    return order


def _adl_rank(contract: ContractSpec, pos: Position, mark: int) -> tuple[Decimal, int]:
    """Profit ratio x effective leverage (highest first), then position id."""
    upnl = unrealized(contract, pos, mark)
    margin = max(pos.margin, 1)
    equity = margin + upnl
    value = contract.value(pos.volume, mark)
    if equity <= 0:
        score = Decimal(upnl) / margin * Decimal(value)
    else:
        score = Decimal(upnl) / margin * Decimal(value) / Decimal(equity)
    return -score, pos.id


def deleverage(
    fx: Futures, contract: ContractSpec, order: FuturesOrder, pos: Position, ts: int
) -> None:
    """Close the rest of a liquidation order against opposite positions."""
    state = fx.states[contract.symbol]
    mark = state.mark
    left = order.qty - order.filled
    bankrupt = bankruptcy_limit(contract, pos, effective_margin(fx, pos))
    price = bankrupt or mark
    if mark and _fund_covers(fx, contract, pos, left, mark):
        price = mark
    close_against_positions(fx, contract, order, pos, price, ts)


def close_against_positions(
    fx: Futures,
    contract: ContractSpec,
    order: FuturesOrder,
    pos: Position,
    price: int,
    ts: int,
    source: str = BY_ADL,
) -> None:
    """Fill what is left of ``order`` (closing ``pos``) at ``price`` against opposite
    positions ranked by profit x effective leverage, without fees: each is closed in turn
    by an order of the engine's (placed by ``source``)."""
    mark = fx.states[contract.symbol].mark
    left = order.qty - order.filled
    counterparts = sorted(
        (p for p in fx.by_contract[contract.symbol].values() if p.side != pos.side),
        key=lambda p: _adl_rank(contract, p, mark),
    )
    for other in counterparts:
        if left == 0:
            break
        take = min(left, other.volume)
        if other.pending_close > other.volume - take:
            for resting in fx.open_orders(other.user, contract.symbol):
                if resting.action == CLOSE and resting.side == opposite(other.side):
                    fx.cancel_resting(resting, ts)
        adl = _closing_order(fx, other, MARKET, GTC, 0, take, source, ts)
        if mark and price != mark:  # at the bankruptcy price: less than at the mark
            at_mark = contract.pnl(other.is_long, 0, contract.value(take, mark))
            other.share_amount += max(
                0, at_mark - contract.pnl(other.is_long, 0, contract.value(take, price))
            )
        fx.fill(contract, None, order, adl, take, price, ts, fees=False)
        adl.status = FILLED
        fx.end(adl)
        fx.emit_order(adl)
        left -= take
    if left:
        raise AssertionError("open interest out of balance: nothing left to deleverage")


def close_at_mark(fx: Futures, pos: Position, ts: int) -> None:
    """Close the whole of ``pos`` at its contract's mark price against opposite positions
    (the operator's account reset): as auto-deleveraging does, but at the mark whatever
    the insurance fund holds, and for a position that is not bankrupt."""
    contract = fx.contracts[pos.contract]
    order = _closing_order(fx, pos, MARKET, GTC, 0, pos.volume, BY_RESET, ts)
    mark = fx.states[contract.symbol].mark
    close_against_positions(fx, contract, order, pos, mark, ts, BY_RESET)
    order.status = FILLED
    fx.end(order)
    fx.emit_order(order)


def _fund_covers(fx: Futures, contract: ContractSpec, pos: Position, qty: int, mark: int) -> bool:
    """Whether closing ``qty`` of ``pos`` at the mark leaves a loss the fund can pay."""
    margin = effective_margin(fx, pos)
    share = margin * qty // pos.volume if pos.volume else 0
    cost = pos.cost * qty // pos.volume if pos.volume else 0
    result = share + contract.pnl(pos.is_long, cost, contract.value(qty, mark))
    deficit = max(0, -result)
    return fx.ledger.free(INSURANCE_ACCOUNT, contract.margin_coin) >= deficit
