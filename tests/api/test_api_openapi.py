"""The OpenAPI document at /openapi.json: valid OpenAPI 3.1, complete (every route the app
serves, nothing else), and true: real answers of every operation, successes and errors,
validate against the schemas it gives for them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, TEST_SECRET_BOX, Env, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.api.openapi import EXTENSION, PATH
from tradehall.client import AdminClient
from tradehall.config import LimitSettings, load_config
from tradehall.engine.markets import MarginSpec
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

pytestmark = pytest.mark.one_process  # the document of serve's app (admin operations included)

SPOT = "/spot/open/sapi/v1"
SPOT_V2 = "/spot/open/sapi/v2"
SPOT_V3 = "/spot/open/sapi/v3"
MARGIN = SPOT + "/margin"
ADMIN = "/admin/v1"
MARKET_KLINE = "/v1/spot/market/kline"
DOC_URI = "urn:tradehall:openapi"
ERROR_STATUSES = {"400", "401", "403", "404", "405", "418", "429", "503"}


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items() for method in item}


PUBLIC = {"ping", "time", "symbols", "depth", "ticker", "trades", "klines"}
FUTURES_EXTENSIONS = {
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


def all_ops(doc: dict[str, Any]) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    return [
        ((method.upper(), path), op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
    ]


def pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


class Checker:
    """Validates real responses against the document's schema for their operation and status,
    and remembers which (operation, status) pairs it saw."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        self.registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
        self.seen: set[tuple[str, str, int]] = set()

    def schema_pointer(self, method: str, path: str, status: int) -> str:
        responses = self.doc["paths"][path][method.lower()]["responses"]
        assert str(status) in responses, f"{method} {path} answered undocumented {status}"
        response = responses[str(status)]
        if "$ref" in response:
            ref = response["$ref"]
            assert ref.startswith("#/components/responses/"), ref
            return "#/" + pointer(*ref[2:].split("/"), "content", "application/json", "schema")
        return (
            "#/"
            + pointer(
                "paths",
                path,
                method.lower(),
                "responses",
                str(status),
                "content",
                "application/json",
            )
            + "/schema"
        )

    def validate(self, schema_ptr: str, body: Any) -> None:
        validator = jsonschema.Draft202012Validator(
            {"$ref": DOC_URI + schema_ptr}, registry=self.registry
        )
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]

    def check(self, response: httpx2.Response, path: str | None = None) -> Any:
        """Validate ``response`` (its operation found from its request) and return its JSON."""
        method = response.request.method
        path = path or response.request.url.path
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        self.validate(self.schema_pointer(method, path, response.status_code), body)
        self.seen.add((method, path, response.status_code))
        return body

    def check_error(self, response: httpx2.Response, component: str) -> Any:
        """Validate an error answered outside any operation (404, 405) against its component."""
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        ptr = "#/" + pointer("components", "responses", component, "content")
        self.validate(ptr + "/application~1json/schema", body)
        return body


@pytest.fixture
def doc(env: Env) -> dict[str, Any]:
    response = env.http.get(PATH)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    document: dict[str, Any] = response.json()
    return document


def margin_exchange(db_path: Path) -> Exchange:
    """The default markets, with isolated margin offered on BTCUSDT."""
    config = load_config()
    markets = dataclasses.replace(config.markets, margin={"BTCUSDT": MarginSpec("BTCUSDT")})
    store = SQLiteStore(db_path, "normal")
    store.migrate()
    exchange = Exchange(
        dataclasses.replace(config, markets=markets),
        store,
        secret_box=TEST_SECRET_BOX,
        check_invariants=True,
    )
    exchange.recover()
    return exchange


@pytest.fixture
def margin_env(tmp_path: Path) -> Iterator[Env]:
    exchange = margin_exchange(tmp_path / "margin.db")
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app) as http:
        admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
        yield Env(http, exchange, clock, admin, tmp_path / "margin.db")
    exchange.store.close()


# --------------------------------------------------------------------------- the document


def test_document_is_valid_openapi_3_1(doc: dict[str, Any]) -> None:
    assert doc["openapi"].startswith("3.1.")
    OpenAPIV31SpecValidator(doc).validate()


