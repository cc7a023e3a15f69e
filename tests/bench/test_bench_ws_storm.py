"""The connection-storm benchmark works end to end on a small scale (it checks the script, not
the figures): the server's RSS is read before and after each storm, and its sockets are all
returned (but one the store may open meanwhile)."""

from __future__ import annotations

from bench.ws_storm import run


def test_a_small_storm_run_reports_rss_per_storm() -> None:
    results = run(storms=2, clients=10, channels=5)
    assert results["rss_before_mb"] > 0
    assert len(results["rss_after_each_storm_mb"]) == 2
    assert results["open_sockets_after"] <= results["open_sockets_before"]
