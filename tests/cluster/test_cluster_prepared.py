"""Placements read at once (``api.usual``: by ``serve``'s handler, and by a gateway for the
engine, ``cluster.prepared``): whatever a client sends to ``POST /order``, one process and
gateway + engine answer byte for byte what the handler's full reading answers, and leave the
same exchange behind."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from support import (
    ADMIN_TOKEN,
    BASE_URL,
    NATS_URL,
    ClientClock,
    FakeClock,
    SplitAdmin,
    make_exchange,
    nats_unreachable,
    split_apps,
)
from tradehall.api import spot, wire
from tradehall.api.app import create_app
from tradehall.api.http import encoded
from tradehall.client import AdminClient, Client
from tradehall.cluster.link import connect
from tradehall.cluster.prepared import as_forwarded, placed, prepare_place, render_placed
from tradehall.cluster.protocol import (
    PLACED,
    Answered,
    Commands,
    Place,
    decode_answers,
    decode_placed,
    encode,
)
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import OrderState
from tradehall.units import format_units

pytestmark = pytest.mark.skipif(nats_unreachable() is not None, reason="needs NATS")

ORDER = "/spot/open/sapi/v1/order"
ORDER_V2 = "/spot/open/sapi/v2/order"


@dataclass
class Side:
    """One topology with two funded traders (their orders cross)."""

    clients: list[Client]
    exchange: Any


def _funded(admin: AdminClient, http: TestClient, clock: FakeClock) -> list[Client]:
    clients = []
    for n in range(2):
        user = admin.create_user()
        key = admin.create_key(user["id"])
        # The same transfer ids on both sides: the same state.
        admin.deposit(user["id"], "BTC", "50", tx_id=f"btc-{n}")
        admin.deposit(user["id"], "USDT", "2000000", tx_id=f"usdt-{n}")
        clients.append(
            Client(BASE_URL, key["apiKey"], key["secret"], http=http, clock=ClientClock(clock))
        )
    return clients


def handler_only() -> AbstractContextManager[Any]:
    """``serve``'s placement handler without its reading at once: the full reading of
    ``OrderRequest`` for every placement, as before ``api.usual``."""
    return mock.patch.object(spot, "read_usual_place", lambda data: None)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side, Side, FakeClock]]:
    """The same exchange served by one process (twice: one of them always reads placements
    with the handler's full reading) and by an engine behind a gateway."""
    clock = FakeClock()
    zero: Path = tmp_path_factory.mktemp("zero") / "tradehall.db"
    one: Path = tmp_path_factory.mktemp("one") / "tradehall.db"
    two: Path = tmp_path_factory.mktemp("two") / "tradehall.db"
    full_exchange, serve_exchange = make_exchange(zero), make_exchange(one)
    split_exchange = make_exchange(two)
    full_app = create_app(full_exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    app = create_app(serve_exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with (
        TestClient(full_app) as full_http,
        TestClient(app) as serve_http,
        split_apps(split_exchange, clock) as (engine_http, service, gateway, split_http),
    ):
        full_admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=full_http)
        serve_admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=serve_http)
        split_admin = SplitAdmin(
            BASE_URL, ADMIN_TOKEN, http=engine_http, gateway=gateway, engine=service
        )
        full_clients = _funded(full_admin, full_http, clock)
        serve_clients = _funded(serve_admin, serve_http, clock)
        split_clients = _funded(split_admin, split_http, clock)
        yield (
            Side(full_clients, full_exchange),
            Side(serve_clients, serve_exchange),
            Side(split_clients, split_exchange),
            clock,
        )
    for exchange in (full_exchange, serve_exchange, split_exchange):
        exchange.store.close()


def _decimal_texts(places: int) -> st.SearchStrategy[str]:
    return st.builds(
        lambda whole, fraction: f"{whole}.{fraction}" if fraction else str(whole),
        st.integers(0, 30),
        st.text("0123456789", max_size=places),
    )


_NUMBERS = st.one_of(
    _decimal_texts(8),  # within the pair's places, or beyond them
    st.sampled_from(["0", "0.0", "-1", "1e-3", "1.", ".5", "", " 1", "1,5", "٣", "00000.100"]),
    # Digits beyond MessagePack's 64 bits (a client writing 20 places): the handler reads them.
    st.sampled_from(["1.00000000000000000000", "18446744073709551616", "9223372036854775808"]),
    st.builds(lambda n, zeros: f"{n}.{'0' * zeros}", st.integers(1, 30), st.integers(10, 21)),
    st.decimals(0, 50, places=3, allow_nan=False, allow_infinity=False),  # JSON numbers
    st.integers(0, 40),
    st.none(),
)

_ANY_PARAMS = st.fixed_dictionaries(
    {
        "symbol": st.sampled_from(["BTCUSDT", "btcusdt", "BtcUsdt", "NOPE", "", 7]),
        "side": st.sampled_from(["BUY", "SELL", "buy", "Sell", "HOLD", "", None]),
        "type": st.sampled_from(["LIMIT", "MARKET", "limit", "market", "STOP", None]),
        "volume": _NUMBERS,
        "price": st.one_of(
            st.builds(lambda p: f"{p}.{p % 100:02d}", st.integers(19_000, 21_000)), _NUMBERS
        ),
    },
    optional={
        "timeInForce": st.sampled_from(["GTC", "ioc", "FOK", "POST_ONLY", "DAY", "", None]),
        "newClientOrderId": st.one_of(
            st.text("abcXYZ019-_:", max_size=8), st.sampled_from(["has space", "x" * 65, 12])
        ),
    },
)
"""Anything: mostly what the handler refuses, or reads itself."""

_USUAL_PARAMS = st.fixed_dictionaries(
    {
        "symbol": st.sampled_from(["BTCUSDT", "btcusdt"]),
        "side": st.sampled_from(["BUY", "SELL", "sell"]),
        "type": st.sampled_from(["LIMIT", "LIMIT", "MARKET"]),
        "volume": st.builds(format_units, st.integers(1, 300_000), st.integers(0, 7)),
        "price": st.builds(
            format_units, st.integers(1_960_000, 2_040_000), st.sampled_from([2, 2, 3])
        ),
    },
    optional={
        "timeInForce": st.sampled_from(["GTC", "IOC", "fok", "POST_ONLY"]),
        "newClientOrderId": st.text("abcXYZ019-_:", max_size=8),
    },
)
"""What a bot sends: placed at once by the engine (unless the pair has fewer places)."""

_PARAMS = st.one_of(_USUAL_PARAMS, _USUAL_PARAMS, _ANY_PARAMS)


def _body(params: dict[str, Any]) -> bytes:
    return json.dumps(
        {k: (float(v) if isinstance(v, Decimal) else v) for k, v in params.items()}
    ).encode()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    placements=st.lists(
        st.tuples(_PARAMS, st.booleans(), st.sampled_from([0, 1])), min_size=1, max_size=6
    )
)
def test_a_placement_read_at_once_gets_the_handlers_answer_in_both_topologies(
    sides: tuple[Side, Side, Side, FakeClock], placements: list[tuple[dict[str, Any], bool, int]]
) -> None:
    full, serve, split, clock = sides
    for params, v2, trader in placements:
        clock.advance(1)
        body = _body(params)
        path = ORDER_V2 if v2 else ORDER
        with handler_only():
            zero = full.clients[trader].request("POST", path, raw_body=body)
        one = serve.clients[trader].request("POST", path, raw_body=body)
        two = split.clients[trader].request("POST", path, raw_body=body)
        assert (one.status_code, one.content) == (zero.status_code, zero.content), params
        assert (two.status_code, two.content) == (zero.status_code, zero.content), params
    state = full.exchange.engine.state_hash()
    assert serve.exchange.engine.state_hash() == state
    assert split.exchange.engine.state_hash() == state


