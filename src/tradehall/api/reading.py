"""Reading a request through its type: one definition for what is documented and what is read.

Each field of a request Struct (``tradehall.api.requests``) carries, next to its msgspec type
(which the OpenAPI document is generated from), a ``Rule``: how ``Params`` reads that
parameter (which reader, its bounds, whether it is required, its error code). A handler reads
its request only through ``reading(params, Struct)``, by the parameter's wire name; a name the
Struct does not declare is a programming error (``LookupError``), so a handler cannot read what
the document does not say. Building the rule table fails for a field without a rule, so the
document cannot declare what no rule reads either.

Reads stay lazy and in the handler's order: which error a request with several faults gets
(and context such as a pair's decimals, known only once the symbol is read) is unchanged.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from tradehall.api.errors import ApiError
from tradehall.api.params import Params
from tradehall.codes import Code
from tradehall.marketdata import Interval as Bar
from tradehall.marketdata import parse_interval


class Rule:
    """How one parameter is read. ``given`` carries what only the handler knows (decimals)."""

    __slots__ = ()

    def read(self, params: Params, name: str, /, **given: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Text(Rule):
    """Text (a JSON number is taken as its text); empty counts as absent."""

    required: bool = False

    def read(self, params: Params, name: str, /, **given: Any) -> str | None:
        return params.text(name, required=self.required)


@dataclass(frozen=True, slots=True)
class GivenText(Rule):
    """Text as sent: an empty string stays empty (what reads it refuses it) rather than
    counting as absent, as the admin API's offline CLI counterparts do."""

    required: bool = False

    def read(self, params: Params, name: str, /, **given: Any) -> str | None:
        value = params.data.get(name)
        if value is None:
            if self.required:
                raise params.missing(name)
            return None
        if not isinstance(value, str):
            raise params.malformed(name, "must be a string")
        return value


@dataclass(frozen=True, slots=True)
class TxId(Rule):
    """An idempotency id. An empty one is passed on (and refused), not taken as absent: a
    generated id would make a repeated call move the funds again."""

    def read(self, params: Params, name: str, /, **given: Any) -> str | None:
        if params.data.get(name) == "":
            return ""
        return params.text(name)


@dataclass(frozen=True, slots=True)
class Symbol(Rule):
    """A pair or contract name, in any case; upper-cased."""

    required: bool = True

    def read(self, params: Params, name: str, /, **given: Any) -> str | None:
        return params.symbol(name, required=self.required)


@dataclass(frozen=True, slots=True)
class Choice(Rule):
    """One of ``allowed``, in any (ASCII) case; upper-cased."""

    allowed: tuple[str, ...]
    code: Code = Code.BAD_PARAM
    required: bool = True

    def read(self, params: Params, name: str, /, **given: Any) -> str | None:
        return params.choice(name, self.allowed, self.code, required=self.required)


@dataclass(frozen=True, slots=True)
class ClientId(Rule):
    """A client order id: printable ASCII, at most ``max_len``; ``""`` when absent."""

    max_len: int = 64

    def read(self, params: Params, name: str, /, **given: Any) -> str:
        return params.client_id(name, self.max_len)


@dataclass(frozen=True, slots=True)
class Units(Rule):
    """A positive exact decimal as integer units; the handler gives ``decimals``."""

    required: bool = True

    def read(self, params: Params, name: str, /, **given: Any) -> int | None:
        return params.units(name, given["decimals"], required=self.required)


@dataclass(frozen=True, slots=True)
class SignedUnits(Rule):
    """A non-zero exact decimal, negative allowed, as units; the handler gives ``decimals``."""

    def read(self, params: Params, name: str, /, **given: Any) -> int:
        return params.signed_units(name, given["decimals"])


@dataclass(frozen=True, slots=True)
class Integer(Rule):
    """An integer within ``minimum``..``maximum`` (a handler may give a tighter ``maximum``,
    as a contract's leverage), ``default`` when absent."""

    minimum: int = 1
    maximum: int | None = None
    default: int | None = None
    required: bool = False

    def read(self, params: Params, name: str, /, **given: Any) -> int | None:
        maximum = given.get("maximum", self.maximum)
        value = params.integer(name, default=self.default, minimum=self.minimum, maximum=maximum)
        if value is None and self.required:
            raise params.missing(name)
        return value


