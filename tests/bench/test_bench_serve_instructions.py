"""``python -m bench.serve_instructions``: instructions per ping and per signed placement of
a real ``tradehall serve`` under callgrind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (.ci/run installs it)"
)
def test_a_placement_counts_more_instructions_than_a_ping(tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    cmd = [
        sys.executable, "-m", "bench.serve_instructions", "--seconds", "2", "--warmup", "0.5",
        "--accounts", "4", "--json", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, timeout=600)
    report = json.loads(out.read_text())
    (tree,) = report["trees"]
    ping, place = tree["ping"], tree["place"]
    assert ping["requests"] > 0 and place["requests"] > 0
    # Counted while the loops ran: a ping is tens of thousands of instructions at least, and
    # a signed, matched and journaled placement costs more than the ping.
    assert ping["instructions_per_request"] > 20_000
    assert place["instructions_per_request"] > ping["instructions_per_request"]
    assert tree["ratio"] == pytest.approx(
        ping["instructions_per_request"] / place["instructions_per_request"]
    )
    assert report["placement_ratios_to_first"] == [1.0]


def test_a_folder_without_tradehall_is_refused(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench.serve_instructions", "--src", str(tmp_path)]
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    if shutil.which("valgrind") is None:
        assert "valgrind" in run.stderr
    else:
        assert "holds no tradehall package" in run.stderr
