"""The price-guard measurement works (it checks the script, not the speed)."""

from __future__ import annotations

import json

import pytest
from bench.price_guards import band_cost, index_tick, main


def test_the_index_tick_uses_every_source_of_every_contract() -> None:
    row = index_tick(3, 4, 5)
    assert (row["contracts"], row["sources_used"]) == (3, 4)
    assert row["us_per_contract_tick"] > 0


def test_the_band_run_refuses_nothing_more_with_the_band_on() -> None:
    band = band_cost(2_000, 1)
    assert band["rejected"]["on"] == band["rejected"]["off"]
    assert len(band["pair_costs"]) == 1


def test_json_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--contracts", "2", "--ticks", "3", "--commands", "1000", "--rounds", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert [row["contracts"] for row in report["index_tick"]] == [2]
