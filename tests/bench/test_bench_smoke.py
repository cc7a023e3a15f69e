"""The benchmark harness works: a tiny ``python -m bench --quick`` run produces every section
with sane numbers. Speed is not checked here (timed assertions do not belong in the suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
Results = tuple[Path, dict[str, Any]]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    out = tmp_path_factory.mktemp("bench") / "results"
    cmd = [
        sys.executable, "-m", "bench", "--quick", "--out", str(out),
        "--engine-commands", "3000", "--engine-accounts", "200", "--profile-commands", "1000",
        "--wire-accounts", "8", "--wire-duration", "1.0", "--wire-step", "0.5",
        "--wire-fractions", "0.8",
        "--recovery-orders", "300,600", "--history-trades", "1500", "--recovery-accounts", "20",
        "--memory-orders", "1000", "--memory-accounts", "300",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRADEHALL_CHECK_INVARIANTS", None)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, json.loads((out / "results.json").read_text())


def test_every_part_reports(results: Results) -> None:
    out, r = results
    for part in ("engine", "wire", "recovery", "memory"):
        assert part in r and "error" not in r[part], r.get(part)
    assert (out / "results.md").read_text().startswith("# tradehall benchmark")
    assert "| Target | Goal | Measured | Result |" in (out / "results.md").read_text()
    assert r["meta"]["machine"]["nproc"] >= 1
    keys = {t["key"] for t in r["targets"]}
    assert {"engine", "place_ratio", "depth_ratio", "memory"} <= keys
    assert all(t["measured"] is not None for t in r["targets"])
    by_key = {t["key"]: t for t in r["targets"]}
    # Each latency row also says what the same rule gives for the floor itself.
    assert "the floor's POST, at 80 % of its own maximum" in by_key["p99_at_80_place"]["shown"]
    assert "the floor's GET, at 80 % of its own maximum" in by_key["p99_at_80_depth"]["shown"]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "latency.png not written" in r["meta"]["plot"]
    else:
        assert (out / "latency.png").stat().st_size > 1000


def test_engine_section_is_sane(results: Results) -> None:
    _, r = results
    e = r["engine"]
    assert e["throughput"]["commands"] == 3000
    assert e["throughput"]["commands_per_s"] > 0
    lat = e["latency"]["latency_us"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert e["latency"]["trades"] > 0 and e["latency"]["ledger_entries"] > 0
    outcomes = e["latency"]["outcomes"]
    assert outcomes.get("limit_gtc:NEW", 0) > 0
    assert outcomes.get("cancel:CANCELED", 0) > 0  # cancels name live orders
    assert e["deterministic_replay"]["latency_pass"] in (True, None)
    assert e["deterministic_replay"]["throughput_pass"] in (True, None)
    rounds = e["rounds"]
    assert len(rounds) >= 2  # engine and bare book alternate
    shares = [r["engine_share"] for r in rounds]
    assert min(shares) <= e["bare_book"]["engine_share"] <= max(shares)  # their median
    assert e["bare_book"]["same_book_as_engine"] is True
    assert e["profile"]["top_tottime"]


def test_wire_section_is_sane(results: Results) -> None:
    _, r = results
    w = r["wire"]
    for name in ("floor_get", "floor_post", "depth", "place", "cancel"):
        scenario = w["scenarios"][name]
        assert scenario["closed"]["throughput"] > 0, name
        assert scenario["closed"]["errors"] == 0, scenario["closed"]["error_samples"]
        steps = scenario["open"]["steps"]
        assert any(s["fraction_of_closed_max"] == 0.8 for s in steps)
        for step in steps:
            assert step["ok"] > 0
            assert step["latency_ms"]["p50"] <= step["latency_ms"]["p99"]
    assert w["rate_limited_responses"] == 0
    assert w["audit_after_load"]["ok"] is True
    assert w["ratios_to_floor"]["place"] > 0
    assert w["ratios_to_floor"]["depth"] > 0


def test_recovery_and_memory_sections_are_sane(results: Results) -> None:
    _, r = results
    steps = r["recovery"]["steps"]
    assert [s["open_orders"] for s in steps] == [300, 600]
    for step in steps:
        assert step["recover_s"] > 0 and step["open_orders_per_s"] > 0
        assert step["server_restart"]["spawn_to_first_answer_s"] > 0
    assert r["recovery"]["history"]["trades"] == 1500
    m = r["memory"]
    assert 0 < m["bytes_per_resting_order"] < 100_000
    assert 0 < m["bytes_per_account"] < 100_000