def test_document_lists_exactly_the_routes_the_app_serves(env: Env, doc: dict[str, Any]) -> None:
    served = set()
    app = env.http.app
    assert isinstance(app, Starlette)
    pages = set()
    for route in app.routes:
        if isinstance(route, WebSocketRoute):  # the streams: docs/websocket.md, not OpenAPI
            assert route.path.endswith("/ws")
            continue
        assert isinstance(route, Route)
        methods = {(method, route.path) for method in route.methods or () if method != "HEAD"}
        if route.include_in_schema:
            served |= methods
        else:
            pages |= methods
    assert operations(doc) == served
    # Only the web pages and their files, and the operator's probes (health, readiness,
    # metrics: docs/operations.md), stay out of the document: no API operation.
    probes = {("GET", "/healthz"), ("GET", "/readyz")}
    if env.gateway is None:
        probes.add(("GET", "/metrics"))  # a gateway serves its own on a listener of its own
    pages_ = {("GET", "/"), ("GET", "/admin"), ("GET", "/web/{name:path}")}
    assert pages == pages_ | probes
    assert ("GET", PATH) in served
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_document_is_cached_unsigned_and_survives_a_store_failure(env: Env) -> None:
    first = env.http.get(PATH)
    again = env.http.get(PATH, headers={"X-CH-APIKEY": "whatever"})
    assert first.status_code == again.status_code == 200
    assert first.content == again.content
    # Still served after a store failure, when every other endpoint answers 503.
    env.exchange.failure = "simulated"
    try:
        assert env.http.get(PATH).content == first.content
        assert env.http.get(SPOT + "/ping").status_code == 503
    finally:
        env.exchange.failure = None


def test_document_is_not_rate_limited(tmp_path: Path) -> None:
    """With tiny limits, /ping is refused (429) then banned (418); the document never is. Both
    refusals are as documented (error body, Retry-After)."""
    exchange = make_exchange(tmp_path / "limits.db")
    limits = LimitSettings(public_per_ip=(2, 60), global_per_ip=(1000, 60), ban_after=2)
    app = create_app(exchange, clock=FakeClock(), limits=limits, run_scheduler=False)
    try:
        with TestClient(app) as http:
            checker = Checker(http.get(PATH).json())
            answers = [http.get(SPOT + "/ping") for _ in range(8)]
            statuses = [a.status_code for a in answers]
            assert statuses[:3] == [200, 200, 429] and statuses[-1] == 418, statuses
            for answer in (answers[2], answers[-1]):
                assert int(answer.headers["retry-after"]) >= 1
                assert checker.check(answer)["code"] == -1003
            for _ in range(20):
                assert http.get(PATH).status_code == 200
    finally:
        exchange.store.close()


def test_signed_operations_declare_the_signing_headers(doc: dict[str, Any]) -> None:
    schemes = doc["components"]["securitySchemes"]
    headers = {schemes[name]["name"] for name in ("ApiKey", "Timestamp", "Signature")}
    assert headers == {"X-CH-APIKEY", "X-CH-TS", "X-CH-SIGN"}
    assert all(schemes[name]["in"] == "header" for name in ("ApiKey", "Timestamp", "Signature"))
    for (_, path), op in all_ops(doc):
        signed = path.startswith(("/spot/open", "/futures/open")) and path.rsplit("/", 1)[
            -1
        ] not in PUBLIC | {"contracts", "index", "ticker_all"}
        if signed:
            assert op["security"] == [{"ApiKey": [], "Timestamp": [], "Signature": []}], path
        elif path.startswith(ADMIN):
            assert op["security"] == [{"AdminToken": []}], path
        else:
            assert "security" not in op, path


def test_security_matches_what_the_server_enforces(env: Env, doc: dict[str, Any]) -> None:
    """Unsigned calls: 401 exactly where the document asks for credentials."""
    checker = Checker(doc)
    for (method, path), op in all_ops(doc):
        if method == "POST":
            response = env.http.post(
                path, content=b"{}", headers={"Content-Type": "application/json"}
            )
        else:
            response = env.http.get(path)
        if "security" in op:
            assert response.status_code == 401, (method, path, response.text)
            expected = -2015 if path.startswith(ADMIN) else -1002
            assert checker.check(response)["code"] == expected
        else:
            assert response.status_code in (200, 400), (method, path, response.text)
            checker.check(response)


