"""Operator actions (users, keys, deposits, withdrawals, views). One implementation serves the
admin API (server running) and the CLI acting on the store (no server), so both give the same
JSON. Each function stages its changes on the exchange; the caller makes them durable.
"""

from __future__ import annotations

import uuid
from typing import Any

from tradehall import __version__
from tradehall.api import wire
from tradehall.codes import Code, Reject
from tradehall.engine import audit as engine_audit
from tradehall.engine.commands import Deposit, Withdraw
from tradehall.engine.engine import TransferReply
from tradehall.engine.spot import FEE_ACCOUNT
from tradehall.exchange import Exchange
from tradehall.units import UnitsError, format_units, format_units_trimmed, to_units

DEMO_USER = "demo"
DEMO_FUNDS = {"BTC": "10", "ETH": "100", "USDT": "1000000"}
DEMO_DEFAULT_FUNDS = "1000"


def create_user(ex: Exchange, name: str | None, ts: int) -> dict[str, Any]:
    if name is not None and (not name.strip() or len(name) > 64 or not name.isprintable()):
        raise Reject(Code.BAD_PARAM, "name must be 1 to 64 printable characters")
    user = ex.create_user(name or f"user-{max(ex.users, default=0) + 1}", ts)
    return {"id": user.id, "name": user.name, "created": user.created}


def list_users(ex: Exchange) -> dict[str, Any]:
    return {
        "users": [{"id": u.id, "name": u.name, "created": u.created} for u in ex.users.values()]
    }


def create_key(
    ex: Exchange, user_id: int, read_only: bool, ips: list[str], ts: int
) -> dict[str, Any]:
    row = ex.create_key(user_id, read_only, ips, ts)
    return {
        "apiKey": row.api_key,
        "secret": row.secret,
        "userId": row.user_id,
        "readOnly": row.read_only,
        "ips": list(row.ips),
    }


def revoke_key(ex: Exchange, api_key: str, ts: int) -> dict[str, Any]:
    row = ex.revoke_key(api_key, ts)
    return {"apiKey": row.api_key, "userId": row.user_id, "revoked": True}


def _amount(ex: Exchange, asset: str, amount: str) -> int:
    spec = ex.config.markets.assets.get(asset)
    if spec is None:
        raise Reject(Code.BAD_PARAM, f"unknown asset {asset!r}")
    try:
        units = to_units(amount, spec.decimals)
    except UnitsError as exc:
        if exc.precision:
            raise Reject(
                Code.PRECISION, f"amount has more than {spec.decimals} decimal places"
            ) from None
        raise Reject(Code.BAD_PARAM, f"amount {amount!r} is not a decimal number") from None
    if units <= 0:
        raise Reject(Code.BAD_PARAM, "amount must be greater than zero")
    return units


def transfer(
    ex: Exchange,
    kind: str,
    user_id: int,
    asset: str,
    amount: str,
    tx_id: str | None,
    ts: int,
) -> dict[str, Any]:
    """A deposit or withdrawal, idempotent by ``tx_id`` (one is generated when absent)."""
    ex.require_user(user_id)
    asset = asset.upper()
    units = _amount(ex, asset, amount)
    tx = tx_id if tx_id else f"{kind}-{uuid.uuid4().hex}"
    command = Deposit if kind == "deposit" else Withdraw
    reply: TransferReply = ex.apply(command(ts, user_id, asset, units, tx))
    decimals = ex.config.markets.assets[asset].decimals
    return {
        "transferId": reply.transfer_id,
        "txId": tx,
        "userId": user_id,
        "asset": asset,
        "amount": format_units_trimmed(units, decimals),
        "duplicate": reply.duplicate,
        "free": format_units(reply.free, decimals),
        "locked": format_units(reply.locked, decimals),
    }


