"""Spot orders through HTTP: create, test, query and cancel, with every error path.

BTCUSDT: price 2 dp, quantity 6 dp, min quantity 0.00001, min value 5 USDT; maker fee 0.0008,
taker fee 0.001, each side pays in the asset it receives. Balances are shown with the asset's 8
decimals. The fake clock stands at T0 unless a test moves it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support import Env
from tradehall.client import ApiError, Client

SPOT = "/spot/open/sapi/v1"
T0 = 1_700_000_000_000
PLAIN = re.compile(r"^[0-9]+(\.[0-9]+)?$")

CREATE_FIELDS = {
    "symbol",
    "orderId",
    "orderIdString",
    "clientOrderId",
    "transactTime",
    "price",
    "origQty",
    "executedQty",
    "status",
    "type",
    "side",
}
DETAIL_FIELDS = {
    "orderId",
    "orderIdString",
    "clientOrderId",
    "symbol",
    "price",
    "origQty",
    "executedQty",
    "avgPrice",
    "status",
    "type",
    "side",
    "transactTime",
}


# --------------------------------------------------------------------------- helpers


def error_of(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value


def assert_error(exc: ApiError, status: int, code: int) -> None:
    assert (exc.status, exc.code) == (status, code), exc


def balances(client: Client) -> dict[str, tuple[str, str]]:
    return {b["asset"]: (b["free"], b["locked"]) for b in client.account()["balances"]}


def snapshot(client: Client) -> tuple[Any, ...]:
    """Everything a refused request must leave as it was, as the account sees it."""
    open_all = client.request("GET", SPOT + "/openOrders", params={"limit": 1000}).json()
    return balances(client), open_all


def post(client: Client, path: str, body: Any) -> Any:
    return client.request("POST", SPOT + path, body=body)


def post_raw(client: Client, path: str, raw: str) -> Any:
    return client.request("POST", SPOT + path, raw_body=raw.encode())


def check_create_shape(order: dict[str, Any]) -> None:
    assert set(order) == CREATE_FIELDS
    for name in CREATE_FIELDS:
        assert isinstance(order[name], str), name
    assert order["orderId"].isdigit()
    assert order["transactTime"].isdigit()
    for name in ("price", "origQty", "executedQty"):
        assert PLAIN.match(order[name]), order[name]


def check_detail_shape(order: dict[str, Any]) -> None:
    assert set(order) == DETAIL_FIELDS
    for name in DETAIL_FIELDS:
        assert isinstance(order[name], str), name
    for name in ("price", "origQty", "executedQty", "avgPrice"):
        assert PLAIN.match(order[name]), order[name]


@pytest.fixture
def alice(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


@pytest.fixture
def bob(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


# --------------------------------------------------------------------------- create LIMIT


def test_create_limit_buy(env: Env, alice: Client) -> None:
    order = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    check_create_shape(order)
    assert order == {
        "symbol": "BTCUSDT",
        "orderId": order["orderId"],
        "orderIdString": order["orderId"],
        "clientOrderId": "",
        "transactTime": str(T0),
        "price": "30000.00",
        "origQty": "0.010000",
        "executedQty": "0.000000",
        "status": "NEW",
        "type": "LIMIT",
        "side": "BUY",
    }
    assert balances(alice)["USDT"] == ("9700.00000000", "300.00000000")
    assert balances(alice)["BTC"] == ("1.00000000", "0.00000000")
    env.audit()


def test_create_limit_sell_with_client_order_id(env: Env, alice: Client) -> None:
    env.clock.advance(42)
    order = alice.create_order(
        "BTCUSDT", "SELL", "LIMIT", "0.25", price="31000.5", client_order_id="my-sell_1"
    )
    check_create_shape(order)
    assert order == {
        "symbol": "BTCUSDT",
        "orderId": order["orderId"],
        "orderIdString": order["orderId"],
        "clientOrderId": "my-sell_1",
        "transactTime": str(T0 + 42),
        "price": "31000.50",
        "origQty": "0.250000",
        "executedQty": "0.000000",
        "status": "NEW",
        "type": "LIMIT",
        "side": "SELL",
    }
    assert balances(alice)["BTC"] == ("0.75000000", "0.25000000")
    assert balances(alice)["USDT"] == ("10000.00000000", "0.00000000")
    env.audit()


def test_order_ids_are_distinct_increasing_strings(env: Env, alice: Client, bob: Client) -> None:
    ids = [
        int(c.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price="10000")["orderId"])
        for c in (alice, bob, alice)
    ]
    assert ids == sorted(ids) and len(set(ids)) == 3
    env.audit()


def test_other_pair_precisions(env: Env) -> None:
    trader = env.trader({"BTC": "1", "ETH": "10", "USDT": "10000"})
    order = trader.create_order("ETHBTC", "BUY", "LIMIT", "1.5", price="0.05123")
    assert (order["price"], order["origQty"], order["executedQty"]) == (
        "0.05123",
        "1.500",
        "0.000",
    )
    order = trader.create_order("ETHUSDT", "SELL", "LIMIT", "0.5", price="2000")
    assert (order["price"], order["origQty"]) == ("2000.00", "0.5000")
    assert balances(trader)["BTC"] == ("0.92315500", "0.07684500")  # 1.5 x 0.05123
    assert balances(trader)["ETH"] == ("9.50000000", "0.50000000")
    env.audit()


# --------------------------------------------------------------------------- crossing


def test_crossing_order_partially_fills_then_fills(env: Env, alice: Client, bob: Client) -> None:
    ask = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    bid = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.03", price="30000")
    assert bid["status"] == "PARTIALLY_FILLED"
    assert bid["executedQty"] == "0.010000"
    assert bid["origQty"] == "0.030000"
    maker = bob.get_order("BTCUSDT", ask["orderId"])
    assert (maker["status"], maker["executedQty"], maker["avgPrice"]) == (
        "FILLED",
        "0.010000",
        "30000.00",
    )
    # The remainder rests; a seller fills it completely.
    env.clock.advance(7)
    taker = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.02", price="29000")
    assert (taker["status"], taker["executedQty"], taker["price"]) == (
        "FILLED",
        "0.020000",
        "29000.00",
    )
    assert taker["transactTime"] == str(T0 + 7)
    done = alice.get_order("BTCUSDT", bid["orderId"])
    check_detail_shape(done)
    assert done == {
        "orderId": bid["orderId"],
        "orderIdString": bid["orderId"],
        "clientOrderId": "",
        "symbol": "BTCUSDT",
        "price": "30000.00",
        "origQty": "0.030000",
        "executedQty": "0.030000",
        "avgPrice": "30000.00",
        "status": "FILLED",
        "type": "LIMIT",
        "side": "BUY",
        "transactTime": str(T0),
    }
    # The taker sold at the maker's price, 30000, not its own limit.
    assert bob.get_order("BTCUSDT", taker["orderId"])["avgPrice"] == "30000.00"
    assert alice.open_orders("BTCUSDT") == []
    env.audit()


def test_crossing_sweeps_levels_with_average_price(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.02", price="30100")
    order = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.05", price="30100")
    assert (order["status"], order["executedQty"]) == ("PARTIALLY_FILLED", "0.030000")
    detail = alice.get_order("BTCUSDT", order["orderId"])
    # (0.01 x 30000 + 0.02 x 30100) / 0.03 = 30066.666...
    assert detail["avgPrice"] == "30066.67"
    assert detail["status"] == "PARTIALLY_FILLED"
    # USDT: 0.05 x 30100 held = 1505; filled 0.01 at 30000 (1 USDT back) and 0.02 at 30100;
    # the remaining 0.02 stays held at 30100 = 602.
    assert balances(alice)["USDT"] == ("8496.00000000", "602.00000000")
    env.audit()


# --------------------------------------------------------------------------- MARKET


def test_market_buy_spends_quote_amount(env: Env, bob: Client) -> None:
    buyer = env.trader({"USDT": "10000"})
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="50000")
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="50001")
    order = buyer.create_order("BTCUSDT", "BUY", "MARKET", "150")
    check_create_shape(order)
    # 100 USDT buys 0.002 at 50000; the other 50 buy 0.000999 at 50001 (49.950999 USDT);
    # the 0.049001 left cannot buy one more lot.
    assert order == {
        "symbol": "BTCUSDT",
        "orderId": order["orderId"],
        "orderIdString": order["orderId"],
        "clientOrderId": "",
        "transactTime": str(T0),
        "price": "0.00",
        "origQty": "150.00",
        "executedQty": "0.002999",
        "status": "FILLED",
        "type": "MARKET",
        "side": "BUY",
    }
    detail = buyer.get_order("BTCUSDT", order["orderId"])
    assert detail["avgPrice"] == "50000.33"  # 149.950999 / 0.002999
    assert (detail["origQty"], detail["executedQty"], detail["status"]) == (
        "150.00",
        "0.002999",
        "FILLED",
    )
    # Spent exactly 149.950999 USDT; nothing stays locked. BTC: 0.002999 less taker fees
    # 0.000002 (of 0.002) and 0.00000099 (of 0.000999, floored to the satoshi).
    assert balances(buyer)["USDT"] == ("9850.04900100", "0.00000000")
    assert balances(buyer)["BTC"] == ("0.00299601", "0.00000000")
    assert buyer.open_orders("BTCUSDT") == []
    assert env.public().depth("BTCUSDT")["asks"] == [["50001.00", "0.009001"]]
    env.audit()


def test_market_buy_spending_whole_budget_on_last_level_is_filled(env: Env, bob: Client) -> None:
    # Regression: this order used to end CANCELED although nothing of its budget was left.
    buyer = env.trader({"USDT": "10000"})
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="50000")
    order = buyer.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert order["executedQty"] == "0.002000"
    assert balances(buyer)["USDT"] == ("9900.00000000", "0.00000000")
    # Nothing of the 100 USDT is left over: the order is complete, as it is when more asks
    # rest behind (see test_market_buy_spending_whole_budget_with_more_asks_behind).
    assert order["status"] == "FILLED"
    assert buyer.get_order("BTCUSDT", order["orderId"])["status"] == "FILLED"
    env.audit()


def test_market_buy_spending_whole_budget_with_more_asks_behind(env: Env, bob: Client) -> None:
    buyer = env.trader({"USDT": "10000"})
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="50000")
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="60000")
    order = buyer.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert (order["status"], order["executedQty"]) == ("FILLED", "0.002000")
    assert balances(buyer)["USDT"] == ("9900.00000000", "0.00000000")
    env.audit()


def test_market_buy_book_runs_out(env: Env, bob: Client) -> None:
    buyer = env.trader({"USDT": "10000"})
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.001", price="30000")
    order = buyer.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert (order["status"], order["executedQty"], order["origQty"]) == (
        "CANCELED",
        "0.001000",
        "100.00",
    )
    assert balances(buyer)["USDT"] == ("9970.00000000", "0.00000000")
    env.audit()


def test_market_order_without_liquidity(env: Env, alice: Client) -> None:
    before = balances(alice)
    buy = alice.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert (buy["status"], buy["executedQty"], buy["price"]) == ("CANCELED", "0.000000", "0.00")
    sell = alice.create_order("BTCUSDT", "SELL", "MARKET", "0.01")
    assert (sell["status"], sell["executedQty"], sell["origQty"]) == (
        "CANCELED",
        "0.000000",
        "0.010000",
    )
    assert balances(alice) == before
    assert alice.get_order("BTCUSDT", buy["orderId"])["avgPrice"] == "0.00"
    env.audit()


def test_market_sell(env: Env, bob: Client) -> None:
    seller = env.trader({"BTC": "1"})
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="29000")
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="28000")
    order = seller.create_order("BTCUSDT", "SELL", "MARKET", "0.015")
    check_create_shape(order)
    assert (order["status"], order["executedQty"], order["origQty"], order["price"]) == (
        "FILLED",
        "0.015000",
        "0.015000",
        "0.00",
    )
    detail = seller.get_order("BTCUSDT", order["orderId"])
    assert detail["avgPrice"] == "28666.67"  # (290 + 140) / 0.015
    # 430 USDT less the 0.1 % taker fee.
    assert balances(seller)["USDT"] == ("429.57000000", "0.00000000")
    assert balances(seller)["BTC"] == ("0.98500000", "0.00000000")
    # More than the book holds: the rest is cancelled and released.
    rest = seller.create_order("BTCUSDT", "SELL", "MARKET", "0.1")
    assert (rest["status"], rest["executedQty"]) == ("CANCELED", "0.005000")
    assert balances(seller)["BTC"] == ("0.98000000", "0.00000000")
    env.audit()


# --------------------------------------------------------------------------- timeInForce


def test_ioc(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    order = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.02", price="30000", time_in_force="IOC"
    )
    assert (order["status"], order["executedQty"]) == ("CANCELED", "0.010000")
    assert alice.open_orders("BTCUSDT") == []
    assert balances(alice)["USDT"] == ("9700.00000000", "0.00000000")
    nothing = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.02", price="30000", time_in_force="ioc"
    )
    assert (nothing["status"], nothing["executedQty"]) == ("CANCELED", "0.000000")
    assert balances(alice)["USDT"] == ("9700.00000000", "0.00000000")
    env.audit()


def test_fok(env: Env, alice: Client, bob: Client) -> None:
    ask = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    before = balances(alice)
    order = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.02", price="30000", time_in_force="FOK"
    )
    assert (order["status"], order["executedQty"]) == ("CANCELED", "0.000000")
    assert balances(alice) == before
    assert bob.get_order("BTCUSDT", ask["orderId"])["status"] == "NEW"
    filled = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", time_in_force="FOK"
    )
    assert (filled["status"], filled["executedQty"]) == ("FILLED", "0.010000")
    env.audit()


def test_post_only(env: Env, alice: Client, bob: Client) -> None:
    ask = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    before = balances(alice)
    rejected = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", time_in_force="POST_ONLY"
    )
    assert (rejected["status"], rejected["executedQty"]) == ("REJECTED", "0.000000")
    assert balances(alice) == before
    assert bob.get_order("BTCUSDT", ask["orderId"])["status"] == "NEW"
    assert alice.get_order("BTCUSDT", rejected["orderId"])["status"] == "REJECTED"
    rests = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="29999.99", time_in_force="POST_ONLY"
    )
    assert rests["status"] == "NEW"
    assert [o["orderId"] for o in alice.open_orders("BTCUSDT")] == [rests["orderId"]]
    env.audit()


def test_bad_time_in_force(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    exc = error_of(
        alice.create_order, "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", time_in_force="GTX"
    )
    assert_error(exc, 400, -1116)
    exc = error_of(alice.create_order, "BTCUSDT", "BUY", "MARKET", "100", time_in_force="IOC")
    assert_error(exc, 400, -1116)
    assert snapshot(alice) == before
    gtc = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", time_in_force="GTC")
    assert gtc["status"] == "NEW"
    env.audit()


# --------------------------------------------------------------------------- client order ids


def test_client_order_ids_take_the_documented_characters(env: Env, alice: Client) -> None:
    """docs/api.md: 1 to 64 printable ASCII characters other than the space (`!` to `~`);
    a space, or anything else, is refused with -1100 and changes nothing."""
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    assert "64 printable ASCII\n  characters other than the space (`!` to `~`)" in docs
    printable = "".join(chr(c) for c in range(0x21, 0x7F))
    for i, cid in enumerate((printable[:64], printable[64:])):
        placed = alice.create_order(
            "BTCUSDT", "BUY", "LIMIT", "0.01", price=str(20000 + i), client_order_id=cid
        )
        assert placed["clientOrderId"] == cid
    before = snapshot(alice)
    for cid in ("my order", " lead", "trail ", "tab\there", "caf\u00e9", "\x7f"):
        exc = error_of(
            alice.create_order,
            "BTCUSDT",
            "BUY",
            "LIMIT",
            "0.01",
            price="20000",
            client_order_id=cid,
        )
        assert_error(exc, 400, -1100)
    assert snapshot(alice) == before


def test_client_order_id_unique_among_open_orders(env: Env, alice: Client, bob: Client) -> None:
    first = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="cid-1"
    )
    assert first["clientOrderId"] == "cid-1"
    before = snapshot(alice)
    exc = error_of(
        alice.create_order,
        "BTCUSDT",
        "BUY",
        "LIMIT",
        "0.02",
        price="29000",
        client_order_id="cid-1",
    )
    assert_error(exc, 400, -1102)
    exc = error_of(
        alice.test_order, "BTCUSDT", "SELL", "LIMIT", "0.02", price="39000", client_order_id="cid-1"
    )
    assert_error(exc, 400, -1102)
    assert snapshot(alice) == before
    # Another account, or another symbol, may use the same id.
    assert (
        bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="cid-1")[
            "clientOrderId"
        ]
        == "cid-1"
    )
    eth = env.trader({"USDT": "1000"})
    eth.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price="30000", client_order_id="x")
    assert (
        eth.create_order("ETHUSDT", "BUY", "LIMIT", "0.01", price="2000", client_order_id="x")[
            "status"
        ]
        == "NEW"
    )
    # Reuse is allowed once the first has been cancelled.
    canceled = alice.cancel_order("BTCUSDT", client_order_id="cid-1")
    assert canceled["orderId"] == first["orderId"]
    second = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.02", price="29000", client_order_id="cid-1"
    )
    assert second["status"] == "NEW"
    assert second["orderId"] != first["orderId"]
    # The id now finds the open order; the old one stays reachable by orderId.
    assert alice.get_order("BTCUSDT", client_order_id="cid-1")["orderId"] == second["orderId"]
    assert alice.get_order("BTCUSDT", first["orderId"])["status"] == "CANCELED"
    env.audit()


def test_client_order_id_reusable_after_fill(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.02", price="30000")
    first = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="again"
    )
    assert first["status"] == "FILLED"
    second = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="again"
    )
    assert second["status"] == "FILLED"
    # The most recent order with that id is the one found.
    assert alice.get_order("BTCUSDT", client_order_id="again")["orderId"] == second["orderId"]
    env.audit()


def test_client_order_id_validation(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    exc = error_of(
        alice.create_order, "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="a b"
    )
    assert_error(exc, 400, -1100)
    exc = error_of(
        alice.create_order,
        "BTCUSDT",
        "BUY",
        "LIMIT",
        "0.01",
        price="30000",
        client_order_id="x" * 65,
    )
    assert exc.status == 400 and exc.code in (-1102, -1100)
    assert snapshot(alice) == before
    env.audit()


def test_client_order_id_with_url_special_characters(env: Env, alice: Client) -> None:
    # The GET query carries it percent-encoded; the signature covers the raw query.
    cid = "a/b+c=d&e%f?g#h"
    order = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id=cid
    )
    assert order["clientOrderId"] == cid
    found = alice.get_order("BTCUSDT", client_order_id=cid)
    assert (found["orderId"], found["clientOrderId"]) == (order["orderId"], cid)
    assert alice.cancel_order("BTCUSDT", client_order_id=cid)["status"] == "CANCELED"
    env.audit()


# --------------------------------------------------------------------------- query


def test_get_order_by_id_and_client_id(env: Env, alice: Client, bob: Client) -> None:
    order = alice.create_order(
        "BTCUSDT", "SELL", "LIMIT", "0.04", price="30000", client_order_id="q1"
    )
    expected = {
        "orderId": order["orderId"],
        "orderIdString": order["orderId"],
        "clientOrderId": "q1",
        "symbol": "BTCUSDT",
        "price": "30000.00",
        "origQty": "0.040000",
        "executedQty": "0.000000",
        "avgPrice": "0.00",
        "status": "NEW",
        "type": "LIMIT",
        "side": "SELL",
        "transactTime": str(T0),
    }
    by_id = alice.get_order("BTCUSDT", order["orderId"])
    check_detail_shape(by_id)
    assert by_id == expected
    assert alice.get_order("BTCUSDT", client_order_id="q1") == expected
    assert alice.get_order("btcusdt", int(order["orderId"])) == expected
    # Partially filled.
    env.clock.advance(1000)
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30500")
    expected |= {"executedQty": "0.010000", "avgPrice": "30000.00", "status": "PARTIALLY_FILLED"}
    assert alice.get_order("BTCUSDT", order["orderId"]) == expected
    assert alice.get_order("BTCUSDT", client_order_id="q1") == expected
    # Cancelled: keeps what it executed.
    alice.cancel_order("BTCUSDT", order["orderId"])
    expected |= {"status": "CANCELED"}
    assert alice.get_order("BTCUSDT", order["orderId"]) == expected
    assert alice.get_order("BTCUSDT", client_order_id="q1") == expected
    env.audit()


def test_get_order_errors(env: Env, alice: Client, bob: Client) -> None:
    order = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    # Another account's order does not exist for bob.
    assert_error(error_of(bob.get_order, "BTCUSDT", order["orderId"]), 400, -2013)
    # Unknown id, unknown client id, the wrong symbol.
    assert_error(error_of(alice.get_order, "BTCUSDT", "999999"), 400, -2013)
    assert_error(error_of(alice.get_order, "BTCUSDT", client_order_id="nope"), 400, -2013)
    assert_error(error_of(alice.get_order, "ETHUSDT", order["orderId"]), 400, -2013)
    assert_error(error_of(alice.get_order, "DOGEUSDT", order["orderId"]), 400, -1121)
    # Neither orderId nor newClientOrderId (the refusal names both); malformed ids.
    neither = error_of(alice.get_order, "BTCUSDT")
    assert_error(neither, 400, -1102)
    assert neither.msg == (
        "mandatory parameter 'orderId' (or 'newClientOrderId') was not sent or is empty"
    )
    for bad in ("abc", "-1", "0", "1.5"):
        assert_error(error_of(alice.get_order, "BTCUSDT", bad), 400, -1102)
    assert alice.get_order("BTCUSDT", order["orderId"])["status"] == "NEW"
    env.audit()


# --------------------------------------------------------------------------- cancel


def test_cancel_releases_holds(env: Env, alice: Client) -> None:
    buy = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    sell = alice.create_order(
        "BTCUSDT", "SELL", "LIMIT", "0.3", price="40000", client_order_id="s-1"
    )
    assert balances(alice)["USDT"] == ("9700.00000000", "300.00000000")
    assert balances(alice)["BTC"] == ("0.70000000", "0.30000000")
    canceled = alice.cancel_order("BTCUSDT", buy["orderId"])
    assert canceled == {
        "symbol": "BTCUSDT",
        "clientOrderId": "",
        "orderId": buy["orderId"],
        "orderIdString": buy["orderId"],
        "status": "CANCELED",
    }
    assert balances(alice)["USDT"] == ("10000.00000000", "0.00000000")
    by_client = alice.cancel_order("btcusdt", client_order_id="s-1")
    assert by_client == {
        "symbol": "BTCUSDT",
        "clientOrderId": "s-1",
        "orderId": sell["orderId"],
        "orderIdString": sell["orderId"],
        "status": "CANCELED",
    }
    assert balances(alice)["BTC"] == ("1.00000000", "0.00000000")
    assert alice.open_orders("BTCUSDT") == []
    assert env.public().depth("BTCUSDT") == {"time": T0, "bids": [], "asks": []}
    env.audit()


def test_cancel_partially_filled(env: Env, alice: Client, bob: Client) -> None:
    buy = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.03", price="30000")
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    assert balances(alice)["USDT"] == ("9100.00000000", "600.00000000")
    canceled = alice.cancel_order("BTCUSDT", buy["orderId"])
    assert canceled["status"] == "CANCELED"
    assert balances(alice)["USDT"] == ("9700.00000000", "0.00000000")
    # Maker fee 0.0008 of 0.01 BTC.
    assert balances(alice)["BTC"] == ("1.00999200", "0.00000000")
    detail = alice.get_order("BTCUSDT", buy["orderId"])
    assert (detail["status"], detail["executedQty"], detail["avgPrice"]) == (
        "CANCELED",
        "0.010000",
        "30000.00",
    )
    env.audit()


def test_cancel_errors(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    filled = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    assert filled["status"] == "FILLED"
    assert_error(error_of(alice.cancel_order, "BTCUSDT", filled["orderId"]), 400, -1145)

    canceled = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.01", price="20000", client_order_id="c"
    )
    alice.cancel_order("BTCUSDT", canceled["orderId"])
    assert_error(error_of(alice.cancel_order, "BTCUSDT", canceled["orderId"]), 400, -1145)
    assert_error(error_of(alice.cancel_order, "BTCUSDT", client_order_id="c"), 400, -1145)

    assert_error(error_of(alice.cancel_order, "BTCUSDT", "987654"), 400, -2013)
    assert_error(error_of(alice.cancel_order, "BTCUSDT", client_order_id="zzz"), 400, -2013)

    # Another account's open order: not found for alice, and it stays open.
    theirs = bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="25000")
    before = snapshot(bob)
    assert_error(error_of(alice.cancel_order, "BTCUSDT", theirs["orderId"]), 400, -2013)
    assert snapshot(bob) == before
    assert bob.get_order("BTCUSDT", theirs["orderId"])["status"] == "NEW"
    # The right id on the wrong symbol.
    assert_error(error_of(bob.cancel_order, "ETHUSDT", theirs["orderId"]), 400, -2013)
    assert_error(error_of(bob.cancel_order, "NOPE", theirs["orderId"]), 400, -1121)
    # No reference at all, or a malformed one.
    assert_error(error_of(bob.cancel_order, "BTCUSDT"), 400, -1102)
    response = post(bob, "/cancel", {"symbol": "BTCUSDT", "orderId": "x1"})
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    assert snapshot(bob) == before
    # orderId as a JSON number works as well as a string.
    response = post(bob, "/cancel", {"symbol": "BTCUSDT", "orderId": int(theirs["orderId"])})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "CANCELED"
    env.audit()


# --------------------------------------------------------------------------- /order/test


def test_order_test_valid_changes_nothing(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    before = snapshot(alice), snapshot(bob), env.public().depth("BTCUSDT")
    assert alice.test_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000") == {}
    assert alice.test_order("BTCUSDT", "BUY", "MARKET", "100") == {}
    assert alice.test_order("BTCUSDT", "SELL", "MARKET", "0.5") == {}
    assert (
        alice.test_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="1000", client_order_id="t") == {}
    )
    assert (snapshot(alice), snapshot(bob), env.public().depth("BTCUSDT")) == before
    assert env.public().trades("BTCUSDT") == {"list": []}
    # No order id was used up by the tests, and the client id "t" is still free.
    real = alice.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.001", price="20000", client_order_id="t"
    )
    assert real["orderId"] == "2"
    env.audit()


def test_order_test_insufficient_balance(env: Env, alice: Client) -> None:
    exc = error_of(alice.test_order, "BTCUSDT", "BUY", "LIMIT", "1", price="30000")
    assert_error(exc, 400, -2017)
    exc = error_of(alice.test_order, "BTCUSDT", "SELL", "LIMIT", "1.000001", price="30000")
    assert_error(exc, 400, -2017)
    exc = error_of(alice.test_order, "BTCUSDT", "BUY", "MARKET", "10000.01")
    assert_error(exc, 400, -2017)


# Invalid order bodies and the error both /order and /order/test must give.
BASE = {"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "volume": "0.01", "price": "30000"}
INVALID: list[tuple[str, dict[str, Any], int]] = [
    ("bad side", {"side": "HOLD"}, -1117),
    ("bad type", {"type": "STOP_LOSS"}, -1116),
    ("missing price", {"price": None}, -1102),
    ("empty price", {"price": ""}, -1102),
    ("price decimals", {"price": "30000.001"}, -1111),
    ("volume decimals", {"volume": "0.0100001"}, -1111),
    ("market buy amount decimals", {"type": "MARKET", "volume": "100.001"}, -1111),
    ("below min quantity", {"volume": "0.000009", "price": "1000000"}, -1136),
    ("below min value", {"volume": "0.0001", "price": "30000"}, -1136),
    ("market buy below min value", {"type": "MARKET", "volume": "4.99"}, -1136),
    (
        "market sell below min quantity",
        {"side": "SELL", "type": "MARKET", "volume": "0.000009"},
        -1136,
    ),
    ("insufficient quote", {"volume": "1"}, -2017),
    ("insufficient base", {"side": "SELL", "volume": "1.5"}, -2017),
    ("negative volume", {"volume": "-0.01"}, -1102),
    ("zero volume", {"volume": "0"}, -1102),
    ("NaN volume", {"volume": "NaN"}, -1102),
    ("infinite volume", {"volume": "Infinity"}, -1102),
    ("text volume", {"volume": "lots"}, -1102),
    ("boolean volume", {"volume": True}, -1102),
    ("array volume", {"volume": ["0.01"]}, -1102),
    ("negative price", {"price": "-30000"}, -1102),
    ("zero price", {"price": "0"}, -1102),
    ("missing volume", {"volume": None}, -1102),
    ("missing side", {"side": None}, -1102),
    ("missing type", {"type": None}, -1102),
    ("missing symbol", {"symbol": None}, -1102),
    ("unknown symbol", {"symbol": "BTCEUR"}, -1121),
    ("illegal symbol", {"symbol": "BTC/USDT"}, -1100),
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"volume": "0.000009", "price": "1000000"}, "quantity below the minimum 0.00001 BTC"),
        ({"volume": "0.0001", "price": "30000"}, "order value below the minimum 5 USDT"),
        ({"type": "MARKET", "volume": "4.99"}, "order value below the minimum 5 USDT"),
    ],
)
def test_a_refusal_below_the_minimum_names_it(
    alice: Client, overrides: dict[str, Any], message: str
) -> None:
    """``/symbols`` (the seed's shape) does not carry the pair's minimums: the refusal does."""
    answer = post(alice, "/order", _body(overrides))
    assert answer.json() == {"code": -1136, "msg": message}


def _body(overrides: dict[str, Any]) -> dict[str, Any]:
    merged = {**BASE, **overrides}
    return {k: v for k, v in merged.items() if v is not None}


@pytest.mark.parametrize(
    ("overrides", "code"), [(o, c) for _, o, c in INVALID], ids=[n for n, _, _ in INVALID]
)
def test_invalid_order(env: Env, alice: Client, overrides: dict[str, Any], code: int) -> None:
    before = snapshot(alice)
    body = _body(overrides)
    placed = post(alice, "/order", body)
    tested = post(alice, "/order/test", body)
    assert placed.status_code == 400, placed.text
    data = placed.json()
    assert set(data) == {"code", "msg"}
    assert data["code"] == code, data
    assert (tested.status_code, tested.json()["code"]) == (400, code)
    assert snapshot(alice) == before
    env.audit()


@pytest.mark.parametrize(
    "overrides",
    [
        {"volume": "1000000000000000000000000000000"},
        {"volume": "1e30"},
        {"price": "1e30"},
        {"side": "SELL", "volume": "1e30"},
        {"type": "MARKET", "volume": "1e30"},
        {"side": "SELL", "type": "MARKET", "volume": "1e30"},
        {"volume": "9" * 70},
    ],
)
def test_huge_values_refused(env: Env, alice: Client, overrides: dict[str, Any]) -> None:
    before = snapshot(alice)
    body = _body(overrides)
    for path in ("/order", "/order/test"):
        response = post(alice, path, body)
        assert response.status_code == 400, response.text
        assert response.json()["code"] in (-1102, -1138, -2017)
    assert snapshot(alice) == before
    env.audit()


def test_huge_json_number_refused(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    for raw in (
        '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":1e400,"price":1}',
        '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":100000000000000000000000,'
        '"price":1}',
        '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":NaN,"price":1}',
    ):
        response = post_raw(alice, "/order", raw)
        assert response.status_code == 400, response.text
        assert response.json()["code"] in (-1102, -1138, -2017)
    # A valid JSON integer of 5,000 digits is too large, not "invalid JSON".
    response = post_raw(alice, "/order", '{"symbol":"BTCUSDT","volume":' + "9" * 5000 + "}")
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    assert "too large" in response.json()["msg"]
    assert snapshot(alice) == before
    env.audit()


def test_malformed_bodies(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    for raw in ("{", "[]", '"x"', "not json"):
        response = post_raw(alice, "/order", raw)
        assert (response.status_code, response.json()["code"]) == (400, -1102), raw
    response = post_raw(alice, "/order", "")
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    assert snapshot(alice) == before
    env.audit()


def test_oversized_body_refused(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    body = {**BASE, "padding": "x" * 70_000}
    response = post(alice, "/order", body)
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    assert snapshot(alice) == before
    env.audit()


def test_duplicated_body_parameter_refused(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    raw = (
        '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":"0.01","volume":"0.02",'
        '"price":"30000"}'
    )
    response = post_raw(alice, "/order", raw)
    try:
        assert response.status_code == 400, response.text
        assert response.json()["code"] == -1101
        assert snapshot(alice) == before
    finally:
        for order in alice.open_orders("BTCUSDT"):
            alice.cancel_order("BTCUSDT", order["orderId"])
        env.audit()


# --------------------------------------------------------------------------- lenient inputs


def test_lower_case_values_accepted(env: Env, alice: Client) -> None:
    order = alice.create_order("btcusdt", "buy", "limit", "0.01", price="30000")
    assert (order["symbol"], order["side"], order["type"], order["status"]) == (
        "BTCUSDT",
        "BUY",
        "LIMIT",
        "NEW",
    )
    env.audit()


def test_a_market_orders_price_is_not_read(env: Env, bob: Client) -> None:
    """docs/api.md: whatever a MARKET order's ``price`` holds is ignored."""
    buyer = env.trader({"USDT": "10000"})
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.004", price="50000")
    for price in ("abc", "1", "-5"):
        order = buyer.create_order("BTCUSDT", "BUY", "MARKET", "50", price=price)
        assert (order["status"], order["executedQty"], order["price"]) == (
            "FILLED",
            "0.001000",
            "0.00",
        )
    assert balances(buyer)["USDT"] == ("9850.00000000", "0.00000000")
    env.audit()


def test_null_values_count_as_absent(env: Env, alice: Client) -> None:
    body = {
        **BASE,
        "newClientOrderId": None,
        "timeInForce": None,
        "recvWindow": None,
    }
    response = post(alice, "/order", body)
    assert response.status_code == 200, response.text
    order = response.json()
    assert (order["status"], order["clientOrderId"]) == ("NEW", "")
    market = post(alice, "/order", {**BASE, "type": "MARKET", "volume": "100", "price": None})
    assert market.status_code == 200, market.text
    assert market.json()["status"] == "CANCELED"
    env.audit()


def test_unknown_parameters_ignored(env: Env, alice: Client) -> None:
    body = {**BASE, "orderUnit": 2, "foo": "bar", "nested": {"a": [1, 2]}, "stopPrice": "1"}
    response = post(alice, "/order", body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "NEW"
    assert post(alice, "/order/test", body).json() == {}
    env.audit()


def test_numbers_as_json_numbers(env: Env, alice: Client, bob: Client) -> None:
    raw = '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":0.01,"price":30000.5}'
    response = post_raw(alice, "/order", raw)
    assert response.status_code == 200, response.text
    order = response.json()
    assert (order["price"], order["origQty"]) == ("30000.50", "0.010000")
    raw = '{"symbol":"BTCUSDT","side":"SELL","type":"LIMIT","volume":1,"price":40000}'
    order = post_raw(bob, "/order", raw).json()
    assert (order["price"], order["origQty"]) == ("40000.00", "1.000000")
    raw = '{"symbol":"BTCUSDT","side":"BUY","type":"MARKET","volume":50.25}'
    order = post_raw(alice, "/order", raw).json()
    assert (order["origQty"], order["executedQty"], order["status"]) == (
        "50.25",
        "0.001256",  # 50.25 / 40000 = 0.00125625 -> whole lots only
        "FILLED",
    )
    # Too many decimals as a JSON number is the same precision error.
    raw = '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":0.0000001,"price":30000}'
    response = post_raw(alice, "/order", raw)
    assert (response.status_code, response.json()["code"]) == (400, -1111)
    raw = '{"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","volume":0.01,"price":30000.123}'
    response = post_raw(alice, "/order", raw)
    assert (response.status_code, response.json()["code"]) == (400, -1111)
    # Trailing zeros beyond the precision are harmless.
    order = post(alice, "/order", {**BASE, "price": "30000.0000", "volume": "0.01000000"}).json()
    assert (order["price"], order["origQty"]) == ("30000.00", "0.010000")
    env.audit()


def test_responses_never_use_exponents(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.00002", price="300000")
    order = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.00002", price="300000")
    detail = alice.get_order("BTCUSDT", order["orderId"])
    text = json.dumps([order, detail, alice.account(), alice.my_trades("BTCUSDT")])
    assert "E-" not in text and "e-" not in text and "E+" not in text
    env.audit()
