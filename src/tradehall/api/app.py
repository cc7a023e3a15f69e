"""The Starlette application: every area's routes, JSON errors for unknown paths, and the
lifespan that flushes the group committer on shutdown."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tradehall.api import admin, margin, openapi, spot
from tradehall.api.errors import error_response
from tradehall.api.http import AppState
from tradehall.api.ratelimit import RateLimiter
from tradehall.api.replay import make_guard
from tradehall.codes import Code
from tradehall.config import LimitSettings
from tradehall.exchange import Exchange
from tradehall.scheduler import Scheduler
from tradehall.store.writer import GroupCommitter


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(Code.UNSUPPORTED, f"{request.method} is not supported here", 405)
    if exc.status_code == 404:
        return error_response(Code.UNSUPPORTED, f"unknown path {request.url.path}", 404)
    return error_response(Code.UNKNOWN, str(exc.detail), exc.status_code)


def create_app(
    exchange: Exchange,
    *,
    clock: Callable[[], int] = wall_clock_ms,
    admin_token: str | None = None,
    limits: LimitSettings | None = None,
    run_scheduler: bool = True,
) -> Starlette:
    """The whole API. Rate limits are off unless ``limits`` says ``enabled``. The scheduler
    (hourly interest) runs in the background unless ``run_scheduler`` is False; tests then
    drive it with ``app.state.scheduler.tick()``."""
    committer = GroupCommitter(exchange)
    settings = limits or LimitSettings(enabled=False)
    state = AppState(
        exchange,
        committer,
        clock,
        admin_token,
        limiter=RateLimiter(settings) if settings.enabled else None,
        replay=make_guard(settings.storage),
    )

    scheduler = Scheduler(exchange, committer, clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if run_scheduler:
            scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            with contextlib.suppress(Exception):
                await committer.flush()
            committer.close()
            state.reader.shutdown(wait=True)

    app = Starlette(
        routes=spot.routes() + margin.routes() + admin.routes(),
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.router.routes.append(openapi.route(app.router.routes))
    app.state.tradehall = state
    app.state.scheduler = scheduler
    return app
