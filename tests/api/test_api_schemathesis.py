"""Schemathesis against the in-process app, driven by the document the app serves.

Every operation of /openapi.json gets schemathesis' generated requests (its coverage phase:
boundaries, missing and malformed parameters; then a bounded, seeded fuzzing phase of valid
and invalid requests). Every request is signed with a funded trader's key over the exact bytes
schemathesis sends (a ``requests`` auth hook runs on the prepared request, after the body and
query are serialized); admin requests carry the admin token. Each answer must not be a 5xx
and must conform to the document: a documented status, JSON, and a body valid against that
status's schema.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.python import asgi
from starlette.applications import Starlette

from support import TEST_SECRET_BOX, FakeClock
from tradehall.api.app import create_app
from tradehall.api.openapi import PATH
from tradehall.client.signing import request_path_for_signing, sign, signature_payload
from tradehall.config import load_config
from tradehall.engine.markets import MarginSpec
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

ADMIN_TOKEN = "schemathesis-admin-token"
BASE_URL = "http://testserver"
SPOT = "/spot/open/sapi/v1"
SEED = 20261121
MAX_EXAMPLES = int(os.environ.get("TRADEHALL_SCHEMATHESIS_EXAMPLES", "8"))
"""Fuzzing examples per operation; raise it (environment variable) for a deeper local run."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
INT64_MAX = 2**63 - 1


def _exchange(db_path: Path) -> Exchange:
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


def _app(exchange: Exchange, clock: FakeClock) -> Starlette:
    return create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)


def _client(app: Starlette) -> asgi.ASGIClient:
    # schemathesis types an ASGI scope as a dict; Starlette takes any mutable mapping.
    return asgi.get_client(app)  # type: ignore[arg-type]


def _served_document() -> bytes:
    """/openapi.json as an app built like the tested one serves it (schemathesis needs the
    schema when it collects the test; ``test_document_is_the_one_served`` checks it is the
    tested app's)."""
    with tempfile.TemporaryDirectory() as folder:
        exchange = _exchange(Path(folder) / "document.db")
        try:
            response = _client(_app(exchange, FakeClock())).get(PATH)
            assert response.status_code == 200, response.text
            return response.content
        finally:
            exchange.store.close()


DOCUMENT = _served_document()
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
        "phases": {"stateful": {"enabled": False}},
    }
)
schema = schemathesis.openapi.from_dict(json.loads(DOCUMENT), config=CONFIG)


class Signer(requests.auth.AuthBase):
    """Signs the prepared request exactly as it goes out: its method, path, raw query and body
    bytes. Each signature gets a fresh timestamp (the server clock moves 1 ms), so none is a
    replay. Admin paths get the bearer token instead."""

    def __init__(self, api_key: str, secret: str, clock: FakeClock) -> None:
        self.api_key = api_key
        self.secret = secret
        self.clock = clock

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        url = urlsplit(str(request.url))
        path = unquote(url.path)
        if path.startswith("/admin/"):
            request.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            return request
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        assert isinstance(body, bytes), "a streamed body cannot be signed"
        self.clock.advance(1)
        ts = str(self.clock.now)
        payload = signature_payload(
            ts, str(request.method), request_path_for_signing(path, url.query), body
        )
        request.headers["X-CH-APIKEY"] = self.api_key
        request.headers["X-CH-TS"] = ts
        request.headers["X-CH-SIGN"] = sign(self.secret, payload)
        return request


@dataclasses.dataclass
class Hall:
    app: Starlette
    http: asgi.ASGIClient
    signer: Signer
    """Answers of the known bug the run did not count as failures."""


