"""The futures part of /openapi.json: every futures operation is described (under the Futures
tag, signed exactly where the server wants a signature, extensions marked), and a real answer
of each, success and errors, validates against the schema the document gives for it."""

from __future__ import annotations

from typing import Any

import httpx2
import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from support import Env
from tradehall.api.openapi import EXTENSION, PATH
from tradehall.engine.commands import SetIndexPrice

pytestmark = pytest.mark.one_process  # the document of serve's app (admin operations included)

F = "/futures/open/fapi/v1"
ROOT = "/fapi/v1"
BTC = "E-BTC-USDT"
DOC_URI = "urn:tradehall:openapi"
PUBLIC = {"ping", "time", "contracts", "depth", "ticker", "index", "klines", "ticker_all"}
FAMILY_EXTENSIONS = {
    "edit_lever",
    "edit_user_margin_model",
    "edit_position_margin",
    "cancel_all",
    "ticker_all",
    "cancel_trigger_order",
    "trigger_order_list",
    "positions",
    "edit_user_position_model",
}


def futures_ops(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): op
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if path.startswith((F, ROOT))
    }


class Checker:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        self.registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
        self.seen: set[tuple[str, str, int]] = set()

    def check(self, response: httpx2.Response) -> Any:
        method, path = response.request.method, response.request.url.path
        responses = self.doc["paths"][path][method.lower()]["responses"]
        status = str(response.status_code)
        assert status in responses, f"{method} {path} answered undocumented {status}"
        if "$ref" in responses[status]:
            name = responses[status]["$ref"].rsplit("/", 1)[-1]
            parts = ["components", "responses", name]
        else:
            parts = ["paths", path, method.lower(), "responses", status]
        parts += ["content", "application/json", "schema"]
        pointer = "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"{DOC_URI}#/{pointer}"}, registry=self.registry
        )
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not errors, (method, path, errors)
        self.seen.add((method, path, response.status_code))
        return body


def test_futures_operations_are_described(env: Env) -> None:
    doc = env.http.get(PATH).json()
    ops = futures_ops(doc)
    assert len(ops) == 29  # ticker, index and ticker_all also at the market address
    for (method, path), op in ops.items():
        name = path.rsplit("/", 1)[-1]
        assert op["tags"] == ["Futures"], path
        if name in PUBLIC and method == "GET":
            assert "security" not in op, path
        else:
            assert op["security"] == [{"ApiKey": [], "Timestamp": [], "Signature": []}], path
        extension = name in FAMILY_EXTENSIONS or "/tradehall/" in path
        assert op.get(EXTENSION, False) is extension, path
    schemes = doc["components"]["securitySchemes"]
    assert "/futures/open" in schemes["Signature"]["description"]
    numbers = doc["components"]["schemas"]["FuturesIndex"]["properties"]
    assert numbers["markPrice"]["type"] == "number"


