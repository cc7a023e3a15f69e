"""Operator actions (users, keys, deposits, withdrawals, transfers, index prices, views). One
implementation serves the admin API (server running) and the CLI acting on the store (no
server), so both give the same JSON. Each function stages its changes on the exchange; the
caller makes them durable.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from tradehall import __version__, adminlog
from tradehall.api import wire
from tradehall.codes import Code, Reject
from tradehall.config import RetentionSettings
from tradehall.engine import audit as engine_audit
from tradehall.engine.commands import (
    Deposit,
    FuturesTransfer,
    MarginTransfer,
    SetIndexPrice,
    Withdraw,
)
from tradehall.engine.contracts import LAST, MID, MONEY_DECIMALS, ContractSpec
from tradehall.engine.engine import TransferReply
from tradehall.engine.futures_model import (
    AccountTransfer,
    ContractState,
    IndexSource,
    futures_account,
)
from tradehall.engine.index_sources import source_names as index_source_names
from tradehall.engine.index_sources import weight_of as index_weight
from tradehall.engine.margin import INSURANCE_ACCOUNT, POOL_ACCOUNT
from tradehall.engine.markets import FEE_RATE_DECIMALS, LEVEL_SCALE
from tradehall.engine.spot import FEE_ACCOUNT
from tradehall.exchange import Exchange
from tradehall.store.base import collector_paused
from tradehall.store.batch import Batch
from tradehall.store.journaled import JournaledStore
from tradehall.units import UnitsError, format_units, format_units_trimmed, to_units

DEMO_USER = "demo"
DEMO_FUNDS = {"BTC": "100", "ETH": "1000", "USDT": "10000000"}
"""Enough to walk each side's first ten levels of every default simulated book (about 40 BTC
or 1,200,000 USDT, docs/simulation.md) with either asset of a pair."""
DEMO_DEFAULT_FUNDS = "1000"
DEMO_POOL = {"BTC": "100", "ETH": "1000", "USDT": "10000000"}
DEMO_INSURANCE = {"BTC": "1", "ETH": "10", "USDT": "100000"}
DEMO_FUTURES_SHARE = Decimal("0.1")
"""Part of the demo account's funding of each margin coin moved into its futures account."""
DEMO_PRICES = {"BTC": 30_000, "ETH": 2_000, "USDT": 1, "USD": 1, "USDC": 1}
"""Each asset's price in dollars on the demo venue: where the simulation starts its markets,
and a quiet demo venue's futures index (``ensure_demo``)."""
TOPUP = "/topup-"
"""``demo-funding-BTC/topup-1``: a top-up of a fixed funding deposit (``fund_up_to``)."""


def create_user(ex: Exchange, name: str | None, ts: int) -> dict[str, Any]:
    if name is not None and (not name.strip() or len(name) > 64 or not name.isprintable()):
        raise Reject(Code.BAD_PARAM, "name must be 1 to 64 printable characters")
    user = ex.create_user(name or f"user-{max(ex.users, default=0) + 1}", ts)
    return {"id": user.id, "name": user.name, "created": user.created}


def list_users(ex: Exchange) -> dict[str, Any]:
    return {
        "users": [{"id": u.id, "name": u.name, "created": u.created} for u in ex.users.values()]
    }


def list_keys(ex: Exchange) -> dict[str, Any]:
    """Every API key, revoked ones included, without its secret; a live self-service key
    with when it expires if unused until then."""
    book = ex.selfservice
    return {
        "keys": [
            {
                "apiKey": k.row.api_key,
                "userId": k.row.user_id,
                "readOnly": k.row.read_only,
                "ips": list(k.row.ips),
                "created": k.row.created,
                "revoked": k.row.revoked,
                "expires": book.expires(k.row.api_key) if k.row.revoked is None else None,
            }
            for k in ex.keys.values()
        ]
    }


