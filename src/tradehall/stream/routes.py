"""The WebSocket routes, served by the same server as the REST API.

- ``/kline-api/ws``: spot market data; the same path answered on a host whose first label
  contains ``futures`` (e.g. ``futures-ws.example.com``) is the futures market data, as the
  family serves futures on a host of its own;
- ``/futures/kline-api/ws``: futures market data on any host;
- ``/spotws_user/userData/ws``: the spot and margin account's private stream;
- ``/position_order/ws``: the futures account's private stream.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.routing import WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from tradehall.api.replay import ReplayGuard
from tradehall.stream.connection import Connection, Handler
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


class Stream:
    """One stream path's ASGI app. A plain app rather than a WebSocket endpoint function, so
    that the connection's writer gets the ASGI ``send`` itself: every frame to every client
    goes through it, and Starlette's session wrapper would add a layer to each."""

    def __init__(
        self, hub: Fanout, handler: Callable[[WebSocket], Handler], *, login: bool = False
    ) -> None:
        self.hub = hub
        self.handler = handler
        self.login = login
        """A private stream: a connection that has not logged in within ``idle_timeout_s``
        is closed, pings answered or not."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        websocket = WebSocket(scope, receive, send)
        connection = Connection(websocket, self.hub, send, login_required=self.login)
        await connection.run(self.handler(websocket))


def routes(hub: Fanout, replay: ReplayGuard, max_ahead_ms: int) -> list[WebSocketRoute]:
    spot_market: Handler = market_handler(futures=False)
    futures_market: Handler = market_handler(futures=True)
    spot_private: Handler = private_handler(SPOT, SPOT_PRIVATE, replay, max_ahead_ms)
    futures_private: Handler = private_handler(FUTURES, FUTURES_PRIVATE, replay, max_ahead_ms)

    def market(websocket: WebSocket) -> Handler:
        return futures_market if is_futures_host(websocket) else spot_market

    return [
        WebSocketRoute(SPOT_MARKET, Stream(hub, market)),
        WebSocketRoute(FUTURES_MARKET, Stream(hub, lambda _: futures_market)),
        WebSocketRoute(SPOT_PRIVATE, Stream(hub, lambda _: spot_private, login=True)),
        WebSocketRoute(FUTURES_PRIVATE, Stream(hub, lambda _: futures_private, login=True)),
    ]
