"""The floor: the server stack tradehall runs on (uvicorn with uvloop and httptools, the same
``uvicorn_config`` and listening socket as ``tradehall.server.run``) answering a constant.

- ``GET /floor`` and ``POST /floor`` (the body is read): a bare ASGI route, nothing above
  uvicorn. This is the floor every endpoint is compared with.
- ``GET /floor/starlette`` and ``POST /floor/starlette``: the same constant through a
  Starlette route (the framework tradehall uses), for information.

The constant is the size of an order-placement response, so the floor also pays for sending
about as many bytes as the endpoints do.

    python -m bench.floor_app --port 0     # prints {"url": ..., "pid": ...} once listening
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tradehall.server import GracefulServer, listen, url_for, uvicorn_config

CONSTANT = json.dumps(
    {
        "symbol": "BTCUSDT",
        "orderId": "1234567",
        "clientOrderId": "",
        "transactTime": "1700000000000",
        "price": "30000.00",
        "origQty": "0.001000",
        "executedQty": "0",
        "status": "NEW",
        "type": "LIMIT",
        "side": "BUY",
    },
    separators=(",", ":"),
).encode()
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(CONSTANT)).encode()),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def _through_starlette(request: Request) -> Response:
    if request.method == "POST":
        await request.body()
    return Response(CONSTANT, media_type="application/json")


_starlette = Starlette(
    routes=[Route("/floor/starlette", _through_starlette, methods=["GET", "POST"])]
)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http" and scope["path"] == "/floor":
        if scope["method"] == "POST":
            more = True
            while more:
                message = await receive()
                more = bool(message.get("more_body", False))
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        await send({"type": "http.response.body", "body": CONSTANT})
        return
    await _starlette(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    sock = listen(args.host, args.port)
    try:
        port = sock.getsockname()[1]
        print(json.dumps({"url": url_for(args.host, port), "pid": os.getpid()}), flush=True)
        server = GracefulServer(uvicorn_config(app))
        server.run(sockets=[sock])
    finally:
        sock.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
