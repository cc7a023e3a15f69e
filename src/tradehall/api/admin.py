"""The local admin API (extension, under /admin/v1): what the operator CLI uses while a server
runs. Reachable only from loopback and only with the token kept in the data folder."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tradehall import operations as ops
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, endpoint
from tradehall.api.params import Params
from tradehall.codes import Code

PREFIX = "/admin/v1"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})


def _require_admin(call: Call) -> None:
    request = call.request
    host = request.client.host if request.client else None
    if host not in LOOPBACK and not (host or "").startswith("127."):
        raise ApiError(Code.BAD_KEY, "the admin API is reachable from loopback only", status=403)
    token = call.state.admin_token
    header = request.headers.get("authorization", "")
    given = header[7:] if header.lower().startswith("bearer ") else ""
    if not token or not given or not hmac.compare_digest(given.encode(), token.encode()):
        raise ApiError(Code.BAD_KEY, "missing or invalid admin token", status=401)


def admin(
    fn: Callable[[Call], Awaitable[Any]], *, when_failed: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    async def guarded(call: Call) -> Any:
        _require_admin(call)
        return await fn(call)

    return endpoint(guarded, limited=False, when_failed=when_failed)


def _user_id(params: Params) -> int:
    user_id = params.integer("userId", minimum=0)
    if user_id is None:
        raise params.missing("userId")
    return user_id


def _bool(params: Params, name: str) -> bool:
    value = params.raw(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise params.malformed(name, "must be true or false")


def _given_text(call: Call, name: str) -> str | None:
    """A text field as sent: an empty string stays empty (operations refuse it) rather than
    counting as absent, so the admin API answers as the offline CLI does."""
    value = call.params.data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise call.params.malformed(name, "must be a string")
    return value


async def create_user(call: Call) -> Any:
    result = ops.create_user(call.exchange, _given_text(call, "name"), call.now)
    await call.durable()
    return result


async def list_users(call: Call) -> Any:
    return ops.list_users(call.exchange)


async def create_key(call: Call) -> Any:
    ips = call.params.raw("ips") or []
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise call.params.malformed("ips", "must be an array of IP addresses or CIDR blocks")
    result = ops.create_key(
        call.exchange, _user_id(call.params), _bool(call.params, "readOnly"), ips, call.now
    )
    await call.durable()
    return result


async def revoke_key(call: Call) -> Any:
    api_key = _given_text(call, "apiKey")
    if api_key is None:
        raise call.params.missing("apiKey")
    result = ops.revoke_key(call.exchange, api_key, call.now)
    await call.durable()
    return result


def _transfer(kind: str) -> Callable[[Call], Awaitable[Any]]:
    async def run(call: Call) -> Any:
        params = call.params
        asset = params.text("asset", required=True)
        amount = params.text("amount", required=True)
        assert asset is not None and amount is not None
        result = ops.transfer(
            call.exchange, kind, _user_id(params), asset, amount, params.text("txId"), call.now
        )
        await call.durable()
        return result

    return run


def _fund(kind: str) -> Callable[[Call], Awaitable[Any]]:
    async def run(call: Call) -> Any:
        params = call.params
        account = params.text("account", required=True)
        asset = params.text("asset", required=True)
        amount = params.text("amount", required=True)
        assert account is not None and asset is not None and amount is not None
        result = ops.fund(
            call.exchange, kind, account, asset, amount, params.text("txId"), call.now
        )
        await call.durable()
        return result

    return run


async def margin_transfer(call: Call) -> Any:
    params = call.params
    fields = [
        params.text(name, required=True) for name in ("symbol", "asset", "amount", "from", "to")
    ]
    symbol, asset, amount, source, target = (str(f) for f in fields)
    result = ops.margin_transfer(
        call.exchange, _user_id(params), symbol, asset, amount, source, target, call.now
    )
    await call.durable()
    return result


async def margin_account(call: Call) -> Any:
    await call.durable()
    symbol = call.params.text("symbol", required=True)
    assert symbol is not None
    return ops.margin_view(call.exchange, _user_id(call.params), symbol.upper())


async def system(call: Call) -> Any:
    await call.durable()
    return ops.system_balances(call.exchange)


async def balances(call: Call) -> Any:
    await call.durable()
    return ops.balances(call.exchange, _user_id(call.params))


async def markets(call: Call) -> Any:
    return ops.markets(call.exchange)


async def audit(call: Call) -> Any:
    memory = ops.audit_memory(call.exchange)  # on the loop: no command runs meanwhile
    store_problems = await call.state.read(ops.audit_store, call.exchange)
    return ops.audit_report(memory, store_problems)


async def status(call: Call) -> Any:
    return ops.status(call.exchange)


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
        ("GET", "/markets", markets),
        ("GET", "/audit", audit),
    ]
    out = [Route(PREFIX + path, admin(fn), methods=[method]) for method, path, fn in table]
    out.append(Route(PREFIX + "/status", admin(status, when_failed=True), methods=["GET"]))
    return out
