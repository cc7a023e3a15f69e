"""Streams from Python without socket code: an async iterator of decoded messages.

    async with MarketStream("http://127.0.0.1:8080") as stream:
        await stream.subscribe("market_btcusdt_trade_ticker")
        async for message in stream:
            print(message["tick"])

    async with UserStream("http://127.0.0.1:8080", API_KEY, SECRET) as stream:
        async for message in stream:            # user_order, user_balance, ...
            print(message)

Frames are gunzipped and parsed; the server's ``{"ping": n}`` is answered with
``{"pong": n}`` and not yielded. Numbers are kept exact (``decimal.Decimal``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from types import TracebackType
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from tradehall.client.signing import sign, signature_payload

SPOT_MARKET_PATH = "/kline-api/ws"
FUTURES_MARKET_PATH = "/futures/kline-api/ws"
SPOT_USER_PATH = "/spotws_user/userData/ws"
FUTURES_USER_PATH = "/position_order/ws"


class StreamError(Exception):
    """The server answered an error frame (``code``, ``msg``) where the call expected success."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{code}: {msg}")
        self.code = code
        self.msg = msg


def decode_frame(frame: str | bytes) -> dict[str, Any]:
    """A server frame as a dict: gzip-compressed JSON (plain JSON text is accepted too)."""
    data = gzip.decompress(frame) if isinstance(frame, bytes) else frame.encode()
    message: dict[str, Any] = json.loads(data, parse_float=Decimal)
    return message


def ws_url(base_url: str, path: str) -> str:
    """``http://host:port`` (or ``ws://``) plus the stream's path, as a ws:// or wss:// URL."""
    base = base_url.rstrip("/")
    if base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    elif base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    return base + path


class _Stream:
    def __init__(self, url: str) -> None:
        self.url = url
        self._ws: ClientConnection | None = None
        self._cb_ids = itertools.count(1)

    async def __aenter__(self) -> _Stream:
        self._ws = await connect(self.url, max_size=2**24, compression=None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    @property
    def websocket(self) -> ClientConnection:
        if self._ws is None:
            raise RuntimeError("the stream is not open: use `async with`")
        return self._ws

    async def send(self, message: dict[str, Any]) -> None:
        await self.websocket.send(json.dumps(message, separators=(",", ":")))

    async def receive(self) -> dict[str, Any]:
        """The next message that is not a ping (pings are answered)."""
        while True:
            message = decode_frame(await self.websocket.recv())
            if "ping" in message and len(message) == 1:
                await self.send({"pong": message["ping"]})
                continue
            return message

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self.receive()

    async def _until_reply(self, event_rep: str, channel: str) -> dict[str, Any]:
        """Read up to the answer (``event_rep``) about ``channel``, or raise its error;
        pushes read on the way are dropped."""
        while True:
            message = await self.receive()
            if message.get("channel") == channel or "code" in message:
                if "code" in message:
                    raise StreamError(int(message["code"]), str(message.get("msg", "")))
                if message.get("event_rep") == event_rep:
                    return message


class MarketStream(_Stream):
    """Market data (``market_<m>_depth_step0`` etc., see docs/websocket.md)."""

    def __init__(self, base_url: str, *, futures: bool = False) -> None:
        super().__init__(ws_url(base_url, FUTURES_MARKET_PATH if futures else SPOT_MARKET_PATH))

    async def __aenter__(self) -> MarketStream:
        await super().__aenter__()
        return self

    async def subscribe(self, channel: str) -> dict[str, Any]:
        """Subscribe and wait for the server's ``subed``; raises StreamError if refused."""
        await self.send(
            {"event": "sub", "params": {"channel": channel, "cb_id": str(next(self._cb_ids))}}
        )
        return await self._until_reply("subed", channel)

    async def unsubscribe(self, channel: str) -> dict[str, Any]:
        await self.send(
            {"event": "unsub", "params": {"channel": channel, "cb_id": str(next(self._cb_ids))}}
        )
        return await self._until_reply("unsubed", channel)

    async def request(self, channel: str, **params: Any) -> list[Any] | dict[str, Any]:
        """History (``req``): klines or trades (``endIdx`` seconds, ``pageSize`` up to 300),
        or the current depth or ticker; returns the answer's ``data``."""
        await self.send(
            {
                "event": "req",
                "params": {"channel": channel, "cb_id": str(next(self._cb_ids)), **params},
            }
        )
        answer = await self._until_reply("rep", channel)
        data: list[Any] | dict[str, Any] = answer["data"]
        return data


class UserStream(_Stream):
    """The account's private stream (spot and margin, or futures)."""

    def __init__(self, base_url: str, api_key: str, secret: str, *, futures: bool = False) -> None:
        self.path = FUTURES_USER_PATH if futures else SPOT_USER_PATH
        super().__init__(ws_url(base_url, self.path))
        self.api_key = api_key
        self.secret = secret

    async def __aenter__(self) -> UserStream:
        await super().__aenter__()
        await self.authenticate()
        return self

    async def authenticate(self) -> dict[str, Any]:
        ts = str(time.time_ns() // 1_000_000)
        signature = sign(self.secret, signature_payload(ts, "GET", self.path, b""))
        await self.send(
            {"event": "sub", "params": {"apiKey": self.api_key, "ts": ts, "sign": signature}}
        )
        return await self._until_reply("subed", "user")