# ------------------------------------------------------------------ the gateway's half


def _prepare(**params: Any) -> Place | None:
    return prepare_place(params, "id-1", ORDER, "key", "10.0.0.1", "req-1")


def test_usual_parameters_are_read_and_the_rest_left_to_the_handler() -> None:
    place = _prepare(symbol="btcusdt", side="buy", type="Limit", volume="0.0100", price="20000.5")
    assert place is not None
    assert (place.symbol, place.side, place.order_type) == ("BTCUSDT", "BUY", "LIMIT")
    assert (place.volume, place.volume_places, place.price, place.price_places) == (
        100,
        4,
        200005,
        1,
    )
    assert (place.time_in_force, place.client_id) == ("", "")
    usual = {"symbol": "BTCUSDT", "side": "SELL", "type": "LIMIT", "volume": "1", "price": "2"}
    for name, unusual in [
        ("volume", Decimal("1")),  # a JSON number: the handler reads it
        ("volume", "1e-3"),
        ("volume", "0"),
        ("volume", ".5"),
        ("price", None),
        ("side", "HOLD"),
        ("symbol", "BTC USDT"),
        ("timeInForce", ""),
        ("newClientOrderId", "has space"),
        ("newClientOrderId", 12),
        ("volume", "1.00000000000000000000"),  # its digits beyond 64 bits
        ("price", "9223372036854775808"),
    ]:
        assert _prepare(**{**usual, name: unusual}) is None, (name, unusual)
    market = _prepare(symbol="BTCUSDT", side="BUY", type="MARKET", volume="10", price="bad")
    assert market is not None and market.price == 0  # a MARKET order does not read it


