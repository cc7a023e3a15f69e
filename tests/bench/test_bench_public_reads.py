"""The public-reads benchmark runs both settings of the gateway's read cache and reports
them (its figures are in docs/deployment.md; nothing here is timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import public_reads
from support import nats_unreachable


def test_a_small_run_reports_the_cache_on_and_off(tmp_path: Path) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "reads.json"
    args = ["--rounds", "1", "--duration", "0.5", "--warmup", "0.2", "--connections", "4"]
    public_reads.main([*args, "--writes", "20", "--out", str(out)])
    report = json.loads(out.read_text())
    assert [r["read_cache_ms"] for r in report["rounds"]] == [500, 0]
    for measured in report["rounds"]:
        assert measured["errors"] == 0 and measured["reads_per_s"] > 0
        assert measured["writes"]["writes"] > 0 and measured["writes"]["errors"] == 0
        assert measured["engine_us_per_read"] >= 0 and measured["gateway_us_per_read"] > 0
    assert set(report["summary"]) == {"cache_500ms", "cache_0ms"}
