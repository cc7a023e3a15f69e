"""Hostile input through HTTP: every signed endpoint, spot and margin, fed oversized, malformed,
mistyped, out-of-range and unicode-laden requests.

Each must get a 4xx (never a 5xx) with ``{"code": <catalogue code>, "msg": <text>}``, the code
that docs/api.md gives for the condition, and must change NOTHING: not the engine's state hash,
not the order id counter, not the balances or open orders the account sees through the API.

The matrices share one exchange (nothing they send may change it, which is what they check);
the cases that once exposed bugs run on fresh exchanges of their own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import httpx2._urlparse
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, TEST_SECRET_BOX, Env, FakeClock
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client
from tradehall.config import load_config
from tradehall.engine.commands import Deposit
from tradehall.engine.margin import POOL_ACCOUNT
from tradehall.engine.markets import MarginSpec
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

SPOT = "/spot/open/sapi/v1"
MARGIN = SPOT + "/margin"
EXT = MARGIN + "/tradehall"
LIMIT_BYTES = 64 * 1024

CONTENT_TYPE = -1017
ILLEGAL = -1100
DUPLICATE = -1101
BAD = -1102
PRECISION = -1111
BAD_TYPE = -1116
BAD_SIDE = -1117
BAD_SYMBOL = -1121
RANGE = -1138
NO_ORDER = -2013
BALANCE = -2017
CATALOGUE = {CONTENT_TYPE, ILLEGAL, DUPLICATE, BAD, PRECISION, BAD_TYPE, BAD_SIDE, BAD_SYMBOL}
CATALOGUE |= {-1136, RANGE, NO_ORDER, BALANCE}
"""Codes a hostile request may get; all answer HTTP 400 (docs/api.md, Error codes)."""


# --------------------------------------------------------------------------- environment


def margin_env(db_path: Path) -> Iterator[Env]:
    """An in-process exchange of the default markets with isolated margin on BTCUSDT."""
    config = load_config()
    markets = dataclasses.replace(config.markets, margin={"BTCUSDT": MarginSpec("BTCUSDT")})
    store = SQLiteStore(db_path, "normal")
    store.migrate()
    exchange = Exchange(
        dataclasses.replace(config, markets=markets),
        store,
        secret_box=TEST_SECRET_BOX,
        check_invariants=True,
    )
    exchange.recover()
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app) as http:
        yield Env(http, exchange, clock, AdminClient(BASE_URL, ADMIN_TOKEN, http=http), db_path)
    exchange.store.close()


@dataclass
class Hostile:
    """A trader with a trade, an open spot order, and a margin account with an open order
    and a loan: every endpoint has something real to aim at."""

    env: Env
    trader: Client
    open_id: int
    margin_open_id: int
    last: Any = None

    @property
    def user(self) -> int:
        user: int = self.trader.user_id  # type: ignore[attr-defined]
        return user

    def snapshot(self) -> Any:
        """The engine's state (taken around every hostile request)."""
        engine = self.env.exchange.engine
        account = engine.margin.account_of(self.user, "BTCUSDT")
        assert account is not None
        return {
            "hash": engine.state_hash(),
            "next order id": engine.spot.next_order_id,
            "next trade id": engine.spot.next_trade_id,
            "balances": engine.balances(self.user),
            "margin balances": engine.balances(account.id),
            "debts": sorted((a, tuple(d)) for a, d in account.debts.items()),
        }

    def api_view(self) -> Any:
        """What the trader sees through the API (taken around every test)."""
        t = self.trader
        self.env.clock.advance(10_000)
        return {
            "api account": t.request("GET", SPOT + "/account").json(),
            "api open": t.request("GET", SPOT + "/openOrders", params={"limit": 1000}).json(),
            "api margin open": t.request(
                "GET", MARGIN + "/openOrders", params={"symbol": "BTCUSDT"}
            ).json(),
            "api margin account": t.request(
                "GET", EXT + "/account", params={"symbol": "BTCUSDT"}
            ).json(),
            "api trades": t.request("GET", SPOT + "/myTrades", params={"symbol": "BTCUSDT"}).json(),
            "api margin trades": t.request(
                "GET", MARGIN + "/myTrades", params={"symbol": "BTCUSDT"}
            ).json(),
        }


def populate(env: Env) -> Hostile:
    trader = env.trader({"USDT": "100000", "BTC": "10"})
    maker = env.trader({"USDT": "100000", "BTC": "10"})
    env.exchange.apply(Deposit(env.clock.now, POOL_ACCOUNT, "USDT", 10**14, "pool-usdt"))
    env.exchange.commit_now()
    maker.create_order("BTCUSDT", "SELL", "LIMIT", "0.1", "30000")
    trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.05", "30000")
    resting = trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", "20000", client_order_id="r")

    def transfer_in(asset: str, amount: str) -> None:
        body = {"symbol": "BTCUSDT", "asset": asset, "amount": amount, "direction": "IN"}
        assert trader.request("POST", EXT + "/transfer", body=body).status_code == 200

    transfer_in("USDT", "10000")
    transfer_in("BTC", "0.1")
    margin = trader.margin_create_order("BTCUSDT", "BUY", "LIMIT", "0.5", "21000")  # a loan
    transfer_in("USDT", "1000")  # free USDT beside the USDT debt
    engine = env.exchange.engine
    account = engine.margin.account_of(trader.user_id, "BTCUSDT")  # type: ignore[attr-defined]
    assert account is not None and account.has_debt()
    return Hostile(env, trader, int(resting["orderId"]), int(margin["orderId"]))


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    with pytest.MonkeyPatch.context() as patch:
        # httpx2 refuses URLs over 64 KiB on the client side; the server must cope with more.
        patch.setattr(httpx2._urlparse, "MAX_URL_LENGTH", 4 * 1024 * 1024)
        for env in margin_env(tmp_path_factory.mktemp("hostile") / "hostile.db"):
            hostile = populate(env)
            hostile.last = hostile.snapshot()
            yield hostile


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Hostile]:
    """A Hostile of its own, for requests that (because of a bug) change the exchange."""
    for env in margin_env(tmp_path / "fresh.db"):
        yield populate(env)


