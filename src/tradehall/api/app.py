"""The Starlette application: every area's routes, JSON errors for unknown paths, and the
lifespan that flushes the group committer on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tradehall import logs
from tradehall.api import (
    admin,
    asset,
    futures,
    health,
    margin,
    openapi,
    scrape,
    selfservice,
    spot,
)
from tradehall.api.auth import MAX_AHEAD_MS
from tradehall.api.guard import ANY_HOST, SECURITY_HEADERS, HostRule, host_of, secured
from tradehall.api.http import (
    JSON_CONTENT_TYPE,
    Answer,
    AppState,
    Front,
    answer_of,
    failed_answer,
    unserved_answer,
)
from tradehall.api.monitor import UNMATCHED
from tradehall.api.ratelimit import RateLimiter
from tradehall.api.replay import make_guard
from tradehall.codes import Code
from tradehall.config import LimitSettings
from tradehall.exchange import Exchange
from tradehall.metrics.collectors import (
    ExchangeCollector,
    FanoutCollector,
    FrontCollector,
    SimulationCollector,
)
from tradehall.metrics.exposition import registry_of
from tradehall.retention import Pruner
from tradehall.scheduler import Scheduler
from tradehall.sim.runner import Simulation
from tradehall.sim.settings import SimulationSettings
from tradehall.store.writer import GroupCommitter
from tradehall.stream.hub import Hub
from tradehall.stream.routes import routes as stream_routes
from tradehall.venue import venue_namespace
from tradehall.web import pages

REQUEST_ID = b"x-request-id"


def _with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    """``send``, adding ``header`` to the answer's headers."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), header]
        await send(message)

    return sending


def _request_id(scope: Scope) -> str:
    """The request's id (``tradehall.logs``), kept in the scope for the handlers, the access
    log and a gateway's forward to the engine."""
    given = None
    for name, value in scope["headers"]:
        if name == REQUEST_ID:
            given = value
            break
    rid = scope["request_id"] = logs.request_id(given)
    return rid


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    state: AppState = request.app.state.tradehall
    method = request.method if request.method in _METHODS else "OTHER"
    status = exc.status_code
    code, msg = Code.UNKNOWN, str(exc.detail)
    if status == 405:
        code, msg = Code.UNSUPPORTED, f"{request.method} is not supported here"
    elif status == 404:
        code, msg = Code.UNSUPPORTED, f"unknown path {request.url.path}"
    return unserved_answer(state.monitor, request.scope, UNMATCHED, method, code, msg, status)


