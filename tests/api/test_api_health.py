"""GET /healthz and GET /readyz, in one process and behind a gateway: alive while serving,
ready unless the store stopped taking writes (then 503 with the reason) or draining."""

from __future__ import annotations

from support import Env


def test_alive_and_ready(env: Env) -> None:
    alive = env.http.get("/healthz")
    assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
    ready = env.http.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert ready.headers["content-type"] == "application/json"
    assert env.http.post("/readyz").status_code == 405


def test_not_ready_once_the_store_takes_no_writes(env: Env) -> None:
    env.exchange.failure = "store commit failed: disk full"
    answer = env.http.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["status"] == "not ready"
    assert "disk full" in answer.json()["reason"]
    assert env.http.get("/healthz").status_code == 200  # alive all the same


def test_not_ready_while_draining(env: Env) -> None:
    front = env.http.app.state.tradehall  # type: ignore[attr-defined]
    front.draining = True
    answer = env.http.get("/readyz")
    assert (answer.status_code, answer.json()["reason"].split(":")[0]) == (503, "draining")


def test_health_is_no_api_operation(env: Env) -> None:
    paths = env.http.get("/openapi.json").json()["paths"]
    assert "/healthz" not in paths and "/readyz" not in paths