def test_every_futures_operation_answers_as_documented(env: Env) -> None:
    doc = env.http.get(PATH).json()
    checker = Checker(doc)

    def ok(response: httpx2.Response) -> Any:
        assert response.status_code == 200, response.text
        return checker.check(response)

    def fails(response: httpx2.Response, status: int, code: int) -> None:
        assert response.status_code == status, response.text
        assert checker.check(response)["code"] == code

    env.exchange.apply(SetIndexPrice(env.clock.now, BTC, 300_000))
    maker = env.trader({"USDT": "100000"})
    client = env.trader({"USDT": "100000"})
    reader = env.trader(read_only=True)
    move = {"asset": "USDT", "amount": "5000", "from": "spot", "to": "futures"}
    for trader in (maker, client):
        ok(trader.request("POST", F + "/tradehall/transfer", body=move))
    order = {"contractName": BTC, "side": "SELL", "type": "LIMIT", "open": "OPEN"}
    ok(maker.request("POST", F + "/order", body={**order, "volume": 10, "price": "30000"}))
    ok(client.request("POST", F + "/edit_lever", body={"contractName": BTC, "nowLevel": 5}))
    model = {"contractName": BTC, "positionModel": 2}
    ok(client.request("POST", F + "/edit_user_margin_model", body=model))
    buy = {**order, "side": "BUY", "volume": "4", "price": "30000", "clientOrderId": "b"}
    bought = ok(client.request("POST", F + "/order", body=buy))
    ok(client.request("POST", F + "/order", body={**buy, "price": 29000, "clientOrderId": "r"}))
    stop = {**order, "type": "MARKET", "open": "CLOSE", "volume": 2, "triggerType": 1}
    ok(client.request("POST", F + "/conditionOrder", body={**stop, "triggerPrice": 25000}))
    second = {**stop, "triggerPrice": 24000, "clientOrderId": "s2"}
    ok(client.request("POST", F + "/conditionOrder", body=second))
    waiting = ok(client.request("POST", F + "/trigger_order_list", body={"contractName": BTC}))
    assert waiting["data"]["count"] == 2
    cancel_stop = {"contractName": BTC, "clientOrderId": "s2"}
    ok(client.request("POST", F + "/cancel_trigger_order", body=cancel_stop))
    ok(client.request("POST", F + "/edit_user_position_model", body=model))
    listed = ok(client.request("GET", F + "/openOrders"))
    assert len(listed) == 2 and "triggerType" in listed[0]
    ok(client.request("GET", F + "/order", params={"contractName": BTC, **bought}))
    ok(
        client.request(
            "GET", F + "/order", params={"contractName": BTC, "orderId": listed[0]["orderId"]}
        )
    )
    account = ok(client.request("GET", F + "/account"))
    position = account["account"][0]["positionVos"][0]["positions"][0]
    assert ok(client.request("GET", F + "/positions", params={"contractName": BTC}))
    adjust = {"positionId": position["id"], "amount": "1.5"}
    ok(client.request("POST", F + "/edit_position_margin", body=adjust))
    ok(client.request("GET", F + "/myTrades", params={"contractName": BTC}))
    ok(client.request("POST", F + "/cancel", body={"contractName": BTC, "clientOrderId": "r"}))
    ok(client.request("POST", F + "/cancel_all", body={}))
    close = {**order, "type": "MARKET", "open": "CLOSE", "volume": 4}
    ok(
        maker.request(
            "POST", F + "/order", body={**order, "side": "BUY", "volume": 4, "price": 30000}
        )
    )
    ok(client.request("POST", F + "/order", body=close))
    assert ok(client.request("POST", F + "/profitHistorical", body={"contractName": BTC}))
    assert ok(client.request("POST", F + "/orderHistorical", body={}))
    ok(reader.request("GET", F + "/account"))
    public = env.public()
    for path, params in [
        (F + "/ping", {}),
        (F + "/time", {}),
        (F + "/contracts", {}),
        (F + "/depth", {"contractName": BTC}),
        (F + "/ticker", {"contractName": BTC}),
        (F + "/index", {"contractName": BTC}),
        (F + "/klines", {"contractName": BTC, "interval": "1h"}),
        (F + "/ticker_all", {}),
        (ROOT + "/ticker", {"contractName": BTC}),
        (ROOT + "/index", {"contractName": BTC}),
        (ROOT + "/ticker_all", {}),
    ]:
        ok(public.request("GET", path, params=params, signed=False))

    fails(
        public.request("GET", F + "/depth", params={"contractName": "X"}, signed=False), 400, -1121
    )
    fails(client.request("POST", F + "/order", body={**order, "side": "UP"}), 400, -1117)
    fails(
        client.request("GET", F + "/order", params={"contractName": BTC, "orderId": 424242}),
        400,
        -2013,
    )
    fails(public.request("GET", F + "/account", signed=False), 401, -1002)
    fails(reader.request("POST", F + "/cancel_all", body={}), 403, -2015)

    succeeded = {(m, p) for m, p, status in checker.seen if status == 200}
    assert succeeded == set(futures_ops(doc))
