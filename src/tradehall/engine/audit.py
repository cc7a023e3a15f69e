"""Invariants of the engine's state, checked by tests, the audit command and debug mode.

Each check returns human-readable violations; an empty list means the state is sound.
"""

from __future__ import annotations

from tradehall.engine.engine import Engine
from tradehall.engine.futures_model import (
    CLEARING_ACCOUNT_BASE,
    CLOSE,
    FuturesOrder,
    clearing_account,
    futures_account,
)
from tradehall.engine.orders import BUY, OPEN_STATUSES


def conservation(engine: Engine) -> list[str]:
    """Per asset: every account's free + locked (fee account included) == deposits - withdrawals."""
    problems = []
    totals = engine.ledger.totals()
    for asset in sorted(set(totals) | set(engine.ledger.external)):
        held = totals.get(asset, 0)
        external = engine.ledger.external.get(asset, 0)
        if held != external:
            problems.append(
                f"{asset}: accounts hold {held} units but deposits - withdrawals = {external}"
            )
    return problems


def no_negative_balance(engine: Engine) -> list[str]:
    return [
        f"account {account} {asset}: free={free} locked={locked}"
        for (account, asset), (free, locked) in engine.ledger.balances.items()
        if (free < 0 or locked < 0) and account > CLEARING_ACCOUNT_BASE
    ]


def locks_match_orders(engine: Engine) -> list[str]:
    """What each account has locked equals what its open orders hold (plus, for futures
    accounts, the margin of its positions)."""
    expected: dict[tuple[int, str], int] = {}
    for book in engine.spot.books.values():
        pair = engine.markets.pairs[book.symbol]
        for order in book.orders.values():
            asset = pair.quote if order.side == BUY else pair.base
            key = (order.account, asset)
            expected[key] = expected.get(key, 0) + order.held
    fx = engine.futures
    for book in fx.books.values():
        coin = fx.contracts[book.symbol].margin_coin
        for order in book.orders.values():
            key = (order.account, coin)
            expected[key] = expected.get(key, 0) + order.held
    for pos in fx.all_positions():
        key = (futures_account(pos.user), fx.contracts[pos.contract].margin_coin)
        expected[key] = expected.get(key, 0) + pos.margin
    problems = []
    for key, (_, locked) in engine.ledger.balances.items():
        if locked != expected.get(key, 0):
            problems.append(
                f"account {key[0]} {key[1]}: locked {locked}"
                f" != held by orders {expected.get(key, 0)}"
            )
    for key, amount in expected.items():
        if key not in engine.ledger.balances and amount:
            problems.append(f"account {key[0]} {key[1]}: orders hold {amount} with no balance")
    return problems


def books_sound(engine: Engine) -> list[str]:
    """No crossed book; level totals match their orders; open orders are indexed and open."""
    problems = []
    for symbol, book in engine.spot.books.items():
        pair = engine.markets.pairs[symbol]
        if book.crossed():
            problems.append(f"{symbol}: book is crossed")
        seen = 0
        for side in (book.bids, book.asks):
            for level in side.iter_levels():
                orders = level.orders()
                if not orders:
                    problems.append(f"{symbol}: empty level {level.price} left on the book")
                total = sum(o.qty - o.filled for o in orders)
                if total != level.total:
                    problems.append(f"{symbol} {level.price}: level total {level.total} != {total}")
                for order in orders:
                    seen += 1
                    if order.status not in OPEN_STATUSES or order.filled >= order.qty:
                        problems.append(
                            f"{symbol}: order {order.id} rests with status {order.status}"
                        )
                    if order.price != level.price:
                        problems.append(f"{symbol}: order {order.id} sits at the wrong level")
                    expected_hold = (
                        pair.quote_amount(order.price, order.qty - order.filled)
                        if order.side == BUY
                        else (order.qty - order.filled) * pair.base_per_lot
                    )
                    if order.held != expected_hold:
                        problems.append(
                            f"{symbol}: order {order.id} holds {order.held},"
                            f" expected {expected_hold}"
                        )
                    index = engine.spot.by_account.get(order.account, {})
                    if index.get(order.id) is not order or order.open_orders is not index:
                        problems.append(
                            f"{symbol}: order {order.id} missing from its account index"
                        )
                    held_asset = pair.quote if order.side == BUY else pair.base
                    record = engine.ledger.balances.get((order.account, held_asset))
                    if order.balance is not None and order.balance is not record:
                        problems.append(f"{symbol}: order {order.id} keeps a stale balance record")
        if seen != len(book.orders):
            problems.append(f"{symbol}: {len(book.orders)} orders indexed, {seen} on levels")
    return problems


