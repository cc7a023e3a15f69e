"""The request types (``tradehall.api.requests``): in each field the msgspec type (what the
document promises) and the reading rule (what the server does) agree where both say
something: the choices, the integer bounds and defaults, the lengths, whether a parameter is
required. And reading through a type refuses a name it does not declare."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tradehall.api import params as params_module
from tradehall.api import requests
from tradehall.api.params import INT64_MAX, Params
from tradehall.api.reading import (
    Addresses,
    Choice,
    ClientId,
    Flag,
    Integer,
    Items,
    OrderId,
    Rule,
    SignedUnits,
    Symbol,
    TxId,
    Units,
    reading,
    rules_of,
)
from tradehall.api.requests import RequestSchema

TYPES = sorted(
    (t for t in vars(requests).values() if isinstance(t, type) and issubclass(t, RequestSchema)),
    key=lambda t: t.__name__,
)
OPTIONAL_RULES = (ClientId, Flag, Addresses, TxId)
"""Rules that read an absent parameter as a value ("", false, [], generated)."""


def fields(schema: type[RequestSchema]) -> list[tuple[str, Rule, dict[str, Any], bool, Any]]:
    """(wire name, rule, property schema, required in the document, default) per field."""
    definition = msgspec.json.schema(schema)["$defs"][schema.__name__]
    required = set(definition.get("required", ()))
    rules = rules_of(schema)
    return [
        (
            f.encode_name,
            rules[f.encode_name],
            definition["properties"][f.encode_name],
            f.encode_name in required,
            f.default,
        )
        for f in msgspec.structs.fields(schema)
    ]


def branches(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return list(prop.get("anyOf", [prop]))


def integer_range(prop: dict[str, Any]) -> set[int] | tuple[int, int]:
    """The integers the property allows: a (minimum, maximum) range or an enum's values."""
    found: list[set[int] | tuple[int, int]] = []
    for branch in branches(prop):
        if branch.get("type") == "integer":
            found.append((branch["minimum"], branch["maximum"]))
        elif "enum" in branch and all(type(v) is int for v in branch["enum"]):
            found.append(set(branch["enum"]))
    assert len(found) == 1, prop
    return found[0]


def test_every_request_type_has_a_rule_per_field() -> None:
    assert len(TYPES) > 50
    for schema in TYPES:
        assert set(rules_of(schema)) == {f.encode_name for f in msgspec.structs.fields(schema)}


@pytest.mark.parametrize("schema", TYPES, ids=lambda t: t.__name__)
def test_rules_agree_with_the_documented_types(schema: type[RequestSchema]) -> None:
    for name, rule, prop, required, default in fields(schema):
        where = f"{schema.__name__}.{name}"
        if required:  # the document requires it: the server must refuse it absent
            assert not isinstance(rule, OPTIONAL_RULES), where
            assert getattr(rule, "required", True), where
        if isinstance(rule, Choice):
            enum = {v for b in branches(prop) for v in b.get("enum", ())}
            assert enum == set(rule.allowed), where
        elif isinstance(rule, Integer):
            allowed = integer_range(prop)
            maximum = INT64_MAX if rule.maximum is None else rule.maximum
            if isinstance(allowed, set):
                assert allowed == set(range(rule.minimum, maximum + 1)), where
            else:
                assert allowed == (rule.minimum, maximum), where
            if default is not msgspec.NODEFAULT and default is not msgspec.UNSET:
                assert default == rule.default, where
            else:
                assert rule.default is None, where
        elif isinstance(rule, OrderId):
            assert integer_range(prop) == (1, INT64_MAX), where
        elif isinstance(rule, Symbol):
            assert prop["pattern"] == f"^{params_module._SYMBOL.pattern}$", where
        elif isinstance(rule, ClientId):
            assert prop["maxLength"] == rule.max_len, where
        elif isinstance(rule, Items):
            assert prop["maxItems"] == rule.max_items, where
        elif isinstance(rule, Units | SignedUnits):
            # An exact decimal: as a string, or a JSON number (read exactly too).
            assert {b.get("type") for b in branches(prop)} == {"string", "number"}, where


def test_reading_refuses_an_undeclared_name() -> None:
    req = reading(Params({"symbol": "btcusdt", "limit": "5"}), requests.SymbolQuery)
    assert req.value("symbol") == "BTCUSDT"
    with pytest.raises(LookupError, match="SymbolQuery declares no parameter 'limit'"):
        req.value("limit")
    with pytest.raises(LookupError):
        req.present("limit")


def test_a_field_without_a_rule_is_refused() -> None:
    class Unread(RequestSchema, frozen=True):
        symbol: str

    with pytest.raises(TypeError, match=r"Unread\.symbol needs exactly one reading rule"):
        rules_of(Unread)


def test_rules_read_as_params_do() -> None:
    order = reading(
        Params({"side": "buy", "volume": "1.5", "price": "", "limit": "7"}), requests.OrderRequest
    )
    assert order.value("side") == "BUY"
    assert order.value("volume", decimals=2) == 150
    assert order.value("timeInForce") is None  # absent, optional
    assert order.value("recvWindow") == 5000
    with pytest.raises(Exception, match="mandatory parameter 'price'"):
        order.value("price", decimals=2)  # empty counts as absent; required when read