def test_every_error_answer_references_the_error_body(doc: dict[str, Any]) -> None:
    responses = doc["components"]["responses"]
    statuses = set()
    for response in responses.values():
        schema = response["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}
    for (_, path), op in all_ops(doc):
        for status, response in op["responses"].items():
            if status != "200":
                statuses.add(status)
                assert response["$ref"].startswith("#/components/responses/"), (path, status)
                assert response["$ref"].split("/")[-1] in responses
    assert statuses | {"404", "405"} == ERROR_STATUSES
    error_body = doc["components"]["schemas"]["ErrorBody"]
    assert error_body["required"] == ["code", "msg"]
    assert error_body["properties"]["code"]["type"] == "integer"


def test_extensions_are_marked(doc: dict[str, Any]) -> None:
    tags = {tag["name"]: tag for tag in doc["tags"]}
    assert tags["Admin"][EXTENSION] is True
    for (_, path), op in all_ops(doc):
        if path.startswith((ADMIN, MARGIN + "/tradehall", SPOT_V2 + "/margin/tradehall")) or (
            path == PATH
        ):
            assert op[EXTENSION] is True, path
            assert path == PATH or op["tags"] in (["Admin"], ["Margin"])
        elif path.startswith(("/futures/open", "/fapi/v1")) and (
            path.rsplit("/", 1)[-1] in FUTURES_EXTENSIONS or "/tradehall/" in path
        ):
            assert op[EXTENSION] is True, path
            assert op["tags"] == ["Futures"]
        else:
            assert EXTENSION not in op, path


def test_request_parameters_follow_the_reference(doc: dict[str, Any]) -> None:
    def params(path: str) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in doc["paths"][path]["get"].get("parameters", [])}

    depth = params(SPOT + "/depth")
    assert depth["symbol"]["required"] is True
    assert depth["symbol"]["schema"]["pattern"] == "^[A-Za-z0-9_-]{1,40}$"
    assert depth["limit"]["required"] is False
    assert (depth["limit"]["schema"]["minimum"], depth["limit"]["schema"]["maximum"]) == (1, 100)
    klines = params(SPOT + "/klines")
    assert "1min" in klines["interval"]["schema"]["enum"]
    assert klines["limit"]["schema"]["maximum"] == 300
    assert params(SPOT + "/myTrades")["fromId"]["required"] is False
    schemas = doc["components"]["schemas"]
    order = schemas["OrderRequest"]
    assert set(order["required"]) == {"symbol", "side", "type", "volume"}
    assert order["properties"]["side"]["enum"] == ["BUY", "SELL"]
    assert order["properties"]["type"]["enum"] == ["LIMIT", "MARKET"]
    assert set(order["properties"]["timeInForce"]["enum"]) == {"GTC", "IOC", "FOK", "POST_ONLY"}
    volume_types = {branch["type"] for branch in order["properties"]["volume"]["anyOf"]}
    assert volume_types == {"string", "number"}
    batch = schemas["BatchOrdersRequest"]["properties"]["orders"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 10)


# --------------------------------------------------------------------------- live answers


