"""The local admin API (extension, under /admin/v1): what the operator CLI uses while a server
runs. Reachable only from loopback and only with the token kept in the data folder."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tradehall import adminlog, sandbox
from tradehall import operations as ops
from tradehall.api import wire
from tradehall.api.errors import ApiError
from tradehall.api.http import AppState, Call, endpoint
from tradehall.api.reading import Reading, reading
from tradehall.api.requests import (
    AdminFundingRequest,
    AdminFuturesTransferRequest,
    AdminIndexPriceRequest,
    AdminIndexQuery,
    AdminInterestRequest,
    AdminLogQuery,
    AdminMarginQuery,
    AdminMarginTransferRequest,
    AdminUserRequest,
    BalancesQuery,
    CreateKeyRequest,
    CreateUserRequest,
    FundRequest,
    RevokeKeyRequest,
    TransferRequest,
)
from tradehall.codes import Code, Reject
from tradehall.sim.runner import Simulation
from tradehall.store.base import StoreError

PREFIX = "/admin/v1"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})


# ------------------------------------------------------------------------- futures answers
# The shapes of the futures admin answers (the dicts of tradehall.operations), for the OpenAPI
# document; like the wire Structs, field order is the answer's.

Rate = Annotated[str, Meta(pattern=r"^[0-9]+(\.[0-9]+)?$", description="A rate (0.0006 = 0.06 %).")]
Count = Annotated[int, Meta(ge=1)]


class AdminFuturesBalance(wire.Wire, frozen=True):
    """A user's futures balance of one margin coin after a transfer: ``free`` is available,
    ``locked`` holds open orders and position margins."""

    user_id: wire.Id
    account: Literal["futures"]
    asset: str
    free: wire.DecimalText
    locked: wire.DecimalText


class AdminIndexPrice(wire.Wire, frozen=True):
    """The contract's index after the operator's price, and where it takes its index from
    (with ``feed``: the feed and the price it pushed, taken at the next index tick)."""

    contract: Annotated[str, Meta(examples=["E-BTC-USDT"])]
    index_price: wire.DecimalText | None
    index_source: Annotated[
        str, Meta(description="`operator`, or the spot pair whose mid and last are sources.")
    ]
    feed: str | UnsetType = UNSET
    feed_price: wire.DecimalText | UnsetType = UNSET


class AdminIndexSource(wire.Wire, frozen=True):
    """One source of a contract's index, as the last index tick saw it."""

    name: Annotated[str, Meta(examples=["mid"])]
    kind: Literal["mid", "last", "feed"]
    weight: Count
    value: wire.DecimalText | None = None
    last_price: wire.DecimalText | None = None
    age_ms: int | None = None
    status: Literal["used", "stale", "outlier", "thin", "none"] = "none"


class AdminIndexSources(wire.Wire, frozen=True):
    """A contract's index and mark, its price band, and each source of its index."""

    contract: str
    index_price: wire.DecimalText | None
    mark_price: wire.DecimalText | None
    index_source: str
    operator_index: wire.DecimalText | None
    price_band: wire.DecimalText
    window_s: Count
    smoothing: Literal["median", "mean"]
    source_band: wire.DecimalText
    max_move_per_s: wire.DecimalText
    sources: list[AdminIndexSource]


class AdminContract(wire.Wire, frozen=True):
    """A perpetual futures contract as configured (money in the quote currency)."""

    symbol: Annotated[str, Meta(examples=["E-BTC-USDT"])]
    id: Count
    type: Literal["E"]
    side: Literal["linear", "inverse"]
    base_asset: str
    quote_asset: str
    margin_coin: str
    multiplier: wire.DecimalText
    multiplier_coin: str
    price_precision: Annotated[int, Meta(ge=0)]
    min_volume: Count
    max_limit_volume: Count
    max_market_volume: Count
    min_money: wire.DecimalText
    max_limit_money: wire.DecimalText
    max_market_money: wire.DecimalText
    max_valid_order: Count
    open_maker_fee: Rate
    open_taker_fee: Rate
    close_maker_fee: Rate
    close_taker_fee: Rate
    maintenance_rate: Rate
    default_leverage: Count
    max_leverage: Count
    funding_interval_hours: Count
    interest_rate: Rate
    funding_cap: Rate
    index_source: str
    trading: bool