def balances(ex: Exchange, user_id: int) -> dict[str, Any]:
    if user_id != FEE_ACCOUNT:
        ex.require_user(user_id)
    amounts = ex.engine.balances(user_id)
    balances = wire.balances(ex.config.markets.assets, amounts)
    return {"userId": user_id, "balances": wire.to_builtins(balances)}


def markets(ex: Exchange) -> dict[str, Any]:
    spec = ex.config.markets
    return {
        "assets": [{"name": a.name, "decimals": a.decimals} for a in spec.assets.values()],
        "pairs": [
            {
                "symbol": p.symbol,
                "baseAsset": p.base,
                "quoteAsset": p.quote,
                "pricePrecision": p.price_precision,
                "quantityPrecision": p.quantity_precision,
                "minQuantity": format_units_trimmed(p.min_quantity, p.quantity_precision),
                "minNotional": format_units_trimmed(p.min_notional, p.quote_decimals),
                "makerFee": format_units_trimmed(p.maker_fee, 8),
                "takerFee": format_units_trimmed(p.taker_fee, 8),
                "marketOrders": p.market_orders,
                "trading": p.trading,
            }
            for p in spec.pairs.values()
        ],
    }


def audit_memory(ex: Exchange) -> dict[str, Any]:
    """Every invariant of the live state: conservation per asset, no negative balance, locks
    equal what open orders hold, sound books. Pure computation on the engine: run it where
    nothing applies commands meanwhile (the event loop, or the offline CLI)."""
    assets = ex.config.markets.assets
    totals = ex.engine.ledger.totals()
    return {
        "problems": engine_audit.check(ex.engine),
        "assets": [
            {
                "asset": name,
                "held": format_units(totals.get(name, 0), spec.decimals),
                "depositsMinusWithdrawals": format_units(
                    ex.engine.ledger.external.get(name, 0), spec.decimals
                ),
                "fees": format_units(sum(ex.engine.ledger.get(FEE_ACCOUNT, name)), spec.decimals),
            }
            for name, spec in assets.items()
        ],
    }


def audit_store(ex: Exchange) -> list[str]:
    """Every stored balance equals the sum of its stored ledger entries (a store read)."""
    return [
        f"account {account} {asset}: stored balance ({free}, {locked}) != ledger sum"
        f" ({sum_free}, {sum_locked})"
        for account, asset, free, locked, sum_free, sum_locked in ex.store.ledger_mismatches()
    ]


def audit_report(memory: dict[str, Any], store_problems: list[str]) -> dict[str, Any]:
    problems = memory["problems"] + store_problems
    return {"ok": not problems, "problems": problems, "assets": memory["assets"]}


def audit(ex: Exchange) -> dict[str, Any]:
    """The whole audit when nothing runs concurrently (offline)."""
    return audit_report(audit_memory(ex), audit_store(ex))


def status(ex: Exchange) -> dict[str, Any]:
    return {
        "version": __version__,
        "users": len(ex.users),
        "openOrders": sum(len(book.orders) for book in ex.engine.spot.books.values()),
        "writable": ex.failure is None,
        "failure": ex.failure,
    }


def ensure_demo(ex: Exchange, ts: int) -> dict[str, Any]:
    """The demo account: created and funded once, then found again on later starts."""
    user = next((u for u in ex.users.values() if u.name == DEMO_USER), None)
    if user is None:
        user = ex.create_user(DEMO_USER, ts)
    for asset in ex.config.markets.assets:
        amount = DEMO_FUNDS.get(asset, DEMO_DEFAULT_FUNDS)
        transfer(ex, "deposit", user.id, asset, amount, f"demo-funding-{asset}", ts)
    key = next(
        (
            k.row
            for k in ex.keys.values()
            if k.row.user_id == user.id and k.row.revoked is None and not k.row.read_only
        ),
        None,
    )
    if key is None:
        key = ex.create_key(user.id, False, [], ts)
    return {"userId": user.id, "apiKey": key.api_key, "secret": key.secret}
