"""Signing functions and what the clients actually put on the wire."""

from __future__ import annotations

import asyncio
import inspect
import json
from decimal import Decimal
from typing import Any

import httpx2
import pytest

from tradehall.client import (
    GATEWAY_PREFIXES,
    ApiError,
    AsyncClient,
    Client,
    request_path_for_signing,
    sign,
    signature_payload,
    verify,
)

VECTOR_SECRET = "902ae3cb34ecee2779aa4d3e1d226686"
VECTOR_BODY = '{"symbol":"BTCUSDT","price":"9300","volume":"1","side":"BUY","type":"LIMIT"}'
VECTOR_MESSAGE = "1588591856950POST/sapi/v1/order/test" + VECTOR_BODY
VECTOR_SIGN = "c50d0a74bb9427a9a03933d0eded03af9bf50115dc5b706882a4fcf07a26b761"

API_KEY = "test-key"
SECRET = "test-secret"
NOW_MS = 1_700_000_000_123


# --- pure functions ---------------------------------------------------------------------------


def test_known_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_MESSAGE.encode()) == VECTOR_SIGN


def test_known_vector_via_payload() -> None:
    payload = signature_payload("1588591856950", "post", "/sapi/v1/order/test", VECTOR_BODY)
    assert payload == VECTOR_MESSAGE.encode()
    assert signature_payload("1588591856950", "POST", "/sapi/v1/order/test", VECTOR_BODY.encode())
    assert sign(VECTOR_SECRET, payload) == VECTOR_SIGN
    assert verify(VECTOR_SECRET, payload, VECTOR_SIGN)


def test_get_payload_has_empty_body() -> None:
    assert signature_payload("1", "get", "/sapi/v1/account", b"") == b"1GET/sapi/v1/account"


def test_gateway_prefixes() -> None:
    assert GATEWAY_PREFIXES == ("/spot/open", "/futures/open")


@pytest.mark.parametrize(
    ("url_path", "expected"),
    [
        ("/spot/open/sapi/v1/order", "/sapi/v1/order"),
        ("/spot/open/sapi/v1/margin/order", "/sapi/v1/margin/order"),
        ("/futures/open/fapi/v1/order", "/fapi/v1/order"),
        ("/fapi/v1/ticker", "/fapi/v1/ticker"),
        ("/sapi/v1/order", "/sapi/v1/order"),
        # Only one prefix, and only on a path-segment boundary.
        ("/spot/open/futures/open/fapi/v1/x", "/futures/open/fapi/v1/x"),
        ("/spot/openx/sapi/v1/order", "/spot/openx/sapi/v1/order"),
    ],
)
def test_prefix_stripping(url_path: str, expected: str) -> None:
    assert request_path_for_signing(url_path, "") == expected


def test_query_appended_raw() -> None:
    raw = "symbol=btcusdt&orderId=12%2C3&b=x+y&a=%e2%82%ac"
    assert request_path_for_signing("/spot/open/sapi/v1/order", raw) == "/sapi/v1/order?" + raw
    assert (
        request_path_for_signing("/fapi/v1/ticker", "contractName=E-BTC-USDT")
        == "/fapi/v1/ticker?contractName=E-BTC-USDT"
    )


def test_verify_is_case_insensitive() -> None:
    payload = VECTOR_MESSAGE.encode()
    assert verify(VECTOR_SECRET, payload, VECTOR_SIGN.upper())
    assert verify(VECTOR_SECRET, payload, VECTOR_SIGN[:32] + VECTOR_SIGN[32:].upper())
    assert not verify(VECTOR_SECRET + "x", payload, VECTOR_SIGN)
    assert not verify(VECTOR_SECRET, payload + b" ", VECTOR_SIGN)
    flipped = ("0" if VECTOR_SIGN[0] != "0" else "1") + VECTOR_SIGN[1:]
    assert not verify(VECTOR_SECRET, payload, flipped)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "0",
        VECTOR_SIGN[:-1],
        VECTOR_SIGN + "0",
        "z" * 64,
        "é" * 64,
        "é" * 32,
        "\x00" * 64,
        "\udcff" * 64,
        " " + VECTOR_SIGN[1:],
        None,
        b"c50d0a74",
        12345,
    ],
)
def test_verify_never_raises_on_garbage(garbage: Any) -> None:
    assert verify(VECTOR_SECRET, VECTOR_MESSAGE.encode(), garbage) is False


def test_verify_never_raises_on_bad_secret() -> None:
    assert verify("\udcff", b"x", VECTOR_SIGN) is False


# --- on the wire ------------------------------------------------------------------------------


class Recorder:
    """MockTransport handler that re-verifies every signed request from its real bytes."""

    def __init__(self, reply: Any = None, status: int = 200) -> None:
        self.requests: list[httpx2.Request] = []
        self.verified: list[bool] = []
        self.reply: Any = {} if reply is None else reply
        self.status = status

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if "X-CH-SIGN" in request.headers:
            raw_query = request.url.query.decode("ascii")
            path = request_path_for_signing(request.url.path, raw_query)
            payload = signature_payload(
                request.headers["X-CH-TS"], request.method, path, request.content
            )
            self.verified.append(verify(SECRET, payload, request.headers["X-CH-SIGN"]))
        if isinstance(self.reply, bytes):
            return httpx2.Response(self.status, content=self.reply)
        return httpx2.Response(self.status, json=self.reply)


