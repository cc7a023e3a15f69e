"""The OpenAPI document against what the handlers actually read: every parameter a handler
looks up during a real call of each operation must be one the document declares for that
operation (query parameters, or the request body's properties). The request types in
``api/openapi.py`` only document; this guards them against drifting from ``api/params.py``'s
reading until one definition serves both."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import test_api_futures_openapi as futures_openapi
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send
from test_api_openapi import (
    SPOT,
    SPOT_V2,
    Checker,
    admin_calls,
    margin_calls,
    margin_exchange,
    spot_calls,
)

import tradehall.api.http as http_module
from support import ADMIN_TOKEN, BASE_URL, Env, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.api.openapi import PATH
from tradehall.api.params import Params
from tradehall.client import AdminClient
from tradehall.exchange import Exchange

CURRENT: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("operation")
READ: dict[tuple[str, str], set[str]] = {}


class Recording(dict[str, Any]):
    """A request's parameters, noting every name a handler looks up."""

    def get(self, key: str, default: Any = None) -> Any:
        operation = CURRENT.get(None)
        if operation is not None:
            READ.setdefault(operation, set()).add(key)
        return super().get(key, default)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    parse_body, parse_query = http_module.parse_body, http_module.parse_query

    def recorded(params: Params) -> Params:
        return Params(Recording(params.data))

    monkeypatch.setattr(http_module, "parse_body", lambda body: recorded(parse_body(body)))
    monkeypatch.setattr(http_module, "parse_query", lambda raw: recorded(parse_query(raw)))
    READ.clear()
    yield
    READ.clear()


def wrapped_env(exchange: Exchange, db_path: Path) -> Iterator[Env]:
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)

    async def noting(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            CURRENT.set((scope["method"], scope["path"]))
        await app(scope, receive, send)

    with TestClient(noting) as http:
        yield Env(http, exchange, clock, AdminClient(BASE_URL, ADMIN_TOKEN, http=http), db_path)
    exchange.store.close()


def declared(doc: dict[str, Any], method: str, path: str) -> set[str]:
    operation = doc["paths"][path][method.lower()]
    names = {p["name"] for p in operation.get("parameters", [])}
    body = operation.get("requestBody")
    if body is not None:
        schema = body["content"]["application/json"]["schema"]
        names |= set(_resolve(doc, schema).get("properties", {}))
    return names


def _resolve(doc: dict[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        found = found[part]
    return _resolve(doc, found)


@pytest.mark.parametrize("spot", [SPOT, SPOT_V2])
def test_handlers_read_only_documented_parameters(
    recording: None, tmp_path: Path, spot: str
) -> None:
    for env in wrapped_env(make_exchange(tmp_path / "a.db"), tmp_path / "a.db"):
        doc = env.http.get(PATH).json()
        checker = Checker(doc)
        spot_calls(env, checker, spot)
        admin_calls(env, checker)
    for env in wrapped_env(margin_exchange(tmp_path / "m.db"), tmp_path / "m.db"):
        margin_calls(env, Checker(doc), spot)
    for env in wrapped_env(make_exchange(tmp_path / "f.db"), tmp_path / "f.db"):
        futures_openapi.test_every_futures_operation_answers_as_documented(env)
    operations = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    # The recording sees what handlers read (a check that this test can fail).
    assert {"symbol", "side", "type", "volume", "price"} <= READ["POST", spot + "/order"]
    assert {"contractName", "orderId"} <= READ["POST", "/futures/open/fapi/v1/cancel"]
    undeclared = {
        f"{method} {path}": sorted(names - declared(doc, method, path))
        for (method, path), names in READ.items()
        if (method, path) in operations and names - declared(doc, method, path)
    }
    assert undeclared == {}