# --------------------------------------------------------------------------- checking


class Raw(str):
    """JSON text put into a body as is: numbers Python cannot hold (1e999999), NaN, ..."""


def encode(value: Any) -> bytes:
    """Compact JSON, UTF-8 on the wire (no \\u escapes), Raw values verbatim."""
    if isinstance(value, Raw):
        return str(value).encode()
    if isinstance(value, dict):
        items = (
            json.dumps(k, ensure_ascii=False).encode() + b":" + encode(v) for k, v in value.items()
        )
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(encode(v) for v in value) + b"]"
    return json.dumps(value, ensure_ascii=False).encode()


NAMED = {ILLEGAL, BAD, PRECISION, BAD_TYPE, BAD_SIDE}
"""Codes whose message names the parameter at fault."""


def problem(response: httpx2.Response, codes: set[int], name: str | None = None) -> str | None:
    """Why ``response`` is not a proper refusal with one of ``codes`` (None when it is). No
    codes: the request must be accepted (HTTP 200)."""
    status = response.status_code
    if not codes:
        return None if status == 200 else f"HTTP {status} {response.text[:200]}"
    if status >= 500:
        return f"HTTP {status} {response.text[:200]}"
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {status}, not JSON: {response.text[:200]!r}"
    if not isinstance(body, dict) or set(body) != {"code", "msg"}:
        return f"HTTP {status}, not an error body: {str(body)[:200]}"
    code, msg = body["code"], body["msg"]
    if code not in codes:
        return f"HTTP {status} code {code} (expected {sorted(codes)}): {msg[:200]}"
    if status != 400:
        return f"HTTP {status} for code {code}, expected 400"
    if not isinstance(msg, str) or not msg.strip():
        return f"empty msg for code {code}"
    if name is not None and code in NAMED and name not in msg:
        return f"msg does not name {name!r}: {msg[:200]}"
    return None


def attempt(
    h: Hostile, send: Callable[[], httpx2.Response], codes: set[int], name: str | None = None
) -> str | None:
    """Send one hostile request: it must be refused with one of ``codes`` and change nothing.
    Returns what went wrong, or None."""
    h.env.clock.advance(10_000)  # fresh signature timestamps: no replay across cases
    wrong = problem(send(), codes, name)
    now = h.snapshot()
    changed = [key for key in now if now[key] != h.last[key]]
    h.last = now
    if changed:
        wrong = f"{wrong or 'refused'}; CHANGED {changed}"
    return wrong


Case = tuple[str, Callable[[], httpx2.Response], set[int], str | None]
"""A label, a request to send, the codes it may be refused with, the field it is about."""


def run_all(h: Hostile, cases: list[Case]) -> None:
    seen = h.api_view()
    failures = []
    for label, send, codes, name in cases:
        wrong = attempt(h, send, codes, name)
        if wrong is not None:
            failures.append(f"{label}: {wrong}")
    assert not failures, "\n".join(failures)
    assert h.api_view() == seen
    h.env.audit()


# --------------------------------------------------------------------------- the endpoints


@dataclass(frozen=True)
class Post:
    path: str
    base: Callable[[Hostile], dict[str, Any]]
    fields: dict[str, str]
    """Parameter -> kind of value (see FIELD_VALUES); "orders.x" is x in the batch's element."""


