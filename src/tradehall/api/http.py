"""The plumbing every endpoint shares: read the request once, authenticate, hand checked
parameters to the handler, render its result or the catalogue's error."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from logging import INFO
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import parse_qsl

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope

from tradehall.api import wire
from tradehall.api.auth import DEFAULT_RECV_WINDOW, MAX_AHEAD_MS, authenticate
from tradehall.api.errors import ApiError, error_response
from tradehall.api.monitor import Monitor
from tradehall.api.params import Params
from tradehall.api.projection_wait import ProjectionWait
from tradehall.api.ratelimit import RateLimiter
from tradehall.api.reading import reading
from tradehall.api.replay import MemoryReplayGuard, ReplayGuard, check_replay
from tradehall.api.requests import SignedQuery
from tradehall.codes import Code, Reject
from tradehall.exchange import ApiKey, Exchange
from tradehall.logs import ACCESS
from tradehall.store.base import StoreError
from tradehall.store.journaled import READ_AFTER, JournaledStore, ProjectionBehind
from tradehall.store.writer import GroupCommitter

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from tradehall.retention import Pruner
    from tradehall.sim.faults import FaultInjector
    from tradehall.sim.runner import Simulation
    from tradehall.stream.hub import Hub

log = logging.getLogger("tradehall.api")
_ACCESS = ACCESS

MAX_BODY_BYTES = 64 * 1024
_decoder = msgspec.json.Decoder(float_hook=Decimal)
T = TypeVar("T")


class GatewayView(Protocol):
    """What the operator's view shows of the gateway workers in front of this process
    (``tradehall.cluster.gateway_registry`` is one): the API layer knows nothing more of the
    topology that runs it."""

    def reports(self) -> list[dict[str, Any]]:
        """Each worker heard of lately."""
        ...

    def merged(self, activity: dict[str, Any]) -> dict[str, Any]:
        """``activity`` (``Monitor.snapshot``) with every worker's added in."""
        ...


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
    simulation: Simulation | None = None
    """The market simulation (``tradehall sim``), when the server was given its settings."""
    pruner: Pruner | None = None
    """The retention task (``[retention]``)."""
    faults: FaultInjector | None = None
    """The fault injector wrapped around the app, when fault injection is configured."""
    max_ahead_ms: int = MAX_AHEAD_MS
    """How far ahead of the clock a signed request's timestamp may be (exclusive)."""
    views: dict[Any, tuple[Any, bytes]] = field(default_factory=dict)
    """Rendered answers kept while what they show is unchanged (``spot.depth``), by key:
    (validity stamp, encoded bytes)."""
    monitor: Monitor = field(default_factory=Monitor)
    """Request and error rates and the recent errors, for the operator view."""
    admin_remote: bool = False
    """The admin API (and the operator page) answer callers off loopback too (config
    ``[server] admin_remote``); the token is required either way."""
    hub: Hub | None = None
    """The WebSocket streams' source (served here, or relayed to gateways by the engine
    process)."""
    gateways: GatewayView | None = None
    """In the engine process: the gateways' reports, added to the operator's view (the
    process that runs the app behind gateways provides it)."""
    metrics: CollectorRegistry | None = None
    """What ``GET /metrics`` shows (``tradehall.metrics``)."""
    draining: bool = False
    """The server was asked to stop: ``/readyz`` answers 503 from then on."""
    _projection: ProjectionWait | None = None
    readiness_checks: list[Callable[[], str | None]] = field(default_factory=list)
    """More conditions of readiness (the engine process's NATS link): each gives the reason
    it is not met, or None."""

    async def not_ready(self) -> str | None:
        """Why this process cannot serve requests now, or None (``GET /readyz``)."""
        if self.draining:
            return "draining: the server is stopping"
        failure = self.exchange.failure
        if failure is not None:
            return f"the store takes no writes until a restart ({failure})"
        for check in self.readiness_checks:
            reason = check()
            if reason is not None:
                return reason
        return await self.limiter.unreachable() if self.limiter is not None else None

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a history read on the reader thread, once the tables hold every journal record
        committed when it was asked (the caller's own writes): the wait is on the event loop
        (``api.projection_wait``), the read runs knowing it is over."""
        loop = asyncio.get_running_loop()
        store = self.exchange.store
        if not isinstance(store, JournaledStore):
            return await loop.run_in_executor(self.reader, fn, *args)
        target = store.head
        if self._projection is None:
            self._projection = ProjectionWait(store, self.reader)
        await self._projection.until(target)
        context = contextvars.copy_context()
        context.run(READ_AFTER.set, target)
        return await loop.run_in_executor(self.reader, partial(context.run, fn, *args))

    async def read_now(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a store read on the reader thread without waiting for the projections (the
        tables as they stand: the audit, storage figures)."""
        return await asyncio.get_running_loop().run_in_executor(self.reader, fn, *args)

    # The ``Front`` an endpoint admits requests through: here, in the process of the exchange.

    def check_writable(self) -> None:
        self.exchange.check_writable()

    def find_key(self, api_key: str) -> ApiKey | None:
        return self.exchange.keys.get(api_key)

    async def perform(
        self,
        spec: EndpointSpec,
        params: Params,
        now: int,
        key: ApiKey | None,
        scope: Scope,
        receive: Receive,
    ) -> bytes | Response:
        if key is not None:
            admit_key_use(self.exchange, key, now)
        return encoded(await spec.handler(Call(self, params, now, key, scope, receive)))


def admit_key_use(exchange: Exchange, key: ApiKey, now: int) -> None:
    """A signed request with ``key``, admitted: the use of a self-service key counts as its
    activity; one unused for longer than ``[sandbox] key_expiry_s`` is refused (-2015)."""
    if not exchange.selfservice.use(exchange.note_state, key.row.api_key, now):
        raise ApiError(
            Code.BAD_KEY,
            "this API key expired: a self-service key unused for more than"
            f" {exchange.config.sandbox.key_expiry_s} s is refused",
            status=401,
        )


@dataclass(slots=True)
class Call:
    state: AppState
    params: Params
    now: int
    key: ApiKey | None
    scope: Scope
    receive: Receive
    account_id: int | None = None
    """The ledger account the call acts on, when not the key owner's spot account (margin)."""
    _request: Request | None = None

    @property
    def request(self) -> Request:
        """The Starlette view of the request (built on first use; the body is already read)."""
        if self._request is None:
            self._request = Request(self.scope, self.receive)
        return self._request

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

    def durable(self) -> Awaitable[None]:
        """Wait until everything applied so far is committed."""
        return self.state.committer.durable()

    async def once_durable(self, answer: T) -> T:
        """``answer``, once what it shows is committed. An answer read from memory must be
        built before the wait, not after: while a request waits, later commands are applied
        to memory, and they are not yet durable (a crash could still undo them)."""
        await self.state.committer.durable()
        return answer


Handler = Callable[[Call], Awaitable[Any]]
"""Returns what the answer encodes to JSON, or ``bytes``: the answer's JSON already encoded."""


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """An endpoint as ``endpoint()`` was told it: its handler and how requests reach it."""

    handler: Handler
    name: str
    signed: bool
    trade: bool
    limited: bool
    when_failed: bool


class Front(Protocol):
    """What an endpoint admits a request through (the clock, the guards, the keys) and hands
    it to: ``AppState`` runs the handler in this process; a gateway forwards it to the engine
    process (``tradehall.cluster``)."""

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def limiter(self) -> RateLimiter | None: ...

    @property
    def replay(self) -> ReplayGuard: ...

    @property
    def monitor(self) -> Monitor: ...

    @property
    def max_ahead_ms(self) -> int: ...

    def check_writable(self) -> None: ...

    def find_key(self, api_key: str) -> ApiKey | None: ...

    async def not_ready(self) -> str | None: ...

    async def perform(
        self,
        spec: EndpointSpec,
        params: Params,
        now: int,
        key: ApiKey | None,
        scope: Scope,
        receive: Receive,
    ) -> bytes | Response: ...


Answer = Callable[[Front, Scope, Receive], Awaitable["bytes | Response"]]
"""An endpoint's work on one request: the JSON body of a 200 answer, or an error Response."""

JSON = "application/json"
JSON_CONTENT_TYPE = (b"content-type", b"application/json")
_encode = msgspec.json.Encoder(enc_hook=wire.enc_hook).encode
"""msgspec's encoder, which also writes futures numbers (``wire.Num``) as their exact text."""


def encoded(result: Any) -> bytes:
    """A handler's result as the answer's JSON (``bytes`` is already that)."""
    return result if type(result) is bytes else _encode(result)


def json_response(content: Any, status: int = 200) -> Response:
    return Response(_encode(content), status_code=status, media_type=JSON)


def recv_window(params: Params) -> int:
    """A signed request's recvWindow, as ``SignedQuery`` reads it (every signed request type
    declares it so); when absent, the usual case, its default without building a Reading."""
    if params.data.get("recvWindow") is None:
        return DEFAULT_RECV_WINDOW
    window: int = reading(params, SignedQuery).value("recvWindow")
    return window


def _too_large() -> ApiError:
    return ApiError(Code.BAD_PARAM, f"request body is larger than {MAX_BODY_BYTES} bytes")


async def read_body(receive: Receive, declared: bytes | None) -> bytes:
    """The body, refused once it exceeds MAX_BODY_BYTES (without reading the rest);
    ``declared`` is the Content-Length header, if sent."""
    if declared is not None:
        text = declared.decode("latin-1")
        if text.isascii() and text.isdigit() and int(text) > MAX_BODY_BYTES:
            raise _too_large()
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):
        body: bytes = message.get("body", b"")  # the usual case: one message
        if len(body) > MAX_BODY_BYTES:
            raise _too_large()
        return body
    chunks = []
    size = 0
    while True:
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise _too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()
        message = await receive()


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
    except (ValueError, RecursionError):
        return False
    return False