def make_client(recorder: Recorder) -> Client:
    http = httpx2.Client(transport=httpx2.MockTransport(recorder))
    return Client("http://exchange.test", API_KEY, SECRET, http=http, clock=lambda: NOW_MS)


def test_signed_get_with_query_verifies() -> None:
    rec = Recorder(reply={"orderId": "123"})
    with make_client(rec) as client:
        assert client.get_order("BTCUSDT", 123, client_order_id="my id/1+2") == {"orderId": "123"}
    (req,) = rec.requests
    assert rec.verified == [True]
    assert req.method == "GET"
    assert req.url.path == "/spot/open/sapi/v1/order"
    # Insertion order, urlencode quoting, sent verbatim.
    assert req.url.query == b"orderId=123&newClientOrderId=my+id%2F1%2B2&symbol=BTCUSDT"
    assert req.content == b""
    assert req.headers["X-CH-APIKEY"] == API_KEY
    assert req.headers["X-CH-TS"] == str(NOW_MS)
    assert req.headers["Content-Type"] == "application/json"
    expected = sign(
        SECRET,
        f"{NOW_MS}GET/sapi/v1/order?orderId=123&newClientOrderId=my+id%2F1%2B2&symbol=BTCUSDT".encode(),
    )
    assert req.headers["X-CH-SIGN"] == expected


def test_signed_post_with_decimal_price_verifies() -> None:
    rec = Recorder(reply={"orderId": "1", "status": "NEW"})
    with make_client(rec) as client:
        client.create_order(
            "BTCUSDT", "BUY", "LIMIT", Decimal("0.00000100"), Decimal("9.3E+3"),
            client_order_id="c1", recv_window=5000,
        )  # fmt: skip
    (req,) = rec.requests
    assert rec.verified == [True]
    assert req.method == "POST"
    assert req.url.path == "/spot/open/sapi/v1/order"
    assert req.url.query == b""
    body = (
        b'{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":"0.00000100",'
        b'"price":"9300","newClientOrderId":"c1","recvWindow":5000}'
    )
    assert req.content == body
    assert req.headers["X-CH-SIGN"] == sign(SECRET, f"{NOW_MS}POST/sapi/v1/order".encode() + body)


def test_decimal_never_in_exponent_notation() -> None:
    rec = Recorder()
    with make_client(rec) as client:
        client.test_order("BTCUSDT", "SELL", "LIMIT", Decimal("1E-7"), Decimal("0E-2"))
    body = json.loads(rec.requests[0].content)
    assert body == {
        "symbol": "BTCUSDT",
        "side": "SELL",
        "type": "LIMIT",
        "volume": "0.0000001",
        "price": "0.00",
    }
    assert rec.requests[0].url.path == "/spot/open/sapi/v1/order/test"
    assert rec.verified == [True]


def test_margin_and_batch_paths_sign() -> None:
    rec = Recorder()
    with make_client(rec) as client:
        client.margin_cancel_order("BTCUSDT", client_order_id="x")
        client.margin_my_trades("BTCUSDT", limit=5, from_id=7)
        client.batch_orders(
            "BTCUSDT", [{"price": Decimal("1.5"), "volume": 2, "side": "BUY", "batchType": "LIMIT"}]
        )
        client.account()
    paths = [(r.method, r.url.path, r.url.query) for r in rec.requests]
    assert paths == [
        ("POST", "/spot/open/sapi/v1/margin/cancel", b""),
        ("GET", "/spot/open/sapi/v1/margin/myTrades", b"symbol=BTCUSDT&limit=5&fromId=7"),
        ("POST", "/spot/open/sapi/v1/batchOrders", b""),
        ("GET", "/spot/open/sapi/v1/account", b""),
    ]
    assert rec.requests[0].content == b'{"newClientOrderId":"x","symbol":"BTCUSDT"}'
    assert b'"price":"1.5","volume":2' in rec.requests[2].content
    assert rec.verified == [True, True, True, True]


def test_public_requests_are_unsigned() -> None:
    rec = Recorder(reply={"symbols": []})
    with make_client(rec) as client:
        client.depth("BTCUSDT")
    (req,) = rec.requests
    assert req.url.query == b"symbol=BTCUSDT"
    assert "X-CH-SIGN" not in req.headers
    assert "X-CH-APIKEY" not in req.headers


def test_request_escape_hatch_signs_raw_body_and_raw_query() -> None:
    rec = Recorder()
    with make_client(rec) as client:
        raw = b'{"symbol": "BTCUSDT",  "volume": 1}'
        response = client.request("POST", "/spot/open/sapi/v1/order?b=2&a=1", raw_body=raw, ts=42)
        assert isinstance(response, httpx2.Response)
        bad = client.request("GET", "/spot/open/sapi/v1/account", headers={"x-ch-sign": "00"})
    first, second = rec.requests
    assert first.content == raw
    assert first.url.query == b"b=2&a=1"
    assert first.headers["X-CH-TS"] == "42"
    assert bad.status_code == 200
    assert second.headers.get_list("X-CH-SIGN") == ["00"]
    assert rec.verified == [True, False]


