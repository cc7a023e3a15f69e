"""Futures order and trigger prices outside the contract's range are refused with -1138
through HTTP (docs/futures.md, "Price range"), and the contract list keeps the seed's fields.

E-BTC-USD (inverse, 10 USD a contract, 0.1 USD ticks, margin in BTC): one contract is worth
at least 0.00000001 BTC up to 1000000000.0 USD. E-BTC-USDT (linear, 0.1 USDT ticks): up to
2^40 ticks = 109951162777.6 USDT.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from test_api_futures import CONTRACT_FIELDS

from support import Env
from tradehall.client import Client

F = "/futures/open/fapi/v1"
INVERSE = "E-BTC-USD"
LINEAR = "E-BTC-USDT"


def post(client: Client, path: str, body: dict[str, Any]) -> httpx2.Response:
    return client.request("POST", F + path, body=body)


def refused(response: httpx2.Response, code: int) -> str:
    assert (response.status_code, response.json().get("code")) == (400, code), response.text
    return str(response.json()["msg"])


def trader(env: Env) -> Client:
    client = env.trader({"BTC": "10", "USDT": "100000"})
    for asset, amount in (("BTC", "5"), ("USDT", "50000")):
        body = {"asset": asset, "amount": amount, "from": "spot", "to": "futures"}
        assert post(client, "/tradehall/transfer", body).status_code == 200
    return client


def order(client: Client, contract: str, price: str, **extra: Any) -> httpx2.Response:
    body = {
        "contractName": contract,
        "side": "SELL",
        "type": "LIMIT",
        "open": "OPEN",
        "volume": 1,
        "price": price,
    }
    return post(client, "/order", {**body, **extra})


def test_prices_above_the_contracts_highest_are_refused(env: Env) -> None:
    client = trader(env)
    message = refused(order(client, INVERSE, "1000000000.1"), -1138)
    assert "at most 1000000000.0 on E-BTC-USD" in message
    refused(order(client, INVERSE, "109951162777.6"), -1138)  # 2**40 ticks
    refused(order(client, INVERSE, "1000000000.1", open="CLOSE"), -1138)
    refused(order(client, LINEAR, "109951162777.7"), -1138)
    trigger = {"triggerType": "1", "triggerPrice": "1000000000.1", "side": "BUY"}
    refused(post(client, "/conditionOrder", _body(INVERSE, "1000000000.0", trigger)), -1138)
    assert env.exchange.engine.futures.open_orders(int(client.user_id)) == []  # type: ignore[attr-defined]

    # At the bound (the contract's index there: no orders are taken without one): a trade
    # of one contract worth 0.00000001 BTC.
    env.admin.set_index_price(INVERSE, "1000000000.0")
    maker = order(client, INVERSE, "1000000000.0")
    assert maker.status_code == 200, maker.text
    other = trader(env)
    taker = order(other, INVERSE, "1000000000.0", side="BUY", timeInForce="IOC")
    assert taker.status_code == 200, taker.text
    account = json.loads(other.request("GET", F + "/account").text)
    (btc,) = [a for a in account["account"] if a["marginCoin"] == "BTC"]
    (group,) = btc["positionVos"]
    (position,) = group["positions"]
    assert position["volume"] == 1
    assert position["openPrice"] == 1000000000.0
    env.audit()


def test_the_contract_list_keeps_the_seeds_fields(env: Env) -> None:
    listed = env.http.get(F + "/contracts").json()
    assert {c["symbol"] for c in listed} >= {INVERSE, LINEAR}
    for contract in listed:
        assert set(contract) == CONTRACT_FIELDS


def _body(contract: str, price: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "contractName": contract,
        "type": "LIMIT",
        "open": "OPEN",
        "volume": 1,
        "price": price,
        **extra,
    }