def order_body(h: Hostile) -> dict[str, Any]:
    return {"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "price": "100", "volume": "0.1"}


ORDER_FIELDS = {
    "symbol": "symbol",
    "side": "side",
    "type": "type",
    "price": "units",
    "volume": "units",
    "newClientOrderId": "cid",
    "timeInForce": "tif",
    "recvWindow": "recv",
}

POSTS = {
    "spot order": Post(SPOT + "/order", order_body, ORDER_FIELDS),
    "spot order/test": Post(SPOT + "/order/test", order_body, ORDER_FIELDS),
    "spot batchOrders": Post(
        SPOT + "/batchOrders",
        lambda h: {
            "symbol": "BTCUSDT",
            "orders": [{"price": "100", "volume": "0.1", "side": "BUY", "batchType": "LIMIT"}],
        },
        {
            "symbol": "symbol",
            "orders": "orders",
            "orders.price": "units",
            "orders.volume": "units",
            "orders.side": "side",
            "orders.batchType": "type",
            "recvWindow": "recv",
        },
    ),
    "spot cancel": Post(
        SPOT + "/cancel",
        lambda h: {"symbol": "BTCUSDT", "orderId": str(h.open_id)},
        {"symbol": "symbol", "orderId": "id", "newClientOrderId": "cid", "recvWindow": "recv"},
    ),
    "spot batchCancel": Post(
        SPOT + "/batchCancel",
        lambda h: {"symbol": "BTCUSDT", "orderIds": [h.open_id]},
        {"symbol": "symbol", "orderIds": "ids", "recvWindow": "recv"},
    ),
    "margin order": Post(MARGIN + "/order", order_body, ORDER_FIELDS),
    "margin cancel": Post(
        MARGIN + "/cancel",
        lambda h: {"symbol": "BTCUSDT", "orderId": str(h.margin_open_id)},
        {"symbol": "symbol", "orderId": "id", "newClientOrderId": "cid", "recvWindow": "recv"},
    ),
    "margin transfer": Post(
        EXT + "/transfer",
        lambda h: {"symbol": "BTCUSDT", "asset": "USDT", "amount": "1", "direction": "OUT"},
        {
            "symbol": "symbol",
            "asset": "asset",
            "amount": "units",
            "direction": "direction",
            "recvWindow": "recv",
        },
    ),
    "margin repay": Post(
        EXT + "/repay",
        lambda h: {"symbol": "BTCUSDT", "asset": "USDT", "amount": "1"},
        {"symbol": "symbol", "asset": "asset", "amount": "units", "recvWindow": "recv"},
    ),
}


@dataclass(frozen=True)
class Get:
    path: str
    base: Callable[[Hostile], dict[str, str]]
    fields: dict[str, str]
    signed: bool = True


GETS = {
    "spot order": Get(
        SPOT + "/order",
        lambda h: {"symbol": "BTCUSDT", "orderId": str(h.open_id)},
        {"symbol": "symbol", "orderId": "id", "newClientOrderId": "cid", "recvWindow": "recv"},
    ),
    "spot openOrders": Get(
        SPOT + "/openOrders",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit", "recvWindow": "recv"},
    ),
    "spot myTrades": Get(
        SPOT + "/myTrades",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit", "fromId": "fromId", "recvWindow": "recv"},
    ),
    "spot account": Get(SPOT + "/account", lambda h: {}, {"recvWindow": "recv"}),
    "margin order": Get(
        MARGIN + "/order",
        lambda h: {"symbol": "BTCUSDT", "orderId": str(h.margin_open_id)},
        {"symbol": "symbol", "orderId": "id", "newClientOrderId": "cid", "recvWindow": "recv"},
    ),
    "margin openOrders": Get(
        MARGIN + "/openOrders",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit", "recvWindow": "recv"},
    ),
    "margin myTrades": Get(
        MARGIN + "/myTrades",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit", "fromId": "fromId", "recvWindow": "recv"},
    ),
    "margin account": Get(
        EXT + "/account",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "recvWindow": "recv"},
    ),
    # The public market-data endpoints take the same kinds of parameters.
    "public depth": Get(
        SPOT + "/depth",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit"},
        signed=False,
    ),
    "public trades": Get(
        SPOT + "/trades",
        lambda h: {"symbol": "BTCUSDT"},
        {"symbol": "symbol", "limit": "limit"},
        signed=False,
    ),
    "public klines": Get(
        SPOT + "/klines",
        lambda h: {"symbol": "BTCUSDT", "interval": "1min"},
        {"symbol": "symbol", "interval": "interval", "limit": "limit"},
        signed=False,
    ),
    "public ticker": Get(
        SPOT + "/ticker", lambda h: {"symbol": "BTCUSDT"}, {"symbol": "symbol"}, signed=False
    ),
}


# --------------------------------------------------------------------------- hostile values

FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
LOOKALIKE = str.maketrans(
    "BCTIEAOSMHKPXcieao",
    "\u0412\u0421\u0422\u0406\u0415\u0410\u041e\u0405\u041c\u041d\u041a\u0420\u0425"
    "\u0441\u0456\u0435\u0430\u043e",
)
"""Latin letters to the Cyrillic letters that look the same."""


def garbled(word: str) -> list[tuple[str, str]]:
    """Unicode versions of an accepted word: invisible, directional, control and look-alike
    characters, emoji, and the whole word in full-width or Cyrillic letters."""
    return [
        ("zero-width space", word[:1] + "\u200b" + word[1:]),
        ("zero-width joiner", word + "\u200d"),
        ("BOM", "\ufeff" + word),
        ("RTL override", "\u202e" + word),
        ("RTL isolate", "\u2067" + word + "\u2069"),
        ("NUL", word + "\x00"),
        ("DEL", word + "\x7f"),
        ("newline", word + "\n"),
        ("combining accent", word + "\u0301"),
        ("emoji", word + "\U0001f600"),
        ("emoji only", "\U0001f4a9"),
        ("full-width", "".join(FULLWIDTH.get(c, c) for c in word)),
        ("cyrillic look-alike", word.translate(LOOKALIKE)),
        ("surrounding spaces", f" {word} "),
    ]


def ids_values() -> list[tuple[str, Any]]:
    return [
        ("0", "0"),
        ("-1", "-1"),
        ("-0", "-0"),
        ("2**63", str(2**63)),
        ("2**64", str(2**64)),
        ("10**30", str(10**30)),
        ("hex", "0x10"),
        ("leading space", " 1"),
        ("trailing space", "1 "),
        ("plus", "+1"),
        ("fraction", "1.5"),
        ("exponent", "1e3"),
        ("letters", "abc"),
        ("full-width digit", "\uff11"),
        ("arabic digit", "\u0661"),
        ("20 digits", "9" * 20),
    ]


