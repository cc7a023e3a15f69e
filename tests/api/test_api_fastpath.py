"""The request fast paths answer exactly as the general ones (docs/performance.md,
"Optimisations"): the app's exact-path dispatch as Starlette's router, the cached depth view
as a fresh rendering, the quick parameter readers as the general ones."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import MutableMapping
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import Env
from tradehall.api import wire
from tradehall.api.app import App
from tradehall.api.errors import ApiError
from tradehall.api.guard import SECURITY_HEADERS
from tradehall.api.http import parse_query
from tradehall.api.params import Params
from tradehall.client import ApiError as ClientError
from tradehall.client import Client
from tradehall.client.signing import request_path_for_signing, sign, signature_payload
from tradehall.codes import Code
from tradehall.stream.routes import (
    FUTURES_MARKET,
    FUTURES_PRIVATE,
    SPOT_MARKET,
    SPOT_PRIVATE,
    Stream,
)
from tradehall.units import UnitsError, to_units

pytestmark = pytest.mark.one_process  # the one process's own dispatch

SPOT = "/spot/open/sapi/v1"


# --------------------------------------------------------------------------- raw ASGI


def asgi(
    env: Env,
    method: str,
    path: str,
    query: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    root_path: str = "",
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight to the app; a ``root_path`` keeps it off the exact-path dispatch
    (Starlette routes it), so the same request can be answered both ways."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path,
        "raw_path": (root_path + path).encode(),
        "query_string": query,
        "root_path": root_path,
        "headers": headers or [],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def call() -> None:
        await env.http.app(scope, receive, send)

    portal = env.http.portal
    assert portal is not None
    portal.call(call)
    start = sent[0]
    return start["status"], list(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def both_ways(
    env: Env,
    method: str,
    path: str,
    query: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    # One request id for both (each answer carries its request's: tradehall.logs).
    headers = [*(headers or []), (b"x-request-id", b"both-ways")]
    fast = asgi(env, method, path, query, headers, body)
    routed = asgi(env, method, path, query, headers, body, root_path="/gw")
    assert fast == routed
    assert (b"x-request-id", b"both-ways") in fast[1]
    return fast


def test_fast_dispatch_answers_as_starlette(env: Env) -> None:
    status, headers, body = both_ways(env, "GET", SPOT + "/ping")
    assert (status, body) == (200, b"{}")
    assert headers == [
        (b"content-length", b"2"),
        (b"content-type", b"application/json"),
        *SECURITY_HEADERS,
        (b"x-request-id", b"both-ways"),
    ]
    status, _, body = both_ways(env, "GET", SPOT + "/depth", b"symbol=BTCUSDT&limit=5")
    assert status == 200 and json.loads(body)["time"] == env.clock()
    status, _, body = both_ways(env, "GET", SPOT + "/depth", b"symbol=NOPE")
    assert (status, json.loads(body)["code"]) == (400, Code.BAD_SYMBOL)
    status, _, body = both_ways(env, "GET", SPOT + "/depth", b"symbol=BTCUSDT&symbol=ETHUSDT")
    assert (status, json.loads(body)["code"]) == (400, Code.TOO_MANY_PARAMS)
    json_type = [(b"content-type", b"application/json")]
    status, _, body = both_ways(env, "POST", SPOT + "/order", headers=json_type, body=b"{}")
    assert (status, json.loads(body)["code"]) == (401, Code.APIKEY_MISSING)
    status, _, body = both_ways(env, "POST", SPOT + "/order", body=b"{}")
    assert (status, json.loads(body)["code"]) == (400, Code.CONTENT_TYPE)


def test_family_addresses_take_the_fast_dispatch(env: Env) -> None:
    """The /sapi/v2 aliases and the v2/v3 reads are in the exact-path table, and answer there
    as Starlette's routing does."""
    app = env.http.app
    assert isinstance(app, App)
    table = app.fast_paths()
    v2, v3 = "/spot/open/sapi/v2", "/spot/open/sapi/v3"
    for path, method in (
        (v2 + "/depth", "GET"),
        (v2 + "/order", "POST"),
        (v2 + "/margin/order", "POST"),
        (v2 + "/ticker", "GET"),
        (v3 + "/historyOrders", "GET"),
        (v3 + "/myTrades", "GET"),
    ):
        assert table[path][method] is not None, (path, method)
    assert table[v2 + "/ticker"]["GET"] is not table[SPOT + "/ticker"]["GET"]
    assert table[v2 + "/depth"]["GET"] is table[SPOT + "/depth"]["GET"]
    status, _, body = both_ways(env, "GET", v2 + "/ticker", b"symbols=BTCUSDT")
    assert status == 200 and [t["symbol"] for t in json.loads(body)] == ["BTCUSDT"]
    status, _, body = both_ways(env, "GET", v3 + "/myTrades")
    assert (status, json.loads(body)["code"]) == (401, Code.APIKEY_MISSING)