def market_activity(ex: Exchange) -> list[dict[str, Any]]:
    """Each spot pair and futures contract with its open orders (on the book) and, for a
    contract, its waiting conditional orders."""
    spot = ex.engine.spot.books
    futures = ex.engine.futures
    return [
        {"symbol": symbol, "kind": "spot", "openOrders": len(spot[symbol].orders), "triggers": 0}
        for symbol in ex.config.markets.pairs
    ] + [
        {
            "symbol": symbol,
            "kind": "futures",
            "openOrders": len(futures.books[symbol].orders),
            "triggers": len(futures.trigger_books[symbol].fixed)
            + len(futures.trigger_books[symbol].trailing),
        }
        for symbol in ex.config.markets.contracts
    ]


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
    """Revoke a key at once; a key already revoked stays as it is (no error)."""
    if not api_key:
        raise Reject(Code.BAD_PARAM, "mandatory parameter 'apiKey' was not sent or is empty")
    row = ex.revoke_key(api_key, ts)
    return {"apiKey": row.api_key, "userId": row.user_id, "revoked": True}


def _name(text: str, what: str = "asset") -> str:
    """An asset or symbol name, upper-cased: ASCII only (some non-ASCII letters upper-case to
    ASCII ones, which must not pass for the real name)."""
    if not text.isascii():
        raise Reject(Code.BAD_PARAM, f"unknown {what} {text!r}")
    return text.upper()


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


SYSTEM_ACCOUNTS = {"fees": FEE_ACCOUNT, "pool": POOL_ACCOUNT, "insurance": INSURANCE_ACCOUNT}
"""The exchange's own accounts: trading fees, the margin lending pool, the insurance fund."""
FUNDABLE = ("pool", "insurance")


def transfer(
    ex: Exchange,
    kind: str,
    user_id: int,
    asset: str,
    amount: str,
    tx_id: str | None,
    ts: int,
) -> dict[str, Any]:
    """A deposit or withdrawal, idempotent by ``tx_id`` (one is generated when absent); a
    deposit no larger than ``[admin] max_deposit``."""
    ex.require_user(user_id)
    if kind == "deposit":
        check_deposit(ex, _name(asset), amount)
    return _external(ex, kind, user_id, asset, amount, tx_id, ts)


def check_deposit(ex: Exchange, asset: str, amount: str) -> None:
    """Refuse a deposit of ``amount`` of ``asset`` above ``[admin] max_deposit``."""
    ceiling = ex.config.admin.deposit_ceiling(asset)
    if ceiling is None:
        return
    units = _amount(ex, asset, amount)  # refuses what is not an amount of a known asset
    decimals = ex.config.markets.assets[asset].decimals
    if units > ceiling.scaleb(decimals):
        raise Reject(
            Code.BAD_PARAM,
            f"a deposit of {amount} {asset} is above [admin] max_deposit"
            f" ({format(ceiling, 'f')} {asset}): nothing was deposited",
        )


def fund(
    ex: Exchange, kind: str, system: str, asset: str, amount: str, tx_id: str | None, ts: int
) -> dict[str, Any]:
    """The operator's deposit into (or withdrawal from) the lending pool or insurance fund."""
    if system not in FUNDABLE:
        raise Reject(Code.BAD_PARAM, f"account must be one of {', '.join(FUNDABLE)}")
    result = _external(ex, kind, SYSTEM_ACCOUNTS[system], asset, amount, tx_id, ts)
    del result["userId"]
    return {"account": system, **result}


def _external(
    ex: Exchange,
    kind: str,
    account: int,
    asset: str,
    amount: str,
    tx_id: str | None,
    ts: int,
) -> dict[str, Any]:
    if tx_id is not None and not tx_id.strip():
        # An unset shell variable must not silently turn an idempotent call into a new one.
        raise Reject(Code.BAD_PARAM, "txId is empty: leave it out to have one generated")
    asset = _name(asset)
    units = _amount(ex, asset, amount)
    tx = tx_id if tx_id is not None else f"{kind}-{uuid.uuid4().hex}"
    command = Deposit if kind == "deposit" else Withdraw
    reply: TransferReply = ex.apply(command(ts, account, asset, units, tx))
    decimals = ex.config.markets.assets[asset].decimals
    return {
        "transferId": reply.transfer_id,
        "txId": tx,
        "userId": account,
        "asset": asset,
        "amount": format_units_trimmed(units, decimals),
        "duplicate": reply.duplicate,
        "free": format_units(reply.free, decimals),
        "locked": format_units(reply.locked, decimals),
    }