class App(Starlette):
    """Starlette, with an exact-path dispatch in front of its router: a request for one of the
    API's fixed paths with a method that path serves goes straight to its endpoint (the
    same code Starlette would reach, minus the middleware stack, the routing scan and the
    Request/Response objects); a WebSocket connection to one of the streams' paths goes
    straight to the stream (with the server's own ``send``, see ``tradehall.stream.direct``).
    Everything else (unknown paths, other methods, HEAD, lifespan, a ``root_path``, an app
    with user middleware) goes through Starlette as usual, so its 404/405 answers and
    ``app.router.routes`` (the OpenAPI listing) are unchanged."""

    _fast: dict[str, dict[str, Answer | None]] | None = None
    _sockets: dict[str, ASGIApp] | None = None
    hosts: HostRule = HostRule()
    """The ``Host`` names answered (``[server] allowed_hosts``); every one by default."""

    def fast_paths(self) -> dict[str, dict[str, Answer | None]]:
        """``{path: {method: answer}}`` for the plain routes before the first route with a
        path parameter, for every method or of another kind, which could match a path out of
        list order; a route of its own (not an ``endpoint``) keeps its place as None, meaning
        Starlette."""
        table: dict[str, dict[str, Answer | None]] = {}
        if self.user_middleware:
            return table
        for route in self.router.routes:
            if type(route) is not Route or "{" in route.path or route.methods is None:
                break
            answer = answer_of(route.endpoint)
            for method in route.methods or ():
                if method != "HEAD":
                    # The first route for a path and method wins, as in Starlette's scan.
                    table.setdefault(route.path, {}).setdefault(method, answer)
        return table

    def socket_paths(self) -> dict[str, ASGIApp]:
        """``{path: app}`` for the WebSocket routes with a plain path, up to the first route
        that could match a WebSocket request out of list order (a mount, a path parameter):
        what Starlette's scan would find for them. The streams get the server's own ``send``
        this way, which every frame to every client goes through."""
        table: dict[str, ASGIApp] = {}
        if self.user_middleware:
            return table
        for route in self.router.routes:
            if type(route) is Route:
                continue  # answers HTTP requests only
            if type(route) is not WebSocketRoute or "{" in route.path:
                break
            table.setdefault(route.path, route.app)
        return table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "lifespan" and not self.hosts.allows(scope):
            await self._refuse_host(scope, receive, send)
            return
        if kind == "websocket" and not scope.get("root_path"):
            sockets = self._sockets
            if sockets is None:
                sockets = self._sockets = self.socket_paths()
            socket = sockets.get(scope["path"])
            if socket is not None:
                scope["app"] = self
                await socket(scope, receive, send)
                return
        elif kind == "http":
            rid = _request_id(scope)
            id_header = (REQUEST_ID, rid.encode())
            fast = self._fast
            if fast is None:
                fast = self._fast = self.fast_paths()
            methods = None if scope.get("root_path") else fast.get(scope["path"])
            if methods is not None:
                answer = methods.get(scope["method"])
                if answer is not None:
                    scope["app"] = self
                    out = await answer(self.state.tradehall, scope, receive)
                    if type(out) is bytes:  # what Response(out, media_type=JSON) would send
                        await send(
                            {
                                "type": "http.response.start",
                                "status": 200,
                                "headers": [
                                    (b"content-length", str(len(out)).encode()),
                                    JSON_CONTENT_TYPE,
                                    *SECURITY_HEADERS,
                                    id_header,
                                ],
                            }
                        )
                        await send({"type": "http.response.body", "body": out})
                    else:
                        assert isinstance(out, Response)
                        await out(scope, receive, secured(_with_header(send, id_header)))
                    return
            await super().__call__(scope, receive, secured(_with_header(send, id_header)))
            return
        await super().__call__(scope, receive, send)

    async def _refuse_host(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request for a host name this server does not serve (a DNS-rebinding page, a
        misdirected client): HTTP 400 with the catalogue's error, a WebSocket handshake
        refused (403)."""
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        state: Front = self.state.tradehall
        state.monitor.requests_total += 1
        shown = host_of(scope)[:100] or "(none)"
        msg = f"host {shown} is not served here (see [server] allowed_hosts)"
        answer = failed_answer(state.monitor, scope, Code.BAD_PARAM, msg, 400)
        await answer(scope, receive, secured(send))


def _not_found(default: ASGIApp) -> ASGIApp:
    """An unknown WebSocket path answers its handshake 404 with the catalogue's error, as an
    unknown HTTP path does (Starlette refuses it 403, which reads as a Host or permission
    problem), where the server can answer a handshake with a response (uvicorn can): with a
    request id, counted and logged as an unmatched request."""

    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket" or "websocket.http.response" not in scope.get(
            "extensions", {}
        ):
            await default(scope, receive, send)
            return
        rid = _request_id(scope)
        state = scope["app"].state.tradehall
        msg = f"unknown path {scope['path'][:200]}"
        answer = unserved_answer(state.monitor, scope, UNMATCHED, "GET", Code.UNSUPPORTED, msg, 404)
        start: Message = {
            "type": "websocket.http.response.start",
            "status": 404,
            "headers": [*answer.raw_headers, *SECURITY_HEADERS, (REQUEST_ID, rid.encode())],
        }
        await send(start)
        await send({"type": "websocket.http.response.body", "body": answer.body})

    return not_found


def _operator_allowed(request: Request) -> bool:
    """The operator's page opens for the admin API's callers: loopback, unless
    ``admin_remote`` (the token is asked for by the page itself)."""
    state: AppState = request.app.state.tradehall
    return state.admin_remote or admin.is_loopback(request.client.host if request.client else None)


def _readiness(request: Request) -> health.Readiness:
    front: Front = request.app.state.tradehall
    return front.not_ready


Companion = Callable[[AppState], contextlib.AbstractAsyncContextManager[Any]]
"""Something that runs beside the app while it serves (the engine process's NATS service),
entered after the scheduler starts and left before the committer's last flush."""


def client_routes(self_service: bool = False) -> list[BaseRoute]:
    """The REST API clients use (spot and its family addresses, margin, asset, futures; with
    ``self_service``, the self-service accounts' endpoints): what gateways serve too."""
    family = [*spot.routes(), *margin.routes(), *asset.routes(), *spot.family_routes()]
    sandbox = selfservice.routes() if self_service else []
    return [*family, *spot.v2_aliases(family), *futures.routes(), *sandbox]


def assemble(
    routes: Sequence[BaseRoute],
    state: Front,
    lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]],
    allowed_hosts: Sequence[str] = (ANY_HOST,),
) -> App:
    """The app around ``routes``: JSON errors, no slash redirects, the OpenAPI listing, the
    ``Host`` names it answers."""
    app = App(
        routes=list(routes), exception_handlers={HTTPException: _http_error}, lifespan=lifespan
    )
    app.hosts = HostRule(allowed_hosts)
    # A path with a trailing slash is an unknown path (404 with an error object, as the
    # contract has it), not a redirect to the path without it.
    app.router.redirect_slashes = False
    app.router.default = _not_found(app.router.default)
    app.router.routes.append(openapi.route(app.router.routes))
    app.router.routes.extend(health.routes(_readiness))
    app.state.tradehall = state
    return app


