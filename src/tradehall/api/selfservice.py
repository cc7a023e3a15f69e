"""Self-service accounts (extension, ``[sandbox] self_service``; docs/api.md): the public
endpoints under /sandbox/v1, served only when the setting is on (otherwise they are unknown
paths). Creating an account is public and rate-limited per IP and globally; the faucet and
the reset are signed with the account's own key."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from msgspec import Meta
from starlette.routing import Route

from tradehall import selfservice
from tradehall.api import wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, endpoint
from tradehall.api.reading import reading
from tradehall.api.requests import CreateAccountRequest, SandboxRequest
from tradehall.codes import Code, Reject

log = logging.getLogger("tradehall.sandbox")

PREFIX = "/sandbox/v1"
INFO = PREFIX + "/info"
ACCOUNTS = PREFIX + "/accounts"
FAUCET = PREFIX + "/faucet"
RESET = PREFIX + "/account/reset"

Amounts = Annotated[dict[str, wire.DecimalText], Meta(description="Amounts by asset.")]
Count = Annotated[int, Meta(ge=0)]


class SandboxInfo(wire.Wire, frozen=True):
    """What a new self-service account gets, and its limits."""

    self_service: bool
    spot: Amounts
    futures: Annotated[Amounts, Meta(description="Futures funds by margin coin.")]
    faucet_per_day: Count
    max_accounts: Count
    key_expiry_seconds: Annotated[
        int, Meta(ge=1, description="A key unused (no signed request) this long is refused.")
    ]


class SandboxAccount(wire.Wire, frozen=True):
    """A new self-service account: its TRADE key's secret is shown here, and never again."""

    user_id: wire.Id
    api_key: str
    secret: str
    spot: Amounts
    futures: Amounts
    faucet_per_day: Count
    key_expiry_seconds: Annotated[int, Meta(ge=1)]


class SandboxDeposited(wire.Wire, frozen=True):
    spot: Amounts
    futures: Amounts


class SandboxFaucet(wire.Wire, frozen=True):
    """What the faucet deposited (only what was below the starting balances)."""

    user_id: wire.Id
    deposited: SandboxDeposited
    used_today: Count
    left_today: Count


class SandboxReset(wire.Wire, frozen=True):
    """The account after its reset (as ``tradehall account reset`` answers)."""

    user_id: wire.Id
    cancelled_orders: Count
    closed_positions: Count
    spot: Amounts
    futures: Amounts


def _refused(exc: Reject, retry_after: int) -> ApiError | Reject:
    """The catalogue's answer: 429 with ``Retry-After`` for a limit, 403 for an account the
    endpoint does not serve."""
    if exc.code == Code.TOO_MANY_REQUESTS:
        return ApiError(exc.code, exc.msg, 429, {"Retry-After": str(retry_after)})
    if exc.code == Code.BAD_KEY:
        return ApiError(exc.code, exc.msg, 403)
    return exc


async def info(call: Call) -> Any:
    return selfservice.settings_view(call.exchange)


async def create_account(call: Call) -> Any:
    reading(call.params, CreateAccountRequest)
    try:
        result = selfservice.create_account(call.exchange, call.now)
    except Reject as exc:
        raise _refused(exc, selfservice.seconds_to_next_expiry(call.exchange, call.now)) from None
    await call.durable()
    client = call.scope.get("client")
    log.info(
        "self-service account %d created for %s",
        result["userId"],
        client[0] if client else "unknown",
        extra={"request_id": call.scope.get("request_id"), "user_id": result["userId"]},
    )
    return result


def _own(action: Callable[..., dict[str, Any]]) -> Callable[[Call], Awaitable[Any]]:
    """A signed request acting on the caller's own self-service account."""

    async def run(call: Call) -> Any:
        reading(call.params, SandboxRequest)
        try:
            result = action(call.exchange, call.user, call.now)
        except Reject as exc:
            raise _refused(exc, selfservice.seconds_to_next_day(call.now)) from None
        await call.durable()
        return result

    return run


def routes() -> list[Route]:
    return [
        Route(INFO, endpoint(info, name=f"GET {INFO}"), methods=["GET"]),
        Route(
            ACCOUNTS,
            endpoint(create_account, name=f"POST {ACCOUNTS}", creates_account=True),
            methods=["POST"],
        ),
        *(
            Route(
                path,
                endpoint(_own(fn), name=f"POST {path}", signed=True, trade=True),
                methods=["POST"],
            )
            for path, fn in ((FAUCET, selfservice.faucet), (RESET, selfservice.reset))
        ),
    ]
