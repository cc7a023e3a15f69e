"""The fan-out benchmark works end to end on a small scale (it checks the script, not the
speed): every phase measured, the subscribers received pushes, the report renders; in one
process and with the engine behind a gateway. Every wait in the harness has a bound (server
start 60 s, subscribers' connect 120 s, each load-generator run its own timeout)."""

from __future__ import annotations

import pytest
from bench.ws_fanout import report, run

from support import nats_unreachable


def test_a_small_fanout_run_measures_every_phase() -> None:
    # No open-loop step at a fixed rate here (fixed_rate=0: the option's "none"): only the
    # gateway's report shows it, and the test below measures it.
    results = run(clients=20, accounts=8, duration=0.5, log=lambda _: None, fixed_rate=0)
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


def test_a_small_fanout_run_through_a_gateway_measures_the_engine_and_the_gateway() -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    results = run(clients=20, accounts=8, duration=0.5, log=lambda _: None, topology_name="gateway")
    assert results["topology"] == "gw1"
    before, after = results["without"]
    during = results["with_subscribers"]
    for phase in (before, during, after):
        assert phase["closed_max_rps"] > 0
        assert phase["at_80pct"]["offered_rps"] > 0
        # The engine and the gateway both worked on every placement, each in its own process.
        assert phase["engine_cpu_us_per_placement"] > 0
        assert phase["gateways_cpu_us_per_placement"] > 0
        assert phase["at_80pct"]["engine_cpu_us_per_placement"] > 0
    # The subscribers' process is accounted for while it runs (20 clients for half a second may
    # use less than the clock tick /proc counts in).
    assert during["subscribers_cpu_share"] is not None and "subscribers_cpu_share" not in before
    pushes = results["pushes"]
    assert pushes["clients"] == 20 and pushes["frames"] > 0
    assert pushes["closed_by_server"] == 0
    assert pushes["trade_to_client_ms"]["count"] > 0
    assert isinstance(results["placement_cost"], float)
    assert isinstance(results["engine_cpu_cost"], float)
    text = report(results)
    assert "gw1" in text and "20 subscribers" in text
    assert "the engine's CPU per placement" in text