def number_values(decimals: int, huge: int) -> list[tuple[str, Any, set[int]]]:
    """Malformed, negative, zero, exponent, NaN, huge and over-precise amounts; ``huge`` is
    the code of a well-formed value too large (an order value past 64 bits: -1138, an amount
    beyond any balance: -1102, a bad amount rather than a balance too small)."""
    malformed = [
        ("exponent", "1e2"),
        ("upper exponent", "1E2"),
        ("negative exponent", "1e-2"),
        ("plus", "+1"),
        ("underscore", "1_000"),
        ("leading space", " 1"),
        ("trailing space", "1 "),
        ("hex", "0x10"),
        ("NaN", "NaN"),
        ("nan", "nan"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("inf", "inf"),
        ("negative", "-1"),
        ("zero", "0"),
        ("negative zero", "-0"),
        ("zero with decimals", "0.000"),
        ("comma", "1,5"),
        ("two points", "1.2.3"),
        ("point", "."),
        ("full-width digit", "\uff11"),
        ("arabic digit", "\u0661"),
        ("65 digits", "1" * 65),
        ("JSON 1e999999", Raw("1e999999")),
        ("JSON -1e999999", Raw("-1e999999")),
        ("JSON 1E400", Raw("1E400")),
        ("JSON 0", Raw("0")),
        ("JSON -0", Raw("-0")),
        ("JSON -5", Raw("-5")),
        ("JSON -0.5", Raw("-0.5")),
    ]
    out: list[tuple[str, Any, set[int]]] = [(label, v, {BAD}) for label, v in malformed]
    thirty = "1." + "0" * 29 + "1"
    out += [
        ("30 decimals", thirty, {PRECISION}),
        ("JSON 30 decimals", Raw(thirty), {PRECISION}),
        ("one decimal too many", "1." + "0" * decimals + "1", {PRECISION}),
        ("JSON 1e-99999", Raw("1e-99999"), {PRECISION}),
        ("40 digits", "9" * 40, {huge}),
        ("JSON 10**30", Raw(str(10**30)), {huge}),
        ("JSON 1e40", Raw("1e40"), {huge}),
    ]
    return out


WRONG_TYPES: list[tuple[str, Any]] = [
    ("object", {}),
    ("object with value", {"value": "1"}),
    ("array", []),
    ("array with value", ["1"]),
    ("true", True),
    ("false", False),
]
OPTIONAL = {"newClientOrderId", "timeInForce", "recvWindow"}


def recv_values() -> list[tuple[str, Any]]:
    return [
        ("0", "0"),
        ("-1", "-1"),
        ("60001", "60001"),
        ("2**63", str(2**63)),
        ("10**30", str(10**30)),
        ("fraction", "1.5"),
        ("letters", "abc"),
        ("hex", "0x10"),
        ("leading space", " 5000"),
        ("full-width digit", "\uff15"),
        ("exponent", "5e3"),
    ]


def field_values(kind: str, field: str) -> list[tuple[str, Any, set[int]]]:
    """Hostile values of one parameter and the codes each may get."""
    word = {"side": "BUY", "type": "LIMIT", "tif": "GTC", "cid": "cid", "asset": "USDT"}
    word |= {"direction": "OUT", "symbol": "BTCUSDT"}
    out: list[tuple[str, Any, set[int]]] = []
    name = field.split(".")[-1]
    if kind == "symbol":
        out += [(label, v, {ILLEGAL}) for label, v in garbled("BTCUSDT")]
        out += [
            ("unknown", "NOPE", {BAD_SYMBOL}),
            ("number", 5, {BAD_SYMBOL}),
            ("41 characters", "A" * 41, {ILLEGAL}),
            ("60 KB", "A" * 60_000, {ILLEGAL}),
            ("slash", "BTC/USDT", {ILLEGAL}),
            ("SQL", "BTCUSDT' OR '1'='1", {ILLEGAL}),
        ]
    elif kind in ("side", "type", "tif", "direction"):
        code = {"side": BAD_SIDE, "type": BAD_TYPE, "tif": BAD_TYPE, "direction": BAD}[kind]
        out += [(label, v, {code}) for label, v in garbled(word[kind])]
        out += [("number", 1, {code}), ("60 KB", "B" * 60_000, {code})]
    elif kind == "cid":
        out += [(label, v, {ILLEGAL}) for label, v in garbled("cid")]
        out += [("65 characters", "c" * 65, {BAD}), ("60 KB", "c" * 60_000, {BAD})]
        out += [("inner space", "a b", {ILLEGAL})]
    elif kind == "asset":
        out += [(label, v, {ILLEGAL, BAD}) for label, v in garbled("USDT")]
        out += [("other asset", "ETH", {BAD}), ("number", 5, {BAD})]
    elif kind == "units":
        decimals = {"price": 2, "volume": 6, "amount": 8}[name]
        out += number_values(decimals, BAD if name == "amount" else RANGE)
    elif kind == "id":
        out += [(label, v, {BAD}) for label, v in ids_values()]
        out += [
            ("JSON 0", Raw("0"), {BAD}),
            ("JSON -1", Raw("-1"), {BAD}),
            ("JSON 2**63", Raw(str(2**63)), {BAD}),
            ("JSON 2**64", Raw(str(2**64)), {BAD}),
            ("JSON 1.5", Raw("1.5"), {BAD}),
            ("JSON 1e-5", Raw("1e-5"), {BAD}),
            ("unknown id 2**63-1", str(2**63 - 1), {NO_ORDER}),
        ]
    elif kind == "ids":
        out += [(f"[{label}]", [v], {BAD}) for label, v in ids_values()]
        out += [
            ("[true]", [True], {BAD}),
            ("[null]", [None], {BAD}),
            ("[[1]]", [[1]], {BAD}),
            ("[{}]", [{}], {BAD}),
            ("[JSON 1.5]", [Raw("1.5")], {BAD}),
            ("[JSON 2**63]", [Raw(str(2**63))], {BAD}),
            ("empty", [], {BAD}),
            ("11 ids", list(range(1, 12)), {DUPLICATE}),
            ("1000 ids", list(range(1, 1001)), {DUPLICATE}),
            # One text of ids separated by commas is taken (docs/api.md); a malformed one not.
            ("string of words", "a,b", {BAD}),
            ("string with an empty id", "1,,2", {BAD}),
            ("string of 11 ids", ",".join(map(str, range(1, 12))), {DUPLICATE}),
            ("string of a huge id", str(2**64), {BAD}),
        ]
    elif kind == "orders":
        element = {"price": "100", "volume": "0.1", "side": "BUY", "batchType": "LIMIT"}
        out += [
            ("empty", [], {BAD}),
            ("11 orders", [element] * 11, {DUPLICATE}),
            ("500 orders", [element] * 500, {DUPLICATE}),
            ("number element", [1], {BAD}),
            ("string element", ["x"], {BAD}),
            ("null element", [None], {BAD}),
            ("array element", [[]], {BAD}),
            ("empty element", [{}], {BAD}),
            ("string", "[]", {BAD}),
        ]
    elif kind == "recv":
        out += [(label, v, {BAD}) for label, v in recv_values()]
        out += [
            ("JSON 0", Raw("0"), {BAD}),
            ("JSON 1.5", Raw("1.5"), {BAD}),
            ("JSON 10**30", Raw(str(10**30)), {BAD}),
            ("JSON 1e-5", Raw("1e-5"), {BAD}),
        ]
    else:  # pragma: no cover
        raise AssertionError(kind)
    out += [
        (f"type {label}", v, {BAD}) for label, v in WRONG_TYPES if kind not in ("ids", "orders")
    ]
    if kind in ("ids", "orders"):
        out += [("type object", {}, {BAD}), ("type true", True, {BAD}), ("type number", 1, {BAD})]
    if name not in OPTIONAL:
        out += [("null", None, {BAD}), ("empty string", "", {BAD})]
    return out


def with_value(base: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(base))
    if field.startswith("orders."):
        body["orders"][0][field.split(".", 1)[1]] = value
    else:
        body[field] = value
    return body


# --------------------------------------------------------------------------- POST: fields


POST_FIELD_CASES = [
    pytest.param(endpoint, field, id=f"{endpoint}-{field}")
    for endpoint, post in POSTS.items()
    for field in post.fields
]


@pytest.mark.parametrize(("endpoint", "field"), POST_FIELD_CASES)
def test_post_parameter_with_hostile_values_is_refused(
    h: Hostile, endpoint: str, field: str
) -> None:
    """Every parameter of every signed POST, set to each hostile value of its kind (wrong JSON
    types included): refused with the parameter's catalogue code, nothing changed."""
    post = POSTS[endpoint]
    kind = post.fields[field]
    cases: list[Case] = []
    for label, value, codes in field_values(kind, field):
        raw = encode(with_value(post.base(h), field, value))
        assert len(raw) <= LIMIT_BYTES, label

        def send(raw: bytes = raw) -> httpx2.Response:
            return h.trader.request("POST", post.path, raw_body=raw)

        name = None if kind == "ids" else field.split(".")[-1]
        cases.append((f"{field}={label}", send, codes, name))
    run_all(h, cases)


# --------------------------------------------------------------------------- POST: bodies


def body_cases(h: Hostile, post: Post) -> list[tuple[str, bytes, set[int], dict[str, str]]]:
    """Whole-body attacks on one endpoint: (label, raw body, codes, extra headers)."""
    base = post.base(h)
    valid = encode(base)
    bad_symbol = {**base, "symbol": "BAD!"}

    def padded(size: int, body: dict[str, Any]) -> bytes:
        raw = encode({**body, "pad": ""})
        return raw[:-2] + b"a" * (size - len(raw)) + raw[-2:]

    first_key = next(iter(base))
    dup = valid[:-1] + b"," + encode({first_key: base[first_key]})[1:]
    cases: list[tuple[str, bytes, set[int], dict[str, str]]] = [
        ("64 KiB + 1", padded(LIMIT_BYTES + 1, base), {BAD}, {}),
        ("1 MiB", padded(1024 * 1024, base), {BAD}, {}),
        ("64 KiB exactly is read", padded(LIMIT_BYTES, bad_symbol), {ILLEGAL}, {}),
        (
            "64 KiB + 1, Content-Length says 100",
            padded(LIMIT_BYTES + 1, base),
            {BAD},
            {"Content-Length": "100"},
        ),
        (
            "small body, Content-Length says 10 MB",
            valid,
            {BAD},
            {"Content-Length": str(10 * 1024 * 1024)},
        ),
        ("Content-Length -1", encode(bad_symbol), {ILLEGAL}, {"Content-Length": "-1"}),
        ("Content-Length abc", encode(bad_symbol), {ILLEGAL}, {"Content-Length": "abc"}),
        ("Content-Length 1e9", encode(bad_symbol), {ILLEGAL}, {"Content-Length": "1e9"}),
        ("Content-Length 0", encode(bad_symbol), {ILLEGAL}, {"Content-Length": "0"}),
        ("Content-Length 2**64", encode(bad_symbol), {BAD}, {"Content-Length": str(2**64)}),
        ("array", b"[]", {BAD}, {}),
        ("array of the body", b"[" + valid + b"]", {BAD}, {}),
        ("string", b'"x"', {BAD}, {}),
        ("null", b"null", {BAD}, {}),
        ("number", b"1", {BAD}, {}),
        ("true", b"true", {BAD}, {}),
        ("empty object", b"{}", {BAD}, {}),
        ("empty", b"", {BAD}, {}),
        ("whitespace", b" \r\n\t ", {BAD}, {}),
        ("truncated", valid[:-5], {BAD}, {}),
        ("only a brace", b"{", {BAD}, {}),
        ("trailing garbage", valid + b"x", {BAD}, {}),
        ("two objects", valid + valid, {BAD}, {}),
        ("form encoded", b"symbol=BTCUSDT&side=BUY", {BAD}, {}),
        ("NUL byte", valid + b"\x00", {BAD}, {}),
        ("UTF-8 BOM", b"\xef\xbb\xbf" + valid, {BAD}, {}),
        ("single quotes", valid.replace(b'"', b"'"), {BAD}, {}),
        ("comment", b"/* x */" + valid, {BAD}, {}),
        ("lone surrogate escape", encode({**base, "symbol": Raw('"\\ud800"')}), {BAD}, {}),
        ("NaN literal", encode({**base, "symbol": Raw("NaN")}), {BAD}, {}),
        ("Infinity literal", encode({**base, "symbol": Raw("Infinity")}), {BAD}, {}),
        ("-Infinity literal", encode({**base, "symbol": Raw("-Infinity")}), {BAD}, {}),
        ("repeated key", dup, {DUPLICATE}, {}),
        (
            "repeated key, other spelling",
            valid[:-1] + b',"' + "".join(f"\\u{ord(c):04x}" for c in first_key).encode() + b'":1}',
            {DUPLICATE},
            {},
        ),
        (
            "deep array under the limit",
            encode({**base, first_key: Raw("[" * 64 + "]" * 64)}),
            {BAD},
            {},
        ),
        ("Content-Type text/plain", valid, {CONTENT_TYPE}, {"Content-Type": "text/plain"}),
        (
            "Content-Type form",
            valid,
            {CONTENT_TYPE},
            {"Content-Type": "application/x-www-form-urlencoded"},
        ),
        ("Content-Type empty", valid, {CONTENT_TYPE}, {"Content-Type": ""}),
    ]
    if "orders" in base:
        nested = valid.replace(b'"LIMIT"}', b'"LIMIT","price":"100"}')
        assert nested != valid
        cases.append(("repeated key in an order", nested, {DUPLICATE}, {}))
    return cases


BODY_BUGS = {
    "invalid UTF-8": b'{"symbol":"\xff"}',
    "overlong UTF-8": b'{"symbol":"\xc0\xaf"}',
    "UTF-8 surrogate": b'{"symbol":"\xed\xa0\x80"}',
    "10k nested arrays as a value": b'{"symbol":' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "10k nested objects as a value": b'{"symbol":' + b'{"a":' * 10_000 + b"1" + b"}" * 10_001,
    "10k nested arrays as the body": b"[" * 10_000 + b"]" * 10_000,
    "1000 nested arrays as a value": b'{"symbol":' + b"[" * 1000 + b"]" * 1000 + b"}",
}


@pytest.mark.parametrize("endpoint", list(POSTS))
def test_post_hostile_bodies_are_refused(h: Hostile, endpoint: str) -> None:
    post = POSTS[endpoint]
    cases: list[Case] = []
    for label, raw, codes, headers in body_cases(h, post):

        def send(raw: bytes = raw, headers: dict[str, str] = headers) -> httpx2.Response:
            return h.trader.request("POST", post.path, raw_body=raw, headers=headers)

        cases.append((label, send, codes, None))
    for label, chunks in (("chunked, 70 KiB", 70), ("chunked, 1 MiB", 1024)):

        def chunked(n: int = chunks) -> httpx2.Response:
            # Unsigned (a streamed body cannot be signed by the client): the size check comes
            # before authentication.
            content = (b" " * 1024 for _ in range(n))
            headers = {"Content-Type": "application/json"}
            return h.env.http.post(post.path, content=content, headers=headers)

        cases.append((label, chunked, {BAD}, None))
    run_all(h, cases)


@pytest.mark.parametrize(
    "endpoint", ["spot order", "spot batchCancel", "margin order", "margin transfer"]
)
@pytest.mark.parametrize("label", list(BODY_BUGS))
def test_post_malformed_encodings_and_deep_nesting_are_refused(
    h: Hostile, endpoint: str, label: str
) -> None:
    """msgspec raises UnicodeDecodeError (invalid UTF-8) and RecursionError (nesting past the
    recursion limit), neither of them the msgspec.DecodeError that http.read_params turns into
    -1102: both end in the catch-all 500 -1000."""
    post = POSTS[endpoint]
    raw = BODY_BUGS[label]
    wrong = attempt(h, lambda: h.trader.request("POST", post.path, raw_body=raw), {BAD})
    assert wrong is None, wrong


# --------------------------------------------------------------------------- GET: queries


def query(params: dict[str, str]) -> str:
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())


