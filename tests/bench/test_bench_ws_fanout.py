"""The fan-out benchmark works end to end on a small scale (it checks the script, not the
speed): every phase measured, the subscribers received pushes, the report renders."""

from __future__ import annotations

from bench.ws_fanout import report, run


def test_a_small_fanout_run_measures_every_phase() -> None:
    results = run(clients=20, accounts=8, duration=0.5, log=lambda _: None)
    before, after = results["without"]
    for phase in (before, results["with_subscribers"], after):
        assert phase["closed_max_rps"] > 0
        assert phase["at_80pct"]["offered_rps"] > 0
    pushes = results["pushes"]
    assert pushes["clients"] == 20 and pushes["frames"] > 0
    assert pushes["closed_by_server"] == 0
    assert pushes["trade_to_client_ms"]["count"] > 0
    assert isinstance(results["placement_cost"], float)
    text = report(results)
    assert "20 subscribers" in text and "Cost of the subscribers" in text