class AdminMarketsWithContracts(wire.Wire, frozen=True):
    """Assets, spot pairs and perpetual futures contracts."""

    assets: list[wire.AdminAsset]
    pairs: list[wire.AdminPair]
    contracts: list[AdminContract]


class AdminKeyInfo(wire.Wire, frozen=True):
    """An API key as listed for the operator: never its secret."""

    api_key: str
    user_id: wire.Id
    read_only: bool
    ips: list[str]
    created: wire.Millis
    revoked: Annotated[wire.Millis | None, Meta(description="When it was revoked; null: live.")]
    expires: Annotated[
        wire.Millis | None,
        Meta(
            description="A live self-service key: when it expires if unused until then (its"
            " last use plus [sandbox] key_expiry_s); null for every other key."
        ),
    ] = None


class AdminKeys(wire.Wire, frozen=True):
    keys: list[AdminKeyInfo]


class AdminMarketActivity(wire.Wire, frozen=True):
    symbol: str
    kind: Literal["spot", "futures"]
    open_orders: Annotated[int, Meta(ge=0, description="Orders resting on the book.")]
    triggers: Annotated[int, Meta(ge=0, description="Waiting conditional orders (futures).")]


class AdminRecentError(wire.Wire, frozen=True):
    """The latest error answer of one client (``source``) for one method, status and code,
    with how many such answers there were; path and message cut to 200 characters."""

    time: Annotated[wire.Millis, Meta(description="When the latest one was answered.")]
    method: str
    path: str
    status: Annotated[int, Meta(ge=400, le=599)]
    code: Annotated[int, Meta(lt=0)]
    msg: str
    source: Annotated[str, Meta(description="The client's address.")] = ""
    count: Annotated[int, Meta(ge=1, description="Such answers since the row appeared.")] = 1
    gateway: Annotated[
        str, Meta(description="The gateway worker that answered it (behind gateways).")
    ] = ""


class AdminGateway(wire.Wire, frozen=True):
    """A gateway worker as it last reported (``tradehall engine`` only)."""

    gateway: Annotated[str, Meta(description="Its name: process id and a random part.")]
    host: str
    pid: int
    started: wire.Millis
    last_heard_seconds_ago: Annotated[float, Meta(ge=0)]
    connections: Annotated[int, Meta(ge=0, description="WebSocket connections open.")]
    read_cache: Annotated[
        dict[str, int],
        Meta(description="Its read cache's hits, misses and answers kept; empty when off."),
    ]
    requests_total: Annotated[int, Meta(ge=0)]
    errors_total: Annotated[int, Meta(ge=0)]
    requests_per_second: Annotated[float, Meta(ge=0)]
    errors_per_second: Annotated[float, Meta(ge=0)]


class AdminGateways(wire.Wire, frozen=True):
    gateways: list[AdminGateway]


class AdminActivity(wire.Wire, frozen=True):
    """Open orders per market and the traffic since the server started: totals, per-second
    averages over the last ``windowSeconds``, and the latest error answers, newest first."""

    markets: list[AdminMarketActivity]
    requests_total: Annotated[int, Meta(ge=0)]
    errors_total: Annotated[int, Meta(ge=0)]
    requests_per_second: Annotated[float, Meta(ge=0)]
    errors_per_second: Annotated[float, Meta(ge=0)]
    window_seconds: Annotated[int, Meta(ge=1)]
    recent_errors: list[AdminRecentError]
    gateways: Annotated[
        list[AdminGateway],
        Meta(description="Behind gateways: each worker's share, already added to the totals."),
    ] = msgspec.field(default_factory=list)


