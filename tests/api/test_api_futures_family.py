"""The family's futures endpoints beyond the seed, through HTTP: cancel_trigger_order,
trigger_order_list, positions and edit_user_position_model."""

from __future__ import annotations

from typing import Any

import pytest
from test_api_futures import BTC, ok, order, placed, post, refused, set_index, trader

from support import Env
from tradehall.client import ApiError

ETH = "E-ETH-USDT"


def stop(client: Any, price: str, contract: str = BTC, **extra: Any) -> int:
    body = {
        "contractName": contract,
        "side": "SELL",
        "type": "MARKET",
        "open": "CLOSE",
        "volume": 1,
        "triggerType": 1,
        "triggerPrice": price,
        **extra,
    }
    return placed(post(client, "/conditionOrder", body))


def long_position(env: Env, client: Any, volume: int = 2) -> None:
    maker = trader(env)
    ok(order(maker, "SELL", "OPEN", volume, "30000"))
    ok(order(client, "BUY", "OPEN", volume, "30000"))


def test_cancel_trigger_order_cancels_conditional_orders_only(env: Env) -> None:
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    client = trader(env)
    long_position(env, client)
    first = stop(client, "25000")
    second = stop(client, "24000", clientOrderId="s2")
    resting = placed(order(client, "BUY", "OPEN", 1, "29000"))
    cancelled = ok(post(client, "/cancel_trigger_order", {"contractName": BTC, "orderId": first}))
    assert cancelled == {"orderId": str(first), "orderIdString": str(first)}
    by_client = client.futures_cancel_trigger_order(BTC, client_order_id="s2")
    assert by_client["orderId"] == str(second)
    msg = refused(
        post(client, "/cancel_trigger_order", {"contractName": BTC, "orderId": resting}), -2013
    )
    assert "/cancel" in msg
    assert client.futures_get_order(BTC, resting)["status"] == "NEW"  # untouched
    refused(post(client, "/cancel_trigger_order", {"contractName": BTC, "orderId": first}), -1145)
    ok(post(client, "/cancel", {"contractName": BTC, "orderId": resting}))
    refused(post(client, "/cancel_trigger_order", {"contractName": BTC, "orderId": resting}), -2013)
    refused(post(client, "/cancel_trigger_order", {"contractName": BTC, "orderId": 999}), -2013)
    refused(post(client, "/cancel_trigger_order", {"contractName": BTC}), -1102)
    env.audit()


def test_trigger_order_list_pages_waiting_conditional_orders(env: Env) -> None:
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    client = trader(env, "5000")
    other = trader(env)
    long_position(env, client)
    ids = [stop(client, price) for price in ("25000", "24000", "23000")]
    listed = client.futures_trigger_order_list()
    assert (listed["code"], listed["msg"]) == ("0", "SUCCESS")
    data = listed["data"]
    assert data["count"] == 3
    assert [item["id"] for item in data["trigOrderList"]] == [str(i) for i in reversed(ids)]
    newest = data["trigOrderList"][0]
    assert newest == {
        "id": str(ids[2]),
        "triggerOrderId": str(ids[2]),
        "clientOrderId": "",
        "contractId": env.exchange.config.markets.contracts[BTC].id,
        "contractName": BTC,
        "marginCoin": "USDT",
        "multiplier": "0.001",
        "triggerPrice": "23000.0",
        "price": "0.0",
        "pricePrecision": 1,
        "volume": "1",
        "open": "CLOSE",
        "side": "SELL",
        "type": "MARKET",
        "positionType": 1,
        "ctime": env.clock.now,
        "mtime": env.clock.now,
        "triggerType": 1,
    }
    page = client.futures_trigger_order_list(BTC, page=2, limit=2)["data"]
    assert (page["count"], [i["id"] for i in page["trigOrderList"]]) == (3, [str(ids[0])])
    assert client.futures_trigger_order_list(ETH)["data"] == {"trigOrderList": [], "count": 0}
    client.futures_cancel_trigger_order(BTC, ids[1])
    assert client.futures_trigger_order_list()["data"]["count"] == 2
    assert other.futures_trigger_order_list()["data"]["count"] == 0
    refused(post(client, "/trigger_order_list", {"limit": 1001}), -1102)
    refused(post(client, "/trigger_order_list", {"contractName": "NOPE"}), -1121)


def test_positions_lists_open_positions(env: Env) -> None:
    set_index(env, "30000")
    client = trader(env)
    assert client.futures_positions() == []
    long_position(env, client)
    (position,) = client.futures_positions()
    assert position["contractName"] == BTC and position["side"] == "BUY"
    assert position["config"] == {"contractId": 1, "contractName": BTC, "symbol": "BTCUSDT"}
    group = client.futures_account()["account"][0]["positionVos"][0]
    assert position == {
        **group["positions"][0],
        "contractName": BTC,
        "contractSymbol": group["contractSymbol"],
    }
    assert client.futures_positions(BTC) == [position]
    assert client.futures_positions(ETH) == []
    refused(
        client.request("GET", "/futures/open/fapi/v1/positions", params={"contractName": "X"}),
        -1121,
    )


def test_edit_user_position_model_is_two_way_only(env: Env) -> None:
    set_index(env, "30000")
    client = trader(env)
    assert client.futures_edit_position_model(BTC, 2) == {
        "code": "0",
        "msg": "SUCCESS",
        "data": None,
    }
    with pytest.raises(ApiError) as info:
        client.futures_edit_position_model(BTC, 1)
    assert info.value.code == -1020 and "two-way" in info.value.msg
    long_position(env, client)
    with pytest.raises(ApiError) as info:
        client.futures_edit_position_model(BTC, 1)
    assert info.value.code == -1020
    assert client.futures_edit_position_model(BTC, 2)["code"] == "0"
    for body, code in (
        ({"contractName": BTC, "positionModel": 3}, -1102),
        ({"contractName": BTC}, -1102),
        ({"contractName": "NOPE", "positionModel": 2}, -1121),
    ):
        refused(post(client, "/edit_user_position_model", body), code)


def test_edit_user_margin_model_takes_the_familys_margin_model_field(env: Env) -> None:
    """Some of the family's documents and SDKs name the margin mode ``marginModel`` (1 cross,
    2 isolated) on this endpoint; the contract's ``positionModel`` means the same here."""
    set_index(env, "30000")
    client = trader(env)
    mode = ok(post(client, "/edit_user_margin_model", {"contractName": BTC, "marginModel": 2}))
    assert mode["positionModel"] == 2
    both = {"contractName": BTC, "marginModel": "1", "positionModel": 1}
    assert ok(post(client, "/edit_user_margin_model", both))["positionModel"] == 1
    for body, code in (
        ({"contractName": BTC, "marginModel": 2, "positionModel": 1}, -1102),
        ({"contractName": BTC, "marginModel": 3}, -1102),
        ({"contractName": BTC}, -1102),
    ):
        refused(post(client, "/edit_user_margin_model", body), code)
    # Only with nothing open on the contract, as for positionModel.
    long_position(env, client)
    refused(post(client, "/edit_user_margin_model", {"contractName": BTC, "marginModel": 2}), -1020)
    env.audit()
