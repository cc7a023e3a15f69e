"""The journal benchmark reports its figures (docs/performance.md; nothing here is timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import journal


def test_a_small_run_reports_the_ratio_the_lag_and_the_projector(tmp_path: Path) -> None:
    out = tmp_path / "journal.json"
    args = ["--rounds", "1", "--duration", "0.5", "--connections", "4", "--accounts", "4"]
    journal.main([*args, "--out", str(out)])
    report = json.loads(out.read_text())
    (measured,) = report["rounds"]
    assert measured["place_errors"] == 0 and measured["place_per_s"] > 0
    assert measured["ratio"] == measured["place_per_s"] / measured["ping_per_s"]
    before, after = measured["ping_before_after_per_s"]
    assert before > 0 and after > 0 and measured["ping_per_s"] == (before + after) / 2
    assert measured["journal_records"] > 0 and measured["projector_cpu_s"] >= 0
    assert measured["lag_max_records"] is not None and measured["history_read_errors"] == 0
    assert set(report["median"]) >= {"ratio", "catch_up_s", "history_read_p99_ms"}


def test_an_unknown_topology_is_refused() -> None:
    with pytest.raises(SystemExit) as refused:
        journal.main(["--topology", "cluster"])
    assert refused.value.code == 2
