"""A real server for the stream tests (with short heartbeats and small limits from a config
file) and raw WebSocket helpers that see the frames exactly as a client does."""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from support import ServerProcess, nats_unreachable, start_engine, start_gateway, start_server
from tradehall.client import AdminClient, Client

STREAM_SETTINGS = """
[websocket]
push_interval_ms = 50
heartbeat_s = 1
idle_timeout_s = 3
max_subscriptions = 12
queue_frames = 1000
max_message_bytes = 1024
"""


def write_config(path: Path) -> Path:
    """The built-in config with the streams' settings, and E-ETH-USDT indexed by the operator
    alone: its tests set the index and need it to stay where they put it (a spot-sourced
    index moves back toward its spot market's prices every second)."""
    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    start = text.index("[websocket]")
    end = text.index("\n# ---", start)
    text = text[:start] + STREAM_SETTINGS.strip() + "\n" + text[end:]
    assert text.count('index_source = "ETHUSDT"') == 1
    path.write_text(text.replace('index_source = "ETHUSDT"', 'index_source = "operator"'))
    return path


TOPOLOGIES = ["serve", "engine+gateway"]
"""Every stream test runs against one process (`tradehall serve`) and against the scale-out
topology (`tradehall engine` behind `tradehall gateway`, over NATS)."""


@dataclass
class Venue:
    url: str
    """Where clients connect: the server, or the gateway."""
    admin: AdminClient
    users: list[tuple[int, str, str]]
    """(user id, API key, secret) of two funded users."""
    processes: list[ServerProcess]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    @property
    def ws(self) -> str:
        return "ws" + self.url[len("http") :]

    def client(self, n: int) -> Client:
        _, key, secret = self.users[n]
        return Client(self.url, key, secret)


def start_venue(tmp: Path, topology: str = "serve") -> Venue:
    config = str(write_config(tmp / "venue.toml"))
    if topology == "serve":
        server = start_server(tmp / "data", "--config", config)
        processes = [server]
    else:
        reason = nats_unreachable()
        if reason:
            pytest.skip(reason)
        subject = f"test-{uuid.uuid4().hex}"
        server = start_engine(tmp / "data", subject, "--config", config)
        processes = [server]
        try:
            processes.append(start_gateway(subject, "--config", config))
        except Exception:
            server.stop()
            raise
    admin = AdminClient(server.url, (tmp / "data" / "admin.token").read_text().strip())
    users = []
    for name in ("alice", "bob"):
        user = admin.create_user(name)
        key = admin.create_key(user["id"])
        for asset, amount in (("BTC", "10"), ("ETH", "100"), ("USDT", "1000000")):
            admin.deposit(user["id"], asset, amount)
        admin.futures_transfer(user["id"], "USDT", "100000", "spot", "futures")
        users.append((user["id"], key["apiKey"], key["secret"]))
    return Venue(processes[-1].url, admin, users, processes)


def decode(frame: str | bytes) -> dict[str, Any]:
    assert isinstance(frame, bytes), "every server frame is binary"
    message: dict[str, Any] = json.loads(gzip.decompress(frame), parse_float=Decimal)
    return message


async def open_ws(url: str, **kwargs: Any) -> ClientConnection:
    return await connect(url, compression=None, **kwargs)


async def send(ws: ClientConnection, message: Any) -> None:
    await ws.send(message if isinstance(message, str) else json.dumps(message))


async def next_message(ws: ClientConnection, timeout: float = 5.0, *, pings: bool = False) -> Any:
    """The next frame, decoded (the server's pings answered and skipped, unless ``pings``:
    then they are returned, unanswered)."""
    while True:
        message = decode(await asyncio.wait_for(ws.recv(), timeout))
        if pings or set(message) != {"ping"}:
            return message
        await send(ws, {"pong": message["ping"]})


async def until(ws: ClientConnection, channel: str, timeout: float = 15.0, **match: Any) -> Any:
    """The next frame on ``channel`` (with the given top-level fields). The wait is generous:
    only a push that never comes should reach it (with 5 s, a market-stream test failed once
    on a 2-core machine loaded by benchmarks, and never again in 15 reruns)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        message = await next_message(ws, max(0.01, deadline - loop.time()))
        if message.get("channel") == channel and all(message.get(k) == v for k, v in match.items()):
            return message


async def subscribe(ws: ClientConnection, channel: str) -> Any:
    await send(ws, {"event": "sub", "params": {"channel": channel, "cb_id": "t"}})
    while True:
        message = await until(ws, channel)
        assert "code" not in message, message
        if message.get("event_rep") == "subed":
            return message


async def error_of(ws: ClientConnection, timeout: float = 5.0) -> Any:
    """The next error frame (pushes on the way skipped)."""
    while "code" not in (message := await next_message(ws, timeout)):
        pass
    return message
