"""A gateway worker's app: the REST API, the WebSocket streams and the trader's page, all
served by the engine process behind (the operator's page and the admin API stay with the
engine)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.types import ASGIApp

from tradehall.api.app import App, assemble, client_routes
from tradehall.cluster.gateway import Gateway
from tradehall.cluster.gateway_streams import GatewayStreams
from tradehall.cluster.metrics import GatewayCollector, metrics_listener
from tradehall.metrics.collectors import FanoutCollector, FrontCollector, SimulationCollector
from tradehall.metrics.exposition import registry_of
from tradehall.sim.faults import FaultInjector
from tradehall.stream.routes import routes as stream_routes
from tradehall.web import pages


def create_gateway_app(gateway: Gateway) -> App:
    streams = GatewayStreams(gateway, gateway.websocket)
    gateway.connections = lambda: len(streams.connections)
    registry = registry_of(
        FrontCollector(gateway.monitor),
        FanoutCollector(streams),
        GatewayCollector(gateway),
        SimulationCollector(lambda: None, lambda: gateway.injector),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with metrics_listener(gateway.metrics_host, gateway.metrics_port, registry):
            async with gateway.running(), streams.running():
                yield

    app = assemble(client_routes(gateway.self_service), gateway, lifespan, gateway.allowed_hosts)
    app.router.routes.extend(stream_routes(streams, gateway.replay, gateway.max_ahead_ms))
    app.router.routes.extend(pages.routes(self_service=gateway.self_service))
    app.state.streams = streams
    app.state.metrics = registry
    return app


def gateway_asgi(gateway: Gateway) -> ASGIApp:
    """The gateway's app, wrapped in the fault injector when ``gateway.faults`` enables one:
    each gateway worker injects (and counts, in its log) its own faults."""
    app = create_gateway_app(gateway)
    faults = gateway.faults
    if faults is None or not faults.enabled:
        return app
    gateway.injector = FaultInjector(app, faults)
    return gateway.injector