def test_a_place_the_engine_hands_to_the_handler_reads_to_the_same_values() -> None:
    place = _prepare(
        symbol="BTCUSDT",
        side="SELL",
        type="LIMIT",
        volume="007.50",
        price="20000.125",
        timeInForce="IOC",
        newClientOrderId="c-1",
    )
    assert place is not None
    fwd = as_forwarded(place)
    assert (fwd.id, fwd.method, fwd.path, fwd.api_key, fwd.ip, fwd.request_id) == (
        "id-1",
        "POST",
        ORDER,
        "key",
        "10.0.0.1",
        "req-1",
    )
    assert fwd.params == {
        "symbol": "BTCUSDT",
        "side": "SELL",
        "type": "LIMIT",
        "volume": "7.50",
        "price": "20000.125",
        "timeInForce": "IOC",
        "newClientOrderId": "c-1",
    }
    assert _prepare(**fwd.params) == place


@given(
    order_type=st.sampled_from(["LIMIT", "MARKET"]),
    side=st.sampled_from(["BUY", "SELL"]),
    price=st.integers(0, 10**12),
    qty=st.integers(0, 10**12),
    quote=st.integers(0, 10**14),
    filled=st.integers(0, 10**12),
    status=st.sampled_from(["NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED", "REJECTED"]),
    price_precision=st.integers(0, 8),
    quantity_precision=st.integers(0, 8),
)
def test_the_gateway_renders_what_the_handler_would(
    order_type: str,
    side: str,
    price: int,
    qty: int,
    quote: int,
    filled: int,
    status: str,
    price_precision: int,
    quantity_precision: int,
) -> None:
    pair = PairSpec(
        "ABCXYZ",
        "ABC",
        "XYZ",
        price_precision,
        quantity_precision,
        min_quantity=1,
        min_notional=1,
        maker_fee=0,
        taker_fee=0,
        market_orders=True,
        trading=True,
        base_decimals=quantity_precision + 2,
        quote_decimals=price_precision + quantity_precision + 2,
    )
    order = OrderState(
        12, 3, "ABCXYZ", side, order_type, "GTC", price, qty, quote, filled, 0, 0, status, "c",
        1_700_000_000_000, 1_700_000_000_000,
    )  # fmt: skip
    place = Place("id", ORDER, "k", "ip", "", "ABCXYZ", side, order_type, 1, 0, 0, 0, "", "c")
    answer = decode_placed(encode(placed(pair, order)))  # as the gateway gets it
    assert render_placed(place, answer) == encoded(wire.order_created(pair, order))


