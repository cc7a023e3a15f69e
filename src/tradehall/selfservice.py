"""Self-service accounts (``[sandbox] self_service``; docs/api.md, "Self-service accounts"): a
stranger creates an account (a user, a TRADE key and its starting funds), tops it up from the
faucet, resets it; its key expires after a time unused. Every step is one of the operator's own
operations (``tradehall.operations``, ``tradehall.sandbox``): users and keys as ``tradehall
user create`` and ``key create`` make them, funds as deposits (the ledger's entries, each under
its own tx id, within ``[admin] max_deposit``) and moves to futures, a reset as ``tradehall
account reset``. Like those, each function stages its changes and the caller makes them
durable; a refusal (Reject) comes before anything is staged."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tradehall import operations as ops
from tradehall import sandbox
from tradehall.codes import Code, Reject
from tradehall.engine.futures_model import futures_account
from tradehall.exchange import Exchange
from tradehall.selfservice_state import DAY_MS
from tradehall.units import format_units, format_units_trimmed

log = logging.getLogger("tradehall.sandbox")

ACCOUNT_NAME = "self-service"
"""Every self-service account's user name (its id tells them apart)."""

Funds = dict[str, int]
"""Amounts in units, by asset."""


def settings_view(ex: Exchange) -> dict[str, Any]:
    """What a stranger may know before creating an account (``GET /sandbox/v1/info``)."""
    settings = ex.config.sandbox
    spot, futures = sandbox.funds(ex, settings.spot, settings.futures)
    return {
        "selfService": settings.self_service,
        "spot": _shown(ex, spot),
        "futures": _shown(ex, futures),
        "faucetPerDay": settings.faucet_per_day,
        "maxAccounts": settings.max_accounts,
        "keyExpirySeconds": settings.key_expiry_s,
    }


def create_account(ex: Exchange, now: int) -> dict[str, Any]:
    """A new user with a TRADE key (its secret is in this answer only) and the ``[sandbox]``
    funds; refused (-1003) while ``max_accounts`` self-service keys are live."""
    settings = ex.config.sandbox
    book = ex.selfservice
    if book.live(ex.keys, now) >= settings.max_accounts:
        raise Reject(
            Code.TOO_MANY_REQUESTS,
            f"this sandbox has its most self-service accounts ({settings.max_accounts});"
            " one is freed when its key expires: try again later",
        )
    spot, futures = sandbox.funds(ex, settings.spot, settings.futures)
    _check_deposits(ex, spot, futures)
    user = ops.create_user(ex, ACCOUNT_NAME, now)
    user_id: int = user["id"]
    key = ops.create_key(ex, user_id, False, [], now)
    book.add(ex.note_state, key["apiKey"], user_id, now)
    _deposit(ex, user_id, spot, futures, f"selfservice-{user_id}", now)
    return {
        "userId": user_id,
        "apiKey": key["apiKey"],
        "secret": key["secret"],
        "spot": _shown(ex, spot),
        "futures": _shown(ex, futures),
        "faucetPerDay": settings.faucet_per_day,
        "keyExpirySeconds": settings.key_expiry_s,
    }


def faucet(ex: Exchange, user_id: int, now: int) -> dict[str, Any]:
    """Top each spot asset and futures margin coin of a self-service account up to its
    starting balance (free and locked together), at most ``faucet_per_day`` times a UTC day;
    a top-up with nothing to top up is not counted."""
    _require_self_service(ex, user_id, "the faucet")
    per_day = ex.config.sandbox.faucet_per_day
    book = ex.selfservice
    used = book.faucet_count(user_id, now)
    spot_target, futures_target = sandbox.starting_balances(ex, user_id)
    ledger = ex.engine.ledger
    spot = _missing(spot_target, lambda asset: sum(ledger.get(user_id, asset)))
    account = futures_account(user_id)
    futures = _missing(futures_target, lambda coin: sum(ledger.get(account, coin)))
    if spot or futures:
        if per_day == 0:
            raise Reject(Code.UNSUPPORTED, "this sandbox has no faucet: reset the account instead")
        if used >= per_day:
            raise Reject(
                Code.TOO_MANY_REQUESTS,
                f"this account had the faucet's {per_day} top-up(s) of the UTC day: try again"
                " after midnight UTC",
            )
        _check_deposits(ex, spot, futures)
        used = book.faucet_taken(ex.note_state, user_id, now)
        _deposit(ex, user_id, spot, futures, f"faucet-{user_id}-{now // DAY_MS}-{used}", now)
    return {
        "userId": user_id,
        "deposited": {"spot": _shown(ex, spot), "futures": _shown(ex, futures)},
        "usedToday": used,
        "leftToday": per_day - used,
    }


