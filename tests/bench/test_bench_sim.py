"""The simulated-day script behind docs/simulation-day.png runs, audits and plots (a few
simulated minutes of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import sim_day


def test_sim_day_runs_audits_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "day.png"
    assert sim_day.main(["--hours", "0.05", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0.05 simulated hours on BTCUSDT" in printed and "audit OK" in printed
    assert "out of funds: none" in printed
    assert out.stat().st_size > 1000
