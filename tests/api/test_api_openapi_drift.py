"""The OpenAPI document against what the handlers actually read, during a real call of every
operation: each handler reads its request only through a request type (``reading(params,
Struct)``, which refuses a name its Struct does not declare), that type is the one the document
is generated from for the operation (its query or body type, or a type nested in it), and every
parameter looked up is one the document declares. A handler looking a parameter up in the
request directly, or through another operation's type, fails this test."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
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
from tradehall.api import spot
from tradehall.api.app import create_app
from tradehall.api.http import Call
from tradehall.api.openapi import OPERATIONS, PATH
from tradehall.api.params import Params
from tradehall.api.reading import Reading
from tradehall.api.requests import OrderRequest, SignedQuery
from tradehall.api.usual import read_usual_place
from tradehall.client import AdminClient
from tradehall.exchange import Exchange

Operation = tuple[str, str]
CURRENT: contextvars.ContextVar[Operation] = contextvars.ContextVar("operation")
THROUGH: contextvars.ContextVar[type[msgspec.Struct] | None] = contextvars.ContextVar(
    "through", default=None
)
READ: dict[Operation, set[str]] = {}
"""Every parameter name looked up, per operation."""
DIRECT: dict[Operation, set[str]] = {}
"""Names looked up outside any request type's reading."""
TYPES: dict[Operation, set[type[msgspec.Struct]]] = {}
"""The request types each operation's parameters were read through."""


class Recording(dict[str, Any]):
    """A request's parameters, noting every name a handler looks up and how."""

    def _note(self, key: str) -> None:
        operation = CURRENT.get(None)
        if operation is None:
            return
        READ.setdefault(operation, set()).add(key)
        schema = THROUGH.get()
        if schema is None:
            DIRECT.setdefault(operation, set()).add(key)
        else:
            TYPES.setdefault(operation, set()).add(schema)

    def get(self, key: str, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._note(str(key))
        return super().__contains__(key)


def _through(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(self: Reading, *args: Any, **kwargs: Any) -> Any:
        token = THROUGH.set(self.schema)
        try:
            return method(self, *args, **kwargs)
        finally:
            THROUGH.reset(token)

    return wrapped


def _reads_through(fn: Callable[..., Any], schema: type[msgspec.Struct]) -> Callable[..., Any]:
    """``fn``, which reads a request's parameters as ``schema`` declares them without a
    ``Reading`` (the usual forms, read at once), noted as reading through ``schema``."""

    def wrapped(*args: Any) -> Any:
        token = THROUGH.set(schema)
        try:
            return fn(*args)
        finally:
            THROUGH.reset(token)

    return wrapped


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    parse_body, parse_query = http_module.parse_body, http_module.parse_query

    def recorded(params: Params) -> Params:
        return Params(Recording(params.data))

    monkeypatch.setattr(http_module, "parse_body", lambda body: recorded(parse_body(body)))
    monkeypatch.setattr(http_module, "parse_query", lambda raw: recorded(parse_query(raw)))
    for name in ("value", "present", "missing", "malformed"):
        monkeypatch.setattr(Reading, name, _through(getattr(Reading, name)))
    monkeypatch.setattr(
        http_module, "recv_window", _reads_through(http_module.recv_window, SignedQuery)
    )
    monkeypatch.setattr(  # where create_order finds it
        "tradehall.api.spot.read_usual_place", _reads_through(read_usual_place, OrderRequest)
    )
    for table in (READ, DIRECT, TYPES):
        table.clear()
    yield
    for table in (READ, DIRECT, TYPES):
        table.clear()


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


def documented_types(operation: Operation) -> set[type[msgspec.Struct]]:
    """The request types the document is generated from for ``operation``, with the types
    nested in them (a batch's items), and SignedQuery for a signed one (``recvWindow``, read
    before the handler runs)."""
    op = OPERATIONS[operation]
    roots: list[type[msgspec.Struct]] = [op.query]
    if op.body is not None:
        roots.append(op.body)
    out: set[type[msgspec.Struct]] = set()
    while roots:
        schema = roots.pop()
        out.add(schema)
        for field in msgspec.structs.fields(schema):
            info = msgspec.inspect.type_info(field.type)
            if isinstance(info, msgspec.inspect.ListType):
                info = info.item_type
            if isinstance(info, msgspec.inspect.StructType) and info.cls not in out:
                roots.append(info.cls)
    if op.auth in ("READ", "TRADE"):
        out.add(SignedQuery)
    return out


def exercise(tmp_path: Path, spot_prefix: str) -> dict[str, Any]:
    """Every operation called as a client would (successes and errors); the document."""
    for env in wrapped_env(make_exchange(tmp_path / "a.db"), tmp_path / "a.db"):
        doc: dict[str, Any] = env.http.get(PATH).json()
        checker = Checker(doc)
        spot_calls(env, checker, spot_prefix)
        admin_calls(env, checker)
    for env in wrapped_env(margin_exchange(tmp_path / "m.db"), tmp_path / "m.db"):
        margin_calls(env, Checker(doc), spot_prefix)
    for env in wrapped_env(make_exchange(tmp_path / "f.db"), tmp_path / "f.db"):
        futures_openapi.test_every_futures_operation_answers_as_documented(env)
    return doc


@pytest.mark.parametrize("spot_prefix", [SPOT, SPOT_V2])
def test_handlers_read_requests_only_through_their_documented_types(
    recording: None, tmp_path: Path, spot_prefix: str
) -> None:
    doc = exercise(tmp_path, spot_prefix)
    operations = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    # The recording sees what handlers read, and through which type.
    order = ("POST", spot_prefix + "/order")
    assert {"symbol", "side", "type", "volume", "price"} <= READ[order]
    assert TYPES[order] == {OrderRequest, SignedQuery}
    assert {"contractName", "orderId"} <= READ["POST", "/futures/open/fapi/v1/cancel"]
    other_spot = SPOT_V2 if spot_prefix == SPOT else SPOT
    unread = {
        f"{method} {path}"
        for method, path in operations
        if declared(doc, method, path)
        and (method, path) not in READ
        and not path.startswith(other_spot + "/")
    }
    assert unread == set()  # every operation with parameters was exercised
    assert {operation: names for operation, names in DIRECT.items() if names} == {}
    foreign = {
        f"{method} {path}": sorted(t.__name__ for t in types - documented_types((method, path)))
        for (method, path), types in TYPES.items()
        if (method, path) in operations and types - documented_types((method, path))
    }
    assert foreign == {}
    undeclared = {
        f"{method} {path}": sorted(names - declared(doc, method, path))
        for (method, path), names in READ.items()
        if (method, path) in operations and names - declared(doc, method, path)
    }
    assert undeclared == {}


def test_a_handler_reading_its_request_directly_is_caught(
    recording: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: a ticker handler looking ``symbol`` up itself is seen."""
    ticker = spot.ticker

    async def direct(call: Call) -> Any:
        call.params.text("symbol")
        return await ticker(call)

    monkeypatch.setattr(spot, "ticker", direct)
    for env in wrapped_env(make_exchange(tmp_path / "a.db"), tmp_path / "a.db"):
        assert env.http.get(SPOT + "/ticker", params={"symbol": "BTCUSDT"}).status_code == 200
    assert {("GET", SPOT + "/ticker"): {"symbol"}} == DIRECT
    assert TYPES[("GET", SPOT + "/ticker")] == {OPERATIONS["GET", SPOT + "/ticker"].query}