def system_balances(ex: Exchange) -> dict[str, Any]:
    """Balances of the exchange's own accounts, each contract's socialised losses, and the
    margin debts written off in each asset the lending pool lends."""
    fx = ex.engine.futures
    assets = ex.config.markets.assets
    pairs = ex.config.markets.pairs
    lent = dict.fromkeys(
        a for s in ex.config.markets.margin for a in (pairs[s].base, pairs[s].quote)
    )
    written_off = ex.engine.margin.written_off
    return {
        "accounts": [
            {"account": name, **balances(ex, account)} for name, account in SYSTEM_ACCOUNTS.items()
        ],
        "socialized": [
            {
                "contract": symbol,
                "asset": contract.margin_coin,
                "amount": format_units(
                    fx.states[symbol].socialized, assets[contract.margin_coin].decimals
                ),
            }
            for symbol, contract in sorted(fx.contracts.items())
        ],
        "writtenOff": [
            {
                "asset": asset,
                "amount": format_units(written_off.get(asset, 0), assets[asset].decimals),
            }
            for asset in lent
        ],
    }


def margin_transfer(
    ex: Exchange,
    user_id: int,
    symbol: str,
    asset: str,
    amount: str,
    source: str,
    target: str,
    ts: int,
) -> dict[str, Any]:
    """Move funds between a user's spot account and its margin account on ``symbol``."""
    ex.require_user(user_id)
    if {source.lower(), target.lower()} != {"spot", "margin"} or not (source + target).isascii():
        raise Reject(Code.BAD_PARAM, "transfers go from spot to margin or from margin to spot")
    symbol = _name(symbol, "symbol")
    if symbol not in ex.config.markets.margin:
        raise Reject(Code.BAD_SYMBOL, f"margin trading is not offered on {symbol!r}")
    asset = _name(asset)
    units = _amount(ex, asset, amount)
    ex.apply(MarginTransfer(ts, user_id, symbol, asset, units, target.lower() == "margin"))
    return margin_view(ex, user_id, symbol)


def margin_view(ex: Exchange, user_id: int, symbol: str) -> dict[str, Any]:
    """A margin account: assets, debts, risk ratio and status, liquidation price, settings."""
    spec = ex.config.markets.margin.get(symbol)
    if spec is None:
        raise Reject(Code.BAD_SYMBOL, f"margin trading is not offered on {symbol!r}")
    pair = ex.config.markets.pairs[symbol]
    engine = ex.engine
    ex.require_user(user_id)  # an unknown user is named as such, as by every other command
    account = engine.margin.account_of(user_id, symbol)
    if account is None:
        raise Reject(Code.INSUFFICIENT_BALANCE, f"no margin account on {symbol}")
    assets = []
    for asset in (pair.base, pair.quote):
        decimals = ex.config.markets.assets[asset].decimals
        free, locked = engine.ledger.get(account.id, asset)
        principal, interest = account.debts.get(asset, (0, 0))
        assets.append(
            {
                "asset": asset,
                "free": format_units(free, decimals),
                "locked": format_units(locked, decimals),
                "borrowed": format_units(principal, decimals),
                "interest": format_units(interest, decimals),
            }
        )
    price = engine.spot.last_price.get(symbol)
    ratio = engine.margin.risk(account, price).ratio() if price else None
    status = "NORMAL"
    if ratio is not None and ratio * LEVEL_SCALE <= spec.liquidation_level:
        status = "LIQUIDATION"
    elif ratio is not None and ratio * LEVEL_SCALE <= spec.warning_level:
        status = "WARNING"
    liquidation = engine.margin.liquidation_price(account)
    return {
        "userId": user_id,
        "symbol": symbol,
        "assets": assets,
        "riskRatio": None if ratio is None else wire.fraction_text(ratio, 4),
        "riskStatus": status,
        # Rounded toward the side that triggers: down for a long, up for a short (base debt).
        "liquidationPrice": None
        if liquidation is None
        else wire.fraction_text(
            liquidation / 10**pair.price_precision,
            pair.price_precision,
            up=pair.base in account.debts,
        ),
        "lastPrice": None if price is None else wire.price(pair, price),
        "maxLeverage": spec.max_leverage,
        "initialLevel": format_units(spec.initial_level, 4),
        "warningLevel": format_units(spec.warning_level, 4),
        "liquidationLevel": format_units(spec.liquidation_level, 4),
    }