def reset(ex: Exchange, user_id: int, now: int) -> dict[str, Any]:
    """``tradehall account reset`` of a self-service account, by its owner, refused while the
    account has what that reset would settle with other accounts' money or leave out: open
    futures positions (the operator's reset closes them at the mark against other traders'
    positions, by their ranking: one stranger's reset would close another's) and margin
    accounts holding anything (the reset leaves margin as it is: funds parked there and a
    reset would mint money, unbounded). The owner closes or moves them first, as a trader
    would."""
    _require_self_service(ex, user_id, "a self-service reset")
    engine = ex.engine
    positions = sorted({p.contract for p in engine.futures.user_positions(user_id)})
    if positions:
        raise Reject(
            Code.UNSUPPORTED,
            f"close your futures positions first ({', '.join(positions)}): a reset does not"
            " close them, since that would close other traders' positions against them",
        )
    margin = engine.margin
    held = []
    for symbol in margin.specs:
        account = margin.account_of(user_id, symbol)
        if account is None:
            continue
        pair = margin.pairs[symbol]
        funds = any(sum(engine.ledger.get(account.id, a)) for a in (pair.base, pair.quote))
        if funds or account.has_debt():
            held.append(symbol)
    if held:
        raise Reject(
            Code.UNSUPPORTED,
            f"repay and move your margin funds back to spot first ({', '.join(held)}): a reset"
            " restores the spot and futures accounts only",
        )
    return sandbox.reset_account(ex, user_id, now)


def sweep(ex: Exchange, now: int) -> list[str]:
    """Revoke the self-service keys unused for longer than ``key_expiry_s`` (as ``tradehall
    key revoke`` does: gateways and streams let go of them); the keys revoked."""
    expired = ex.selfservice.expired(now)
    for api_key in expired:
        revoked = ops.revoke_key(ex, api_key, now)
        log.info("self-service key %s… of user %d expired: revoked", api_key[:8], revoked["userId"])
    return expired


def seconds_to_next_day(now: int) -> int:
    """Seconds until the faucet counts afresh (the next UTC midnight)."""
    return _seconds(DAY_MS - now % DAY_MS)


def seconds_to_next_expiry(ex: Exchange, now: int) -> int:
    """Seconds until the first live self-service key expires (an account is freed then)."""
    book = ex.selfservice
    return _seconds(min(book.used.values(), default=now) + book.expiry_ms - now)


def _seconds(ms: int) -> int:
    return max(1, -(-ms // 1000))


def _require_self_service(ex: Exchange, user_id: int, what: str) -> None:
    if user_id not in ex.selfservice.users:
        raise Reject(Code.BAD_KEY, f"{what} serves self-service accounts only")


def _missing(target: Funds, held: Callable[[str], int]) -> Funds:
    """What ``held`` lacks of ``target``, by asset."""
    return {asset: want - have for asset, want in target.items() if (have := held(asset)) < want}


def _check_deposits(ex: Exchange, spot: Funds, futures: Funds) -> None:
    """Every deposit ``_deposit`` would make passes ``[admin] max_deposit`` (checked before
    any is made: a refusal stages nothing)."""
    for funds in (spot, futures):
        for asset, units in funds.items():
            if units > 0:
                ops.check_deposit(ex, asset, _text(ex, asset, units))


def _deposit(ex: Exchange, user_id: int, spot: Funds, futures: Funds, tx: str, now: int) -> None:
    """Deposit ``spot``, and ``futures`` into spot then moved to futures, each asset under
    the tx id ``<tx>-<asset>`` (``-futures`` for the futures share)."""
    for asset, units in spot.items():
        if units > 0:
            ops.transfer(
                ex, "deposit", user_id, asset, _text(ex, asset, units), f"{tx}-{asset}", now
            )
    for coin, units in futures.items():
        if units > 0:
            amount = _text(ex, coin, units)
            ops.transfer(ex, "deposit", user_id, coin, amount, f"{tx}-{coin}-futures", now)
            ops.move_funds(ex, user_id, coin, amount, True, now)


def _text(ex: Exchange, asset: str, units: int) -> str:
    return format_units_trimmed(units, ex.config.markets.assets[asset].decimals)


def _shown(ex: Exchange, funds: Funds) -> dict[str, str]:
    """Amounts as balances show them (every decimal place of the asset)."""
    assets = ex.config.markets.assets
    return {a: format_units(units, assets[a].decimals) for a, units in funds.items()}
