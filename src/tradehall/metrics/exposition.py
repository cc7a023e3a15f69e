"""One registry per app (tests run several apps in one process; nothing goes into the
library's global registry), and its text for ``/metrics``."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

CONTENT_TYPE = CONTENT_TYPE_LATEST


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A registry with ``collectors`` and the process's own (CPU, memory, open files)."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    for collector in collectors:
        registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