# ------------------------------------------------------------------ the engine's half


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[str, SplitAdmin, dict[str, Any], FakeClock]]:
    """An engine behind a gateway (its subject, its admin API, a funded user) ."""
    exchange = make_exchange(tmp_path / "tradehall.db")
    clock = FakeClock()
    with split_apps(exchange, clock) as (engine_http, service, gateway, _):
        admin = SplitAdmin(BASE_URL, ADMIN_TOKEN, http=engine_http, gateway=gateway, engine=service)
        user = admin.create_user()
        admin.deposit(user["id"], "USDT", "100000")
        yield service.subject, admin, user, clock
    exchange.store.close()


def _send(subject: str, batch: Commands) -> list[Answered]:
    async def send() -> list[Answered]:
        nc = await connect(NATS_URL, "test")
        try:
            reply = await nc.request(f"{subject}.cmd", encode(batch), timeout=10)
            return decode_answers(reply.data)
        finally:
            await nc.close()

    return asyncio.run(send())


def _locked_usdt(admin: SplitAdmin, user: dict[str, Any]) -> Decimal:
    (usdt,) = [b for b in admin.balances(user["id"])["balances"] if b["asset"] == "USDT"]
    return Decimal(usdt["locked"])


def _place(api_key: str, volume: str = "0.01", symbol: str = "BTCUSDT") -> Place:
    params = {"symbol": symbol, "side": "BUY", "type": "LIMIT", "volume": volume, "price": "20000"}
    place = prepare_place(params, uuid.uuid4().hex, ORDER, api_key, "127.0.0.1", "")
    assert place is not None
    return place


def test_places_are_applied_in_order_each_once_and_the_rest_refused_as_the_handler_does(
    engine: tuple[str, SplitAdmin, dict[str, Any], FakeClock],
) -> None:
    subject, admin, user, clock = engine
    key = admin.create_key(user["id"])["apiKey"]
    first, second = _place(key, "0.01"), _place(key, "0.02")
    too_fine = _place(key, "0.0000001")  # more places than the pair's: the handler says so
    unknown = _place(key, symbol="NOPEUSDT")
    poor = _place(key, "1000")  # 20,000,000 USDT: refused by the engine itself
    batch = Commands([first, too_fine, second, first, unknown, poor], clock.now)
    answers = _send(subject, batch)
    assert [a.status for a in answers] == [PLACED, 400, PLACED, PLACED, 400, 400]
    refusals = [msgspec.json.decode(answers[i].body) for i in (1, 4, 5)]
    assert [r["code"] for r in refusals] == [-1111, -1121, -2017], refusals
    placed_first, placed_second = (decode_placed(answers[i].body) for i in (0, 2))
    assert answers[3] == answers[0]  # the same id twice: one order, one answer
    assert placed_first.order_id < placed_second.order_id  # in the message's order
    assert (placed_first.price, placed_first.orig, placed_first.status) == (2000000, 10000, "NEW")
    # The answer lost: the gateway resends the message; nothing is applied again.
    again = _send(subject, msgspec.structs.replace(batch, attempt=2))
    assert again == answers
    assert _locked_usdt(admin, user) == Decimal("600")  # 0.01 and 0.02 at 20,000


def test_a_place_with_a_key_the_engine_refuses_is_refused_as_the_handler_does(
    engine: tuple[str, SplitAdmin, dict[str, Any], FakeClock],
) -> None:
    subject, admin, user, clock = engine
    read_only = admin.create_key(user["id"], read_only=True)["apiKey"]
    revoked = admin.create_key(user["id"])["apiKey"]
    admin.revoke_key(revoked)
    batch = Commands([_place(read_only), _place(revoked), _place("no-such-key")], clock.now)
    answers = _send(subject, batch)
    assert [a.status for a in answers] == [403, 401, 401]
    assert [msgspec.json.decode(a.body)["code"] for a in answers] == [-2015, -2015, -2015]
    assert _locked_usdt(admin, user) == 0
