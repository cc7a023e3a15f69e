"""``GET /metrics`` on the admin side of ``serve`` and ``engine``: the Prometheus text
format, for the admin token's holder only (loopback unless ``admin_remote``), like the admin
API. Gateways serve theirs on a listener of their own (``--metrics-port``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tradehall.api.admin import require_admin
from tradehall.api.errors import ApiError
from tradehall.api.http import AppState, unserved_answer
from tradehall.metrics.exposition import CONTENT_TYPE, render

PATH = "/metrics"


def routes() -> list[Route]:
    async def metrics(request: Request) -> Response:
        state: AppState = request.app.state.tradehall
        try:
            require_admin(request, state)
        except ApiError as refused:
            # Scrapes are not counted or logged (a probe every few seconds would drown the
            # rest); a refused one is, so guessing the admin token here leaves a trace.
            return unserved_answer(
                state.monitor, request.scope, PATH, "GET", refused.code, refused.msg, refused.status
            )
        if state.metrics is None:
            return Response(b"", media_type=CONTENT_TYPE)
        return Response(render(state.metrics), media_type=CONTENT_TYPE)

    return [Route(PATH, metrics, methods=["GET"], include_in_schema=False)]
