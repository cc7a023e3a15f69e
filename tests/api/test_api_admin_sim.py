"""``POST /admin/v1/sim/start`` answers once the simulation has built its markets, and says
why when it could not (rather than "started" and a failure seen only in ``sim status``)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, ApiError
from tradehall.config import load_config


def admin_on(tmp_path: Path, funds: int, max_usd: int) -> tuple[TestClient, AdminClient]:
    config = load_config()
    simulation = config.simulation
    taker = dataclasses.replace(simulation.taker, max_usd=Decimal(max_usd))
    simulation = dataclasses.replace(
        simulation, funds=funds, taker=taker, markets=("BTCUSDT",), history_days=1
    )
    exchange = make_exchange(
        tmp_path / "tradehall.db", config=dataclasses.replace(config, simulation=simulation)
    )
    app = create_app(exchange, clock=FakeClock(), admin_token=ADMIN_TOKEN, run_scheduler=False)
    http = TestClient(app)
    return http, AdminClient(BASE_URL, ADMIN_TOKEN, http=http)


def test_sim_start_answers_when_the_markets_are_built(tmp_path: Path) -> None:
    http, admin = admin_on(tmp_path, 4, 250_000)
    with http:
        started = admin.sim_start()
        assert started["started"] is True and started["running"] is True
        assert [m["symbol"] for m in started["markets"]] == ["BTCUSDT"]  # built already
        assert {p["state"] for p in started["participants"]} == {"active"}
        admin.sim_stop()


def test_sim_start_says_why_a_simulation_stopped_as_it_started(tmp_path: Path) -> None:
    # A taker funded for 80 orders of 10 million dollars, a thousand times over: beyond the
    # range of USDT's total supply, so funding it is refused and the simulation stops.
    http, admin = admin_on(tmp_path, 1_000, 10_000_000)
    with http:
        with pytest.raises(ApiError) as refused:
            admin.sim_start()
        assert (refused.value.status, refused.value.code) == (500, -1001)
        assert "the simulation stopped as it started" in refused.value.msg
        assert "supply" in refused.value.msg
        status = admin.sim_status()
        assert status["running"] is False and "supply" in status["error"]
