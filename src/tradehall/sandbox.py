"""Sandbox controls for the operator (docs/simulation.md): settle funding now, charge margin
interest now, and reset an account to its starting balances. Like tradehall.operations, each
function stages engine commands on the exchange (every change a ledger entry) and the caller
makes them durable; the admin API and the offline CLI share them."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from tradehall import operations as ops
from tradehall.codes import Code, Reject
from tradehall.engine.commands import (
    CancelBatch,
    ChargeInterest,
    ClosePositions,
    Deposit,
    FuturesTransfer,
    SettleFunding,
    Withdraw,
)
from tradehall.engine.futures_model import futures_account
from tradehall.exchange import Exchange
from tradehall.sim.accounts import funding_tx, participant_market
from tradehall.units import format_units, format_units_trimmed, to_units


def funding_now(ex: Exchange, contract: str | None, ts: int) -> dict[str, Any]:
    """Settle funding at once on ``contract`` (or every contract with a mark price)."""
    symbol = ""  # every contract (SettleFunding's own word for it)
    if contract is not None:  # an empty name is an unknown contract, never every one
        symbol = ops.contract_view(ops._contract(ex, contract))["symbol"]
    if not ex.config.markets.contracts:
        raise Reject(Code.BAD_SYMBOL, "no futures contracts are configured")
    settled: list[str] = ex.apply(SettleFunding(ts, symbol))
    states = ex.engine.futures.states
    return {
        "settled": [
            {"contract": s, "fundingRate": format_units_trimmed(states[s].last_funding_rate, 8)}
            for s in settled
        ]
    }


def interest_now(ex: Exchange, hours: int, ts: int) -> dict[str, Any]:
    """Charge ``hours`` hours of margin interest on every debt at once (the
    ``ChargeInterest`` command); what each margin account was charged."""
    charged: list[tuple[int, str, str, int]] = ex.apply(ChargeInterest(ts, hours))
    margin = ex.engine.margin.accounts
    assets = ex.config.markets.assets
    return {
        "hours": hours,
        "charged": [
            {
                "userId": margin[account].user,
                "symbol": symbol,
                "asset": asset,
                "interest": format_units(amount, assets[asset].decimals),
            }
            for account, symbol, asset, amount in charged
        ],
    }


def starting_balances(ex: Exchange, user_id: int) -> tuple[dict[str, int], dict[str, int]]:
    """(spot, futures) balances in units that ``user_id`` is reset to: a simulation
    participant's own starting funds (what the simulation deposited for it, top-ups
    included: a maker given a trader's balances would hold more than its inventory bound lets
    it quote against, and stop quoting one side); a self-service account's ``[sandbox]``
    funds; for anyone else ``[simulation.reset]``. Either, by default, what ``serve --demo``
    gives the demo account."""
    assets = ex.config.markets.assets
    name = ex.users[user_id].name
    market = participant_market(name)
    if market is not None:
        funded = {
            asset: amount
            for asset in assets
            if (amount := ops.funded(ex, user_id, funding_tx(name, asset)))
        }
        if market in ex.config.markets.contracts:
            return {}, funded  # a futures participant's funds were all moved to futures
        return funded, {}
    if user_id in ex.selfservice.users:
        return funds(ex, ex.config.sandbox.spot, ex.config.sandbox.futures)
    return funds(ex, ex.config.simulation.reset_spot, ex.config.simulation.reset_futures)


def funds(
    ex: Exchange, spot: dict[str, Decimal], futures: dict[str, Decimal]
) -> tuple[dict[str, int], dict[str, int]]:
    """Configured (spot, futures) funds in units; an empty side is the demo account's."""
    assets = ex.config.markets.assets
    spot = spot or {
        asset: Decimal(ops.DEMO_FUNDS.get(asset, ops.DEMO_DEFAULT_FUNDS)) for asset in assets
    }
    futures = futures or {
        coin: Decimal(ops.DEMO_FUNDS.get(coin, ops.DEMO_DEFAULT_FUNDS)) * ops.DEMO_FUTURES_SHARE
        for coin in ops.margin_coins(ex)
    }
    return (
        {a: to_units(v, assets[a].decimals) for a, v in spot.items()},
        {c: to_units(v, assets[c].decimals) for c, v in futures.items()},
    )


def reset_account(ex: Exchange, user_id: int, ts: int) -> dict[str, Any]:
    """Cancel the user's orders, close its futures positions at the mark, and bring its spot
    and futures balances back to the starting balances (deposits and withdrawals for the
    difference). Margin accounts are left as they are."""
    ex.require_user(user_id)
    engine = ex.engine
    spot_target, futures_target = starting_balances(ex, user_id)
    assets = ex.config.markets.assets
    cancelled = 0
    by_symbol: dict[str, list[int]] = {}
    for order in engine.open_orders(user_id):
        by_symbol.setdefault(order.symbol, []).append(order.id)
    for symbol, ids in by_symbol.items():
        ex.apply(CancelBatch(ts, user_id, symbol, tuple(ids)))
        cancelled += len(ids)
    fx = engine.futures
    cancelled += len(fx.open_orders(user_id)) + len(fx.waiting_triggers(user_id))
    closed: int = ex.apply(ClosePositions(ts, user_id))
    account = futures_account(user_id)
    for coin in fx.margin_coins:
        free = engine.ledger.free(account, coin)
        if free:
            ex.apply(FuturesTransfer(ts, user_id, coin, free, False))
    batch = uuid.uuid4().hex[:12]
    for asset in assets:
        want = spot_target.get(asset, 0) + futures_target.get(asset, 0)
        have = engine.ledger.free(user_id, asset)
        tx = f"reset-{user_id}-{batch}-{asset}"
        if want > have:
            ex.apply(Deposit(ts, user_id, asset, want - have, tx))
        elif have > want:
            ex.apply(Withdraw(ts, user_id, asset, have - want, tx))
    for coin, units in futures_target.items():
        if units > 0:
            ex.apply(FuturesTransfer(ts, user_id, coin, units, True))
    return {
        "userId": user_id,
        "cancelledOrders": cancelled,
        "closedPositions": closed,
        "spot": {
            a: format_units(engine.ledger.free(user_id, a), s.decimals) for a, s in assets.items()
        },
        "futures": {
            c: format_units(engine.ledger.free(account, c), assets[c].decimals)
            for c in futures_target
        },
    }