TRANSFER_ACCOUNTS = ("spot", "margin", "futures")


def transfer_target(source: str, target: str) -> str:
    """``margin`` or ``futures``: the account other than spot that a transfer between
    ``source`` and ``target`` involves."""
    ends = {source.lower(), target.lower()}
    if not (source + target).isascii() or ends not in ({"spot", "margin"}, {"spot", "futures"}):
        raise Reject(
            Code.BAD_PARAM, "transfers go from spot to margin or futures, or from there to spot"
        )
    return "margin" if "margin" in ends else "futures"


def margin_coins(ex: Exchange) -> list[str]:
    """The assets futures margin is held in (each contract's margin coin), in config order."""
    return list(dict.fromkeys(c.margin_coin for c in ex.config.markets.contracts.values()))


def futures_transfer(
    ex: Exchange,
    user_id: int,
    asset: str,
    amount: str,
    source: str,
    target: str,
    ts: int,
) -> dict[str, Any]:
    """Move funds between a user's spot account and its futures account; the futures
    balance after it."""
    if {source.lower(), target.lower()} != {"spot", "futures"} or not (source + target).isascii():
        raise Reject(Code.BAD_PARAM, "transfers go from spot to futures or from futures to spot")
    record = move_funds(ex, user_id, asset, amount, target.lower() == "futures", ts)
    return futures_balance(ex, user_id, record.asset)


def move_funds(
    ex: Exchange, user_id: int, asset: str, amount: str, into_futures: bool, ts: int
) -> AccountTransfer:
    """Move ``amount`` (decimal text) of ``asset`` from spot to futures, or back."""
    ex.require_user(user_id)
    asset = _name(asset)
    coins = margin_coins(ex)
    if asset not in coins:
        if asset not in ex.config.markets.assets:
            raise Reject(Code.BAD_PARAM, f"unknown asset {asset!r}")
        shown = ", ".join(coins) if coins else "none: no contracts are configured"
        raise Reject(
            Code.BAD_PARAM,
            f"{asset} is not the margin coin of any contract (margin coins: {shown})",
        )
    units = _amount(ex, asset, amount)
    record: AccountTransfer = ex.apply(FuturesTransfer(ts, user_id, asset, units, into_futures))
    return record


def futures_balance(ex: Exchange, user_id: int, asset: str) -> dict[str, Any]:
    """A user's futures balance of one margin coin: free (available) and locked (order holds
    and position margins)."""
    decimals = ex.config.markets.assets[asset].decimals
    free, locked = ex.engine.ledger.get(futures_account(user_id), asset)
    return {
        "userId": user_id,
        "account": "futures",
        "asset": asset,
        "free": format_units(free, decimals),
        "locked": format_units(locked, decimals),
    }


def _contract(ex: Exchange, contract: str) -> ContractSpec:
    spec = ex.config.markets.contracts.get(_name(contract, "contract"))
    if spec is None:
        raise Reject(Code.BAD_SYMBOL, f"unknown contract {contract!r}")
    return spec


