"""The gateways an engine process has heard from, for the operator: each gateway worker
reports every few seconds (``GatewayReport`` on ``<prefix>.gateways.report``) what it served;
one not heard of for ``expiry`` seconds (killed, cut off) is dropped from the view, one that
stops says so and goes at once.

Behind gateways the engine process sees no client request's front half (HTTP, signatures,
limits): the requests and errors the operator's view shows are the engine's own (admin API,
errors its handlers answer) plus every gateway's, added up here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tradehall.api.monitor import RECENT_ERRORS, within_budget
from tradehall.cluster.gateway import REPORT_EVERY
from tradehall.cluster.protocol import GatewayReport

REPORT_EXPIRY = 3 * REPORT_EVERY

SUMMED = ("requestsTotal", "errorsTotal", "requestsPerSecond", "errorsPerSecond")


class GatewayRegistry:
    def __init__(
        self,
        *,
        expiry: float = REPORT_EXPIRY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.expiry = expiry
        self._monotonic = monotonic
        self._latest: dict[str, tuple[float, GatewayReport]] = {}

    def heard(self, report: GatewayReport) -> None:
        if report.leaving:
            self._latest.pop(report.gateway, None)
        else:
            self._latest[report.gateway] = (self._monotonic(), report)
        self._expire()

    def _expire(self) -> None:
        now = self._monotonic()
        for name, (at, _) in list(self._latest.items()):
            if now - at > self.expiry:
                del self._latest[name]

    def reports(self) -> list[dict[str, Any]]:
        """Every gateway worker heard of lately, by host and process."""
        self._expire()
        now = self._monotonic()
        out = []
        for at, report in self._latest.values():
            activity = report.activity
            out.append(
                {
                    "gateway": report.gateway,
                    "host": report.host,
                    "pid": report.pid,
                    "started": report.started,
                    "lastHeardSecondsAgo": round(now - at, 1),
                    "connections": report.connections,
                    "readCache": report.reads,
                    **{name: activity.get(name, 0) for name in SUMMED},
                }
            )
        return sorted(out, key=lambda g: (g["host"], g["pid"], g["gateway"]))

    def merged(self, activity: dict[str, Any]) -> dict[str, Any]:
        """The engine's own activity (``Monitor.snapshot``) with every gateway's added in,
        and the list of gateways."""
        gateways = self.reports()
        merged = dict(activity)
        for name in SUMMED:
            total = activity.get(name, 0) + sum(g[name] for g in gateways)
            merged[name] = round(total, 3) if isinstance(total, float) else total
        errors = [*activity.get("recentErrors", []), *self.recent_errors()]
        errors.sort(key=lambda e: e.get("time", 0), reverse=True)
        merged["recentErrors"] = within_budget(errors[:RECENT_ERRORS])
        merged["gateways"] = gateways
        return merged

    def recent_errors(self) -> list[dict[str, Any]]:
        """The gateways' recent errors, newest first."""
        errors = [
            {**error, "gateway": report.gateway}
            for _, report in self._latest.values()
            for error in report.activity.get("recentErrors", [])
        ]
        return sorted(errors, key=lambda e: e.get("time", 0), reverse=True)[:RECENT_ERRORS]