def get_values(kind: str) -> list[tuple[str, str, set[int]]]:
    mega = 1024 * 1024
    if kind == "symbol":
        out = [(label, v, {ILLEGAL}) for label, v in garbled("BTCUSDT")]
        out += [("1 MB", "A" * mega, {ILLEGAL}), ("unknown", "NOPE", {BAD_SYMBOL})]
        return out
    if kind == "cid":
        out = [(label, v, {ILLEGAL}) for label, v in garbled("cid")]
        return [*out, ("1 MB", "c" * mega, {BAD}), ("65 characters", "c" * 65, {BAD})]
    if kind == "id":
        return [*[(label, v, {BAD}) for label, v in ids_values()], ("1 MB", "1" * mega, {BAD})]
    if kind == "limit":
        values = [
            ("0", "0"),
            ("-1", "-1"),
            ("1001", "1001"),
            ("10**30", str(10**30)),
            ("2**63", str(2**63)),
            ("fraction", "1.5"),
            ("letters", "abc"),
            ("leading space", " 1"),
            ("trailing space", "1 "),
            ("plus", "+1"),
            ("hex", "0x10"),
            ("exponent", "1e2"),
            ("full-width digit", "\uff11"),
            ("NUL", "1\x00"),
            ("1 MB", "1" * mega),
        ]
        return [(label, v, {BAD}) for label, v in values]
    if kind == "fromId":
        values = [
            ("-1", "-1"),
            ("2**63", str(2**63)),
            ("10**30", str(10**30)),
            ("fraction", "1.5"),
            ("letters", "abc"),
            ("leading space", " 1"),
            ("plus", "+1"),
            ("hex", "0x10"),
            ("full-width digit", "\uff11"),
            ("1 MB", "1" * mega),
        ]
        return [(label, v, {BAD}) for label, v in values]
    if kind == "recv":
        return [*[(label, v, {BAD}) for label, v in recv_values()], ("1 MB", "1" * mega, {BAD})]
    if kind == "interval":
        out = [(label, v, {BAD}) for label, v in garbled("1min")]
        return [*out, ("1 MB", "m" * mega, {BAD}), ("upper case", "1MIN", {BAD})]
    raise AssertionError(kind)


