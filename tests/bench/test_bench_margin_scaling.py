"""The margin scaling measurement works (it checks the script, not the speed)."""

from __future__ import annotations

import json

import pytest
from bench.margin_scaling import main, run


def test_it_measures_each_size_with_that_many_borrowers() -> None:
    rows = run([0, 5], 20)
    assert [row["margin_accounts"] for row in rows] == [0, 5]
    assert all(row["spot_command_us"] > 0 and row["first_trade_ms"] > 0 for row in rows)


def test_json_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--accounts", "2", "--commands", "4", "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["margin_accounts"] == 2
