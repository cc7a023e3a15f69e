"""Structured logs and request ids with real processes: `--log-format json --access-log`
writes one JSON object per line; a request's X-Request-Id comes back in the answer and is in
the access log of `serve`, and of both the gateway and the engine behind it."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

import tradehall
from support import ServerProcess, nats_unreachable, start_engine, start_gateway, start_server
from tradehall.client import AdminClient

LOG_FLAGS = ("--log-format", "json", "--access-log")


def get(url: str, request_id: str | None = None) -> tuple[str, Any]:
    request = urllib.request.Request(url)
    if request_id is not None:
        request.add_header("X-Request-Id", request_id)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["x-request-id"], json.loads(answer.read())


def records(process: ServerProcess) -> list[dict[str, Any]]:
    """Every line the stopped process wrote on stderr, each one JSON object."""
    process.stop(signal.SIGTERM)
    assert process.proc.stderr is not None
    lines = [line for line in process.proc.stderr.read().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def test_serve_answers_and_logs_the_request_id(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", *LOG_FLAGS)
    try:
        given, _ = get(server.url + "/spot/open/sapi/v1/time", "trace-42")
        made, _ = get(server.url + "/spot/open/sapi/v1/time")
        invalid, _ = get(server.url + "/spot/open/sapi/v1/time", "no spaces allowed")
    finally:
        logged = records(server)
    assert given == "trace-42"
    assert made and made != invalid and invalid != "no spaces allowed"
    access = [r for r in logged if r["logger"] == "tradehall.access"]
    (traced,) = [r for r in access if r.get("request_id") == "trace-42"]
    assert traced["level"] == "info" and traced["time"].endswith("Z")
    assert (traced["endpoint"], traced["method"], traced["code"]) == (
        "/spot/open/sapi/v1/time", "GET", 200,
    )  # fmt: skip
    assert traced["duration_ms"] >= 0 and "time 200" in traced["message"]
    assert {r.get("request_id") for r in access} >= {made, invalid}


def test_the_request_id_follows_a_request_to_the_engine(tmp_path: Path) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject, "--demo", *LOG_FLAGS)
    try:
        gateway = start_gateway(subject, *LOG_FLAGS)
        try:
            trace = f"follow-{uuid.uuid4().hex[:8]}"
            answered, _ = get(gateway.url + "/spot/open/sapi/v1/depth?symbol=BTCUSDT", trace)
        finally:
            front = records(gateway)
    finally:
        back = records(engine)
    assert answered == trace
    (at_gateway,) = [r for r in front if r.get("request_id") == trace]
    (at_engine,) = [r for r in back if r.get("request_id") == trace]
    assert at_gateway["endpoint"] == at_engine["endpoint"] == "/spot/open/sapi/v1/depth"
    assert at_gateway["code"] == at_engine["code"] == 200


def test_serve_logs_its_start_the_signal_and_its_stop(tmp_path: Path) -> None:
    """An operator reading the log sees when the server listened, why it stopped, and that
    it stopped cleanly (records of logger tradehall.server, in that order)."""
    server = start_server(tmp_path / "data", "--log-format", "json")
    port = server.url.rsplit(":", 1)[1]
    logged = records(server)  # stops it with SIGTERM
    assert server.proc.returncode == 0
    messages = [r["message"] for r in logged if r["logger"] == "tradehall.server"]
    listening = [i for i, m in enumerate(messages) if m.startswith("listening on http://")]
    signalled = [i for i, m in enumerate(messages) if m.startswith("SIGTERM received: stopping")]
    stopped = [i for i, m in enumerate(messages) if m.startswith("stopped taking requests")]
    assert listening and signalled and stopped, messages
    assert f":{port} (pid {server.proc.pid})" in messages[listening[0]]
    assert listening[0] < signalled[0] < stopped[0]


def test_a_second_signal_during_a_drain_is_logged_and_stops_at_once(tmp_path: Path) -> None:
    config = tmp_path / "drain.toml"
    default = (Path(tradehall.__file__).parent / "default_config.toml").read_text()
    assert "\ndrain_s = 0 " in default
    config.write_text(default.replace("\ndrain_s = 0 ", "\ndrain_s = 30 ", 1))
    server = start_server(tmp_path / "data", "--config", str(config), "--log-format", "json")
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    started = time.monotonic()
    logged = records(server)  # the second SIGTERM
    assert server.proc.returncode == 0 and time.monotonic() - started < 15  # not 30 s
    messages = [r["message"] for r in logged if r["logger"] == "tradehall.server"]
    first = [m for m in messages if m.startswith("SIGTERM received: draining for 30s")]
    again = [m for m in messages if m == "SIGTERM received again: stopping at once"]
    assert first and again, messages


def test_an_index_source_left_out_is_logged_with_its_price(tmp_path: Path) -> None:
    """One line when a source is left out, naming its price and the index as prices (it
    said 'its value 3000000 ticks, index 300000')."""
    server = start_server(tmp_path / "data", "--log-format", "json")
    try:
        token = (tmp_path / "data" / "admin.token").read_text().strip()
        with AdminClient(server.url, token) as admin:
            for _ in range(3):
                for feed, price in (("a", "30000"), ("b", "30000.2"), ("c", "300000")):
                    body = {"contract": "E-BTC-USDT", "price": price, "feed": feed}
                    answer = admin.request("POST", "/admin/v1/futures/index-price", body=body)
                    assert answer.status_code == 200, answer.text
                time.sleep(1.2)  # the scheduler's tick, once a second
    finally:
        logged = records(server)
    lines = [r["message"] for r in logged if "index source c of E-BTC-USDT" in r["message"]]
    assert lines, [r["message"] for r in logged]
    assert lines[0].startswith("index source c of E-BTC-USDT left out: outlier (its price 300000.0")
    assert "ticks" not in lines[0]
