"""The simulation's scripts behind docs/simulation-day.png and docs/simulation-depth.png run,
audit and plot (a few simulated minutes or seconds of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import sim_day, sim_depth


def test_sim_day_runs_audits_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "day.png"
    assert sim_day.main(["--hours", "0.05", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0.05 simulated hours on BTCUSDT" in printed and "audit OK" in printed
    assert "out of funds: none" in printed
    assert out.stat().st_size > 1000


def test_sim_depth_measures_the_default_books(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script behind docs/simulation-depth.png (five simulated seconds of it; the figure
    only where matplotlib, the [bench] extra, is installed)."""
    out = tmp_path / "depth.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        drawn = ["--no-plot"]
    else:
        drawn = ["--out", str(out)]
    assert sim_depth.main(["--seconds", "5", *drawn]) == 0
    printed = capsys.readouterr().out
    for symbol in ("BTCUSDT", "ETHUSDT", "E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"):
        assert f"{symbol}: first ten levels per side min" in printed
    assert "a 0.1 BTC market order on BTCUSDT walks at most 1 level(s)" in printed
    assert "out of funds: none; audit OK" in printed
    assert drawn == ["--no-plot"] or out.stat().st_size > 1000
