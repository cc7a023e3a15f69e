"""POST /batchOrders and POST /batchCancel through HTTP.

batchOrders is all-or-nothing: every element is validated and the combined holds checked
before any order is placed. batchCancel answers ``{success: [long], failed: [long]}``.
"""

from __future__ import annotations

from typing import Any

import pytest

from support import Env
from tradehall.client import ApiError, Client

SPOT = "/spot/open/sapi/v1"


def error_of(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value


def assert_error(exc: ApiError, status: int, code: int) -> None:
    assert (exc.status, exc.code) == (status, code), exc


def balances(client: Client) -> dict[str, tuple[str, str]]:
    return {b["asset"]: (b["free"], b["locked"]) for b in client.account()["balances"]}


def snapshot(client: Client) -> tuple[Any, ...]:
    open_all = client.request("GET", SPOT + "/openOrders", params={"limit": 1000}).json()
    return balances(client), open_all


def limit(side: str, volume: str, price: str, **extra: Any) -> dict[str, Any]:
    return {"price": price, "volume": volume, "side": side, "batchType": "LIMIT", **extra}


def assert_ids(data: Any, count: int) -> list[int]:
    assert set(data) == {"ids"}
    ids = data["ids"]
    assert len(ids) == count
    for value in ids:
        assert type(value) is int
    assert len(set(ids)) == count
    return list(ids)


@pytest.fixture
def alice(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


@pytest.fixture
def bob(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


# --------------------------------------------------------------------------- batchOrders


def test_batch_orders_places_every_order(env: Env, alice: Client) -> None:
    data = alice.batch_orders(
        "BTCUSDT",
        [
            limit("BUY", "0.01", "30000"),
            limit("BUY", "0.02", "29000.5"),
            limit("SELL", "0.1", "35000"),
        ],
    )
    ids = assert_ids(data, 3)
    assert ids == sorted(ids)
    orders = {int(o["orderId"]): o for o in alice.open_orders("BTCUSDT")}
    assert set(orders) == set(ids)
    first, second, third = (orders[i] for i in ids)
    assert (first["side"], first["price"], first["origQty"], first["status"], first["type"]) == (
        "BUY",
        "30000.00",
        "0.010000",
        "NEW",
        "LIMIT",
    )
    assert (second["price"], second["origQty"]) == ("29000.50", "0.020000")
    assert (third["side"], third["price"], third["origQty"]) == ("SELL", "35000.00", "0.100000")
    # Holds: 300 + 580.01 USDT, 0.1 BTC.
    assert balances(alice)["USDT"] == ("9119.99000000", "880.01000000")
    assert balances(alice)["BTC"] == ("0.90000000", "0.10000000")
    detail = alice.get_order("BTCUSDT", ids[1])
    assert (detail["orderId"], detail["status"]) == (str(ids[1]), "NEW")
    env.audit()


def test_batch_orders_json_numbers_and_lower_case(env: Env, alice: Client) -> None:
    raw = (
        '{"symbol":"btcusdt","orders":[{"price":30000,"volume":0.01,"side":"buy",'
        '"batchType":"limit"},{"price":30001.5,"volume":0.002,"side":"BUY","batchType":"LIMIT"}]}'
    )
    response = alice.request("POST", SPOT + "/batchOrders", raw_body=raw.encode())
    assert response.status_code == 200, response.text
    ids = assert_ids(response.json(), 2)
    prices = {o["orderId"]: o["price"] for o in alice.open_orders("BTCUSDT")}
    assert prices == {str(ids[0]): "30000.00", str(ids[1]): "30001.50"}
    env.audit()


def test_batch_orders_fill_against_the_book(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    ids = assert_ids(
        alice.batch_orders(
            "BTCUSDT", [limit("BUY", "0.004", "30000"), limit("BUY", "0.01", "30000")]
        ),
        2,
    )
    first = alice.get_order("BTCUSDT", ids[0])
    second = alice.get_order("BTCUSDT", ids[1])
    assert (first["status"], first["executedQty"]) == ("FILLED", "0.004000")
    assert (second["status"], second["executedQty"]) == ("PARTIALLY_FILLED", "0.006000")
    assert [t["qty"] for t in alice.my_trades("BTCUSDT")] == ["0.006000", "0.004000"]
    env.audit()


def test_batch_orders_market(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="29000")
    orders = [
        {"volume": "150", "side": "BUY", "batchType": "MARKET"},
        {"price": "1", "volume": "0.002", "side": "SELL", "batchType": "MARKET"},
    ]
    ids = assert_ids(alice.batch_orders("BTCUSDT", orders), 2)
    buy = alice.get_order("BTCUSDT", ids[0])
    sell = alice.get_order("BTCUSDT", ids[1])
    assert (buy["type"], buy["side"], buy["origQty"], buy["executedQty"], buy["status"]) == (
        "MARKET",
        "BUY",
        "150.00",
        "0.005000",
        "FILLED",
    )
    assert (sell["type"], sell["price"], sell["executedQty"], sell["avgPrice"]) == (
        "MARKET",
        "0.00",
        "0.002000",
        "29000.00",
    )
    assert sell["status"] == "FILLED"
    assert alice.open_orders("BTCUSDT") == []
    # USDT: -150 + 58 less 0.058 taker fee; BTC: +0.005 less 0.000005 fee, -0.002.
    assert balances(alice)["USDT"] == ("9907.94200000", "0.00000000")
    assert balances(alice)["BTC"] == ("1.00299500", "0.00000000")
    env.audit()


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"side": "SIDEWAYS"}, -1117),
        ({"batchType": "STOP"}, -1116),
        ({"batchType": None}, -1102),
        ({"price": "30000.001"}, -1111),
        ({"volume": "0.0000001"}, -1111),
        ({"volume": "0.0001"}, -1136),
        ({"volume": "-1"}, -1102),
        ({"price": None}, -1102),
        ({"volume": "1"}, -2017),
    ],
)
def test_batch_orders_one_invalid_element_places_none(
    env: Env, alice: Client, bad: dict[str, Any], code: int
) -> None:
    before = snapshot(alice)
    third = {k: v for k, v in {**limit("BUY", "0.01", "28000"), **bad}.items() if v is not None}
    orders = [limit("BUY", "0.01", "30000"), limit("SELL", "0.01", "40000"), third]
    exc = error_of(alice.batch_orders, "BTCUSDT", orders)
    assert_error(exc, 400, code)
    # Whatever refused it, the element is named (a balance too small named none).
    assert exc.msg.startswith("batch rejected, no order placed: orders[2]"), exc.msg
    assert snapshot(alice) == before
    # The order ids were not consumed either.
    assert alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price="10000")["orderId"] == "1"
    env.audit()


