"""Reading request parameters (query strings and JSON bodies) into checked values.

Both sources go through one class: query values arrive as text, JSON values as text, numbers
or booleans. A ``null`` counts as absent and unknown parameters are ignored (the contract).
Each failure is an ApiError with the catalogue's code and the parameter's name.

Handlers do not call these readers by hand: they read through their request type
(``tradehall.api.reading``), whose fields name the reader and its arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from tradehall.api.errors import ApiError
from tradehall.codes import Code
from tradehall.units import UnitsError, pow10, to_units

SYMBOL = re.compile(r"[A-Za-z0-9_-]{1,40}")
_SYMBOL = SYMBOL  # as tests/api/test_api_request_types.py names it
_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)
CLIENT_ID = re.compile(r"[\x21-\x7e]{1,64}")


def plain_decimal(value: Any) -> tuple[int, int] | None:
    """Positive plain decimal text (digits, at most one point with digits after it, at most
    20 digits on either side), as its digits read as one integer and how many of them follow
    the point; None for anything else (``to_units`` reads that, or says what is wrong)."""
    if type(value) is not str:
        return None
    whole, point, fraction = value.partition(".")
    digits = whole + fraction
    if (
        digits.isdigit()
        and digits.isascii()
        and 0 < len(whole) <= 20
        and (bool(fraction) or not point)
        and len(fraction) <= 20
    ):
        number = int(digits)
        if number > 0:
            return number, len(fraction)
    return None


class Params:
    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    def raw(self, name: str) -> Any:
        value = self.data.get(name)
        if (isinstance(value, str) and value == "") or value is None:
            return None
        return value

    def present(self, name: str) -> bool:
        return self.raw(name) is not None

    def missing(self, name: str) -> ApiError:
        return ApiError(Code.BAD_PARAM, f"mandatory parameter '{name}' was not sent or is empty")

    def malformed(self, name: str, what: str) -> ApiError:
        return ApiError(Code.BAD_PARAM, f"parameter '{name}' {what}")

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self.raw(name)
        if value is None:
            if required:
                raise self.missing(name)
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise self.malformed(name, "must be a string")
        return str(value)

    def symbol(self, name: str = "symbol", *, required: bool = True) -> str | None:
        value = self.text(name, required=required)
        if value is None:
            return None
        if not SYMBOL.fullmatch(value):
            # The family's wording (after Binance's): a name too long is out of the legal
            # range too, so the message says what that range is.
            raise ApiError(
                Code.ILLEGAL_CHARS,
                f"illegal characters in parameter '{name}'; legal range is '{SYMBOL.pattern}'",
            )
        return value.upper()

    def choice(
        self, name: str, allowed: Iterable[str], code: Code, *, required: bool = True
    ) -> str | None:
        value = self.text(name, required=required)
        if value is None:
            return None
        # ASCII only: some letters (long s U+017F, dotless i U+0131) upper-case to ASCII.
        upper = value.upper() if value.isascii() else ""
        if upper not in allowed:
            raise ApiError(code, f"invalid {name} {value!r}; expected one of {', '.join(allowed)}")
        return upper

    def client_id(self, name: str, max_len: int = 64) -> str:
        value = self.text(name)
        if value is None:
            return ""
        if len(value) > max_len:
            raise self.malformed(name, f"is longer than {max_len} characters")
        if not CLIENT_ID.fullmatch(value):
            raise ApiError(Code.ILLEGAL_CHARS, f"illegal characters in parameter '{name}'")
        return value

    def units(self, name: str, decimals: int, required: bool = True) -> int | None:
        """A positive decimal with at most ``decimals`` places, as integer units."""
        plain = plain_decimal(self.data.get(name))  # the usual case, at once
        if plain is not None and plain[1] <= decimals:  # more: to_units tells which error
            return plain[0] * pow10(decimals - plain[1])
        value = self.raw(name)
        if value is None:
            if required:
                raise self.missing(name)
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise self.malformed(name, "must be a number")
        try:
            units = to_units(value, decimals)
        except UnitsError as exc:
            if exc.precision:
                raise ApiError(
                    Code.PRECISION, f"parameter '{name}' has more than {decimals} decimal places"
                ) from None
            raise self.malformed(name, "must be a decimal number") from None
        if units <= 0:
            raise self.malformed(name, "must be greater than zero")
        return units

    def signed_units(self, name: str, decimals: int) -> int:
        """A non-zero decimal, negative allowed, with at most ``decimals`` places, as units."""
        value = self.raw(name)
        if value is None:
            raise self.missing(name)
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise self.malformed(name, "must be a number")
        try:
            units = to_units(value, decimals)
        except UnitsError as exc:
            if exc.precision:
                raise ApiError(
                    Code.PRECISION, f"parameter '{name}' has more than {decimals} decimal places"
                ) from None
            raise self.malformed(name, "must be a decimal number") from None
        if units == 0:
            raise self.malformed(name, "must not be zero")
        return units

    def integer(
        self, name: str, *, default: int | None = None, minimum: int = 1, maximum: int | None = None
    ) -> int | None:
        value = self.raw(name)
        if value is None:
            if default is None:
                return None
            return default
        number = parse_int(value)
        if number is None or number < minimum or (maximum is not None and number > maximum):
            if number is None and not _integral(value):
                raise self.malformed(name, "must be an integer")
            # Integral but beyond the signed 64-bit range counts as above any maximum.
            top = maximum if maximum is not None else INT64_MAX
            raise self.malformed(name, f"must be at least {minimum} and at most {top}")
        return number

    def limit(self, default: int, maximum: int) -> int:
        value = self.integer("limit", default=default, minimum=1, maximum=maximum)
        assert value is not None
        return value

    def order_id(self, name: str, *, required: bool = False) -> int | None:
        value = self.raw(name)
        if value is None:
            if required:
                raise self.missing(name)
            return None
        number = parse_int(value)
        if number is None or number <= 0:
            raise self.malformed(name, "must be a positive integer id")
        return number

    def list(self, name: str, max_items: int, *, comma_text: bool = False) -> list[Any]:
        """A non-empty array of at most ``max_items``; with ``comma_text`` also its items as
        one text separated by commas (``"12,13"``), as some clients of the family send ids."""
        value = self.raw(name)
        if value is None:
            raise self.missing(name)
        if comma_text and isinstance(value, str):
            value = [item.strip() for item in value.split(",")] if value.strip() else []
        if not isinstance(value, list):
            raise self.malformed(name, "must be an array")
        if not value:
            raise self.malformed(name, "must not be empty")
        if len(value) > max_items:
            raise ApiError(Code.TOO_MANY_PARAMS, f"'{name}' takes at most {max_items} items")
        return value


INT64_MAX = 2**63 - 1


def _integral(value: Any) -> bool:
    """Integer text, an integral number or an int (of any size; not a bool)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return _INTEGER.fullmatch(value) is not None
    if isinstance(value, Decimal):
        return value.is_finite() and value == value.to_integral_value()
    return isinstance(value, int)


def parse_int(value: Any) -> int | None:
    """An integer within the signed 64-bit range (every id and bound is stored as one)."""
    if not _integral(value):
        return None
    # Beyond 20 characters or digits it is out of range: int() of a long text, or of a number
    # like 1e999999, would take seconds.
    if (isinstance(value, str) and len(value) > 20) or (
        isinstance(value, Decimal) and value.adjusted() >= 20
    ):
        return None
    number = int(value)
    return number if -INT64_MAX - 1 <= number <= INT64_MAX else None
