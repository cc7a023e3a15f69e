"""Conversion between decimal text at the edge and the integer units used everywhere inside.

A value with ``decimals`` places is held as an integer count of ``10**-decimals``. Conversion
happens once, where text enters (API parameters, configuration) or leaves (responses, CLI).
"""

from __future__ import annotations

import re
from decimal import Decimal

POW10 = [10**i for i in range(40)]
_PLAIN_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)


class UnitsError(ValueError):
    """The text is not a plain finite decimal, or has more places than allowed."""

    def __init__(self, message: str, *, precision: bool = False) -> None:
        super().__init__(message)
        self.precision = precision


def is_plain_decimal(text: str) -> bool:
    """Whether ``text`` is written as ``to_units`` takes it: plain decimal notation, an
    optional leading ``-``, no exponent, at most 64 characters."""
    return len(text) <= 64 and _PLAIN_DECIMAL.fullmatch(text) is not None


def pow10(n: int) -> int:
    return POW10[n] if 0 <= n < len(POW10) else int(10**n)


def to_units(value: str | int | Decimal, decimals: int) -> int:
    """Parse ``value`` as a decimal with at most ``decimals`` places into integer units.

    Raises UnitsError (``precision=True`` when only the number of places is wrong).
    """
    if isinstance(value, bool):
        raise UnitsError("not a number")
    if isinstance(value, int):
        return value * pow10(decimals)
    if isinstance(value, str):
        # Plain decimal text only: no exponent, sign '+', underscores, spaces or non-ASCII
        # digits, which Decimal() would otherwise accept.
        if not is_plain_decimal(value):
            raise UnitsError("not a number")
        dec = Decimal(value)
    elif isinstance(value, Decimal):
        dec = value
    else:
        raise UnitsError("not a number")
    if not dec.is_finite():
        raise UnitsError("not a finite number")
    sign, digits, exponent = dec.as_tuple()
    assert isinstance(exponent, int)
    if len(digits) > 80 or exponent > 40:
        raise UnitsError("number too large")
    if exponent < -(decimals + len(digits)):
        # More places than the coefficient has digits: not representable, and refused in O(1)
        # (a JSON number like 1e-2500000 must not cost a huge power of ten).
        if any(digits):
            raise UnitsError(f"more than {decimals} decimal places", precision=True)
        return 0
    coefficient = 0
    for d in digits:
        coefficient = coefficient * 10 + d
    if exponent >= 0:
        units = coefficient * pow10(exponent + decimals)
    else:
        places = -exponent
        if places > decimals:
            # Trailing zeros beyond the allowed places are harmless ("1.500" with 2 places).
            excess = places - decimals
            scale = pow10(excess)
            if coefficient % scale:
                raise UnitsError(f"more than {decimals} decimal places", precision=True)
            units = coefficient // scale
        else:
            units = coefficient * pow10(decimals - places)
    return -units if sign else units


def format_units(units: int, decimals: int) -> str:
    """Render integer units as plain decimal text with exactly ``decimals`` places."""
    if decimals == 0:
        return str(units)
    # zfill rather than a nested format spec: this renders every price and quantity answered.
    if units >= 0:
        whole, frac = divmod(units, pow10(decimals))
        return f"{whole}.{str(frac).zfill(decimals)}"
    whole, frac = divmod(-units, pow10(decimals))
    return f"-{whole}.{str(frac).zfill(decimals)}"


def format_units_trimmed(units: int, decimals: int) -> str:
    """Like format_units, without trailing zeros (and without a bare trailing point)."""
    text = format_units(units, decimals)
    if decimals:
        text = text.rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"
