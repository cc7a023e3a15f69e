"""The high-availability benchmark kills (or freezes) leaders under a writer's load, checks the
store after each takeover and measures the cost of following (nothing here is timed but the
frozen leader's lease, which holds its lock for seconds by design)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import takeover
from support import NATS_URL, PG_URL, nats_unreachable, postgres_unreachable


def test_a_small_run_reports_takeovers_and_the_cost_of_following(tmp_path: Path) -> None:
    reason = postgres_unreachable() or nats_unreachable()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "takeover.json"
    args = ["--sizes", "300", "--takeovers", "1", "--database", PG_URL, "--nats", NATS_URL]
    args += ["--rounds", "1", "--duration", "0.5", "--warmup", "0.2", "--accounts", "40"]
    args += ["--fixed-rate", "500", "--kinds", "warm,cold,frozen"]
    takeover.main([*args, "--out", str(out)])
    report = json.loads(out.read_text())
    (size,) = report["takeover"]
    assert size["build"]["open_orders"] == 300
    assert set(size["kinds"]) == {"warm", "cold", "frozen"}
    for kind, measured in size["kinds"].items():
        (trial,) = measured["trials"]
        assert trial["kind"] == kind and trial["new_leader"] in ("A", "B")
        assert trial["open_orders"] == 300  # the writer's IOC orders never rest
        assert trial["takeover_s"] > trial["internal_s"] >= 0
        assert trial["store_check"]["acked"] > 0
        assert trial["store_check"]["lost_count"] == 0
        assert trial["store_check"]["applied_twice"] == []
        summary = measured["summary"]
        assert summary["lost"] == 0 and summary["takeover_s"]["p50"] == trial["takeover_s"]
    warm, cold = size["kinds"]["warm"]["trials"][0], size["kinds"]["cold"]["trials"][0]
    assert warm["detection_s"] is not None and warm["restart_load_s"] is not None
    assert cold["detection_s"] is None and cold["load_s"] >= 0
    assert cold["spawn_to_loaded_s"] > cold["load_s"]
    frozen = size["kinds"]["frozen"]["trials"][0]
    assert frozen["reaped_s"] is None and frozen["detection_s"] > 1  # its lease ran out
    following = report["following"]
    (measured_round,) = following["rounds"]
    for setting in ("alone", "followed"):
        for part in ("ceiling", "fixed"):
            measured = measured_round[setting][part]
            assert measured["placed_per_s"] > 0 and measured["leader_cpu_share"] > 0
            assert measured["statuses"].keys() == {"200"}, measured["refusals"]
    followed = measured_round["followed"]["ceiling"]
    assert followed["standby_cpu_share"] > 0 and followed["standby_catch_up_s"] >= 0
    assert "standby_cpu_share" not in measured_round["alone"]["ceiling"]
    assert set(following["cost_of_following"]) == {
        "ceiling placed_per_s",
        "ceiling leader_cpu_us_per_placement",
        "fixed leader_cpu_us_per_placement",
    }
