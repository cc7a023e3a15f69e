"""The WebSocket routes, served by the same server as the REST API.

- ``/kline-api/ws``: spot market data; the same path answered on a host whose first label
  contains ``futures`` (e.g. ``futures-ws.example.com``) is the futures market data, as the
  family serves futures on a host of its own;
- ``/futures/kline-api/ws``: futures market data on any host;
- ``/spotws_user/userData/ws``: the spot and margin account's private stream;
- ``/position_order/ws``: the futures account's private stream.
"""

from __future__ import annotations

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from tradehall.api.replay import ReplayGuard
from tradehall.stream.connection import Connection
from tradehall.stream.fanout import FUTURES, SPOT, Fanout
from tradehall.stream.market import market_handler
from tradehall.stream.private import private_handler

SPOT_MARKET = "/kline-api/ws"
FUTURES_MARKET = "/futures/kline-api/ws"
SPOT_PRIVATE = "/spotws_user/userData/ws"
FUTURES_PRIVATE = "/position_order/ws"


def is_futures_host(websocket: WebSocket) -> bool:
    host = websocket.headers.get("host", "")
    return "futures" in host.split(".", 1)[0].lower()


def routes(hub: Fanout, replay: ReplayGuard, max_ahead_ms: int) -> list[WebSocketRoute]:
    spot_market = market_handler(futures=False)
    futures_market = market_handler(futures=True)
    spot_private = private_handler(SPOT, SPOT_PRIVATE, replay, max_ahead_ms)
    futures_private = private_handler(FUTURES, FUTURES_PRIVATE, replay, max_ahead_ms)

    async def market(websocket: WebSocket) -> None:
        handler = futures_market if is_futures_host(websocket) else spot_market
        await Connection(websocket, hub).run(handler)

    async def futures(websocket: WebSocket) -> None:
        await Connection(websocket, hub).run(futures_market)

    async def spot_user(websocket: WebSocket) -> None:
        await Connection(websocket, hub).run(spot_private)

    async def futures_user(websocket: WebSocket) -> None:
        await Connection(websocket, hub).run(futures_private)

    return [
        WebSocketRoute(SPOT_MARKET, market),
        WebSocketRoute(FUTURES_MARKET, futures),
        WebSocketRoute(SPOT_PRIVATE, spot_user),
        WebSocketRoute(FUTURES_PRIVATE, futures_user),
    ]