def set_index_price(
    ex: Exchange, contract: str, price: str, ts: int, feed: str = ""
) -> dict[str, Any]:
    """The operator's index price for a contract: without ``feed`` the index at once (an
    override), with it one price of that named feed among the index's sources."""
    spec = _contract(ex, contract)
    places = spec.price_precision
    try:
        ticks = to_units(price, places)
    except UnitsError as exc:
        if exc.precision:
            raise Reject(Code.PRECISION, f"price has more than {places} decimal places") from None
        raise Reject(Code.BAD_PARAM, f"price {price!r} is not a decimal number") from None
    if ticks <= 0:
        raise Reject(Code.BAD_PARAM, "price must be greater than zero")
    state: ContractState = ex.apply(SetIndexPrice(ts, spec.symbol, ticks, feed))
    answer: dict[str, Any] = {
        "contract": spec.symbol,
        "indexPrice": format_units(state.index, places) if state.index else None,
        "indexSource": spec.index_source,
    }
    if feed:
        answer["feed"] = feed
        answer["feedPrice"] = format_units(ticks, places)
    return answer


def index_sources(ex: Exchange, contract: str, now: int) -> dict[str, Any]:
    """A contract's index and mark, its price band, and each source of its index: weight,
    smoothed value, when it last changed and whether the last index tick used it."""
    spec = _contract(ex, contract)
    state = ex.engine.futures.states[spec.symbol]
    places = spec.price_precision

    def price(ticks: int) -> str | None:
        return format_units(ticks, places) if ticks else None

    sources = []
    for name in index_source_names(spec, state):
        source = state.sources.get(name) or IndexSource()
        changed = source.fed_at if source.fed else (source.samples[-1][0] if source.samples else 0)
        sources.append(
            {
                "name": name,
                "kind": name if name in (MID, LAST) else "feed",
                "weight": index_weight(spec.index, name),
                "value": price(source.value),
                "lastPrice": price(source.fed or (source.samples[-1][1] if source.samples else 0)),
                "ageMs": now - changed if changed else None,
                "status": source.status or "none",
            }
        )
    return {
        "contract": spec.symbol,
        "indexPrice": price(state.index),
        "markPrice": price(state.mark),
        "indexSource": spec.index_source,
        "operatorIndex": price(state.operator_index),
        "priceBand": format_units_trimmed(spec.price_band, FEE_RATE_DECIMALS),
        "windowS": spec.index.window_ms // 1000,
        "smoothing": "median" if spec.index.median else "mean",
        "sourceBand": format_units_trimmed(spec.index.band, FEE_RATE_DECIMALS),
        "maxMovePerS": format_units_trimmed(spec.index.max_move, FEE_RATE_DECIMALS),
        "sources": sources,
    }


def balances(ex: Exchange, user_id: int) -> dict[str, Any]:
    if user_id not in SYSTEM_ACCOUNTS.values():
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
        "contracts": [contract_view(c) for c in spec.contracts.values()],
    }


def _rate(units: int) -> str:
    return format_units_trimmed(units, 8)


