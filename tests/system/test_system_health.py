"""Health and readiness of real processes: `tradehall serve`, `tradehall engine` (on its
admin listener) and `tradehall gateway`, whose /readyz follows its engine: 503 while the
engine is killed, 200 again once it is back."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import ServerProcess, nats_unreachable, start_engine, start_gateway, start_server


def probe(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def wait_for(url: str, status: int, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        code, body = probe(url)
        if code == status:
            return body
        assert time.monotonic() < deadline, (url, code, body)
        time.sleep(0.05)


@pytest.fixture
def stopped() -> Iterator[list[ServerProcess]]:
    processes: list[ServerProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


def test_serve_is_alive_and_ready(tmp_path: Path, stopped: list[ServerProcess]) -> None:
    server = start_server(tmp_path / "data")
    stopped.append(server)
    assert probe(server.url + "/healthz") == (200, {"status": "alive"})
    assert probe(server.url + "/readyz") == (200, {"status": "ready"})


def test_a_gateway_is_not_ready_while_its_engine_is_away(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject)
    stopped.append(engine)
    gateway = start_gateway(subject)
    stopped.append(gateway)
    assert probe(engine.url + "/readyz") == (200, {"status": "ready"})
    wait_for(gateway.url + "/readyz", 200)

    engine.stop(signal.SIGKILL)
    body = wait_for(gateway.url + "/readyz", 503)
    assert body["status"] == "not ready" and "engine is not reachable" in body["reason"]
    assert probe(gateway.url + "/healthz") == (200, {"status": "alive"})

    restarted = start_engine(engine.data_dir, subject)
    stopped.append(restarted)
    assert wait_for(gateway.url + "/readyz", 200) == {"status": "ready"}