def test_batch_orders_element_not_an_object(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    exc = error_of(alice.batch_orders, "BTCUSDT", [limit("BUY", "0.01", "30000"), "nope"])
    assert_error(exc, 400, -1102)
    assert snapshot(alice) == before
    env.audit()


def test_batch_orders_combined_holds_above_balance(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    # Each needs 6000 USDT of the 10000: fine alone, not together.
    orders = [limit("BUY", "0.2", "30000"), limit("BUY", "0.2", "30000")]
    refused = error_of(alice.batch_orders, "BTCUSDT", orders)
    assert_error(refused, 400, -2017)
    assert refused.msg == (
        "batch rejected, no order placed: orders[1]: insufficient USDT balance with the orders"
        " before it"
    )
    sells = [limit("SELL", "0.6", "40000"), limit("SELL", "0.6", "40000")]
    assert_error(error_of(alice.batch_orders, "BTCUSDT", sells), 400, -2017)
    assert snapshot(alice) == before
    # Exactly the balance is fine.
    exact = [limit("BUY", "0.2", "25000"), limit("BUY", "0.2", "25000")]
    assert_ids(alice.batch_orders("BTCUSDT", exact), 2)
    assert balances(alice)["USDT"] == ("0.00000000", "10000.00000000")
    env.audit()


def test_batch_orders_count_bounds(env: Env, alice: Client) -> None:
    before = snapshot(alice)
    eleven = [limit("BUY", "0.001", str(20000 + i)) for i in range(11)]
    exc = error_of(alice.batch_orders, "BTCUSDT", eleven)
    assert exc.status == 400
    assert exc.code in (-1101, -1102)
    assert snapshot(alice) == before
    assert_error(error_of(alice.batch_orders, "BTCUSDT", []), 400, -1102)
    for body in (
        {"symbol": "BTCUSDT"},
        {"symbol": "BTCUSDT", "orders": None},
        {"symbol": "BTCUSDT", "orders": {"price": "1"}},
        {"symbol": "BTCUSDT", "orders": "[]"},
    ):
        response = alice.request("POST", SPOT + "/batchOrders", body=body)
        assert (response.status_code, response.json()["code"]) == (400, -1102), body
    response = alice.request(
        "POST", SPOT + "/batchOrders", body={"orders": [limit("BUY", "0.001", "20000")]}
    )
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    response = alice.request(
        "POST",
        SPOT + "/batchOrders",
        body={"symbol": "XYZ", "orders": [limit("BUY", "0.001", "20000")]},
    )
    assert (response.status_code, response.json()["code"]) == (400, -1121)
    assert snapshot(alice) == before
    ten = eleven[:10]
    assert_ids(alice.batch_orders("BTCUSDT", ten), 10)
    assert len(alice.open_orders("BTCUSDT")) == 10
    env.audit()


def test_batch_orders_client_id_of_an_open_order_refused(env: Env, alice: Client) -> None:
    alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000", client_order_id="dup")
    before = snapshot(alice)
    orders = [limit("BUY", "0.01", "29000"), limit("BUY", "0.01", "28000", newClientOrderId="dup")]
    assert_error(error_of(alice.batch_orders, "BTCUSDT", orders), 400, -1102)
    assert snapshot(alice) == before
    env.audit()


def test_batch_orders_duplicate_client_ids_within_batch(env: Env, alice: Client) -> None:
    # Regression: both orders used to be placed, two open orders sharing one client order id.
    before = snapshot(alice)
    orders = [
        limit("BUY", "0.01", "29000", newClientOrderId="twin"),
        limit("BUY", "0.01", "28000", newClientOrderId="twin"),
    ]
    response = alice.request(
        "POST", SPOT + "/batchOrders", body={"symbol": "BTCUSDT", "orders": orders}
    )
    # The contract: a client order id is unique among the account's open orders on the symbol;
    # a duplicate is rejected. All-or-nothing: the batch is refused whole.
    assert response.status_code == 400, response.text
    assert response.json() == {
        "code": -1102,
        "msg": "batch rejected, no order placed: orders[1]: newClientOrderId 'twin' repeats"
        " orders[0]'s",
    }
    assert snapshot(alice) == before
    # Distinct ids in one batch are fine.
    orders[1] = limit("BUY", "0.01", "28000", newClientOrderId="twin-2")
    assert_ids(alice.batch_orders("BTCUSDT", orders), 2)
    assert alice.get_order("BTCUSDT", client_order_id="twin-2")["price"] == "28000.00"
    env.audit()


# --------------------------------------------------------------------------- batchCancel


def test_batch_cancel_success_and_failed(env: Env, alice: Client, bob: Client) -> None:
    ids = assert_ids(
        alice.batch_orders(
            "BTCUSDT",
            [
                limit("BUY", "0.01", "30000"),
                limit("BUY", "0.01", "29000"),
                limit("SELL", "0.2", "40000"),
                limit("BUY", "0.01", "28000"),
            ],
        ),
        4,
    )
    theirs = int(bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="27000")["orderId"])
    alice.cancel_order("BTCUSDT", ids[3])
    bob_before = snapshot(bob)
    result = alice.batch_cancel("BTCUSDT", [ids[0], 999_999, ids[2], theirs, ids[3]])
    assert result == {"success": [ids[0], ids[2]], "failed": [999_999, theirs, ids[3]]}
    for value in result["success"] + result["failed"]:
        assert type(value) is int
    assert [int(o["orderId"]) for o in alice.open_orders("BTCUSDT")] == [ids[1]]
    assert balances(alice)["USDT"] == ("9710.00000000", "290.00000000")
    assert balances(alice)["BTC"] == ("1.00000000", "0.00000000")
    assert alice.get_order("BTCUSDT", ids[0])["status"] == "CANCELED"
    assert alice.get_order("BTCUSDT", ids[2])["status"] == "CANCELED"
    # Bob's order is untouched.
    assert snapshot(bob) == bob_before
    assert bob.get_order("BTCUSDT", theirs)["status"] == "NEW"
    env.audit()


def test_batch_cancel_filled_and_string_ids(env: Env, alice: Client, bob: Client) -> None:
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    filled = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    assert filled["status"] == "FILLED"
    open_one = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="20000")
    result = alice.batch_cancel("BTCUSDT", [filled["orderId"], open_one["orderId"]])
    assert result == {"success": [int(open_one["orderId"])], "failed": [int(filled["orderId"])]}
    env.audit()


