"""The fault injector in front of the app (in process): it answers before the app's fast
path, never touches the admin API, counts what it injects, and is transparent when off."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from starlette.testclient import TestClient

from support import ADMIN_TOKEN, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.sim.faults import FaultInjector
from tradehall.sim.settings import FaultRule, FaultSettings


def injector(tmp_path: Path, settings: FaultSettings) -> tuple[FaultInjector, TestClient]:
    exchange = make_exchange(tmp_path / "t.db")
    app = create_app(exchange, clock=FakeClock(), admin_token=ADMIN_TOKEN, run_scheduler=False)
    wrapped = FaultInjector(app, settings)
    app.state.tradehall.faults = wrapped
    return wrapped, TestClient(wrapped)


def test_every_request_refused_but_the_admin_api(tmp_path: Path) -> None:
    faults, http = injector(
        tmp_path, FaultSettings(enabled=True, rules=(FaultRule(path="*", error_before_share=1),))
    )
    with http:
        answer = http.get("/spot/open/sapi/v1/ping")  # a fast-path endpoint
        assert answer.status_code == 503 and answer.json()["code"] == -1001
        assert answer.headers["x-tradehall-fault"] == "error_before"
        assert http.get("/spot/open/sapi/v1/nowhere").status_code == 503  # Starlette's router
        assert http.get("/nowhere").status_code == 404  # "*" is the API, not every path
        admin = http.get("/admin/v1/sim", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert admin.status_code == 200
        assert admin.json()["faults"]["injected"]["error_before"] == 2
    assert [entry["path"] for entry in faults.recent] == [
        "/spot/open/sapi/v1/ping",
        "/spot/open/sapi/v1/nowhere",
    ]


def test_off_is_transparent(tmp_path: Path) -> None:
    faults, http = injector(
        tmp_path, FaultSettings(enabled=False, rules=(FaultRule(error_before_share=1),))
    )
    with http:
        assert http.get("/spot/open/sapi/v1/ping").status_code == 200
    assert faults.status()["injected"] == {
        "latency": 0,
        "error_before": 0,
        "error_after": 0,
        "rate_limited": 0,
        "dropped": 0,
    }


def test_a_burst_refuses_every_request_of_its_rule_until_it_ends(tmp_path: Path) -> None:
    now = [0.0]
    exchange = make_exchange(tmp_path / "t.db")
    app = create_app(exchange, clock=FakeClock(), admin_token=ADMIN_TOKEN, run_scheduler=False)
    rule = FaultRule(path="/spot/open/sapi/v1/time", burst_share=1, burst_seconds=5)
    faults = FaultInjector(
        app, FaultSettings(enabled=True, seed=1, rules=(rule,)), clock=lambda: now[0]
    )
    with TestClient(faults) as http:
        first = http.get("/spot/open/sapi/v1/time")
        assert first.status_code == 429 and first.headers["retry-after"] == "5"
        assert http.get("/spot/open/sapi/v1/ping").status_code == 200  # another path
        now[0] = 4.0
        assert http.get("/spot/open/sapi/v1/time").headers["retry-after"] == "1"
    assert faults.status()["injected"]["rate_limited"] == 2


def test_a_delayed_answer_says_so_and_is_the_apps_own(tmp_path: Path) -> None:
    delayed = FaultRule(path="*", latency_share=1.0, latency_ms_min=1, latency_ms_max=2)
    faults, http = injector(tmp_path, FaultSettings(enabled=True, rules=(delayed,)))
    with http:
        answer = http.get("/spot/open/sapi/v1/ping")
        assert answer.status_code == 200 and answer.json() == {}
        assert answer.headers.get_list("x-tradehall-fault") == ["latency"]
    assert faults.status()["injected"]["latency"] == 1
    # Delayed and then refused: the header names the fault that decided the answer.
    both = dataclasses.replace(delayed, error_before_share=1.0)
    (tmp_path / "b").mkdir()
    _, http = injector(tmp_path / "b", FaultSettings(enabled=True, rules=(both,)))
    with http:
        refused = http.get("/spot/open/sapi/v1/ping")
        assert refused.status_code == 503
        assert refused.headers.get_list("x-tradehall-fault") == ["error_before"]