GET_FIELD_CASES = [
    pytest.param(endpoint, field, id=f"{endpoint}-{field}")
    for endpoint, get in GETS.items()
    for field in get.fields
]


@pytest.mark.parametrize(("endpoint", "field"), GET_FIELD_CASES)
def test_get_parameter_with_hostile_values_is_refused(
    h: Hostile, endpoint: str, field: str
) -> None:
    """Every parameter of every GET (signed, and public): unicode, 1 MB strings, out-of-range
    and malformed numbers and ids, and the parameter sent twice (-1101)."""
    get = GETS[endpoint]
    cases: list[Case] = []
    for label, value, codes in get_values(get.fields[field]):
        params = {**get.base(h), field: value}

        def send(params: dict[str, str] = params) -> httpx2.Response:
            return h.trader.request("GET", get.path + "?" + query(params), signed=get.signed)

        cases.append((f"{field}={label}", send, codes, field))
    base = get.base(h)
    twice = query({**base, field: base.get(field, "1")})
    again = query({field: base.get(field, "1")})
    cases.append(
        (
            f"{field} twice",
            lambda: h.trader.request("GET", f"{get.path}?{twice}&{again}", signed=get.signed),
            {DUPLICATE},
            None,
        )
    )
    run_all(h, cases)


@pytest.mark.parametrize("endpoint", list(GETS))
def test_get_hostile_query_strings(h: Hostile, endpoint: str) -> None:
    """Raw query strings: invalid percent-encoding, invalid UTF-8, repeated keys in other
    spellings. A 1 MB unknown parameter is ignored like any unknown parameter."""
    get = GETS[endpoint]
    base = query(get.base(h))
    sep = "&" if base else ""
    raw_cases: list[tuple[str, str, set[int]]] = [
        ("unknown parameter of 1 MB is ignored", f"{base}{sep}junk={'x' * 1024 * 1024}", set()),
        ("invalid UTF-8 key", f"{base}{sep}%FF%FE=1", set()),
        ("recvWindow twice", f"{base}{sep}recvWindow=5000&recvWindow=5000", {DUPLICATE}),
        (
            "recvWindow twice, other spelling",
            f"{base}{sep}recvWindow=5000&%72ecvWindow=5000",
            {DUPLICATE},
        ),
        ("recvWindow twice, one empty", f"{base}{sep}recvWindow=&recvWindow=5000", {DUPLICATE}),
    ]
    if "symbol" in get.fields:
        rest = query({k: v for k, v in get.base(h).items() if k != "symbol"})
        more = f"&{rest}" if rest else ""
        raw_cases += [
            ("symbol invalid UTF-8", f"symbol=BTC%FFUSDT{more}", {ILLEGAL}),
            ("symbol broken escape", f"symbol=BTC%ZZUSDT{more}", {ILLEGAL}),
            ("symbol NUL", f"symbol=BTCUSDT%00{more}", {ILLEGAL}),
            ("symbol plus", f"symbol=BTC+USDT{more}", {ILLEGAL}),
            ("symbol twice", f"symbol=BTCUSDT&symbol=ETHUSDT{more}", {DUPLICATE}),
            ("symbol twice, other spelling", f"symbol=BTCUSDT&%73ymbol=BTCUSDT{more}", {DUPLICATE}),
            ("symbol 10000 times", "&".join(["symbol=BTCUSDT"] * 10_000) + more, {DUPLICATE}),
        ]
    cases: list[Case] = []
    for label, raw, codes in raw_cases:

        def send(raw: str = raw) -> httpx2.Response:
            return h.trader.request("GET", f"{get.path}?{raw}", signed=get.signed)

        cases.append((label, send, codes, None))
    run_all(h, cases)