def test_unknown_paths_and_methods_still_get_json_errors(env: Env) -> None:
    status, _, body = asgi(env, "GET", SPOT + "/nowhere")
    assert status == 404 and json.loads(body)["code"] == Code.UNSUPPORTED
    status, _, body = asgi(env, "DELETE", SPOT + "/ping")
    assert status == 405 and json.loads(body)["code"] == Code.UNSUPPORTED
    status, _, body = asgi(env, "POST", SPOT + "/depth")
    assert status == 405 and json.loads(body)["code"] == Code.UNSUPPORTED
    status, _, _ = asgi(env, "HEAD", SPOT + "/ping")  # HEAD: Starlette's, as before
    assert status == 200


def test_signed_requests_answer_alike_both_ways(env: Env) -> None:
    user = env.admin.create_user()
    key = env.admin.create_key(user["id"])
    env.admin.deposit(user["id"], "USDT", "100000")
    answers = []
    for n, root_path in enumerate(("", "/gw")):
        body = b'{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":"0.01","price":"29000"}'
        ts = str(env.clock() - 1 - n)
        # What a client behind that root path signs: the path as the server sees it.
        signed = request_path_for_signing(root_path + SPOT + "/order", "")
        headers = [
            (b"content-type", b"application/json"),
            (b"x-ch-apikey", key["apiKey"].encode()),
            (b"x-ch-ts", ts.encode()),
            (
                b"x-ch-sign",
                sign(key["secret"], signature_payload(ts, "POST", signed, body)).encode(),
            ),
        ]
        status, _, answer = asgi(env, "POST", SPOT + "/order", b"", headers, body, root_path)
        answers.append((status, sorted(json.loads(answer))))
        replayed = asgi(env, "POST", SPOT + "/order", b"", headers, body, root_path)
        assert (replayed[0], json.loads(replayed[2])["code"]) == (401, Code.BAD_SIGNATURE)
    assert answers[0] == answers[1] and answers[0][0] == 200
    assert len(env.exchange.engine.open_orders(user["id"], "BTCUSDT")) == 2


# --------------------------------------------------------------------------- depth view


def fresh_depth(env: Env, limit: int) -> dict[str, Any]:
    pair = env.exchange.config.markets.pairs["BTCUSDT"]
    book = env.exchange.engine.spot.books["BTCUSDT"]
    depth = wire.depth(pair, env.clock(), book.bids.depth(limit), book.asks.depth(limit))
    decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(depth))
    return decoded


