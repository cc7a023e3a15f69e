"""What ``/metrics`` shows of the scale-out topology's own parts: a gateway worker's link to
the engine (round trips, reconnects, the read cache) and the engine process's NATS service
(commands taken, resends answered again, gateways heard from); and each worker's metrics
listener."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tradehall.metrics.histogram import histogram_family

if TYPE_CHECKING:  # both import this module
    from tradehall.cluster.engine_service import EngineService
    from tradehall.cluster.gateway import Gateway

log = logging.getLogger("tradehall.gateway")


class GatewayCollector(Collector):
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def collect(self) -> Iterator[Metric]:
        gateway = self.gateway
        yield histogram_family(
            "tradehall_nats_round_trip_seconds",
            "Time from sending a message of commands to the engine to its reply.",
            [],
            [((), gateway.round_trips)],
        )
        yield CounterMetricFamily(
            "tradehall_nats_reconnects", "NATS connections lost and made again.",
            value=gateway.reconnects,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "tradehall_engine_answering",
            "1 while the engine's latest word to this gateway was an answer.",
            value=int(gateway.engine_answers),
        )
        reads = gateway.reads.stats() if gateway.reads is not None else {}
        family = CounterMetricFamily(
            "tradehall_read_cache_lookups",
            "Public reads looked up in the read cache, by result (hit, miss).",
            labels=["result"],
        )
        for result, count in (("hit", "hits"), ("miss", "misses")):
            family.add_metric([result], reads.get(count, 0))
        yield family


class EngineServiceCollector(Collector):
    def __init__(self, service: EngineService) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service
        yield CounterMetricFamily(
            "tradehall_forwarded_commands",
            "Requests gateways forwarded that the engine process ran.",
            value=service.executed,
        )
        yield CounterMetricFamily(
            "tradehall_forwarded_duplicates",
            "Forwarded requests seen again (a gateway's resend) and answered, not run, again.",
            value=service.duplicates,
        )
        yield CounterMetricFamily(
            "tradehall_nats_reconnects", "NATS connections lost and made again.",
            value=service.reconnects,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "tradehall_gateways",
            "Gateway workers heard from lately.",
            value=len(service.gateways.reports()),
        )


@contextlib.contextmanager
def metrics_listener(host: str, port: int | None, registry: CollectorRegistry) -> Iterator[None]:
    """The library's own HTTP server (a thread) serving ``registry`` on ``host:port``, for as
    long as the block runs; nothing when ``port`` is None."""
    if port is None:
        yield
        return
    server, thread = start_http_server(port, host, registry)
    log.info("metrics on http://%s:%d/metrics", host, port)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
