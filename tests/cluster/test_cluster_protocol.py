"""What travels between gateways and the engine: request parameters come out as they went in
(types included: a JSON number stays a Decimal, told apart from a string by ``Params``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tradehall.cluster.protocol import (
    Forwarded,
    KeyInfo,
    KeySet,
    decode_forwarded,
    decode_keys,
    encode,
    wire_params,
)
from tradehall.store.batch import KeyRow

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=20),
    st.decimals(allow_nan=False, allow_infinity=False, places=None),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Decimal):
        return str(a) == str(b)  # the exact text: 1.50 stays 1.50
    return bool(a == b)


@given(st.dictionaries(st.text(max_size=12), values, max_size=6))
def test_parameters_travel_unchanged(params: dict[str, Any]) -> None:
    sent = Forwarded(
        "id-1", "POST", "/spot/open/sapi/v1/order", wire_params(params), None, "::1", 5
    )
    received = decode_forwarded(encode(sent))
    assert same(received.params, params)
    assert (received.id, received.attempt, received.first_sent) == ("id-1", 1, 5)


def test_keys_travel_with_their_allow_lists() -> None:
    row = KeyRow("k" * 32, "s" * 32, 7, True, ("10.0.0.0/8",), 123, None)
    (info,) = decode_keys(encode(KeySet([KeyInfo.of(row)]))).keys
    key = info.api_key_object()
    assert key.row == row
    assert [str(n) for n in key.networks] == ["10.0.0.0/8"]
