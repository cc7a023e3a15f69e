"""The engine-ceiling-with-subscribers benchmark runs its three phases on fresh engines and
reports the cost (its figures are in docs/websocket.md; nothing here is timed)."""

from __future__ import annotations

import json

import pytest
from bench.common import cpu_plan

from bench import ws_engine
from support import nats_unreachable


def test_a_small_run_measures_three_phases_and_the_cost(capsys: pytest.CaptureFixture[str]) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    if not cpu_plan()["pinned"]:
        pytest.skip("needs two CPUs and taskset")
    ws_engine.main(["--rounds", "1", "--clients", "20", "--duration", "0.5", "--json"])
    results = json.loads(capsys.readouterr().out)
    (measured,) = results["rounds"]
    for phase in ("before", "with_subscribers", "after"):
        assert measured[phase]["placements_per_s"] > 0
        assert measured[phase]["engine_cpu_share"] > 0
    assert measured["with_subscribers"]["frames_per_s"] > 0
    assert measured["with_subscribers"]["clients_dropped"] == 0
    assert "cost_per_engine_core_s" in results
