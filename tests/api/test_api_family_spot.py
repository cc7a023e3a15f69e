"""The family's newer spot addresses through HTTP: every spot and margin endpoint under
/sapi/v2, the v2 ticker of every pair, the v3 history reads, and ``orderIdString``."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from support import BASE_URL, ClientClock, Env
from tradehall.client import Client
from tradehall.client.signing import sign, signature_payload

SPOT = "/spot/open/sapi/v1"
V2 = "/spot/open/sapi/v2"
V3 = "/spot/open/sapi/v3"
T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def ok(response: httpx2.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def refused(response: httpx2.Response, code: int, status: int = 400) -> str:
    assert (response.status_code, response.json()["code"]) == (status, code), response.text
    return str(response.json()["msg"])


def on_v2(env: Env, client: Client) -> Client:
    """The same key, sending its spot and margin calls to /sapi/v2."""
    key, secret = client._builder.api_key, client._builder._secret
    return Client(
        BASE_URL, key, secret, http=env.http, clock=ClientClock(env.clock), spot_version="v2"
    )


def test_v2_aliases_act_on_the_same_orders(env: Env) -> None:
    alice = env.trader({"USDT": "10000", "BTC": "1"})
    v2 = on_v2(env, alice)
    placed = v2.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    assert placed["orderIdString"] == placed["orderId"]
    assert alice.get_order("BTCUSDT", placed["orderId"]) == v2.get_order(
        "BTCUSDT", placed["orderId"]
    )
    assert v2.open_orders("BTCUSDT") == alice.open_orders("BTCUSDT")
    assert v2.account() == alice.account()
    assert v2.depth("BTCUSDT") == alice.depth("BTCUSDT")
    canceled = v2.cancel_order("BTCUSDT", placed["orderId"])
    assert canceled["status"] == "CANCELED" and canceled["orderIdString"] == placed["orderId"]
    assert alice.get_order("BTCUSDT", placed["orderId"])["status"] == "CANCELED"
    env.audit()


def test_v2_signature_covers_the_v2_path(env: Env) -> None:
    alice = env.trader({"USDT": "10000"})
    key, secret = alice._builder.api_key, alice._builder._secret
    assert key is not None and secret is not None
    ts = str(env.clock.now)
    for signed_path, status in (("/sapi/v1/account", 401), ("/sapi/v2/account", 200)):
        signature = sign(secret, signature_payload(ts, "GET", signed_path, b""))
        headers = {"X-CH-APIKEY": key, "X-CH-TS": ts, "X-CH-SIGN": signature}
        response = env.http.get(V2 + "/account", headers=headers)
        assert response.status_code == status, response.text
    assert refused(env.http.get(V2 + "/nope"), -1020, 404)


def test_v2_margin_alias(env: Env) -> None:
    alice = env.trader({"USDT": "10000"})
    v2 = on_v2(env, alice)
    transfer = {"symbol": "BTCUSDT", "asset": "USDT", "amount": "1000", "direction": "IN"}
    ok(alice.request("POST", V2 + "/margin/tradehall/transfer", body=transfer))
    placed = v2.margin_create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="20000")
    assert alice.margin_open_orders("BTCUSDT") == v2.margin_open_orders("BTCUSDT")
    assert [o["orderId"] for o in alice.margin_open_orders("BTCUSDT")] == [placed["orderId"]]
    assert alice.open_orders("BTCUSDT") == []  # the margin account's, not the spot one's
    assert v2.margin_cancel_order("BTCUSDT", placed["orderId"])["status"] == "CANCELED"
    env.audit()


def test_v2_ticker_of_every_pair_with_best_bid_and_ask(env: Env) -> None:
    maker = env.trader({"USDT": "100000", "BTC": "10"})
    taker = env.trader({"USDT": "100000", "BTC": "10"})
    maker.create_order("BTCUSDT", "SELL", "LIMIT", "0.5", price="30000")
    taker.create_order("BTCUSDT", "BUY", "LIMIT", "0.2", price="30000")  # trades 0.2
    env.clock.advance(60_000)
    taker.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="31000")  # trades 0.1 at 30000
    maker.create_order("BTCUSDT", "BUY", "LIMIT", "0.25", price="29000")
    maker.create_order("BTCUSDT", "BUY", "LIMIT", "0.05", price="29000")
    public = env.public()
    every = public.tickers()
    pairs = [p["symbol"] for p in public.symbols()["symbols"]]
    assert [t["symbol"] for t in every] == pairs
    btc = every[pairs.index("BTCUSDT")]
    assert btc == {
        **public.ticker("BTCUSDT"),
        "symbol": "BTCUSDT",
        "amount": "9000.00000000",
        "askPrice": "30000.00",
        "askVolume": "0.200000",
        "bidPrice": "29000.00",
        "bidVolume": "0.300000",
    }
    quiet = every[pairs.index("ETHBTC")]  # no order, no trade: zeros at the pair's precision
    for name in ("askPrice", "askVolume", "bidPrice", "bidVolume", "amount"):
        assert float(quiet[name]) == 0 and quiet[name].startswith("0."), (name, quiet)
    assert public.ticker_v2("btcusdt") == btc
    chosen = public.tickers(["ethbtc", "BTCUSDT", "btcusdt"])
    assert [t["symbol"] for t in chosen] == ["ETHBTC", "BTCUSDT"]
    assert refused(env.http.get(V2 + "/ticker", params={"symbols": "BTCUSDT,NOPE"}), -1121)
    assert "symbols" in refused(env.http.get(V2 + "/ticker", params={"symbols": "BTCUSDT,"}), -1102)
    # v1 keeps the seed's shape and its required symbol.
    assert set(public.ticker("BTCUSDT")) == {"high", "low", "last", "vol", "rose", "time"}
    refused(env.http.get(SPOT + "/ticker"), -1102)


def test_v3_history_orders_lists_open_and_ended_orders(env: Env) -> None:
    alice = env.trader({"USDT": "100000", "BTC": "10", "ETH": "10"})
    bob = env.trader({"USDT": "100000", "BTC": "10"})
    first = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    env.clock.advance(10)
    second = alice.create_order("ETHBTC", "SELL", "LIMIT", "1", price="0.05")
    env.clock.advance(10)
    third = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.02", price="40000")
    alice.cancel_order("BTCUSDT", third["orderId"])
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")  # fills the first
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.5", price="50000")

    listed = alice.history_orders()
    assert [o["orderId"] for o in listed] == [third["orderId"], second["orderId"], first["orderId"]]
    assert [(o["status"], o["isWorking"]) for o in listed] == [
        ("CANCELED", False),
        ("NEW", True),
        ("FILLED", False),
    ]
    assert listed[2] == {
        "orderId": first["orderId"],
        "orderIdString": first["orderId"],
        "clientOrderId": "",
        "symbol": "BTCUSDT",
        "price": "30000.00",
        "origQty": "0.010000",
        "executedQty": "0.010000",
        "avgPrice": "30000.00",
        "status": "FILLED",
        "type": "LIMIT",
        "side": "BUY",
        "time": str(T0),
        "isWorking": False,
    }
    assert [o["orderId"] for o in alice.history_orders("btcusdt")] == [
        third["orderId"],
        first["orderId"],
    ]
    assert [o["orderId"] for o in alice.history_orders(limit=1)] == [third["orderId"]]
    window = alice.history_orders(start_time=T0 + 5, end_time=T0 + 15)
    assert [o["orderId"] for o in window] == [second["orderId"]]
    assert [o["orderId"] for o in alice.history_orders(end_time=T0 + 5)] == [first["orderId"]]
    assert alice.history_orders(start_time=T0 + 21) == []


def test_v3_windows_and_limits(env: Env) -> None:
    alice = env.trader({"USDT": "100000"})
    alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    env.clock.advance(8 * DAY)
    assert alice.history_orders() == []  # the default window is the last seven days
    assert len(alice.history_orders(start_time=T0)) == 1
    assert len(alice.history_orders(end_time=T0 + 7 * DAY)) == 1
    for params, code in (
        ({"startTime": T0, "endTime": T0 + 7 * DAY + 1}, -1102),
        ({"startTime": T0 + 1, "endTime": T0}, -1102),
        ({"limit": 101}, -1102),
        ({"limit": 0}, -1102),
        ({"startTime": "x"}, -1102),
        ({"symbol": "NOPE"}, -1121),
    ):
        for path in ("/historyOrders", "/myTrades"):
            refused(alice.request("GET", V3 + path, params=params), code)


def test_v3_my_trades_of_every_pair(env: Env) -> None:
    alice = env.trader({"USDT": "100000", "BTC": "10"})
    bob = env.trader({"USDT": "100000", "BTC": "10", "ETH": "10"})
    alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    env.clock.advance(100)
    alice.create_order("ETHBTC", "BUY", "LIMIT", "1", price="0.05")
    bob.create_order("ETHBTC", "SELL", "LIMIT", "1", price="0.05")
    trades = alice.my_trades_v3()
    assert [t["symbol"] for t in trades] == ["ETHBTC", "BTCUSDT"]
    assert trades[1] == alice.my_trades("BTCUSDT")[0]
    assert trades[0] == alice.my_trades("ETHBTC")[0]
    assert [t["symbol"] for t in alice.my_trades_v3("BTCUSDT")] == ["BTCUSDT"]
    assert [t["symbol"] for t in bob.my_trades_v3(limit=1)] == ["ETHBTC"]
    assert alice.my_trades_v3(start_time=T0 + 1) == [trades[0]]


def test_client_refuses_an_unknown_spot_version() -> None:
    with pytest.raises(ValueError):
        Client(BASE_URL, spot_version="v9")
