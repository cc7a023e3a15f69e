"""``GET /v1/spot/market/kline``, the live venues' candle address, through HTTP and the bundled
client: the bars of ``/sapi/v1/klines`` in the family's envelope, with the same checks."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from support import Env
from tradehall.client import Client

PATH = "/v1/spot/market/kline"
MINUTE = 60_000
INTERVALS = ("1min", "5min", "15min", "30min", "60min", "1h", "1day", "1week", "1month")


def refused(response: httpx2.Response, code: int, status: int = 400) -> str:
    assert (response.status_code, response.json()) == (
        status,
        {"code": code, "msg": response.json()["msg"]},
    ), response.text
    return str(response.json()["msg"])


def trade(maker: Client, taker: Client, qty: str, price: str) -> None:
    maker.create_order("BTCUSDT", "SELL", "LIMIT", qty, price=price)
    assert taker.create_order("BTCUSDT", "BUY", "LIMIT", qty, price=price)["status"] == "FILLED"


@pytest.fixture
def traded(env: Env) -> Env:
    """Trades in two minutes three minutes apart (flat bars between them)."""
    funds = {"USDT": "1000000", "BTC": "100"}
    a, b = env.trader(funds), env.trader(funds)
    trade(a, b, "0.01", "30000")
    trade(a, b, "0.02", "30500.5")
    env.clock.advance(3 * MINUTE)
    trade(a, b, "0.005", "29900")
    return env


def as_klines(bars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bars of the envelope renamed to ``/klines``' fields."""
    names = {"id": "idx", "volume": "vol"}
    return [{names.get(k, k): v for k, v in bar.items()} for bar in bars]


def test_market_kline_is_klines_in_the_envelope(traded: Env) -> None:
    public = traded.public()
    for interval in INTERVALS:
        answer = traded.http.get(PATH, params={"symbol": "btcusdt", "scaleType": interval})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["code"], body["msg"], list(body["data"])) == ("0", "SUCCESS", ["data"])
        bars = body["data"]["data"]
        assert as_klines(bars) == public.klines("BTCUSDT", interval)
        for bar in bars:
            assert list(bar) == ["id", "open", "close", "high", "low", "volume"]
            assert type(bar["id"]) is int and bar["id"] > 10**12  # ms, the bar's open time
            assert all(type(bar[k]) is str for k in ("open", "close", "high", "low", "volume"))
    minutes = public.market_kline("BTCUSDT", "1min")["data"]["data"]
    assert [b["id"] for b in minutes] == sorted(b["id"] for b in minutes)  # oldest first
    assert len(minutes) == 4
    assert (minutes[0]["open"], minutes[0]["close"], minutes[0]["volume"]) == (
        "30000.00",
        "30500.50",
        "0.030000",
    )
    assert public.market_kline("BTCUSDT", "1min", limit=2)["data"]["data"] == minutes[-2:]
    assert (
        traded.http.get(PATH, params={"symbol": "BTCUSDT", "scaleType": "1min"}).json()["data"][
            "data"
        ]
        == minutes
    )


def test_market_kline_empty_and_unsigned(env: Env) -> None:
    answer = env.http.get(PATH, params={"symbol": "ETHUSDT", "scaleType": "1day"})
    assert answer.json() == {"code": "0", "msg": "SUCCESS", "data": {"data": []}}


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"scaleType": "1min"}, -1102),
        ({"symbol": "BTCUSDT"}, -1102),
        ({"symbol": "BTCUSDT", "scaleType": "2min"}, -1102),
        ({"symbol": "BTCUSDT", "scaleType": "1min", "limit": "0"}, -1102),
        ({"symbol": "BTCUSDT", "scaleType": "1min", "limit": "301"}, -1102),
        ({"symbol": "BTCUSDT", "scaleType": "1min", "limit": "x"}, -1102),
        ({"symbol": "NOPE", "scaleType": "1min"}, -1121),
        ({"symbol": "BTC/USDT", "scaleType": "1min"}, -1100),
    ],
)
def test_market_kline_refusals(env: Env, params: dict[str, str], code: int) -> None:
    refused(env.http.get(PATH, params=params), code)


def test_market_kline_limit_bounds(traded: Env) -> None:
    params = {"symbol": "BTCUSDT", "scaleType": "1min"}
    assert len(traded.http.get(PATH, params={**params, "limit": "300"}).json()["data"]["data"]) == 4
    assert len(traded.http.get(PATH, params={**params, "limit": "1"}).json()["data"]["data"]) == 1