def margin_waiting_sound(engine: Engine) -> list[str]:
    """The margin accounts waiting for liquidity are exactly those that owe and stand at or
    below their liquidation level: the waiting set is a function of the state, so a restart
    or a replay finds the same one (the engine held a rescued account as waiting, and the
    journal's replay disagreed with it)."""
    margin = engine.margin
    due = {account.id for account in margin.accounts.values() if margin.due(account)}
    problems = []
    for account_id in sorted(margin.waiting - due):
        problems.append(f"margin account {account_id} waits for liquidity but is not due")
    for account_id in sorted(due - margin.waiting):
        problems.append(f"margin account {account_id} is due but not being liquidated")
    return problems


def futures_sound(engine: Engine) -> list[str]:
    """Per contract: long open interest == short open interest; the clearing account holds
    exactly the entry cost of open shorts minus that of open longs (reversed for inverse)
    less the socialised losses; volume pending close matches the open CLOSE orders and
    never exceeds the position; futures books are not crossed and their levels add up."""
    problems = []
    fx = engine.futures
    for symbol, contract in fx.contracts.items():
        positions = list(fx.by_contract[symbol].values())
        long_oi = sum(p.volume for p in positions if p.is_long)
        short_oi = sum(p.volume for p in positions if not p.is_long)
        if long_oi != short_oi:
            problems.append(f"{symbol}: long open interest {long_oi} != short {short_oi}")
        long_cost = sum(p.cost for p in positions if p.is_long)
        short_cost = sum(p.cost for p in positions if not p.is_long)
        expected = long_cost - short_cost if contract.inverse else short_cost - long_cost
        expected -= fx.states[symbol].socialized
        clearing, _ = engine.ledger.get(clearing_account(contract.id), contract.margin_coin)
        if clearing != expected:
            problems.append(f"{symbol}: clearing holds {clearing}, positions say {expected}")
        book = fx.books[symbol]
        if book.crossed():
            problems.append(f"{symbol}: book is crossed")
        pending: dict[tuple[int, str], int] = {}
        for side in (book.bids, book.asks):
            for level in side.iter_levels():
                orders = level.orders()
                if sum(o.qty - o.filled for o in orders) != level.total or not orders:
                    problems.append(f"{symbol} {level.price}: level total is wrong")
                for order in orders:
                    assert isinstance(order, FuturesOrder)
                    if order.status not in OPEN_STATUSES or order.held < 0:
                        problems.append(f"{symbol}: order {order.id} rests unsound")
                    if order.action == CLOSE:
                        if order.held:
                            problems.append(f"{symbol}: CLOSE order {order.id} holds funds")
                        key = (order.user, "SELL" if order.side == BUY else BUY)
                        pending[key] = pending.get(key, 0) + order.qty - order.filled
        for pos in positions:
            if pos.volume <= 0 or pos.margin < 0 or pos.cost <= 0:
                problems.append(f"{symbol}: position {pos.id} is unsound")
            if pos.pending_close != pending.get((pos.user, pos.side), 0):
                problems.append(
                    f"{symbol}: position {pos.id} pending close {pos.pending_close} "
                    f"!= open CLOSE orders {pending.get((pos.user, pos.side), 0)}"
                )
            if pos.pending_close > pos.volume:
                problems.append(f"{symbol}: position {pos.id} has more pending close than volume")
            if fx.positions.get((pos.user, symbol, pos.side)) is not pos:
                problems.append(f"{symbol}: position {pos.id} is not indexed")
    return problems


def check(engine: Engine) -> list[str]:
    """Every invariant; an empty list means the engine's state is sound."""
    return (
        conservation(engine)
        + no_negative_balance(engine)
        + locks_match_orders(engine)
        + books_sound(engine)
        + margin_waiting_sound(engine)
        + futures_sound(engine)
    )
