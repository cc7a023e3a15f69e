"""The WebSocket streams served by gateways (the protocol itself is tested against both
topologies in the other stream tests): what only the split topology has, with real processes.
A client's subscriptions outlive an engine restart; a killed gateway leaves the others'
streams alone; the engine being down is an error frame; gateways serve the trader's page and
the engine the operator's;
the market simulation runs in the engine and its trades reach gateway clients."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from stream_support import decode, open_ws, send, subscribe, until
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from cli_support import tradehall_inline
from support import (
    ServerProcess,
    nats_unreachable,
    start_engine,
    start_gateway,
)
from tradehall.client import ApiError, Client

SYMBOL = "BTCUSDT"
DEPTH = "market_btcusdt_depth_step0"


@pytest.fixture
def stopped() -> Iterator[list[ServerProcess]]:
    """Processes to stop when the test ends (however it ends)."""
    processes: list[ServerProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


@dataclass
class Split:
    subject: str
    url: str
    """The gateway's."""
    client: Client

    def ws(self, path: str = "/kline-api/ws") -> str:
        return "ws" + self.url[len("http") :] + path


def split(data_dir: Path, stopped: list[ServerProcess]) -> Split:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(data_dir, subject, "--demo")
    stopped.append(engine)
    gateway = start_gateway(subject)
    stopped.append(gateway)
    assert engine.demo is not None
    client = Client(gateway.url, engine.demo["apiKey"], engine.demo["secret"])
    return Split(subject, gateway.url, client)


async def book_shows(ws: ClientConnection, price: str, timeout: float = 15) -> None:
    """Depth pushes until one shows ``price`` as the best bid."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        pushed = await until(ws, DEPTH, timeout=max(0.1, deadline - loop.time()))
        buys = pushed["tick"]["buys"]
        if buys and buys[0][0] == price:
            return


def place_until_accepted(client: Client, price: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            client.create_order(SYMBOL, "BUY", "LIMIT", "0.01", price)
            return
        except ApiError as exc:
            if exc.code != -1001 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_subscriptions_outlive_an_engine_restart(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    found = split(tmp_path / "data", stopped)
    client = found.client
    engine = stopped[0]

    async def scenario() -> None:
        async with await open_ws(found.ws()) as ws:
            await subscribe(ws, DEPTH)
            await asyncio.to_thread(client.create_order, SYMBOL, "BUY", "LIMIT", "0.01", "20000")
            await book_shows(ws, "20000.00")

            engine.stop(signal.SIGKILL)
            stopped.append(start_engine(engine.data_dir, found.subject))
            # The gateway restates what its clients follow when the engine announces itself;
            # the same connection then gets the new book.
            await asyncio.to_thread(place_until_accepted, client, "20001")
            await book_shows(ws, "20001.00")

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_a_killed_gateway_leaves_the_other_gateways_streams_alone(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    found = split(tmp_path / "data", stopped)
    client = found.client
    doomed = start_gateway(found.subject)
    stopped.append(doomed)

    async def scenario() -> None:
        doomed_ws = await open_ws("ws" + doomed.url[len("http") :] + "/kline-api/ws")
        await subscribe(doomed_ws, DEPTH)
        async with await open_ws(found.ws()) as ws:
            await subscribe(ws, DEPTH)
            doomed.stop(signal.SIGKILL)
            for price in ("20000", "20002"):
                await asyncio.to_thread(client.create_order, SYMBOL, "BUY", "LIMIT", "0.01", price)
                await book_shows(ws, f"{price}.00")
        with pytest.raises(ConnectionClosed):  # what it had received, then the end
            while True:
                await asyncio.wait_for(doomed_ws.recv(), 5)

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_gateways_serve_the_traders_page_and_the_engine_the_operators(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    found = split(tmp_path / "data", stopped)
    with urllib.request.urlopen(found.url + "/", timeout=10) as page:
        assert page.status == 200 and b"<html" in page.read().lower()
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(found.url + "/admin", timeout=10)
    assert missing.value.code == 404
    engine = stopped[0].url  # its loopback admin API serves the operator's page instead
    with urllib.request.urlopen(engine + "/admin", timeout=10) as page:
        assert page.status == 200 and b"admin.js" in page.read()
    with urllib.request.urlopen(engine + "/web/js/admin.js", timeout=10) as script:
        assert script.status == 200
    with pytest.raises(urllib.error.HTTPError) as no_trader:
        urllib.request.urlopen(engine + "/", timeout=10)
    assert no_trader.value.code == 404


def test_stream_errors_when_the_engine_is_down_are_error_frames(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    found = split(tmp_path / "data", stopped)
    stopped[0].stop(signal.SIGKILL)

    async def scenario() -> None:
        async with await open_ws(found.ws()) as ws:
            await send(ws, {"event": "sub", "params": {"channel": DEPTH, "cb_id": "1"}})
            error = decode(await asyncio.wait_for(ws.recv(), 10))
            assert error["code"] == -1001 and "engine" in error["msg"]
            assert error["cb_id"] == "1"
            await send(ws, {"ping": 7})  # the connection stays usable
            assert decode(await asyncio.wait_for(ws.recv(), 5)) == {"pong": 7}

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_the_market_simulation_runs_in_the_engine_and_reaches_gateway_clients(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    data = tmp_path / "data"
    stopped.append(start_engine(data, subject, "--demo", "--sim"))
    gateway = start_gateway(subject)
    stopped.append(gateway)
    public = Client(gateway.url)
    deadline = time.monotonic() + 30
    while len(public.depth(SYMBOL, 100)["bids"]) < 20:  # the makers' ladders, through NATS
        assert time.monotonic() < deadline, "the simulated book did not fill in time"
        time.sleep(0.2)

    async def a_trade_is_pushed() -> None:
        url = "ws" + gateway.url[len("http") :] + "/kline-api/ws"
        async with await open_ws(url) as ws:
            await subscribe(ws, "market_btcusdt_trade_ticker")
            pushed = await until(ws, "market_btcusdt_trade_ticker", timeout=20)
            assert pushed["tick"]["data"][0]["price"]

    asyncio.run(asyncio.wait_for(a_trade_is_pushed(), 60))
    done = tradehall_inline("sim", "status", "--data-dir", str(data), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert status["running"] is True and status["participants"]