def test_cached_depth_is_the_fresh_rendering_and_keeps_time_current(env: Env) -> None:
    buyer = env.trader({"USDT": "1000000"})
    seller = env.trader({"BTC": "100"})
    public = env.public()
    rng = random.Random(5)
    live: list[tuple[Client, str]] = []
    for step in range(60):
        action = rng.random()
        if action < 0.55 or not live:
            side, who = ("BUY", buyer) if rng.random() < 0.5 else ("SELL", seller)
            price = 30000 + rng.randint(-5, 5) + (-3 if side == "BUY" else 3)
            placed = who.create_order(
                "BTCUSDT", side, "LIMIT", volume=f"0.0{rng.randint(1, 9)}", price=str(price)
            )
            if placed["status"] in ("NEW", "PARTIALLY_FILLED"):
                live.append((who, placed["orderId"]))
        elif action < 0.85:
            who, order_id = live.pop(rng.randrange(len(live)))
            with contextlib.suppress(ClientError):  # filled meanwhile
                who.cancel_order("BTCUSDT", order_id=order_id)
        for limit in (100, 3):
            first = public.depth("BTCUSDT", limit=limit)
            assert first == fresh_depth(env, limit), step
            env.clock.advance(7)  # the levels come from the cache now; the time may not
            again = public.depth("BTCUSDT", limit=limit)
            assert again["time"] == env.clock()
            assert again == fresh_depth(env, limit)


def test_depth_view_follows_a_failed_command(env: Env) -> None:
    """A command that fails unexpectedly (not a clean refusal) may have moved the book: the
    views are dropped (and the exchange stops: tests/test_exchange_failstop.py)."""
    public = env.public()
    public.depth("BTCUSDT")  # the view is cached
    versions = dict(env.exchange.book_versions)

    class Boom(Exception):
        pass

    def explode(cmd: Any) -> Any:
        raise Boom

    real = env.exchange.engine.apply
    env.exchange.engine.apply = explode  # type: ignore[method-assign]
    try:
        with pytest.raises(Boom):
            env.exchange.apply(object())  # type: ignore[arg-type]
    finally:
        env.exchange.engine.apply = real  # type: ignore[method-assign]
    assert all(env.exchange.book_versions[s] > versions[s] for s in versions)
    with pytest.raises(ClientError) as refused:
        public.depth("BTCUSDT")
    assert (refused.value.status, refused.value.code) == (503, -1001)


# --------------------------------------------------------------------------- parameters


def general_units(value: Any, decimals: int) -> int | str:
    """What Params.units answers without its quick path: the units, or the error's text."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        return "type"
    try:
        units = to_units(value, decimals)
    except UnitsError as exc:
        return "precision" if exc.precision else "malformed"
    return units if units > 0 else "not positive"


def quick_units(value: Any, decimals: int) -> int | str:
    try:
        units = Params({"v": value}).units("v", decimals)
    except ApiError as exc:
        if exc.code == Code.PRECISION:
            return "precision"
        if "greater than zero" in exc.msg:
            return "not positive"
        return "type" if "must be a number" in exc.msg else "malformed"
    assert units is not None
    return units


DECIMAL_TEXT = st.from_regex(r"\A[0-9]{0,22}(\.[0-9]{0,22})?\Z") | st.sampled_from(
    ["0", "0.0", "00.100", "1.", ".5", "1e3", "-1", "+1", " 1", "1_0", "\u0661", "1.5.5", ""]
)


@settings(max_examples=400, deadline=None)
@given(DECIMAL_TEXT, st.integers(min_value=0, max_value=18))
def test_quick_decimal_reading_matches_to_units(text: str, decimals: int) -> None:
    assert quick_units(text, decimals) == general_units(text, decimals)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab=&;c +%2x\u00e9", max_size=14))
def test_query_reading_matches_parse_qsl(query: str) -> None:
    pairs = parse_qsl(query, keep_blank_values=True)
    if len(dict(pairs)) != len(pairs):
        with pytest.raises(ApiError):
            parse_query(query)
    else:
        assert dict(parse_query(query).data) == dict(pairs)


def test_the_stream_paths_take_the_exact_dispatch(env: Env) -> None:
    """A WebSocket connection to a stream reaches it with the server's own ``send`` (the
    streams write their frames straight to the socket only then), on one process and on a
    gateway alike."""
    app = env.http.app
    assert isinstance(app, App)
    table = app.socket_paths()
    for path in (SPOT_MARKET, FUTURES_MARKET, SPOT_PRIVATE, FUTURES_PRIVATE):
        assert isinstance(table[path], Stream), path
