"""The plumbing every endpoint shares: read the request once, authenticate, hand checked
parameters to the handler, render its result or the catalogue's error."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from tradehall.api.auth import DEFAULT_RECV_WINDOW, MAX_RECV_WINDOW, authenticate
from tradehall.api.errors import ApiError, error_response
from tradehall.api.params import Params
from tradehall.api.ratelimit import RateLimiter
from tradehall.api.replay import MemoryReplayGuard, ReplayGuard, check_replay
from tradehall.codes import Code, Reject
from tradehall.exchange import ApiKey, Exchange
from tradehall.store.base import StoreError
from tradehall.store.writer import GroupCommitter

log = logging.getLogger("tradehall.api")

MAX_BODY_BYTES = 64 * 1024
_decoder = msgspec.json.Decoder(float_hook=Decimal)
T = TypeVar("T")


@dataclass
class AppState:
    """What the handlers reach: the exchange, its committer, the clock, the guards and a
    reader thread."""

    exchange: Exchange
    committer: GroupCommitter
    clock: Callable[[], int]
    admin_token: str | None = None
    limiter: RateLimiter | None = None
    replay: ReplayGuard = field(default_factory=MemoryReplayGuard)
    reader: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="tradehall-reader")
    )

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a store read on the reader thread (history queries)."""
        return await asyncio.get_running_loop().run_in_executor(self.reader, fn, *args)


@dataclass(slots=True)
class Call:
    state: AppState
    params: Params
    now: int
    key: ApiKey | None
    request: Request
    account_id: int | None = None
    """The ledger account the call acts on, when not the key owner's spot account (margin)."""

    @property
    def exchange(self) -> Exchange:
        return self.state.exchange

    @property
    def account(self) -> int:
        if self.account_id is not None:
            return self.account_id
        assert self.key is not None
        return self.key.user_id

    @property
    def user(self) -> int:
        assert self.key is not None
        return self.key.user_id

    async def durable(self) -> None:
        await self.state.committer.durable()


Handler = Callable[[Call], Awaitable[Any]]


def json_response(content: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(content), status_code=status, media_type="application/json")


async def read_body(request: Request) -> bytes:
    """The body, refused once it exceeds MAX_BODY_BYTES (without reading the rest)."""
    too_large = ApiError(Code.BAD_PARAM, f"request body is larger than {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


class _DuplicateKey(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        raise _DuplicateKey
    return mapping


def has_duplicate_keys(body: bytes) -> bool:
    """True when any JSON object in ``body`` (nested ones included) repeats a key."""
    try:
        json.loads(body, object_pairs_hook=_unique_pairs)
    except _DuplicateKey:
        return True
    except ValueError:
        return False
    return False


async def read_params(request: Request) -> tuple[Params, bytes]:
    if request.method == "POST":
        content_type = request.headers.get("content-type", "")
        if "application/json" not in content_type.lower():
            raise ApiError(Code.CONTENT_TYPE, "Content-Type must be application/json")
        body = await read_body(request)
        if not body.strip():
            return Params({}), body
        try:
            data = _decoder.decode(body)
        except msgspec.DecodeError:
            raise ApiError(Code.BAD_PARAM, "request body is not valid JSON") from None
        if not isinstance(data, dict):
            raise ApiError(Code.BAD_PARAM, "request body must be a JSON object")
        # Every key is followed by a colon, so when colons and keys are as many, no key can
        # repeat; otherwise (nested objects, colons in strings) check exactly, off the fast path.
        if body.count(b":") != len(data) and has_duplicate_keys(body):
            raise ApiError(Code.TOO_MANY_PARAMS, "a parameter was sent more than once")
        return Params(data), body
    raw_query = request.scope.get("query_string", b"").decode("latin-1")
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        raise ApiError(Code.TOO_MANY_PARAMS, "a parameter was sent more than once")
    return Params(query), b""


def endpoint(
    handler: Handler,
    *,
    name: str = "",
    signed: bool = False,
    trade: bool = False,
    limited: bool = True,
    when_failed: bool = False,
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler. ``name`` ("METHOD /path") selects its rate limit; ``limited=False``
    exempts it (the admin API). After a failed commit every endpoint answers 503 / -1001
    (memory may hold what the store lost), except those marked ``when_failed``."""

    async def run(request: Request) -> Response:
        state: AppState = request.app.state.tradehall
        ip = request.client.host if request.client else "unknown"
        limiter = state.limiter if limited else None
        try:
            if limiter is not None:
                await limiter.admit_ip(ip)
                if not signed:
                    await limiter.admit_public(ip)
            if not when_failed:
                state.exchange.check_writable()
            params, body = await read_params(request)
            now = state.clock()
            key = None
            if signed:
                window = params.integer(
                    "recvWindow", default=DEFAULT_RECV_WINDOW, minimum=1, maximum=MAX_RECV_WINDOW
                )
                assert window is not None
                key = authenticate(
                    headers=request.headers,
                    method=request.method,
                    path=request.scope["path"],
                    raw_query=request.scope.get("query_string", b"").decode("latin-1"),
                    body=body,
                    now_ms=now,
                    recv_window=window,
                    find_key=state.exchange.keys.get,
                    client_ip=request.client.host if request.client else None,
                    trade=trade,
                )
                if limiter is not None:
                    await limiter.admit_key(name, key.row.api_key, ip)
                await check_replay(
                    state.replay,
                    request.headers["x-ch-sign"],
                    int(request.headers["x-ch-ts"]),
                    window,
                    now,
                )
            return json_response(await handler(Call(state, params, now, key, request)))
        except ApiError as exc:
            return error_response(exc.code, exc.msg, exc.status, exc.headers)
        except Reject as exc:
            return error_response(exc.code, exc.msg, 400)
        except StoreError as exc:
            return error_response(
                Code.INTERNAL,
                f"the store failed; no write is accepted until the server restarts ({exc})",
                503,
            )
        except Exception:
            log.exception("unexpected error in %s %s", request.method, request.url.path)
            return error_response(Code.UNKNOWN, "unknown error", 500)

    return run