class AdminLogEntry(wire.Wire, frozen=True):
    """One admin action in the audit trail."""

    id: Annotated[int, Meta(ge=1, description="1, 2, ... in the order written.")]
    time: wire.Millis
    actor: Annotated[
        str,
        Meta(
            description="`token:<fingerprint>` (the admin token's), or `local` (the CLI on the"
            " data folder without a server)."
        ),
    ]
    agent: Annotated[
        str,
        Meta(description="Through what, as the caller said (`X-Tradehall-Agent`): the CLI"
             " (`cli:<user>@<host>`), `operator-page`, or `api`."),
    ]  # fmt: skip
    action: Annotated[str, Meta(examples=["user.create", "deposit", "key.revoke"])]
    params: Annotated[dict[str, Any], Meta(description="The request's parameters.")]
    result: Literal["ok", "refused"]
    code: Annotated[int, Meta(le=0, description="0, or the refusal's catalogue code.")]
    detail: Annotated[
        str, Meta(description="What was created or changed (JSON), or why it was refused.")
    ]


class AdminLog(wire.Wire, frozen=True):
    """The admin audit trail, newest first."""

    entries: list[AdminLogEntry]


def is_loopback(host: str | None) -> bool:
    return host in LOOPBACK or (host or "").startswith("127.")


def require_admin(request: Request, state: AppState) -> None:
    """Loopback (unless ``admin_remote``) and the admin token, or ApiError."""
    host = request.client.host if request.client else None
    if not state.admin_remote and not is_loopback(host):
        raise ApiError(Code.BAD_KEY, "the admin API is reachable from loopback only", status=403)
    token = state.admin_token
    header = request.headers.get("authorization", "")
    given = header[7:] if header.lower().startswith("bearer ") else ""
    if not token or not given or not hmac.compare_digest(given.encode(), token.encode()):
        raise ApiError(Code.BAD_KEY, "missing or invalid admin token", status=401)


def _require_admin(call: Call) -> None:
    require_admin(call.request, call.state)


def admin(
    fn: Callable[[Call], Awaitable[Any]], *, when_failed: bool = False, action: str = ""
) -> Callable[[Request], Awaitable[Response]]:
    """An admin endpoint; one with an ``action`` (each that changes something) is recorded
    in the admin audit trail, done or refused, before it is answered."""

    async def guarded(call: Call) -> Any:
        _require_admin(call)
        if not action:
            return await fn(call)
        try:
            result = await fn(call)
        except (ApiError, Reject) as refused:
            await _record(call, action, refused)
            raise
        await _record(call, action, result)
        return result

    return endpoint(guarded, limited=False, when_failed=when_failed)


async def _record(call: Call, action: str, outcome: Any) -> None:
    """Stage the action's entry and wait for its commit: whoever got an answer can find the
    action in the trail. (The action's own rows went in the commit before: an entry in a
    commit of its own, not a change to every handler.)"""
    state = call.state
    agent = adminlog.clean_agent(call.request.headers.get(adminlog.AGENT_HEADER))
    row = adminlog.entry(
        call.now,
        adminlog.token_actor(state.admin_token or ""),
        agent,
        action,
        call.params.data,
        outcome,
    )
    try:
        call.exchange.log_admin(row)
        await call.durable()
    except StoreError:
        if not isinstance(outcome, BaseException):
            raise  # done but not recorded: not acknowledged either (the store failed)


async def create_user(call: Call) -> Any:
    name: str | None = reading(call.params, CreateUserRequest).value("name")
    result = ops.create_user(call.exchange, name, call.now)
    await call.durable()
    return result


async def list_users(call: Call) -> Any:
    return ops.list_users(call.exchange)


async def create_key(call: Call) -> Any:
    req = reading(call.params, CreateKeyRequest)
    ips: list[str] = req.value("ips")
    user_id: int = req.value("userId")
    read_only: bool = req.value("readOnly")
    result = ops.create_key(call.exchange, user_id, read_only, ips, call.now)
    await call.durable()
    return result


async def revoke_key(call: Call) -> Any:
    api_key: str = reading(call.params, RevokeKeyRequest).value("apiKey")
    result = ops.revoke_key(call.exchange, api_key, call.now)
    await call.durable()
    return result


def _texts(req: Reading, *names: str) -> list[str]:
    """Required text parameters, read in order (each rule refuses an absent one)."""
    return [str(req.value(name)) for name in names]


def _transfer(kind: str) -> Callable[[Call], Awaitable[Any]]:
    async def run(call: Call) -> Any:
        req = reading(call.params, TransferRequest)
        asset, amount = _texts(req, "asset", "amount")
        user_id: int = req.value("userId")
        result = ops.transfer(
            call.exchange, kind, user_id, asset, amount, req.value("txId"), call.now
        )
        await call.durable()
        return result

    return run