def spot_calls(env: Env, checker: Checker, spot: str = SPOT) -> None:
    """A real call of every spot operation (and of the document), each checked."""
    maker = env.trader({"BTC": "10", "USDT": "1000000"})
    taker = env.trader({"BTC": "10", "USDT": "1000000"})
    reader = env.trader(read_only=True)
    public = env.public()

    def ok(response: httpx2.Response) -> Any:
        assert response.status_code == 200, response.text
        return checker.check(response)

    sell = ok(
        maker.request(
            "POST",
            spot + "/order",
            body={
                "symbol": "btcusdt",
                "side": "SELL",
                "type": "LIMIT",
                "volume": "0.5",
                "price": "30000",
                "newClientOrderId": "ask-1",
            },
        )
    )
    ok(
        taker.request(
            "POST",
            spot + "/order",
            body={
                "symbol": "BTCUSDT",
                "side": "BUY",
                "type": "LIMIT",
                "volume": 0.2,
                "price": 30000,
            },
        )
    )
    env.clock.advance(61_000)
    ok(
        taker.request(
            "POST",
            spot + "/order",
            body={"symbol": "BTCUSDT", "side": "BUY", "type": "MARKET", "volume": "300"},
        )
    )
    ok(
        taker.request(
            "POST",
            spot + "/order/test",
            body={
                "symbol": "BTCUSDT",
                "side": "BUY",
                "type": "LIMIT",
                "volume": "1",
                "price": "10",
            },
        )
    )
    batch = ok(
        taker.request(
            "POST",
            spot + "/batchOrders",
            body={
                "symbol": "BTCUSDT",
                "orders": [
                    {"side": "BUY", "batchType": "LIMIT", "volume": "0.1", "price": "20000"},
                    {"side": "BUY", "batchType": "LIMIT", "volume": "0.1", "price": "20001"},
                ],
            },
        )
    )
    ok(
        maker.request(
            "GET", spot + "/order", params={"symbol": "BTCUSDT", "orderId": sell["orderId"]}
        )
    )
    ok(
        maker.request(
            "GET", spot + "/order", params={"symbol": "BTCUSDT", "newClientOrderId": "ask-1"}
        )
    )
    assert ok(taker.request("GET", spot + "/openOrders", params={"symbol": "BTCUSDT"}))
    assert ok(maker.request("GET", spot + "/myTrades", params={"symbol": "BTCUSDT"}))
    ok(
        taker.request(
            "GET", spot + "/myTrades", params={"symbol": "BTCUSDT", "fromId": 1, "limit": 1}
        )
    )
    ok(reader.request("GET", spot + "/account"))
    ok(taker.request("GET", spot + "/account"))
    ok(
        taker.request(
            "POST", spot + "/cancel", body={"symbol": "BTCUSDT", "orderId": batch["ids"][0]}
        )
    )
    cancel = ok(
        taker.request(
            "POST",
            spot + "/batchCancel",
            body={"symbol": "BTCUSDT", "orderIds": [batch["ids"][1], 999999]},
        )
    )
    assert cancel["failed"] == [999999]
    assert ok(public.request("GET", spot + "/depth", params={"symbol": "BTCUSDT"}, signed=False))[
        "asks"
    ]
    reads: list[tuple[str, dict[str, Any]]] = [
        ("/ping", {}),
        ("/time", {}),
        ("/symbols", {}),
        ("/ticker", {"symbol": "BTCUSDT"}),
        ("/trades", {"symbol": "BTCUSDT", "limit": 5}),
        ("/klines", {"symbol": "BTCUSDT", "interval": "1min"}),
        ("/klines", {"symbol": "ETHBTC", "interval": "1month"}),
    ]
    for path, params in reads:
        ok(public.request("GET", spot + path, params=params, signed=False))
    for params in ({}, {"symbols": "ethbtc,BTCUSDT"}) if spot == SPOT_V2 else ():
        assert ok(public.request("GET", spot + "/ticker", params=params, signed=False))
    for path in ("/historyOrders", "/myTrades"):
        assert ok(maker.request("GET", SPOT_V3 + path, params={"limit": 5}))
    move = {"coinSymbol": "USDT", "amount": "10", "fromAccount": "EXCHANGE", "toAccount": "FUTURE"}
    assert ok(taker.request("POST", spot + "/asset/transfer", body=move))["data"]["transferId"]
    query = {"fromAccount": "EXCHANGE", "toAccount": "FUTURE"}
    assert ok(taker.request("POST", spot + "/asset/transferQuery", body=query))["data"]["list"]
    ok(env.http.get(PATH))

    # Errors: each documented status the server can give without rate limits.
    def fails(response: httpx2.Response, status: int, code: int) -> None:
        assert response.status_code == status, response.text
        assert checker.check(response)["code"] == code

    kline = {"symbol": "BTCUSDT", "scaleType": "1min"}
    assert ok(public.request("GET", MARKET_KLINE, params=kline, signed=False))["data"]["data"]
    fails(
        public.request("GET", MARKET_KLINE, params={**kline, "limit": 301}, signed=False),
        400,
        -1102,
    )

    fails(
        public.request("GET", spot + "/depth", params={"symbol": "NOPE"}, signed=False), 400, -1121
    )
    fails(
        public.request(
            "GET", spot + "/klines", params={"symbol": "BTCUSDT", "interval": "2h"}, signed=False
        ),
        400,
        -1102,
    )
    fails(
        taker.request(
            "POST",
            spot + "/order",
            body={"symbol": "BTCUSDT", "side": "UP", "type": "LIMIT", "volume": "1"},
        ),
        400,
        -1117,
    )
    fails(public.request("GET", spot + "/account", signed=False), 401, -1002)
    fails(
        reader.request("POST", spot + "/cancel", body={"symbol": "BTCUSDT", "orderId": 1}),
        403,
        -2015,
    )
    fails(
        maker.request("GET", spot + "/order", params={"symbol": "BTCUSDT", "orderId": 424242}),
        400,
        -2013,
    )
    missing = env.http.get(spot + "/nowhere")
    assert missing.status_code == 404
    assert checker.check_error(missing, "NotFound")["code"] == -1020
    wrong = env.http.delete(spot + "/ping")
    assert wrong.status_code == 405
    assert checker.check_error(wrong, "MethodNotAllowed")["code"] == -1020
    env.exchange.failure = "simulated store failure"
    try:
        fails(taker.request("GET", spot + "/account"), 503, -1001)
        fails(env.admin.request("GET", ADMIN + "/users"), 503, -1001)
    finally:
        env.exchange.failure = None