# --------------------------------------------------------------------------- known bugs


FOLDED = [
    # (endpoint, field, value, codes): letters whose str.upper() is ASCII, U+017F LATIN SMALL
    # LETTER LONG S ("S") and U+0131 LATIN SMALL LETTER DOTLESS I ("I").
    ("spot order", "side", "\u017fell", {BAD_SIDE}),  # SELL
    ("spot order", "type", "l\u0131m\u0131t", {BAD_TYPE}),  # LIMIT
    ("spot order", "timeInForce", "\u0131oc", {BAD_TYPE}),  # IOC
    ("spot order/test", "side", "\u017fell", {BAD_SIDE}),
    ("spot batchOrders", "orders.batchType", "l\u0131m\u0131t", {BAD_TYPE}),
    ("margin order", "side", "\u017fell", {BAD_SIDE}),
    ("margin transfer", "asset", "u\u017fdt", {ILLEGAL, BAD}),  # USDT
    ("margin transfer", "direction", "\u0131n", {BAD}),  # IN
    ("margin repay", "asset", "u\u017fdt", {ILLEGAL, BAD}),
]


@pytest.mark.parametrize(
    ("endpoint", "field", "value", "codes"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]}-{case[2]!a}") for case in FOLDED],
)
def test_non_ascii_letters_that_upper_case_to_ascii_are_refused(
    fresh: Hostile, endpoint: str, field: str, value: str, codes: set[int]
) -> None:
    post = POSTS[endpoint]
    body = post.base(fresh)
    if endpoint == "spot order" and field == "side":
        body = {**body, "price": "40000", "volume": "0.01"}  # a SELL that would rest
    if endpoint == "margin transfer":
        body = {**body, "direction": "IN"} if field == "asset" else body
    body = with_value(body, field, value)
    fresh.last = fresh.snapshot()
    wrong = attempt(fresh, lambda: fresh.trader.request("POST", post.path, body=body), codes)
    assert wrong is None, wrong