def _fund(kind: str) -> Callable[[Call], Awaitable[Any]]:
    async def run(call: Call) -> Any:
        req = reading(call.params, FundRequest)
        account, asset, amount = _texts(req, "account", "asset", "amount")
        result = ops.fund(call.exchange, kind, account, asset, amount, req.value("txId"), call.now)
        await call.durable()
        return result

    return run


async def margin_transfer(call: Call) -> Any:
    req = reading(call.params, AdminMarginTransferRequest)
    symbol, asset, amount, source, target = _texts(req, "symbol", "asset", "amount", "from", "to")
    user_id: int = req.value("userId")
    result = ops.margin_transfer(
        call.exchange, user_id, symbol, asset, amount, source, target, call.now
    )
    await call.durable()
    return result


async def futures_transfer(call: Call) -> Any:
    req = reading(call.params, AdminFuturesTransferRequest)
    asset, amount, source, target = _texts(req, "asset", "amount", "from", "to")
    user_id: int = req.value("userId")
    result = ops.futures_transfer(call.exchange, user_id, asset, amount, source, target, call.now)
    await call.durable()
    return result


async def index_price(call: Call) -> Any:
    req = reading(call.params, AdminIndexPriceRequest)
    contract, price = _texts(req, "contract", "price")
    feed: str = req.value("feed") or ""
    result = ops.set_index_price(call.exchange, contract, price, call.now, feed)
    await call.durable()
    return result


async def index_sources(call: Call) -> Any:
    (contract,) = _texts(reading(call.params, AdminIndexQuery), "contract")
    return ops.index_sources(call.exchange, contract, call.now)


async def margin_account(call: Call) -> Any:
    req = reading(call.params, AdminMarginQuery)
    (symbol,) = _texts(req, "symbol")
    user_id: int = req.value("userId")
    return await call.once_durable(ops.margin_view(call.exchange, user_id, symbol.upper()))


async def system(call: Call) -> Any:
    return await call.once_durable(ops.system_balances(call.exchange))


async def balances(call: Call) -> Any:
    user_id: int = reading(call.params, BalancesQuery).value("userId")
    return await call.once_durable(ops.balances(call.exchange, user_id))


async def markets(call: Call) -> Any:
    return ops.markets(call.exchange)


async def audit(call: Call) -> Any:
    store_problems = await call.state.read_now(ops.audit_store, call.exchange)
    replica = await call.state.read_now(ops.replica_from_tables, call.exchange)
    await call.durable()
    while call.state.committer.busy():  # a commit in flight is in neither the journal's
        await call.durable()  # head nor the pending batch yet
    # On the loop from here: no command runs meanwhile.
    memory = ops.audit_memory(call.exchange)
    store_problems += ops.audit_journal(call.exchange, replica)
    report = ops.audit_report(memory, store_problems)
    call.exchange.stats.audit = (call.now, bool(report["ok"]), len(report["problems"]))
    return report


async def storage(call: Call) -> Any:
    """The store's tables (rows, bytes), its space, and the retention in force."""
    report = await call.state.read_now(ops.storage, call.exchange)
    pruner = call.state.pruner
    report["retention"]["prunedSinceStart"] = dict(pruner.totals) if pruner else {}
    return report


async def status(call: Call) -> Any:
    return ops.status(call.exchange)


def _simulation(call: Call) -> Simulation:
    sim = call.state.simulation
    if sim is None:
        raise ApiError(Code.UNSUPPORTED, "this server runs without simulation settings")
    return sim


def sim_view(call: Call) -> dict[str, Any]:
    sim = call.state.simulation
    faults = call.state.faults
    view: dict[str, Any] = sim.status() if sim is not None else {"running": False}
    view["faults"] = faults.status() if faults is not None else {"enabled": False}
    return view


async def sim_status(call: Call) -> Any:
    return sim_view(call)


async def sim_start(call: Call) -> Any:
    simulation = _simulation(call)
    started = simulation.start()
    if started and (error := await simulation.set_up()):
        raise ApiError(Code.INTERNAL, f"the simulation stopped as it started: {error}", status=500)
    return {"started": started, **sim_view(call)}