def test_batch_cancel_wrong_symbol_and_repeated_id(env: Env, alice: Client) -> None:
    order = int(alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")["orderId"])
    assert alice.batch_cancel("ETHUSDT", [order]) == {"success": [], "failed": [order]}
    assert alice.get_order("BTCUSDT", order)["status"] == "NEW"
    # An id named twice is one request: one outcome per distinct id, never both.
    assert alice.batch_cancel("BTCUSDT", [order, order]) == {"success": [order], "failed": []}
    assert alice.batch_cancel("BTCUSDT", [order, order]) == {"success": [], "failed": [order]}
    assert balances(alice)["USDT"] == ("10000.00000000", "0.00000000")
    env.audit()


def test_batch_cancel_bounds_and_errors(env: Env, alice: Client) -> None:
    ids = assert_ids(
        alice.batch_orders("BTCUSDT", [limit("BUY", "0.001", str(20000 + i)) for i in range(10)]),
        10,
    )
    before = snapshot(alice)
    exc = error_of(alice.batch_cancel, "BTCUSDT", [*ids, 999_999])
    assert exc.status == 400
    assert exc.code in (-1101, -1102)
    assert_error(error_of(alice.batch_cancel, "BTCUSDT", []), 400, -1102)
    # One malformed id: nothing is cancelled.
    for bad in ("abc", -1, 0, 1.5, None, True):
        exc = error_of(alice.batch_cancel, "BTCUSDT", [ids[0], bad])
        assert_error(exc, 400, -1102)
    for body in (
        {"symbol": "BTCUSDT"},
        {"symbol": "BTCUSDT", "orderIds": ""},
        {"symbol": "BTCUSDT", "orderIds": f"{ids[0]},,{ids[1]}"},
        {"symbol": "BTCUSDT", "orderIds": f"{ids[0]};{ids[1]}"},
        {"symbol": "BTCUSDT", "orderIds": f"{ids[0]},abc"},
        {"symbol": "BTCUSDT", "orderIds": {"0": ids[0]}},
        {"orderIds": [ids[0]]},
    ):
        response = alice.request("POST", SPOT + "/batchCancel", body=body)
        assert (response.status_code, response.json()["code"]) == (400, -1102), body
    text = ",".join(str(i) for i in range(1, 12))  # 11 ids: one more than a batch takes
    response = alice.request("POST", SPOT + "/batchCancel", body={"symbol": "BTCUSDT",
                                                                 "orderIds": text})  # fmt: skip
    assert (response.status_code, response.json()["code"]) == (400, -1101)
    assert_error(error_of(alice.batch_cancel, "NOPE", [ids[0]]), 400, -1121)
    assert snapshot(alice) == before
    # The ids as one text separated by commas, as some clients of the family send them.
    text = f"{ids[0]}, {ids[1]},{ids[2]}"
    response = alice.request("POST", SPOT + "/batchCancel", body={"symbol": "BTCUSDT",
                                                                 "orderIds": text})  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json() == {"success": ids[:3], "failed": []}
    result = alice.batch_cancel("BTCUSDT", ids[3:])
    assert result == {"success": ids[3:], "failed": []}
    assert alice.open_orders("BTCUSDT") == []
    assert balances(alice)["USDT"] == ("10000.00000000", "0.00000000")
    env.audit()
