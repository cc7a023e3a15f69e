"""A histogram as cheap as a counter to observe: fixed bucket bounds, a count per bucket and
a sum, no lock (the event loop is the only writer; a scrape from another thread may see a
value a moment old, which Prometheus tolerates)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from prometheus_client.core import HistogramMetricFamily

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Seconds: from a fast read (sub-millisecond) to a request stuck behind a slow commit."""

SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
"""Rows (a commit's size)."""


class Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        """Observations per bucket (not cumulative); the last one is +Inf."""
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound counts in that bound's bucket (``le``).
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """(``le``, count) pairs as the exposition wants them, +Inf last."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), list(self.counts), strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


def histogram_family(
    name: str,
    doc: str,
    labels: Sequence[str],
    series: Iterable[tuple[Sequence[str], Histogram]],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    for values, hist in series:
        family.add_metric(list(values), hist.cumulative(), hist.total)
    return family