async def sim_stop(call: Call) -> Any:
    stopped = await _simulation(call).stop(withdraw_quotes=True)
    return {"stopped": stopped, **sim_view(call)}


async def funding_now(call: Call) -> Any:
    contract: str | None = reading(call.params, AdminFundingRequest).value("contract")
    result = sandbox.funding_now(call.exchange, contract, call.now)
    await call.durable()
    return result


async def interest_now(call: Call) -> Any:
    hours: int = reading(call.params, AdminInterestRequest).value("hours")
    result = sandbox.interest_now(call.exchange, hours, call.now)
    await call.durable()
    return result


async def reset_account(call: Call) -> Any:
    user_id: int = reading(call.params, AdminUserRequest).value("userId")
    result = sandbox.reset_account(call.exchange, user_id, call.now)
    await call.durable()
    return result


async def list_keys(call: Call) -> Any:
    return ops.list_keys(call.exchange)


async def activity(call: Call) -> Any:
    own = call.state.monitor.snapshot()
    gateways = call.state.gateways
    return {
        "markets": ops.market_activity(call.exchange),
        **(gateways.merged(own) if gateways is not None else own),
    }


async def list_gateways(call: Call) -> Any:
    gateways = call.state.gateways
    return {"gateways": gateways.reports() if gateways is not None else []}


ACTIONS = {
    "/users": "user.create",
    "/keys": "key.create",
    "/keys/revoke": "key.revoke",
    "/deposit": "deposit",
    "/withdraw": "withdraw",
    "/system/deposit": "system.deposit",
    "/system/withdraw": "system.withdraw",
    "/margin/transfer": "margin.transfer",
    "/futures/transfer": "futures.transfer",
    "/futures/index-price": "index-price",
    "/sim/start": "sim.start",
    "/sim/stop": "sim.stop",
    "/futures/funding-now": "funding.now",
    "/margin/interest-now": "interest.now",
    "/accounts/reset": "account.reset",
}
"""The admin audit trail's name of each action (the POST at that path), shared with the
CLI's offline commands."""


async def admin_log(call: Call) -> Any:
    req = reading(call.params, AdminLogQuery)
    limit: int = req.value("limit")
    before: int | None = req.value("before")
    return await call.state.read(ops.admin_log, call.exchange, limit, before)


def routes() -> list[Route]:
    table: list[tuple[str, str, Callable[[Call], Awaitable[Any]]]] = [
        ("POST", "/users", create_user),
        ("GET", "/users", list_users),
        ("POST", "/keys", create_key),
        ("POST", "/keys/revoke", revoke_key),
        ("POST", "/deposit", _transfer("deposit")),
        ("POST", "/withdraw", _transfer("withdraw")),
        ("GET", "/balances", balances),
        ("POST", "/system/deposit", _fund("deposit")),
        ("POST", "/system/withdraw", _fund("withdraw")),
        ("GET", "/system", system),
        ("POST", "/margin/transfer", margin_transfer),
        ("GET", "/margin/account", margin_account),
        ("POST", "/futures/transfer", futures_transfer),
        ("POST", "/futures/index-price", index_price),
        ("GET", "/futures/index", index_sources),
        ("GET", "/markets", markets),
        ("GET", "/audit", audit),
        ("GET", "/storage", storage),
        ("GET", "/keys", list_keys),
        ("GET", "/activity", activity),
        ("GET", "/gateways", list_gateways),
        ("GET", "/sim", sim_status),
        ("POST", "/sim/start", sim_start),
        ("POST", "/sim/stop", sim_stop),
        ("POST", "/futures/funding-now", funding_now),
        ("POST", "/margin/interest-now", interest_now),
        ("POST", "/accounts/reset", reset_account),
        ("GET", "/admin-log", admin_log),
    ]
    out = [
        Route(
            PREFIX + path,
            admin(fn, action=ACTIONS[path] if method == "POST" else ""),
            methods=[method],
        )
        for method, path, fn in table
    ]
    out.append(Route(PREFIX + "/status", admin(status, when_failed=True), methods=["GET"]))
    return out