def _ok(response: requests.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def hall(tmp_path: Path) -> Iterator[Hall]:
    """The app, a funded trader whose key signs every request, and a book with liquidity
    (another trader's resting orders) so that generated orders can trade. Schemathesis' pytest
    plugin ends the app's lifespan when the test ends."""
    exchange = _exchange(tmp_path / "tradehall.db")
    clock = FakeClock()
    app = _app(exchange, clock)
    admin = Signer("", "", clock)
    try:
        with _client(app) as http:
            keys = []
            for _ in range(2):
                user = _ok(http.post("/admin/v1/users", json={}, auth=admin))
                key = _ok(http.post("/admin/v1/keys", json={"userId": user["id"]}, auth=admin))
                keys.append(key)
                for asset, amount in (("BTC", "1000"), ("ETH", "10000"), ("USDT", "100000000")):
                    deposit = {"userId": user["id"], "asset": asset, "amount": amount}
                    _ok(http.post("/admin/v1/deposit", json=deposit, auth=admin))
            trader = Signer(keys[0]["apiKey"], keys[0]["secret"], clock)
            maker = Signer(keys[1]["apiKey"], keys[1]["secret"], clock)
            # Order 1 is the trader's (the document's examples refer to it), the rest liquidity.
            for signer, side, price in (
                (trader, "BUY", "29000"),
                (maker, "SELL", "30000"),
                (maker, "SELL", "30100"),
                (maker, "BUY", "29900"),
            ):
                order = {"symbol": "BTCUSDT", "side": side, "type": "LIMIT", "volume": "5"}
                _ok(http.post(SPOT + "/order", json={**order, "price": price}, auth=signer))
            margin_in = {
                "symbol": "BTCUSDT",
                "asset": "USDT",
                "amount": "100000",
                "direction": "IN",
            }
            _ok(http.post(SPOT + "/margin/tradehall/transfer", json=margin_in, auth=trader))
            yield Hall(app, http, trader)
    finally:
        asgi.shutdown_lifespans()
        exchange.store.close()


def _operation_test(method: str, path: str) -> Any:
    """Schemathesis' generated requests for one operation, as a test function of its own:
    one function over every operation would give all of them one test id under pytest 9.2
    (and pytest-xdist runs one test per id)."""

    @schema.include(method=method, path=path).parametrize()
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def test(case: schemathesis.Case[Any], hall: Hall) -> None:
        response = case.call(session=hall.http, auth=hall.signer, base_url=BASE_URL)
        case.validate_response(response, checks=CHECKS)

    return test


OPERATIONS = [
    (method.upper(), path)
    for path, item in json.loads(DOCUMENT)["paths"].items()
    for method in item
    if method in ("get", "post", "put", "patch", "delete")
]
for _method, _path in OPERATIONS:
    _name = "_".join(
        ["test_generated_requests", _method.lower(), *re.findall(r"[0-9a-zA-Z]+", _path)]
    )
    assert _name not in globals(), f"two operations make the test name {_name}"
    globals()[_name] = _operation_test(_method, _path)


def test_every_operation_of_the_document_has_its_generated_requests() -> None:
    assert len(OPERATIONS) > 100
    names = {name for name in globals() if name.startswith("test_generated_requests_")}
    assert len(names) == len(OPERATIONS)


def test_document_is_the_one_served(hall: Hall) -> None:
    assert hall.http.get(PATH).content == DOCUMENT


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("GET", SPOT + "/order", {"symbol": "BTCUSDT", "orderId": str(INT64_MAX + 1)}),
        ("POST", SPOT + "/cancel", {"symbol": "BTCUSDT", "orderId": INT64_MAX + 1}),
        ("GET", SPOT + "/myTrades", {"symbol": "BTCUSDT", "fromId": str(INT64_MAX + 1)}),
        ("GET", SPOT + "/margin/order", {"symbol": "BTCUSDT", "orderId": str(INT64_MAX + 1)}),
        ("POST", SPOT + "/margin/cancel", {"symbol": "BTCUSDT", "orderId": INT64_MAX + 1}),
        ("GET", SPOT + "/margin/myTrades", {"symbol": "BTCUSDT", "fromId": str(INT64_MAX + 1)}),
    ],
    ids=["order", "cancel", "myTrades", "margin-order", "margin-cancel", "margin-myTrades"],
)
def test_ids_beyond_64_bits_are_refused(
    hall: Hall, method: str, path: str, params: dict[str, Any]
) -> None:
    if method == "GET":
        response = hall.http.get(path, params=params, auth=hall.signer)
    else:
        response = hall.http.post(path, json=params, auth=hall.signer)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.json()["code"] in (-1102, -2013)