def admin_calls(env: Env, checker: Checker) -> None:
    admin = env.admin

    def ok(response: httpx2.Response) -> Any:
        assert response.status_code == 200, response.text
        return checker.check(response)

    user = ok(admin.request("POST", ADMIN + "/users", body={"name": "alice"}))
    ok(admin.request("POST", ADMIN + "/users"))
    ok(admin.request("GET", ADMIN + "/users"))
    key = ok(
        admin.request(
            "POST",
            ADMIN + "/keys",
            body={"userId": user["id"], "readOnly": "true", "ips": ["10.0.0.0/8"]},
        )
    )
    ok(admin.request("POST", ADMIN + "/keys/revoke", body={"apiKey": key["apiKey"]}))
    deposit = {"userId": user["id"], "asset": "usdt", "amount": "12.5", "txId": "tx-1"}
    ok(admin.request("POST", ADMIN + "/deposit", body=deposit))
    assert ok(admin.request("POST", ADMIN + "/deposit", body=deposit))["duplicate"] is True
    ok(admin.request("POST", ADMIN + "/withdraw", body={**deposit, "txId": "tx-2", "amount": 2}))
    ok(admin.request("GET", ADMIN + "/balances", params={"userId": user["id"]}))
    ok(admin.request("GET", ADMIN + "/balances", params={"userId": 0}))
    ok(admin.request("GET", ADMIN + "/markets"))
    assert ok(admin.request("GET", ADMIN + "/audit"))["ok"] is True
    assert ok(admin.request("GET", ADMIN + "/storage"))["retention"]["enabled"] is True
    ok(admin.request("GET", ADMIN + "/status"))
    assert ok(admin.request("GET", ADMIN + "/sim"))["running"] is False
    assert ok(admin.request("POST", ADMIN + "/sim/start"))["started"] is True
    assert ok(admin.request("POST", ADMIN + "/sim/stop"))["stopped"] is True
    assert isinstance(ok(admin.request("POST", ADMIN + "/futures/funding-now"))["settled"], list)
    assert ok(admin.request("POST", ADMIN + "/margin/interest-now"))["hours"] == 1
    reset = ok(admin.request("POST", ADMIN + "/accounts/reset", body={"userId": user["id"]}))
    assert reset["spot"]["BTC"] == "100.00000000"
    pool = {"account": "pool", "asset": "USDT", "amount": "1000", "txId": "pool-1"}
    ok(admin.request("POST", ADMIN + "/system/deposit", body=pool))
    ok(admin.request("POST", ADMIN + "/system/withdraw", body={**pool, "txId": "pool-2"}))
    ok(admin.request("GET", ADMIN + "/system"))
    move = {"userId": user["id"], "symbol": "BTCUSDT", "asset": "USDT", "amount": "5"}
    ok(
        admin.request(
            "POST", ADMIN + "/margin/transfer", body={**move, "from": "spot", "to": "margin"}
        )
    )
    view = {"userId": user["id"], "symbol": "BTCUSDT"}
    ok(admin.request("GET", ADMIN + "/margin/account", params=view))
    futures = {"userId": user["id"], "asset": "USDT", "amount": "1"}
    ok(
        admin.request(
            "POST", ADMIN + "/futures/transfer", body={**futures, "from": "spot", "to": "futures"}
        )
    )
    index = {"contract": "E-BTC-USD", "price": "30000.5"}
    ok(admin.request("POST", ADMIN + "/futures/index-price", body=index))
    fed = ok(admin.request("POST", ADMIN + "/futures/index-price", body={**index, "feed": "x"}))
    assert (fed["feed"], fed["feedPrice"], fed["indexPrice"]) == ("x", "30000.5", "30000.5")
    sources = ok(admin.request("GET", ADMIN + "/futures/index", params={"contract": "e-btc-usd"}))
    assert [(s["name"], s["weight"], s["status"]) for s in sources["sources"]] == [
        ("mid", 2, "none"), ("last", 1, "none"), ("x", 1, "none"),
    ]  # fmt: skip
    assert (sources["indexPrice"], sources["priceBand"]) == ("30000.5", "0.05")
    bad = admin.request("POST", ADMIN + "/deposit", body={**deposit, "asset": "NOPE"})
    assert bad.status_code == 400 and checker.check(bad)["code"] == -1102
    stranger = env.http.get(ADMIN + "/status", headers={"Authorization": "Bearer wrong"})
    assert stranger.status_code == 401 and checker.check(stranger)["code"] == -2015
    keys = ok(admin.request("GET", ADMIN + "/keys"))["keys"]
    assert [k["revoked"] is not None for k in keys if k["apiKey"] == key["apiKey"]] == [True]
    assert all("secret" not in k for k in keys)
    activity = ok(admin.request("GET", ADMIN + "/activity"))
    # The refusals above are among the recent errors, newest first.
    assert activity["recentErrors"][0]["path"] == ADMIN + "/status"
    assert activity["recentErrors"][0]["status"] == 401
    assert ok(admin.request("GET", ADMIN + "/gateways")) == {"gateways": []}  # serve has none
    trail = ok(admin.request("GET", ADMIN + "/admin-log", params={"limit": 3}))["entries"]
    assert [e["action"] for e in trail][:1] == ["deposit"]  # the refused one, newest first