@dataclass(frozen=True, slots=True)
class OrderId(Rule):
    """A positive 64-bit id, as a number or its text."""

    required: bool = False

    def read(self, params: Params, name: str, /, **given: Any) -> int | None:
        return params.order_id(name, required=self.required)


@dataclass(frozen=True, slots=True)
class Items(Rule):
    """A non-empty array of at most ``max_items`` (its items are checked by the handler)."""

    max_items: int

    def read(self, params: Params, name: str, /, **given: Any) -> list[Any]:
        return params.list(name, self.max_items)


@dataclass(frozen=True, slots=True)
class Flag(Rule):
    """A boolean, or its text ``true``/``false``/``1``/``0``; false when absent."""

    def read(self, params: Params, name: str, /, **given: Any) -> bool:
        value = params.raw(name)
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        raise params.malformed(name, "must be true or false")


@dataclass(frozen=True, slots=True)
class Addresses(Rule):
    """An array of IP addresses or CIDR blocks (checked by what reads them); empty when
    absent."""

    def read(self, params: Params, name: str, /, **given: Any) -> list[str]:
        value = params.raw(name) or []
        if not isinstance(value, list) or not all(isinstance(ip, str) for ip in value):
            raise params.malformed(name, "must be an array of IP addresses or CIDR blocks")
        return value


@dataclass(frozen=True, slots=True)
class Interval(Rule):
    """A candlestick interval; ``names`` lists the accepted ones for the error message."""

    names: str

    def read(self, params: Params, name: str, /, **given: Any) -> Bar:
        text = params.text(name, required=True)
        assert text is not None
        try:
            return parse_interval(text)
        except ValueError:
            raise ApiError(
                Code.BAD_PARAM, f"invalid interval {text!r}; expected {self.names}"
            ) from None


@functools.cache
def rules_of(schema: type[msgspec.Struct]) -> Mapping[str, Rule]:
    """The rule of each field of ``schema``, by wire name, in field order. Every field must
    carry exactly one rule (``Annotated[type, ..., Rule]``)."""
    hints = typing.get_type_hints(schema, include_extras=True)
    out: dict[str, Rule] = {}
    for field in msgspec.structs.fields(schema):
        hint = hints[field.name]
        extras = getattr(hint, "__metadata__", ()) if typing.get_origin(hint) else ()
        rules = [extra for extra in extras if isinstance(extra, Rule)]
        if len(rules) != 1:
            raise TypeError(f"{schema.__name__}.{field.name} needs exactly one reading rule")
        out[field.encode_name] = rules[0]
    return out


class Reading:
    """A request's parameters read through its Struct."""

    __slots__ = ("params", "rules", "schema")

    def __init__(self, params: Params, schema: type[msgspec.Struct]) -> None:
        self.params = params
        self.schema = schema
        self.rules = rules_of(schema)

    def _rule(self, name: str) -> Rule:
        rule = self.rules.get(name)
        if rule is None:
            raise LookupError(f"{self.schema.__name__} declares no parameter {name!r}")
        return rule

    def value(self, name: str, /, **given: Any) -> Any:
        """The parameter ``name`` read by its field's rule (an ApiError when it is bad)."""
        rule = self.rules.get(name)  # _rule() inlined: this runs for every parameter
        if rule is None:
            rule = self._rule(name)  # raises
        if given:
            return rule.read(self.params, name, **given)
        return rule.read(self.params, name)

    def present(self, name: str) -> bool:
        self._rule(name)
        return self.params.present(name)

    def missing(self, name: str) -> ApiError:
        self._rule(name)
        return self.params.missing(name)

    def malformed(self, name: str, what: str) -> ApiError:
        self._rule(name)
        return self.params.malformed(name, what)


reading = Reading
"""``reading(params, SomeRequest)``: the request's parameters read through its type."""


__all__ = [
    "Addresses",
    "Choice",
    "ClientId",
    "Flag",
    "GivenText",
    "Integer",
    "Interval",
    "Items",
    "OrderId",
    "Reading",
    "Rule",
    "SignedUnits",
    "Symbol",
    "Text",
    "TxId",
    "Units",
    "reading",
    "rules_of",
]
