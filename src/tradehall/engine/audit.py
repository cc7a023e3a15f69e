"""Invariants of the engine's state, checked by tests, the audit command and debug mode.

Each check returns human-readable violations; an empty list means the state is sound.
"""

from __future__ import annotations

from tradehall.engine.engine import Engine
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
        if free < 0 or locked < 0
    ]


def locks_match_orders(engine: Engine) -> list[str]:
    """What each account has locked equals what its open orders hold."""
    expected: dict[tuple[int, str], int] = {}
    for book in engine.spot.books.values():
        pair = engine.markets.pairs[book.symbol]
        for order in book.orders.values():
            asset = pair.quote if order.side == BUY else pair.base
            key = (order.account, asset)
            expected[key] = expected.get(key, 0) + order.held
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
                    if engine.spot.by_account.get(order.account, {}).get(order.id) is not order:
                        problems.append(
                            f"{symbol}: order {order.id} missing from its account index"
                        )
        if seen != len(book.orders):
            problems.append(f"{symbol}: {len(book.orders)} orders indexed, {seen} on levels")
    return problems


def check(engine: Engine) -> list[str]:
    """Every invariant; an empty list means the engine's state is sound."""
    return (
        conservation(engine)
        + no_negative_balance(engine)
        + locks_match_orders(engine)
        + books_sound(engine)
    )
