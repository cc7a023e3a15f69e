"""Health and readiness for load balancers and orchestrators: ``GET /healthz`` answers 200
while the process serves at all; ``GET /readyz`` answers 200 when it can serve requests
(its ``Front`` says what that takes: the store writable, the engine reachable from a
gateway, not draining) and 503 with the reason otherwise. Neither is an API operation (no
signature, no rate limit, not in the OpenAPI document, not counted as API traffic)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

READY = msgspec.json.encode({"status": "ready"})
ALIVE = msgspec.json.encode({"status": "alive"})
_HEADERS = {"cache-control": "no-store"}

Readiness = Callable[[], Awaitable[str | None]]
"""Why the process cannot serve now (one line), or None when it can."""


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json", headers=_HEADERS)


def routes(readiness: Callable[[Request], Readiness]) -> list[Route]:
    """The two routes; ``readiness`` finds the check for a request (the app's ``Front``)."""

    async def healthz(request: Request) -> Response:
        return _json(ALIVE)

    async def readyz(request: Request) -> Response:
        reason = await readiness(request)()
        if reason is None:
            return _json(READY)
        body = msgspec.json.encode({"status": "not ready", "reason": reason})
        return _json(body, 503)

    return [
        Route("/healthz", healthz, methods=["GET"], include_in_schema=False),
        Route("/readyz", readyz, methods=["GET"], include_in_schema=False),
    ]