def parse_body(body: bytes) -> Params:
    if not body.strip():
        return Params({})
    try:
        data = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        if "out of range" in str(exc):  # valid JSON: an integer of thousands of digits
            raise ApiError(
                Code.BAD_PARAM, "a number in the request body is too large to be a value"
            ) from None
        raise ApiError(Code.BAD_PARAM, "request body is not valid JSON") from None
    except (UnicodeDecodeError, RecursionError):
        # Not UTF-8, or nested too deep to be a request.
        raise ApiError(Code.BAD_PARAM, "request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(Code.BAD_PARAM, "request body must be a JSON object")
    # Every key is followed by a colon, so when colons and keys are as many, no key can
    # repeat; otherwise (nested objects, colons in strings) check exactly, off the fast path.
    if body.count(b":") != len(data) and has_duplicate_keys(body):
        raise ApiError(Code.TOO_MANY_PARAMS, "a parameter was sent more than once")
    return Params(data)


_NO_PARAMS = Params({})


def parse_query(raw_query: str) -> Params:
    if not raw_query:
        return _NO_PARAMS
    if "%" in raw_query or "+" in raw_query:
        pairs = parse_qsl(raw_query, keep_blank_values=True)
    else:  # nothing to unquote: what parse_qsl does, minus its generality
        pairs = [(n, v) for n, _, v in (f.partition("=") for f in raw_query.split("&") if f)]
    query = dict(pairs)
    if len(query) != len(pairs):
        raise ApiError(Code.TOO_MANY_PARAMS, "a parameter was sent more than once")
    return Params(query)


def header_map(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by (as sent, lower-case) name; the first of repeated ones wins,
    as with Starlette's ``Headers``."""
    raw = scope["headers"]
    return dict(reversed(raw if type(raw) is list else list(raw)))


_NO_HEADERS: dict[bytes, bytes] = {}
"""What an unsigned GET reads of the headers: nothing."""

_ANSWERS: weakref.WeakKeyDictionary[Callable[..., Any], Answer] = weakref.WeakKeyDictionary()
_SPECS: weakref.WeakKeyDictionary[Callable[..., Any], EndpointSpec] = weakref.WeakKeyDictionary()


def answer_of(route_endpoint: Callable[..., Any]) -> Answer | None:
    """The raw-ASGI form of an ``endpoint()`` (None for anything else), for the app's exact
    path dispatch in front of Starlette's router."""
    return _ANSWERS.get(route_endpoint)


def spec_of(route_endpoint: Callable[..., Any]) -> EndpointSpec | None:
    """What ``endpoint()`` was told for this route endpoint (None for anything else)."""
    return _SPECS.get(route_endpoint)


def failure_response(state: Front, exc: Exception, scope: Scope) -> Response:
    """The catalogue's answer to what a request's handling raised (counted by the monitor)."""
    if isinstance(exc, ApiError):
        return failed_answer(state.monitor, scope, exc.code, exc.msg, exc.status, exc.headers)
    if isinstance(exc, Reject):
        return failed_answer(state.monitor, scope, exc.code, exc.msg, 400)
    if isinstance(exc, ProjectionBehind):  # a history read: nothing is wrong but time
        return failed_answer(state.monitor, scope, Code.INTERNAL, str(exc), 503)
    if isinstance(exc, StoreError):
        msg = f"writes are stopped until the server restarts ({exc})"
        return failed_answer(state.monitor, scope, Code.INTERNAL, msg, 503)
    log.exception(
        "unexpected error in %s %s",
        scope.get("method"),
        scope.get("path"),
        exc_info=exc,
        extra={"request_id": scope.get("request_id"), "endpoint": scope.get("path")},
    )
    return failed_answer(state.monitor, scope, Code.UNKNOWN, "unknown error", 500)


def failed_answer(
    monitor: Monitor,
    scope: Scope,
    code: int,
    msg: str,
    status: int,
    headers: dict[str, str] | None = None,
) -> Response:
    """The error answer, counted and kept among the recent errors."""
    client = scope.get("client")
    source = str(client[0]) if client else ""
    monitor.error(scope.get("method", ""), scope.get("path", ""), status, code, msg, source)
    return error_response(code, msg, status, headers)


def unserved_answer(
    monitor: Monitor, scope: Scope, endpoint: str, method: str, code: int, msg: str, status: int
) -> Response:
    """The error answer to a request no ``endpoint()`` handler served (an unknown path, a
    refused ``/metrics`` scrape, a WebSocket handshake on no stream): a request counted under
    ``endpoint`` (its route, or ``unmatched``) and ``method``, an access record, and an error
    among the recent ones, as an endpoint's own refusal gets."""
    monitor.requests_total += 1
    if monitor.detailed:
        monitor.count(endpoint, method, status)
    if _ACCESS.isEnabledFor(INFO):
        sent = scope.get("method", method)
        extra = {
            "request_id": scope.get("request_id"),
            "endpoint": scope.get("path"),
            "method": sent,
            "code": status,
        }
        _ACCESS.info("%s %s %d", sent, endpoint, status, extra=extra)
    return failed_answer(monitor, scope, code, msg, status)


def _access(scope: Scope, out: bytes | Response, key: ApiKey | None, seconds: float) -> None:
    """The access log's record of one answer (``--access-log``)."""
    status = 200 if type(out) is bytes else out.status_code  # type: ignore[union-attr]
    _ACCESS.info(
        "%s %s %d",
        scope["method"],
        scope["path"],
        status,
        extra={
            "request_id": scope.get("request_id"),
            "user_id": key.user_id if key is not None else None,
            "endpoint": scope["path"],
            "method": scope["method"],
            "code": status,
            "duration_ms": round(seconds * 1000, 3),
        },
    )


def endpoint(
    handler: Handler,
    *,
    name: str = "",
    signed: bool = False,
    trade: bool = False,
    limited: bool = True,
    when_failed: bool = False,
    creates_account: bool = False,
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler. ``name`` ("METHOD /path") selects its rate limit; ``limited=False``
    exempts it (the admin API); ``creates_account`` adds the self-service accounts' limits
    (last, once the request is admitted). After a failed commit every endpoint answers 503 /
    -1001 (memory may hold what the store lost), except those marked ``when_failed``.

    The request is read straight from the ASGI scope (headers once, into a dict). The app
    calls the raw form (``answer_of``) for its fixed paths; Starlette calls the returned
    function for anything it routes itself."""

    spec = EndpointSpec(handler, name, signed, trade, limited, when_failed)

    async def answer(state: Front, scope: Scope, receive: Receive) -> bytes | Response:
        started = perf_counter()
        client = scope.get("client")
        ip = client[0] if client else "unknown"
        limiter = state.limiter if limited else None
        monitor = state.monitor
        monitor.requests_total += 1
        out: bytes | Response
        key: ApiKey | None = None
        try:
            if limiter is not None:
                await limiter.admit_ip(ip)
                if not signed:
                    await limiter.admit_public(ip)
            if not when_failed:
                state.check_writable()
            method = scope["method"]
            headers = header_map(scope) if signed or method == "POST" else _NO_HEADERS
            if method == "POST":
                # Checked before the body is read: the media type before any parameter
                # (";charset=...") must be application/json, in any case.
                content_type = headers.get(b"content-type", b"")
                if content_type.split(b";", 1)[0].strip().lower() != b"application/json":
                    raise ApiError(Code.CONTENT_TYPE, "Content-Type must be application/json")
                body = await read_body(receive, headers.get(b"content-length"))
                params = parse_body(body)
                raw_query = ""
            else:
                body = b""
                query = scope.get("query_string", b"")
                raw_query = query.decode("latin-1") if query else ""
                params = parse_query(raw_query)
            now = state.clock()
            if signed:
                window = recv_window(params)
                if method == "POST":
                    query = scope.get("query_string", b"")
                    raw_query = query.decode("latin-1") if query else ""
                api_key = headers.get(b"x-ch-apikey")
                ts = headers.get(b"x-ch-ts")
                signature = headers.get(b"x-ch-sign")
                try:
                    key = authenticate(
                        api_key=api_key.decode("latin-1") if api_key is not None else None,
                        ts_text=ts.decode("latin-1") if ts is not None else None,
                        signature=signature.decode("latin-1") if signature is not None else None,
                        method=method,
                        path=scope["path"],
                        raw_query=raw_query,
                        body=body,
                        now_ms=now,
                        recv_window=window,
                        find_key=state.find_key,
                        client_ip=client[0] if client else None,
                        trade=trade,
                        max_ahead_ms=state.max_ahead_ms,
                    )
                except ApiError as refused:
                    monitor.auth_refused(refused.code)
                    raise
                assert ts is not None and signature is not None  # authenticate checked them
                if limiter is not None:
                    await limiter.admit_key(name, key.row.api_key, ip)
                try:
                    await check_replay(
                        state.replay,
                        signature.decode("latin-1"),
                        int(ts.decode("latin-1")),
                        window,
                        now,
                    )
                except ApiError:
                    monitor.refused("replay", "")
                    raise
            if creates_account and limiter is not None:
                await limiter.admit_account(ip)
            out = await state.perform(spec, params, now, key, scope, receive)
        except Exception as exc:
            out = failure_response(state, exc, scope)
        if monitor.detailed:
            status = 200 if type(out) is bytes else out.status_code  # type: ignore[union-attr]
            monitor.observe(scope["path"], scope["method"], status, perf_counter() - started)
        if _ACCESS.isEnabledFor(INFO):
            _access(scope, out, key, perf_counter() - started)
        return out

    async def run(request: Request) -> Response:
        out = await answer(request.app.state.tradehall, request.scope, request.receive)
        if type(out) is bytes:
            return Response(out, media_type=JSON)
        assert isinstance(out, Response)
        return out

    _ANSWERS[run] = answer
    _SPECS[run] = spec
    return run
