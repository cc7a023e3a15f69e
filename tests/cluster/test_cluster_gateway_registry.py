"""The engine's view of its gateways (``cluster.gateway_registry``): reports kept while fresh,
a leaving gateway gone at once, the gateways' traffic added to the engine's own."""

from __future__ import annotations

from typing import Any

from tradehall.cluster.gateway_registry import GatewayRegistry
from tradehall.cluster.protocol import GatewayReport, decode_report, encode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def activity(
    requests: int, errors: int, rate: float, recent: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "requestsTotal": requests,
        "errorsTotal": errors,
        "requestsPerSecond": rate,
        "errorsPerSecond": 0.0,
        "windowSeconds": 60,
        "recentErrors": recent,
    }


def report(name: str, requests: int, *, leaving: bool = False, time: int = 0) -> GatewayReport:
    errors = [
        {"time": time, "method": "GET", "path": "/x", "status": 400, "code": -1121, "msg": "m"}
    ]
    return GatewayReport(
        name, "host-a", 42, 1, activity(requests, 1, 2.5, errors), 3, {"hits": 9}, leaving
    )


def test_reports_travel_unchanged() -> None:
    sent = report("gw-1", 10)
    assert decode_report(encode(sent)) == sent


def test_a_gateway_is_listed_while_it_reports_and_gone_when_it_leaves_or_falls_silent() -> None:
    clock = Clock()
    registry = GatewayRegistry(expiry=15, monotonic=clock)
    registry.heard(report("gw-1", 10))
    registry.heard(report("gw-2", 20))
    clock.now += 5
    first, _ = registry.reports()
    assert (first["gateway"], first["requestsTotal"], first["lastHeardSecondsAgo"]) == (
        "gw-1",
        10,
        5.0,
    )
    assert (first["connections"], first["readCache"], first["pid"]) == (3, {"hits": 9}, 42)
    registry.heard(report("gw-1", 0, leaving=True))
    assert [g["gateway"] for g in registry.reports()] == ["gw-2"]
    clock.now += 11  # gw-2 last heard 16 s ago
    assert registry.reports() == []


def test_the_gateways_traffic_is_added_to_the_engines() -> None:
    registry = GatewayRegistry(monotonic=Clock())
    registry.heard(report("gw-1", 10, time=5))
    registry.heard(report("gw-2", 20, time=7))
    own = activity(
        3,
        1,
        0.5,
        [{"time": 6, "method": "POST", "path": "/admin", "status": 401, "code": -2015, "msg": "t"}],
    )
    merged = registry.merged(own)
    assert (merged["requestsTotal"], merged["errorsTotal"], merged["requestsPerSecond"]) == (
        33,
        3,
        5.5,
    )
    assert [(e["time"], e.get("gateway")) for e in merged["recentErrors"]] == [
        (7, "gw-2"),
        (6, None),
        (5, "gw-1"),
    ]
    assert [g["gateway"] for g in merged["gateways"]] == ["gw-1", "gw-2"]