def margin_calls(env: Env, checker: Checker, spot: str = SPOT) -> None:
    trader = env.trader({"BTC": "10", "USDT": "100000"})
    other = env.trader({"BTC": "10", "USDT": "100000"})

    def ok(response: httpx2.Response) -> Any:
        assert response.status_code == 200, response.text
        return checker.check(response)

    ok(
        other.request(
            "POST",
            spot + "/order",
            body={
                "symbol": "BTCUSDT",
                "side": "SELL",
                "type": "LIMIT",
                "volume": "1",
                "price": "30000",
            },
        )
    )
    transfer = {"symbol": "BTCUSDT", "asset": "USDT", "amount": "5000", "direction": "IN"}
    ok(trader.request("POST", spot + "/margin" + "/tradehall/transfer", body=transfer))
    order = ok(
        trader.request(
            "POST",
            spot + "/margin" + "/order",
            body={
                "symbol": "BTCUSDT",
                "side": "BUY",
                "type": "LIMIT",
                "volume": "0.01",
                "price": "30000",
            },
        )
    )
    resting = ok(
        trader.request(
            "POST",
            spot + "/margin" + "/order",
            body={
                "symbol": "BTCUSDT",
                "side": "BUY",
                "type": "LIMIT",
                "volume": "0.1",
                "price": "100",
            },
        )
    )
    ok(
        trader.request(
            "GET",
            spot + "/margin" + "/order",
            params={"symbol": "BTCUSDT", "orderId": order["orderId"]},
        )
    )
    assert ok(trader.request("GET", spot + "/margin" + "/openOrders", params={"symbol": "BTCUSDT"}))
    assert ok(trader.request("GET", spot + "/margin" + "/myTrades", params={"symbol": "BTCUSDT"}))
    ok(
        trader.request(
            "POST",
            spot + "/margin" + "/cancel",
            body={"symbol": "BTCUSDT", "orderId": resting["orderId"]},
        )
    )
    view = ok(
        trader.request("GET", spot + "/margin" + "/tradehall/account", params={"symbol": "BTCUSDT"})
    )
    assert view["lastPrice"] is not None
    ok(
        trader.request(
            "POST",
            spot + "/margin" + "/tradehall/repay",
            body={"symbol": "BTCUSDT", "asset": "USDT", "amount": "1"},
        )
    )
    refused = trader.request("GET", spot + "/margin" + "/openOrders", params={"symbol": "ETHUSDT"})
    assert refused.status_code == 400 and checker.check(refused)["code"] == -1121


@pytest.mark.parametrize("spot", [SPOT, SPOT_V2])
def test_every_operation_answers_as_documented(
    env: Env, margin_env: Env, doc: dict[str, Any], spot: str
) -> None:
    """Once through /sapi/v1, once through the family's /sapi/v2 aliases."""
    checker = Checker(doc)
    spot_calls(env, checker, spot)
    admin_calls(env, checker)
    margin_calls(margin_env, checker, spot)
    succeeded = {(method, path) for method, path, status in checker.seen if status == 200}
    # The futures operations are exercised by test_api_futures_openapi.py.
    futures = {op for op in operations(doc) if op[1].startswith(("/futures/", "/fapi/"))}
    other = SPOT_V2 if spot == SPOT else SPOT + "/"
    not_this_run = {op for op in operations(doc) if op[1].startswith(other)}
    assert succeeded == operations(doc) - futures - not_this_run
    statuses = {status for _, _, status in checker.seen}
    assert {200, 400, 401, 403, 503} <= statuses