def contract_view(c: ContractSpec) -> dict[str, Any]:
    """A contract's configuration, decimals as text (rates and money trimmed)."""
    return {
        "symbol": c.symbol,
        "id": c.id,
        "type": c.type,
        "side": "inverse" if c.inverse else "linear",
        "baseAsset": c.base,
        "quoteAsset": c.quote,
        "marginCoin": c.margin_coin,
        "multiplier": format(c.multiplier.normalize(), "f"),
        "multiplierCoin": c.multiplier_coin,
        "pricePrecision": c.price_precision,
        "minVolume": c.min_volume,
        "maxLimitVolume": c.max_limit_volume,
        "maxMarketVolume": c.max_market_volume,
        "minMoney": format_units_trimmed(c.min_money, MONEY_DECIMALS),
        "maxLimitMoney": format_units_trimmed(c.max_limit_money, MONEY_DECIMALS),
        "maxMarketMoney": format_units_trimmed(c.max_market_money, MONEY_DECIMALS),
        "maxValidOrder": c.max_valid_order,
        "openMakerFee": _rate(c.open_maker_fee),
        "openTakerFee": _rate(c.open_taker_fee),
        "closeMakerFee": _rate(c.close_maker_fee),
        "closeTakerFee": _rate(c.close_taker_fee),
        "maintenanceRate": _rate(c.maintenance_rate),
        "defaultLeverage": c.default_leverage,
        "maxLeverage": c.max_leverage,
        "fundingIntervalHours": c.funding_interval_ms // 3_600_000,
        "interestRate": _rate(c.interest_rate),
        "fundingCap": _rate(c.funding_cap),
        "indexSource": c.index_source,
        "trading": c.trading,
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
    """Every stored balance equals the sum of its stored ledger entries, and the admin audit
    trail is whole (a store read of the tables as they stand: each projector commit leaves
    them whole, so the audit does not wait for a projector that is behind)."""
    tables = _tables(ex)
    return [
        f"account {account} {asset}: stored balance ({free}, {locked}) != ledger sum"
        f" ({sum_free}, {sum_locked})"
        for account, asset, free, locked, sum_free, sum_locked in tables.ledger_mismatches()
    ] + admin_log_problems(ex)


def _tables(ex: Exchange) -> Any:
    store = ex.store
    return store.projections if isinstance(store, JournaledStore) else store


def admin_log_problems(ex: Exchange) -> list[str]:
    """The trail's entries are numbered 1, 2, ... as written and never removed: ids that do
    not run 1..n mean entries are missing."""
    count, low, high = _tables(ex).admin_log_span()
    if count and (low != 1 or high != count):
        return [f"admin log: {count} entries with ids {low}..{high}: entries are missing"]
    return []


MAX_ADMIN_LOG = 1000


def admin_log(ex: Exchange, limit: int, before: int | None) -> dict[str, Any]:
    """The admin audit trail, newest first, ``limit`` entries (at most 1000) with an id
    below ``before``."""
    if not 1 <= limit <= MAX_ADMIN_LOG:
        raise Reject(Code.BAD_PARAM, f"limit must be 1 to {MAX_ADMIN_LOG}")
    if before is not None and before < 1:
        raise Reject(Code.BAD_PARAM, "before must be a positive entry id")
    return {"entries": [adminlog.view(row) for row in ex.store.admin_log(limit, before)]}


def replica_from_tables(ex: Exchange) -> Exchange | None:
    """A fresh exchange loaded from the tables alone (as of the journal record they hold),
    the first half of ``audit_journal``: a store read, run off the event loop. None when the
    store keeps no journal."""
    store = ex.store
    if not isinstance(store, JournaledStore):
        return None
    replica = Exchange(ex.config, store.projections, secret_box=ex.secret_box)
    with collector_paused():
        replica.recover()
    return replica


def audit_journal(ex: Exchange, replica: Exchange | None) -> list[str]:
    """The tables checked against a replay of the journal: ``replica`` (the tables loaded,
    ``replica_from_tables``) with every journal record after them applied, and what ``ex``
    has applied but not yet committed, must be in exactly the state of ``ex``'s engine (the
    same state hash). Run where nothing applies commands meanwhile (the event loop)."""
    store = ex.store
    if replica is None or not isinstance(store, JournaledStore):
        return []
    seq = replica.projected
    for record in store.tail(replica.projected):
        if record.seq > store.head:
            break
        replica.replay(record.entries, record.seq)
        replica.pending = Batch()
        seq = record.seq
    if seq < store.head:
        return [
            f"journal: records {seq + 1}..{store.head} are missing"
            f" (the tables stand at {replica.projected})"
        ]
    replica.replay(ex.pending.entries, store.head + 1)  # type: ignore[arg-type]
    live, replayed = ex.engine.state_hash(), replica.engine.state_hash()
    if live != replayed:
        return [
            f"journal: the tables (at record {replica.projected}) with the journal replayed to"
            f" record {store.head} give state {replayed[:16]}, the engine holds {live[:16]}"
        ]
    return []


def audit_report(memory: dict[str, Any], store_problems: list[str]) -> dict[str, Any]:
    problems = memory["problems"] + store_problems
    return {"ok": not problems, "problems": problems, "assets": memory["assets"]}


def audit(ex: Exchange) -> dict[str, Any]:
    """The whole audit when nothing runs concurrently (offline)."""
    journal = audit_journal(ex, replica_from_tables(ex))
    return audit_report(audit_memory(ex), audit_store(ex) + journal)


def retention_view(settings: RetentionSettings) -> dict[str, Any]:
    return {
        "enabled": settings.enabled,
        "intervalSeconds": settings.interval_s,
        "batchRows": settings.batch_rows,
        "ordersDays": settings.orders_days,
        "tradesDays": settings.trades_days,
        "ledgerDays": settings.ledger_days,
        "systemLedgerHours": settings.system_ledger_hours,
        "simulationMinutes": settings.simulation_minutes,
        "journalHours": settings.journal_hours,
    }


def storage(ex: Exchange) -> dict[str, Any]:
    """Rows and bytes per table (bytes with the table's indexes; null where the backend
    cannot tell), the backend's own space figures and the retention in force (store reads)."""
    tables = ex.store.table_stats()
    return {
        "backend": "postgresql" if ex.config.server.database else "sqlite",
        "tables": [
            {"table": name, "rows": rows, "bytes": size} for name, (rows, size) in tables.items()
        ],
        "store": ex.store.storage_stats(),
        "retention": retention_view(ex.config.retention),
    }


def status(ex: Exchange) -> dict[str, Any]:
    return {
        "version": __version__,
        "users": len(ex.users),
        "openOrders": sum(len(book.orders) for book in ex.engine.spot.books.values()),
        "writable": ex.failure is None,
        "failure": ex.failure,
        **({"journal": journal_status(ex.store)} if isinstance(ex.store, JournaledStore) else {}),
        **ha_view(ex),
    }


def journal_status(store: JournaledStore) -> dict[str, Any]:
    """Where the journal and the tables stand (docs/durability.md)."""
    projected = store.projected_seen()
    child = store.projector
    return {
        "head": store.head,
        "epoch": store.epoch,
        "projected": projected,
        "lag": max(0, store.head - projected),
        "projector": (
            {"running": child.alive(), "restarts": child.restarts} if child is not None else None
        ),
    }


def ha_view(ex: Exchange) -> dict[str, Any]:
    """The HA engine's view (``engine --standby``), or nothing."""
    store = ex.store
    role = getattr(store, "ha", None)
    if role is None:
        return {}
    from tradehall.cluster.standby import ha_status

    return {"ha": ha_status(role, store.head)}  # type: ignore[attr-defined]


def topup_tx(tx_id: str, n: int) -> str:
    """The tx id of the ``n``-th top-up of the funding deposit ``tx_id`` (0: itself)."""
    return f"{tx_id}{TOPUP}{n}" if n else tx_id


def funded(ex: Exchange, account: int, tx_id: str) -> int:
    """What the funding deposit ``tx_id`` and its top-ups credited ``account`` (units)."""
    total, n = 0, 0
    while (record := ex.engine.transfers.get(topup_tx(tx_id, n))) is not None:
        if record.account == account:
            total += record.amount
        n += 1
    return total


def fund_up_to(
    ex: Exchange,
    account: int,
    asset: str,
    units: int,
    tx_id: str,
    ts: int,
    *,
    short_below: int | None = None,
) -> int:
    """Built-in funding (the demo account's, the simulation's participants'), idempotent: a
    deposit of ``units`` under the fixed ``tx_id`` once. When the deposits under it add up to
    less than ``short_below`` (by default ``units``), as in a data folder funded when the
    amount was smaller, the difference is deposited under the next top-up id
    (``tx_id/topup-1``, ...), once too. Not an operator's deposit: ``[admin] max_deposit``
    does not cap it. Returns what was deposited now (0: nothing)."""
    have = funded(ex, account, tx_id)
    if have >= (units if short_below is None else min(units, short_below)):
        return 0
    n = 0
    while topup_tx(tx_id, n) in ex.engine.transfers:
        n += 1
    decimals = ex.config.markets.assets[asset].decimals
    amount = format_units(units - have, decimals)
    _external(ex, "deposit", account, asset, amount, topup_tx(tx_id, n), ts)
    return units - have


def demo_index(contract: ContractSpec) -> int:
    """The contract's index at the demo prices, in ticks (0: an asset without one)."""
    base, quote = DEMO_PRICES.get(contract.base), DEMO_PRICES.get(contract.quote)
    if not base or not quote:
        return 0
    return int(Decimal(base) / Decimal(quote) * 10**contract.price_precision)


def ensure_demo(ex: Exchange, ts: int, *, index: bool = False) -> dict[str, Any]:
    """The demo account: created and funded once, then found again on later starts (topped
    up once to ``DEMO_FUNDS`` if it was funded with smaller amounts). With contracts
    configured, the insurance fund holds each margin coin and the demo account's futures
    account a tenth more of its funding of each. With ``index`` (a venue without the
    simulation, whose quiet books give no index), each contract that has no index price yet
    gets one at the demo prices, as the operator's ``index-price`` would set it: a contract
    takes no orders without one."""
    user = next((u for u in ex.users.values() if u.name == DEMO_USER), None)
    if user is None:
        user = ex.create_user(DEMO_USER, ts)
    coins = margin_coins(ex)
    for asset, spec in ex.config.markets.assets.items():
        amount = Decimal(DEMO_FUNDS.get(asset, DEMO_DEFAULT_FUNDS))
        units = to_units(amount, spec.decimals)
        fund_up_to(ex, user.id, asset, units, f"demo-funding-{asset}", ts)
        if ex.config.markets.margin:  # a demo venue lends: fund the pool once
            pool = DEMO_POOL.get(asset, DEMO_DEFAULT_FUNDS)
            fund(ex, "deposit", "pool", asset, pool, f"demo-pool-{asset}", ts)
        if ex.config.markets.margin or asset in coins:  # one insurance fund for both, once
            insured = DEMO_INSURANCE.get(asset, DEMO_DEFAULT_FUNDS)
            fund(ex, "deposit", "insurance", asset, insured, f"demo-insurance-{asset}", ts)
        if asset in coins:
            # Futures work out of the box: a further tenth of the funding is deposited and
            # moved to the futures account (only what is deposited now: once), so the spot
            # balances stay what the README says.
            share = to_units(amount * DEMO_FUTURES_SHARE, spec.decimals)
            extra = fund_up_to(ex, user.id, asset, share, f"demo-futures-{asset}", ts)
            if extra:
                ex.apply(FuturesTransfer(ts, user.id, asset, extra, True))
    if index:
        for contract in ex.config.markets.contracts.values():
            price = demo_index(contract)
            if price and not ex.engine.futures.states[contract.symbol].index:
                ex.apply(SetIndexPrice(ts, contract.symbol, price))
    # The oldest key that still trades from anywhere: the one made at the first start, as
    # long as it is not revoked (not whichever of the demo user's keys sorts first).
    key = min(
        (
            k.row
            for k in ex.keys.values()
            if k.row.user_id == user.id
            and k.row.revoked is None
            and not k.row.read_only
            and not k.row.ips
        ),
        key=lambda row: (row.created, row.api_key),
        default=None,
    )
    if key is None:
        key = ex.create_key(user.id, False, [], ts)
    return {"userId": user.id, "apiKey": key.api_key, "secret": key.secret}