def test_async_client_signs_the_same_bytes() -> None:
    rec = Recorder()

    async def run() -> None:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(rec))
        client = AsyncClient(
            "http://exchange.test", API_KEY, SECRET, http=http, clock=lambda: NOW_MS
        )
        async with client:
            await client.create_order("BTCUSDT", "BUY", "LIMIT", "1", Decimal("9300"))
            await client.open_orders("BTCUSDT", limit=10)
        await http.aclose()

    asyncio.run(run())
    assert rec.verified == [True, True]
    assert rec.requests[0].content == (
        b'{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":"1","price":"9300"}'
    )
    assert rec.requests[1].url.query == b"symbol=BTCUSDT&limit=10"


def test_async_client_on_the_family_addresses() -> None:
    """``spot_version="v2"`` moves spot and margin calls to /sapi/v2 (signed as sent); the
    family's asset answers in their ``{"code": "0", ...}`` envelope are not errors."""
    rec = Recorder({"code": "0", "msg": "SUCCESS", "data": {"transferId": "7"}})

    async def run() -> list[Any]:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(rec))
        client = AsyncClient(
            "http://exchange.test",
            API_KEY,
            SECRET,
            http=http,
            clock=lambda: NOW_MS,
            spot_version="v2",
        )
        async with client:
            answers = [
                await client.account(),
                await client.margin_open_orders("BTCUSDT"),
                await client.asset_transfer("USDT", "5", "EXCHANGE", "FUTURE"),
                await client.tickers(["btcusdt", "ethbtc"]),
                await client.history_orders(limit=5, start_time=1),
                await client.futures_positions("E-BTC-USDT"),
            ]
        await http.aclose()
        return answers

    answers = asyncio.run(run())
    assert answers[2]["data"] == {"transferId": "7"}
    assert [r.url.path for r in rec.requests] == [
        "/spot/open/sapi/v2/account",
        "/spot/open/sapi/v2/margin/openOrders",
        "/spot/open/sapi/v2/asset/transfer",
        "/spot/open/sapi/v2/ticker",
        "/spot/open/sapi/v3/historyOrders",
        "/futures/open/fapi/v1/positions",
    ]
    assert rec.verified == [True] * 5  # the ticker is public
    assert rec.requests[2].content == (
        b'{"coinSymbol":"USDT","amount":"5","fromAccount":"EXCHANGE","toAccount":"FUTURE"}'
    )
    assert rec.requests[3].url.query == b"symbols=btcusdt%2Cethbtc"
    assert rec.requests[4].url.query == b"limit=5&startTime=1"


def test_market_kline_is_an_unsigned_read_at_the_root() -> None:
    """Both clients read the live venues' candles at ``/v1/spot/market/kline``, unsigned."""
    reply = {"code": "0", "msg": "SUCCESS", "data": {"data": []}}
    rec = Recorder(reply)

    async def run() -> Any:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(rec))
        client = AsyncClient(
            "http://exchange.test", API_KEY, SECRET, http=http, clock=lambda: NOW_MS
        )
        async with client:
            answer = await client.market_kline("BTCUSDT", "60min", limit=5)
        await http.aclose()
        return answer

    assert asyncio.run(run()) == reply
    with make_client(rec) as client:
        assert client.market_kline("btcusdt", "1day") == reply
    first, second = rec.requests
    assert (first.url.path, first.url.query) == (
        "/v1/spot/market/kline",
        b"symbol=BTCUSDT&scaleType=60min&limit=5",
    )
    assert (second.url.path, second.url.query) == (
        "/v1/spot/market/kline",
        b"symbol=btcusdt&scaleType=1day",
    )
    assert all("X-CH-SIGN" not in r.headers for r in rec.requests)


def test_sync_and_async_have_identical_methods() -> None:
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    sync_methods, async_methods = public(Client), public(AsyncClient)
    assert sync_methods.keys() == async_methods.keys()
    for name, member in vars(AsyncClient).items():
        if name in async_methods:
            assert inspect.iscoroutinefunction(member), name
    for name, sig in sync_methods.items():
        assert list(sig.parameters) == list(async_methods[name].parameters), name


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reply", "code", "msg"),
    [
        (400, {"code": -1121, "msg": "Invalid symbol."}, -1121, "Invalid symbol."),
        (200, {"code": -1022, "msg": "bad sign"}, -1022, "bad sign"),
        (502, b"Bad Gateway", -1000, "Bad Gateway"),
        (200, b"not json", -1000, "not json"),
        (404, [1, 2], -1000, "[1,2]"),
    ],
)
def test_api_error(status: int, reply: Any, code: int, msg: str) -> None:
    rec = Recorder(reply=reply, status=status)
    with make_client(rec) as client, pytest.raises(ApiError) as info:
        client.account()
    assert (info.value.status, info.value.code, info.value.msg) == (status, code, msg)
