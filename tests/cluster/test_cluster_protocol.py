"""What travels between gateways and the engine: request parameters come out as they went in
(types included: a JSON number stays a Decimal, told apart from a string by ``Params``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tradehall.cluster.protocol import (
    ASK_AGAIN,
    Answered,
    Command,
    Commands,
    Forwarded,
    KeyInfo,
    KeySet,
    MarketNote,
    PackedCommands,
    Replies,
    decode_answers,
    decode_commands,
    decode_forwarded,
    decode_keys,
    decode_note,
    decode_replies,
    encode,
    wire_params,
)
from tradehall.store.batch import KeyRow

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # beyond 64 bits too (a client may write 1e23 out)
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
    sent = Forwarded("id-1", "POST", "/spot/open/sapi/v1/order", wire_params(params), None, "::1")
    received = decode_forwarded(encode(sent))
    assert same(received.params, params)
    assert received.id == "id-1"


def test_a_batch_as_a_gateway_packs_it_is_the_commands_in_order() -> None:
    """A gateway encodes each command once, when admitted, and packs the bytes; the engine
    decodes the message as the list of commands."""
    sent: list[Command] = [
        Forwarded(f"id-{n}", "POST", "/p", wire_params({"n": Decimal(n)}), "k", "::1")
        for n in range(3)
    ]
    packed = PackedCommands([msgspec.Raw(encode(fwd)) for fwd in sent], 5, 2)
    received = decode_commands(encode(packed))
    assert [c.id for c in received.commands] == ["id-0", "id-1", "id-2"]
    params = [c.params["n"] for c in received.commands if isinstance(c, Forwarded)]
    assert params == [Decimal(0), Decimal(1), Decimal(2)]
    assert (received.first_sent, received.attempt) == (5, 2)
    assert received == decode_commands(encode(Commands(sent, 5, 2)))


def test_answers_travel_in_order() -> None:
    sent = [Answered(200, b"{}"), Answered(429, b"x", (("Retry-After", "1"),)), ASK_AGAIN]
    assert decode_answers(encode(Replies(sent, "run", 3))) == sent


def test_replies_and_market_notes_say_which_engine_run_and_note() -> None:
    replies = decode_replies(encode(Replies([Answered(200, b"{}")], "run", 3)))
    assert (replies.epoch, replies.note) == ("run", 3)
    note = MarketNote("run", 4, ["BTCUSDT", "E-BTC-USDT"])
    assert decode_note(encode(note)) == note


def test_keys_travel_with_their_allow_lists() -> None:
    row = KeyRow("k" * 32, "s" * 32, 7, True, ("10.0.0.0/8",), 123, None)
    (info,) = decode_keys(encode(KeySet([KeyInfo.of(row)]))).keys
    key = info.api_key_object()
    assert key.row == row
    assert [str(n) for n in key.networks] == ["10.0.0.0/8"]
