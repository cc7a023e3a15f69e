"""Rendering integer units as decimal text, against Decimal's own rendering."""

from __future__ import annotations

from decimal import Decimal, localcontext

from hypothesis import given
from hypothesis import strategies as st

from tradehall.units import format_units, to_units


@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(min_value=0, max_value=18))
def test_format_units_is_the_exact_decimal_with_all_places(units: int, decimals: int) -> None:
    text = format_units(units, decimals)
    with localcontext() as ctx:
        ctx.prec = 60
        expected = Decimal(units).scaleb(-decimals).quantize(Decimal(1).scaleb(-decimals))
    assert text == f"{expected:f}"
    if units > 0:
        assert to_units(text, decimals) == units
