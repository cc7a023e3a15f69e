"""Fault injection seen from a bot (the bundled client) against a real server: 503 answers
that changed nothing, 504 answers whose order was placed all the same (outcome unknown: look
before retrying), 429 bursts with Retry-After, added latency; every fault counted in
`tradehall sim status`, and the admin API never touched."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from cli_support import tradehall_inline
from support import (
    ServerProcess,
    nats_unreachable,
    start_engine,
    start_gateway,
)
from tradehall.client import ApiError, Client
from tradehall.client.stream import MarketStream

BASE = (
    Path(__file__).resolve().parents[2] / "src" / "tradehall" / "default_config.toml"
).read_text()
FAULTS = """
[simulation.faults]
enabled = true
seed = 3

[[simulation.faults.rule]]
path = "/spot/open/sapi/v1/order"
method = "POST"
error_before_share = 0.3
error_after_share = 0.3

[[simulation.faults.rule]]
path = "/spot/open/sapi/v1/depth"
burst_share = 0.2
burst_seconds = 30

[[simulation.faults.rule]]
path = "/spot/open/sapi/v1/time"
latency_share = 1.0
latency_ms_min = 20
latency_ms_max = 40
"""


def test_injected_faults_as_a_client_sees_them(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    config = tmp_path / "tradehall.toml"
    config.write_text(BASE + FAULTS)
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--no-sim", "--config", str(config))
    assert server.demo is not None
    bot = Client(server.url, server.demo["apiKey"], server.demo["secret"])
    seen: Counter[int] = Counter()
    for i in range(30):
        client_id = f"bot-{i}"
        try:
            bot.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", "1000", client_order_id=client_id)
            seen[200] += 1
            placed = True
        except ApiError as exc:
            seen[exc.status] += 1
            assert exc.status in (503, 504)
            placed = exc.status == 504  # 504: applied, though the answer was lost
        # The outcome of a 5xx is unknown to the bot: it looks (GET /order, which no rule
        # touches) before it acts again.
        try:
            found = bot.get_order("BTCUSDT", client_order_id=client_id)["clientOrderId"]
        except ApiError as exc:
            assert exc.code == -2013
            found = None
        assert (found == client_id) == placed
    assert seen[503] and seen[504] and seen[200]

    limited = 0
    for _ in range(15):
        try:
            bot.depth("BTCUSDT")
        except ApiError as exc:
            assert exc.status == 429 and exc.code == -1003
            limited += 1
    assert limited  # once a burst starts it lasts: every later call is refused
    bot.server_time()  # delayed, not refused

    done = tradehall_inline("sim", "status", "--data-dir", str(data), "--json")
    faults = json.loads(done.stdout)["faults"]
    assert faults["enabled"] is True
    assert faults["injected"] == {
        "latency": 1,
        "error_before": seen[503],
        "error_after": seen[504],
        "rate_limited": limited,
        "dropped": 0,
    }
    assert faults["recent"][-1]["path"] == "/spot/open/sapi/v1/time"


STREAM_FAULTS = """
[simulation.faults]
enabled = true

[[simulation.faults.rule]]
path = "/kline-api/ws"
drop_share = 1.0
drop_after_ms_min = 300
drop_after_ms_max = 600
"""


def test_a_stream_is_dropped_and_a_bot_reconnects(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    config = tmp_path / "tradehall.toml"
    config.write_text(BASE + STREAM_FAULTS)
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--no-sim", "--config", str(config))

    async def scenario() -> float:
        started = time.monotonic()
        for _ in range(2):  # dropped, then the bot reconnects and is dropped again
            async with MarketStream(server.url) as stream:
                await stream.subscribe("market_btcusdt_depth_step0")
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(stream.receive(), 5)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 8
    # Futures streams match no rule: untouched.
    done = tradehall_inline("sim", "status", "--data-dir", str(data), "--json")
    faults = json.loads(done.stdout)["faults"]
    assert faults["injected"]["dropped"] == 2
    assert faults["recent"][-1]["path"] == "/kline-api/ws"


GATEWAY_FAULTS = """
[simulation.faults]
enabled = true

[[simulation.faults.rule]]
path = "/spot/open/sapi/v1/order"
method = "POST"
error_before_share = 1.0
"""


def test_a_gateway_injects_the_faults_of_its_config(tmp_path: Path) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    config = tmp_path / "tradehall.toml"
    config.write_text(BASE + GATEWAY_FAULTS)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject, "--demo", "--config", str(config))
    try:
        gateway = start_gateway(subject, "--config", str(config))
        try:
            assert engine.demo is not None
            bot = Client(gateway.url, engine.demo["apiKey"], engine.demo["secret"])
            with pytest.raises(ApiError) as refused:
                bot.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", "1000")
            assert refused.value.status == 503
            request = urllib.request.Request(gateway.url + "/spot/open/sapi/v1/order", b"{}")
            with pytest.raises(urllib.error.HTTPError) as raw:
                urllib.request.urlopen(request, timeout=10)
            assert raw.value.code == 503
            assert raw.value.headers["X-Tradehall-Fault"] == "error_before"
            assert bot.open_orders("BTCUSDT") == []  # refused before the engine: nothing placed
            assert bot.depth("BTCUSDT")["bids"] == []  # no rule: untouched
        finally:
            gateway.stop()
    finally:
        engine.stop()
