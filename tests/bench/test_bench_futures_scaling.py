"""The futures scaling measurement works (it checks the script, not the speed)."""

from __future__ import annotations

import json

import pytest
from bench.futures_scaling import main, run


def test_it_measures_each_size_with_that_many_open_positions() -> None:
    rows = run([4, 10], 20)
    assert [row["positions"] for row in rows] == [4, 10]
    assert [row["waiting_triggers"] for row in rows] == [4, 10]
    for row in rows:
        for name in ("place_cancel_us", "trade_us", "mark_move_ms", "first_move_ms", "funding_ms"):
            assert row[name] > 0, (name, row)


def test_json_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--positions", "2", "--commands", "4", "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["positions"] == 2