def create_app(
    exchange: Exchange,
    *,
    clock: Callable[[], int] = wall_clock_ms,
    admin_token: str | None = None,
    limits: LimitSettings | None = None,
    run_scheduler: bool = True,
    simulation: SimulationSettings | None = None,
    run_simulation: bool = False,
    max_clock_ahead_ms: int = MAX_AHEAD_MS,
    admin_remote: bool = False,
    client_api: bool = True,
    companion: Companion | None = None,
    allowed_hosts: Sequence[str] = (ANY_HOST,),
) -> Starlette:
    """The whole API. Rate limits are off unless ``limits`` says ``enabled``. The scheduler
    (hourly interest) runs in the background unless ``run_scheduler`` is False; tests then
    drive it with ``app.state.scheduler.tick()``. The market simulation (``simulation``
    settings, by default the configuration's) starts with the app under
    ``run_simulation``, or later by ``tradehall sim start``. ``max_clock_ahead_ms``: how far
    ahead of the clock a signed request's timestamp may be (``[server] max_clock_ahead_ms``).
    ``client_api=False`` (the engine process, whose clients reach it through gateways) serves
    the admin API only, without streams or pages. ``allowed_hosts``: the ``Host`` names
    answered (``[server] allowed_hosts``)."""
    committer = GroupCommitter(exchange)
    settings = limits or LimitSettings(enabled=False)
    namespace = venue_namespace(settings, exchange.store)
    state = AppState(
        exchange,
        committer,
        clock,
        admin_token,
        limiter=RateLimiter(settings, namespace) if settings.enabled else None,
        replay=make_guard(settings.storage, namespace),
        max_ahead_ms=max_clock_ahead_ms,
        admin_remote=admin_remote,
    )

    scheduler = Scheduler(exchange, committer, clock)
    pruner = state.pruner = Pruner(exchange, committer, clock)
    state.simulation = Simulation(
        exchange, committer, clock, simulation or exchange.config.simulation
    )
    hub = state.hub = Hub(exchange, committer, clock, exchange.config.websocket)
    state.metrics = registry_of(
        FrontCollector(state.monitor),
        ExchangeCollector(exchange, committer),
        *([FanoutCollector(hub)] if client_api else []),
        SimulationCollector(lambda: state.simulation, lambda: state.faults),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if run_scheduler:
            scheduler.start()
            pruner.start()
        if client_api:
            hub.start()
        sampler = asyncio.create_task(state.monitor.run())
        if run_simulation and state.simulation is not None:
            state.simulation.start()
        try:
            async with companion(state) if companion else contextlib.nullcontext():
                yield
        finally:
            if state.simulation is not None:
                await state.simulation.stop()
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await hub.stop()
            await scheduler.stop()
            await pruner.stop()
            with contextlib.suppress(Exception):
                await committer.flush()
            committer.close()
            state.reader.shutdown(wait=True)

    app = assemble(
        [
            *(client_routes(exchange.config.sandbox.self_service) if client_api else []),
            *admin.routes(),
        ],
        state,
        lifespan,
        allowed_hosts,
    )
    if client_api:
        app.router.routes.extend(stream_routes(hub, state.replay, state.max_ahead_ms))
    # The web pages and their files come last: their routes are not API operations (the
    # OpenAPI document leaves them out) and a path parameter ends the fast-path table. The
    # engine process (no client API) serves the operator's page only.
    app.router.routes.extend(scrape.routes())
    app.router.routes.extend(
        pages.routes(
            trader=client_api,
            operator_allowed=_operator_allowed,
            self_service=exchange.config.sandbox.self_service,
        )
    )
    app.state.scheduler = scheduler
    app.state.pruner = pruner
    return app