SLOW_NUMBERS = [
    # int(Decimal("1E+200000")) in params.parse_int: quadratic in the exponent (1e999999 takes
    # about 25 s, 1e9999999 hours), before authentication for recvWindow. orderId goes the same
    # way (POST /cancel, /margin/cancel).
    ("spot order", "recvWindow", Raw("1e200000"), False),
    ("spot batchCancel", "orderIds", [Raw("1e200000")], True),
    # units.to_units computes 10**(places - decimals) for 1E-2500000 (price, volume, amount).
    ("spot order", "volume", Raw("1e-2500000"), True),
]


@pytest.mark.parametrize(
    ("endpoint", "field", "value", "signed"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in SLOW_NUMBERS],
)
def test_numbers_with_huge_exponents_are_refused_at_once(
    h: Hostile, endpoint: str, field: str, value: Any, signed: bool
) -> None:
    post = POSTS[endpoint]
    raw = encode(with_value(post.base(h), field, value))

    seen = h.api_view()

    def send() -> httpx2.Response:
        if signed:
            return h.trader.request("POST", post.path, raw_body=raw)
        # No credentials at all: parameters are read before the signature is checked.
        return h.env.http.post(post.path, content=raw, headers={"Content-Type": "application/json"})

    h.env.clock.advance(10_000)
    started = time.perf_counter()
    response = send()
    elapsed = time.perf_counter() - started
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["code"] in CATALOGUE | {-1002}, response.text
    assert h.snapshot() == h.last
    assert h.api_view() == seen
    assert elapsed < 0.1, f"took {elapsed:.2f} s"
    h.env.audit()


def test_batch_cancel_names_the_malformed_element(h: Hostile) -> None:
    body = {"symbol": "BTCUSDT", "orderIds": [h.open_id, "abc"]}
    response = h.trader.request("POST", SPOT + "/batchCancel", body=body)
    assert problem(response, {BAD}) is None
    assert "orderIds[1]" in response.json()["msg"], response.json()


def test_content_length_with_non_ascii_digits_is_not_a_500(h: Hostile) -> None:
    """Sent straight to the ASGI app (httpx re-encodes header text): uvicorn's httptools
    parser refuses such a header before the app sees it, other ASGI servers may not."""
    sent: list[MutableMapping[str, Any]] = []
    messages = [{"type": "http.request", "body": b'{"symbol":"BTCUSDT"}', "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    path = SPOT + "/order"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"\xb2")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }

    async def call() -> None:
        await h.env.http.app(scope, receive, send)

    before = h.snapshot()
    portal = h.env.http.portal
    assert portal is not None
    portal.call(call)
    status = sent[0]["status"]
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert h.snapshot() == before
    assert 400 <= status < 500, (status, body)
    assert body["code"] in CATALOGUE | {-1002}, body
    h.env.audit()
