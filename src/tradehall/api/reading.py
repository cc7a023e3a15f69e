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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from tradehall.api.errors import ApiError
from tradehall.api.params import SYMBOL, Params
from tradehall.codes import Code
from tradehall.marketdata import Interval as Bar
from tradehall.marketdata import parse_interval

Reader = Callable[[Params, dict[str, Any]], Any]
"""A rule compiled for one parameter: (the request's params, what the handler gives) -> the
value. Built once per request type, so a read is one call with nothing to look up."""


class Rule:
    """How one parameter is read. ``given`` carries what only the handler knows (decimals)."""

    __slots__ = ()

    def reader(self, name: str) -> Reader:
        """This rule for the parameter ``name``."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Text(Rule):
    """Text (a JSON number is taken as its text); empty counts as absent."""

    required: bool = False

    def reader(self, name: str) -> Reader:
        required = self.required
        return lambda params, given: params.text(name, required=required)


@dataclass(frozen=True, slots=True)
class GivenText(Rule):
    """Text as sent: an empty string stays empty (what reads it refuses it) rather than
    counting as absent, as the admin API's offline CLI counterparts do. ``empty=False``
    refuses an empty (or blank) one here: for a name whose absence widens the action."""

    required: bool = False
    empty: bool = True

    def reader(self, name: str) -> Reader:
        required, empty = self.required, self.empty

        def read(params: Params, given: dict[str, Any]) -> str | None:
            value = params.data.get(name)
            if value is None:
                if required:
                    raise params.missing(name)
                return None
            if not isinstance(value, str):
                raise params.malformed(name, "must be a string")
            if not empty and not value.strip():
                raise params.malformed(name, "must not be empty (leave it out instead)")
            return value

        return read


@dataclass(frozen=True, slots=True)
class TxId(Rule):
    """An idempotency id. An empty one is passed on (and refused), not taken as absent: a
    generated id would make a repeated call move the funds again."""

    def reader(self, name: str) -> Reader:
        def read(params: Params, given: dict[str, Any]) -> str | None:
            if params.data.get(name) == "":
                return ""
            return params.text(name)

        return read


@dataclass(frozen=True, slots=True)
class Symbol(Rule):
    """A pair or contract name, in any case; upper-cased."""

    required: bool = True

    def reader(self, name: str) -> Reader:
        required = self.required
        usual = SYMBOL.fullmatch

        def read(params: Params, given: dict[str, Any]) -> str | None:
            value = params.data.get(name)
            if type(value) is str and usual(value):  # the usual case, at once
                return value.upper()
            return params.symbol(name, required=required)

        return read


def usual_choice(value: Any, allowed: frozenset[str]) -> str | None:
    """``value`` upper-cased when it is text naming one of ``allowed`` in any ASCII case
    (the usual case); None for anything else."""
    if type(value) is str and value.isascii() and (upper := value.upper()) in allowed:
        return upper
    return None


@dataclass(frozen=True, slots=True)
class Choice(Rule):
    """One of ``allowed``, in any (ASCII) case; upper-cased."""

    allowed: tuple[str, ...]
    code: Code = Code.BAD_PARAM
    required: bool = True

    def reader(self, name: str) -> Reader:
        allowed, code, required = self.allowed, self.code, self.required
        usual = frozenset(allowed)

        def read(params: Params, given: dict[str, Any]) -> str | None:
            value = params.data.get(name)
            upper = usual_choice(value, usual)
            if upper is not None:  # the usual cases, at once
                return upper
            if value is None and not required:
                return None
            return params.choice(name, allowed, code, required=required)

        return read


@dataclass(frozen=True, slots=True)
class ClientId(Rule):
    """A client order id: printable ASCII but the space, at most ``max_len``; ``""`` when absent."""

    max_len: int = 64

    def reader(self, name: str) -> Reader:
        max_len = self.max_len

        def read(params: Params, given: dict[str, Any]) -> str:
            value = params.data.get(name)
            if value is None or value == "":  # absent, the usual case
                return ""
            return params.client_id(name, max_len)

        return read


@dataclass(frozen=True, slots=True)
class Units(Rule):
    """A positive exact decimal as integer units; the handler gives ``decimals``."""

    required: bool = True

    def reader(self, name: str) -> Reader:
        required = self.required
        return lambda params, given: params.units(name, given["decimals"], required)


@dataclass(frozen=True, slots=True)
class SignedUnits(Rule):
    """A non-zero exact decimal, negative allowed, as units; the handler gives ``decimals``."""

    def reader(self, name: str) -> Reader:
        return lambda params, given: params.signed_units(name, given["decimals"])


@dataclass(frozen=True, slots=True)
class Integer(Rule):
    """An integer within ``minimum``..``maximum`` (a handler may give a tighter ``maximum``,
    as a contract's leverage), ``default`` when absent."""

    minimum: int = 1
    maximum: int | None = None
    default: int | None = None
    required: bool = False

    def reader(self, name: str) -> Reader:
        minimum, default, required = self.minimum, self.default, self.required
        declared = self.maximum

        def read(params: Params, given: dict[str, Any]) -> int | None:
            maximum = given.get("maximum", declared)
            value = params.integer(name, default=default, minimum=minimum, maximum=maximum)
            if value is None and required:
                raise params.missing(name)
            return value

        return read


@dataclass(frozen=True, slots=True)
class OrderId(Rule):
    """A positive 64-bit id, as a number or its text."""

    required: bool = False

    def reader(self, name: str) -> Reader:
        required = self.required
        return lambda params, given: params.order_id(name, required=required)


@dataclass(frozen=True, slots=True)
class Items(Rule):
    """A non-empty array of at most ``max_items`` (its items are checked by the handler);
    with ``comma_text`` also one text of items separated by commas."""

    max_items: int
    comma_text: bool = False

    def reader(self, name: str) -> Reader:
        max_items, comma_text = self.max_items, self.comma_text
        return lambda params, given: params.list(name, max_items, comma_text=comma_text)


@dataclass(frozen=True, slots=True)
class Flag(Rule):
    """A boolean, or its text ``true``/``false``/``1``/``0``; false when absent."""

    def reader(self, name: str) -> Reader:
        def read(params: Params, given: dict[str, Any]) -> bool:
            value = params.raw(name)
            if value is None:
                return False
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
                return value.lower() in ("true", "1")
            raise params.malformed(name, "must be true or false")

        return read


@dataclass(frozen=True, slots=True)
class Addresses(Rule):
    """An array of IP addresses or CIDR blocks (checked by what reads them); empty when
    absent."""

    def reader(self, name: str) -> Reader:
        def read(params: Params, given: dict[str, Any]) -> list[str]:
            value = params.raw(name) or []
            if not isinstance(value, list) or not all(isinstance(ip, str) for ip in value):
                raise params.malformed(name, "must be an array of IP addresses or CIDR blocks")
            return value

        return read


@dataclass(frozen=True, slots=True)
class Interval(Rule):
    """A candlestick interval; ``names`` lists the accepted ones for the error message."""

    names: str

    def reader(self, name: str) -> Reader:
        names = self.names

        def read(params: Params, given: dict[str, Any]) -> Bar:
            text = params.text(name, required=True)
            assert text is not None
            try:
                return parse_interval(text)
            except ValueError:
                raise ApiError(
                    Code.BAD_PARAM, f"invalid interval {text!r}; expected {names}"
                ) from None

        return read


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


def readers_of(schema: type[msgspec.Struct]) -> dict[str, Reader]:
    """Each field's rule compiled for its wire name (built once per request type)."""
    found = _READERS.get(schema)
    if found is None:
        found = _READERS[schema] = {
            name: rule.reader(name) for name, rule in rules_of(schema).items()
        }
    return found


_READERS: dict[type[msgspec.Struct], dict[str, Reader]] = {}


class Reading:
    """A request's parameters read through its Struct."""

    __slots__ = ("params", "readers", "schema")

    def __init__(self, params: Params, schema: type[msgspec.Struct]) -> None:
        self.params = params
        self.schema = schema
        readers = _READERS.get(schema)  # readers_of() inlined: this runs for every request
        self.readers = readers if readers is not None else readers_of(schema)

    def _declared(self, name: str) -> None:
        if name not in self.readers:
            raise LookupError(f"{self.schema.__name__} declares no parameter {name!r}")

    def value(self, name: str, /, **given: Any) -> Any:
        """The parameter ``name`` read by its field's rule (an ApiError when it is bad)."""
        read = self.readers.get(name)
        if read is None:
            self._declared(name)  # raises
        return read(self.params, given)  # type: ignore[misc]

    def present(self, name: str) -> bool:
        self._declared(name)
        return self.params.present(name)

    def missing(self, name: str) -> ApiError:
        self._declared(name)
        return self.params.missing(name)

    def malformed(self, name: str, what: str) -> ApiError:
        self._declared(name)
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
    "Reader",
    "Reading",
    "Rule",
    "SignedUnits",
    "Symbol",
    "Text",
    "TxId",
    "Units",
    "readers_of",
    "reading",
    "rules_of",
    "usual_choice",
]
