"""Authentication of signed requests, through HTTP.

Every failure must give the contract's code and HTTP status and change nothing: each refused
write below is followed by a check that balances and open orders are exactly as before.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, Env, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client, request_path_for_signing, sign, signature_payload
from tradehall.exchange import ApiKey
from tradehall.store.batch import KeyRow

SPOT = "/spot/open/sapi/v1"

VECTOR_SECRET = "902ae3cb34ecee2779aa4d3e1d226686"
VECTOR_TS = "1588591856950"
VECTOR_BODY = '{"symbol":"BTCUSDT","price":"9300","volume":"1","side":"BUY","type":"LIMIT"}'
VECTOR_SIGN = "c50d0a74bb9427a9a03933d0eded03af9bf50115dc5b706882a4fcf07a26b761"

ORDER_BODY = {
    "symbol": "BTCUSDT",
    "side": "BUY",
    "type": "LIMIT",
    "volume": "0.01",
    "price": "30000",
}


# --------------------------------------------------------------------------- helpers


class Key:
    """A registered, funded API key whose secret the test holds (to sign by hand)."""

    def __init__(
        self,
        env: Env,
        funds: dict[str, str] | None = None,
        *,
        read_only: bool = False,
        ips: list[str] | None = None,
        user_id: int | None = None,
    ) -> None:
        if user_id is None:
            user_id = env.admin.create_user()["id"]
        created = env.admin.create_key(user_id, read_only=read_only, ips=ips)
        for asset, amount in (funds or {}).items():
            env.admin.deposit(user_id, asset, amount)
        self.env = env
        self.user_id: int = user_id
        self.api_key: str = created["apiKey"]
        self.secret: str = created["secret"]
        self.calls = itertools.count(1)

    def client(self, http: Any = None) -> Client:
        # Each signature gets its own timestamp (a few ms in the past, inside the window), so
        # two identical reads are never one request replayed.
        calls = self.calls
        server = self.env.clock

        def clock() -> int:
            return server.now - next(calls) % 4000

        return Client(BASE_URL, self.api_key, self.secret, http=http or self.env.http, clock=clock)


def hmac_hex(secret: str, message: str | bytes) -> str:
    data = message.encode() if isinstance(message, str) else message
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def body_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def headers_for(
    key: Key, ts: int | str, method: str, sign_path: str, body: bytes = b""
) -> dict[str, str]:
    """Headers with a signature computed by raw hmac over ts + METHOD + path + body."""
    ts_text = str(ts)
    sig = hmac_hex(key.secret, ts_text.encode() + method.encode() + sign_path.encode() + body)
    return {
        "Content-Type": "application/json",
        "X-CH-APIKEY": key.api_key,
        "X-CH-TS": ts_text,
        "X-CH-SIGN": sig,
    }


def post_raw(env: Env, path: str, body: bytes, headers: dict[str, str]) -> Any:
    return env.http.post(SPOT + path, content=body, headers=headers)


def get_raw(env: Env, path_and_query: str, headers: dict[str, str]) -> Any:
    return env.http.get(SPOT + path_and_query, headers=headers)


def assert_error(response: Any, status: int, code: int) -> None:
    assert response.status_code == status, response.text
    data = response.json()
    assert set(data) == {"code", "msg"}
    assert data["code"] == code
    assert isinstance(data["msg"], str) and data["msg"]


def state_of(key: Key) -> tuple[Any, Any]:
    """What a refused request must leave untouched: balances and open orders of every pair."""
    client = key.client()
    return client.account(), client.request(
        "GET", SPOT + "/openOrders", params={"limit": 1000}
    ).json()


# --------------------------------------------------------------------------- known vector


def test_contract_vector_with_signing_helpers_and_raw_hmac() -> None:
    message = VECTOR_TS + "POST" + "/sapi/v1/order/test" + VECTOR_BODY
    assert hmac_hex(VECTOR_SECRET, message) == VECTOR_SIGN
    path = request_path_for_signing(SPOT + "/order/test", "")
    assert path == "/sapi/v1/order/test"
    payload = signature_payload(VECTOR_TS, "POST", path, VECTOR_BODY.encode())
    assert payload == message.encode()
    assert sign(VECTOR_SECRET, payload) == VECTOR_SIGN


@pytest.mark.one_process  # installs a key in the exchange's memory only
def test_contract_vector_accepted_end_to_end(env: Env) -> None:
    """The vector's exact bytes, headers and timestamp, against the real app: the vector's secret
    is installed (in memory only) as a key of a funded user and the clock set to the vector's."""
    user = env.admin.create_user()["id"]
    env.admin.deposit(user, "USDT", "10000")
    row = KeyRow("vector-key", VECTOR_SECRET, user, False, (), env.clock())
    env.exchange.keys["vector-key"] = ApiKey(row, ())
    env.clock.now = int(VECTOR_TS) + 1
    headers = {
        "Content-Type": "application/json",
        "X-CH-APIKEY": "vector-key",
        "X-CH-TS": VECTOR_TS,
        "X-CH-SIGN": VECTOR_SIGN,
    }
    response = env.http.post(SPOT + "/order/test", content=VECTOR_BODY.encode(), headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {}
    # One changed byte of the body is not.
    tampered = VECTOR_BODY.replace('"9300"', '"9301"').encode()
    response = env.http.post(SPOT + "/order/test", content=tampered, headers=headers)
    assert_error(response, 401, -1022)


# --------------------------------------------------------------------------- signing by hand


def test_hand_signed_post_with_raw_hmac(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    body = body_bytes(ORDER_BODY)
    ts = env.clock()
    response = post_raw(env, "/order", body, headers_for(key, ts, "POST", "/sapi/v1/order", body))
    assert response.status_code == 200, response.text
    order = response.json()
    assert order["status"] == "NEW"
    assert order["orderId"] == "1"
    balances = {b["asset"]: b for b in key.client().account()["balances"]}
    assert balances["USDT"] == {"asset": "USDT", "free": "9700.00000000", "locked": "300.00000000"}
    env.audit()


def test_hand_signed_get_with_query_string(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    key.client().create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    query = "symbol=BTCUSDT&limit=10"
    ts = env.clock()
    headers = headers_for(key, ts, "GET", "/sapi/v1/openOrders?" + query)
    response = get_raw(env, "/openOrders?" + query, headers)
    assert response.status_code == 200, response.text
    assert [o["orderId"] for o in response.json()] == ["1"]
    env.audit()


@pytest.mark.parametrize("sent", ["/account", "/account?"])
def test_an_empty_query_may_be_signed_with_its_question_mark(env: Env, sent: str) -> None:
    # Clients that always write "?" before the query sign "/sapi/v1/account?" for no query.
    key = Key(env, {"USDT": "10000"})
    for sign_path in ("/sapi/v1/account", "/sapi/v1/account?"):
        response = get_raw(env, sent, headers_for(key, env.clock(), "GET", sign_path))
        assert response.status_code == 200, response.text
    # Only an empty query: "?" and anything more is still part of what must be signed.
    headers = headers_for(key, env.clock(), "GET", "/sapi/v1/openOrders?")
    assert_error(get_raw(env, "/openOrders?symbol=BTCUSDT", headers), 401, -1022)
    headers = headers_for(key, env.clock(), "GET", "/sapi/v1/account??")
    assert_error(get_raw(env, sent, headers), 401, -1022)


def test_signing_module_for_a_registered_key(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    ts = str(env.clock())
    # GET with query, signed with the library's helpers.
    query = "symbol=btcusdt&limit=5"
    path = request_path_for_signing(SPOT + "/myTrades", query)
    assert path == "/sapi/v1/myTrades?" + query
    sig = sign(key.secret, signature_payload(ts, "GET", path, b""))
    headers = {"X-CH-APIKEY": key.api_key, "X-CH-TS": ts, "X-CH-SIGN": sig}
    response = get_raw(env, "/myTrades?" + query, headers)
    assert response.status_code == 200, response.text
    assert response.json() == []
    # POST with body.
    body = body_bytes(ORDER_BODY)
    path = request_path_for_signing(SPOT + "/order/test", "")
    sig = sign(key.secret, signature_payload(ts, "POST", path, body))
    headers = {
        "Content-Type": "application/json",
        "X-CH-APIKEY": key.api_key,
        "X-CH-TS": ts,
        "X-CH-SIGN": sig,
    }
    response = post_raw(env, "/order/test", body, headers)
    assert response.status_code == 200, response.text
    assert response.json() == {}
    env.audit()


def test_upper_case_hex_signature_accepted(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    headers["X-CH-SIGN"] = headers["X-CH-SIGN"].upper()
    response = post_raw(env, "/order", body, headers)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "NEW"
    env.audit()


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("header", "code"),
    [("X-CH-APIKEY", -1002), ("X-CH-TS", -1023), ("X-CH-SIGN", -1024)],
)
def test_missing_header(env: Env, header: str, code: int) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    del headers[header]
    assert_error(post_raw(env, "/order", body, headers), 401, code)
    # Present but empty counts as missing too.
    headers[header] = ""
    assert_error(post_raw(env, "/order", body, headers), 401, code)
    assert state_of(key) == before
    env.audit()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/order"),
        ("POST", "/order/test"),
        ("POST", "/batchOrders"),
        ("GET", "/order?symbol=BTCUSDT&orderId=1"),
        ("POST", "/cancel"),
        ("POST", "/batchCancel"),
        ("GET", "/openOrders?symbol=BTCUSDT"),
        ("GET", "/myTrades?symbol=BTCUSDT"),
        ("GET", "/account"),
    ],
)
def test_every_signed_endpoint_requires_a_key(env: Env, method: str, path: str) -> None:
    response = env.http.request(
        method,
        SPOT + path,
        content=b"{}" if method == "POST" else b"",
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, 401, -1002)


def test_bad_signature(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    ts = env.clock()
    wrong_secret = headers_for(key, ts, "POST", "/sapi/v1/order", body)
    wrong_secret["X-CH-SIGN"] = hmac_hex(
        "not-the-secret", f"{ts}POST/sapi/v1/order".encode() + body
    )
    assert_error(post_raw(env, "/order", body, wrong_secret), 401, -1022)
    for garbage in ("zz" * 32, "abc", "0" * 63, "0" * 65):
        headers = headers_for(key, ts, "POST", "/sapi/v1/order", body)
        headers["X-CH-SIGN"] = garbage
        assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    # Signed with the gateway prefix in the path: not the contract's requestPath.
    headers = headers_for(key, ts, "POST", SPOT + "/order", body)
    assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    # Signed as GET, sent as POST.
    headers = headers_for(key, ts, "GET", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    # Signed with another timestamp than the one sent.
    headers = headers_for(key, ts, "POST", "/sapi/v1/order", body)
    headers["X-CH-TS"] = str(ts - 1)
    assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    assert state_of(key) == before
    env.audit()


def test_body_tampering_after_signing(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    signed_body = body_bytes(ORDER_BODY)
    sent_body = body_bytes({**ORDER_BODY, "volume": "0.02"})
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", signed_body)
    assert_error(post_raw(env, "/order", sent_body, headers), 401, -1022)
    # Same JSON, different bytes (a space): the raw body is what is signed.
    spaced = json.dumps(ORDER_BODY).encode()
    assert json.loads(spaced) == json.loads(signed_body)
    assert_error(post_raw(env, "/order", spaced, headers), 401, -1022)
    assert state_of(key) == before
    env.audit()


def test_reordered_query_string_rejected(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    key.client().create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    ts = env.clock()
    headers = headers_for(key, ts, "GET", "/sapi/v1/openOrders?symbol=BTCUSDT&limit=10")
    assert_error(get_raw(env, "/openOrders?limit=10&symbol=BTCUSDT", headers), 401, -1022)
    # The query exactly as signed is accepted.
    response = get_raw(env, "/openOrders?symbol=BTCUSDT&limit=10", headers)
    assert response.status_code == 200, response.text
    # Signed without the query, sent with it.
    headers = headers_for(key, ts, "GET", "/sapi/v1/openOrders")
    assert_error(get_raw(env, "/openOrders?symbol=BTCUSDT", headers), 401, -1022)
    env.audit()


def test_stale_timestamp_beyond_recv_window(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    now = env.clock()
    headers = headers_for(key, now - 5001, "POST", "/sapi/v1/order", body)
    refused = post_raw(env, "/order", body, headers)
    assert_error(refused, 401, -1021)
    assert "outside the recvWindow" in refused.json()["msg"]
    headers = headers_for(key, now - 3_600_000, "POST", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 401, -1021)
    assert state_of(key) == before
    # Exactly recvWindow (5000 ms) old is still inside the window.
    headers = headers_for(key, now - 5000, "POST", "/sapi/v1/order", body)
    response = post_raw(env, "/order", body, headers)
    assert response.status_code == 200, response.text
    env.audit()


def test_timestamp_in_the_future(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    now = env.clock()
    for ahead in (1000, 1001, 60_000):
        headers = headers_for(key, now + ahead, "POST", "/sapi/v1/order", body)
        refused = post_raw(env, "/order", body, headers)
        assert_error(refused, 401, -1021)
        # The forward limit is what was broken, not recvWindow (raising it would not help).
        msg = refused.json()["msg"]
        assert f"{ahead} ms ahead" in msg and "less than 1000 ms ahead" in msg, msg
    assert state_of(key) == before
    headers = headers_for(key, now + 999, "POST", "/sapi/v1/order", body)
    response = post_raw(env, "/order", body, headers)
    assert response.status_code == 200, response.text
    env.audit()


def test_configured_forward_tolerance(tmp_path: Any) -> None:
    """``max_clock_ahead_ms`` moves the forward edge only: ts must stay strictly below
    serverTime + the tolerance, and the backward edge is still recvWindow."""
    exchange = make_exchange(tmp_path / "wide.db")
    clock = FakeClock()
    app = create_app(
        exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False, max_clock_ahead_ms=5000
    )
    with TestClient(app) as http:
        env = Env(http, exchange, clock, AdminClient(BASE_URL, ADMIN_TOKEN, http=http), tmp_path)
        key = Key(env, {"USDT": "10000"})
        now = clock()
        for ahead, status in ((4999, 200), (5000, 401), (-5000, 200), (-5001, 401)):
            headers = headers_for(key, now + ahead, "GET", "/sapi/v1/account")
            assert get_raw(env, "/account", headers).status_code == status, ahead
    exchange.store.close()


@pytest.mark.parametrize("ts", ["abc", "-5", "1.7e12", "17000000000000000000"])
def test_malformed_timestamp(env: Env, ts: str) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, ts, "POST", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 401, -1021)
    assert state_of(key) == before
    env.audit()


def test_recv_window_in_body_honoured(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    now = env.clock()
    wide = body_bytes({**ORDER_BODY, "recvWindow": 10000})
    # 9 s old: outside the default 5 s window, inside the 10 s one sent in the body.
    headers = headers_for(key, now - 9000, "POST", "/sapi/v1/order", wide)
    response = post_raw(env, "/order", wide, headers)
    assert response.status_code == 200, response.text
    # recvWindow as a string works too.
    wide_text = body_bytes({**ORDER_BODY, "recvWindow": "10000"})
    headers = headers_for(key, now - 9000, "POST", "/sapi/v1/order", wide_text)
    assert post_raw(env, "/order", wide_text, headers).status_code == 200
    before = state_of(key)
    headers = headers_for(key, now - 10001, "POST", "/sapi/v1/order", wide)
    assert_error(post_raw(env, "/order", wide, headers), 401, -1021)
    # A narrower window in the body is honoured as well.
    narrow = body_bytes({**ORDER_BODY, "recvWindow": 1000})
    headers = headers_for(key, now - 1001, "POST", "/sapi/v1/order", narrow)
    assert_error(post_raw(env, "/order", narrow, headers), 401, -1021)
    assert state_of(key) == before
    env.audit()


def test_recv_window_in_query_honoured(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    now = env.clock()
    query = "recvWindow=20000"
    headers = headers_for(key, now - 15000, "GET", "/sapi/v1/account?" + query)
    response = get_raw(env, "/account?" + query, headers)
    assert response.status_code == 200, response.text
    headers = headers_for(key, now - 15000, "GET", "/sapi/v1/account")
    assert_error(get_raw(env, "/account", headers), 401, -1021)


def test_recv_window_above_maximum_refused(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes({**ORDER_BODY, "recvWindow": 60001})
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 400, -1102)
    assert state_of(key) == before
    env.audit()


def test_unknown_key(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    headers["X-CH-APIKEY"] = "0" * 32
    assert_error(post_raw(env, "/order", body, headers), 401, -2015)
    # Keys are case-sensitive.
    headers["X-CH-APIKEY"] = key.api_key.upper()
    if key.api_key.upper() != key.api_key:
        assert_error(post_raw(env, "/order", body, headers), 401, -2015)
    assert state_of(key) == before
    env.audit()


@pytest.mark.one_process  # calls the admin API through the client's http
def test_revoked_key(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    other = Key(env, user_id=key.user_id)  # a second key of the same user stays valid
    client = key.client()
    order = client.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    revoked = env.admin.revoke_key(key.api_key)
    assert revoked == {"apiKey": key.api_key, "userId": key.user_id, "revoked": True}
    assert env.admin.revoke_key(key.api_key) == revoked  # idempotent, not an error
    for sent, code in (({"apiKey": ""}, -1102), ({"apiKey": "0" * 32}, -2015)):
        answer = env.http.post(
            "/admin/v1/keys/revoke",
            json=sent,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert_error(answer, 400, code)
    before = state_of(other)
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 401, -2015)
    cancel = body_bytes({"symbol": "BTCUSDT", "orderId": order["orderId"]})
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/cancel", cancel)
    assert_error(post_raw(env, "/cancel", cancel, headers), 401, -2015)
    assert_error(
        get_raw(env, "/account", headers_for(key, env.clock(), "GET", "/sapi/v1/account")),
        401,
        -2015,
    )
    assert state_of(other) == before
    assert [o["orderId"] for o in other.client().open_orders("BTCUSDT")] == [order["orderId"]]
    env.audit()


def test_read_only_key(env: Env) -> None:
    trader = Key(env, {"USDT": "10000", "BTC": "1"})
    reader = Key(env, read_only=True, user_id=trader.user_id)
    order = trader.client().create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    before = state_of(trader)
    ro = reader.client()

    def refused(method: str, path: str, body: dict[str, Any]) -> None:
        response = ro.request(method, SPOT + path, body=body)
        assert_error(response, 403, -2015)

    refused("POST", "/order", ORDER_BODY)
    refused("POST", "/order/test", ORDER_BODY)
    refused("POST", "/cancel", {"symbol": "BTCUSDT", "orderId": order["orderId"]})
    refused(
        "POST",
        "/batchOrders",
        {
            "symbol": "BTCUSDT",
            "orders": [{"price": "30000", "volume": "0.01", "side": "BUY", "batchType": "LIMIT"}],
        },
    )
    refused("POST", "/batchCancel", {"symbol": "BTCUSDT", "orderIds": [int(order["orderId"])]})
    assert state_of(trader) == before

    # Reading is allowed.
    assert ro.account() == before[0]
    assert ro.open_orders("BTCUSDT")[0]["orderId"] == order["orderId"]
    assert ro.get_order("BTCUSDT", order["orderId"])["status"] == "NEW"
    assert ro.my_trades("BTCUSDT") == []
    env.audit()


def test_ip_allow_list(env: Env) -> None:
    key = Key(env, {"USDT": "10000"}, ips=["10.0.0.0/8"])
    # The test client's own address is not in 10.0.0.0/8.
    before = state_of(Key(env, user_id=key.user_id))
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    assert_error(post_raw(env, "/order", body, headers), 403, -2015)
    assert_error(
        get_raw(env, "/account", headers_for(key, env.clock(), "GET", "/sapi/v1/account")),
        403,
        -2015,
    )
    outside = TestClient(env.http.app, client=("192.168.1.7", 50000))
    response = outside.get(
        SPOT + "/account", headers=headers_for(key, env.clock(), "GET", "/sapi/v1/account")
    )
    assert_error(response, 403, -2015)
    assert state_of(Key(env, user_id=key.user_id)) == before

    # From inside the allowed network the same key works.
    inside = key.client(TestClient(env.http.app, client=("10.1.2.3", 50000)))
    assert {b["asset"]: b["free"] for b in inside.account()["balances"]}["USDT"] == (
        "10000.00000000"
    )
    assert inside.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")["status"] == "NEW"
    env.audit()


def test_post_without_json_content_type(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    before = state_of(key)
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    del headers["Content-Type"]
    assert_error(post_raw(env, "/order", body, headers), 400, -1017)
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "",
        "application/jsonx",
        "application/json-patch+json",
        "text/plain; application/json",
    ):
        headers["Content-Type"] = content_type
        assert_error(post_raw(env, "/order", body, headers), 400, -1017)
    assert state_of(key) == before
    # A charset parameter is fine, and the type's case does not matter.
    for content_type in ("application/json; charset=utf-8", "Application/JSON;charset=UTF-8"):
        env.clock.advance(1)  # a new signature
        headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
        headers["Content-Type"] = content_type
        response = post_raw(env, "/order", body, headers)
        assert response.status_code == 200, response.text
    env.audit()


def test_duplicated_query_parameter_refused(env: Env) -> None:
    key = Key(env)
    query = "symbol=BTCUSDT&symbol=ETHUSDT"
    headers = headers_for(key, env.clock(), "GET", "/sapi/v1/openOrders?" + query)
    assert_error(get_raw(env, "/openOrders?" + query, headers), 400, -1101)


def test_auth_errors_are_json_error_objects(env: Env) -> None:
    response = env.http.get(SPOT + "/account")
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == -1002


def test_replayed_request_refused(env: Env) -> None:
    key = Key(env, {"USDT": "10000"})
    body = body_bytes(ORDER_BODY)
    headers = headers_for(key, env.clock(), "POST", "/sapi/v1/order", body)
    first = post_raw(env, "/order", body, headers)
    assert first.status_code == 200, first.text
    before = state_of(key)
    assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    # The upper-case spelling is the same signature.
    headers["X-CH-SIGN"] = headers["X-CH-SIGN"].upper()
    assert_error(post_raw(env, "/order", body, headers), 401, -1022)
    assert state_of(key) == before
    assert len(key.client().open_orders("BTCUSDT")) == 1
    env.audit()


def _get_account(env: Env, headers: list[tuple[bytes, bytes]]) -> tuple[int, Any]:
    """GET /account straight into the env's app (``_asgi_get``), on its client's event loop."""
    portal = env.http.portal
    assert portal is not None  # the client is open for the whole test
    answer: tuple[int, Any] = portal.call(_asgi_get, env.http.app, SPOT + "/account", headers)
    return answer


async def _asgi_get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, Any]:
    """One GET straight into the ASGI app with raw header bytes (the test client would
    re-encode non-ASCII header values; a real server hands the bytes over as received)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("testclient", 50000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, json.loads(body)


def test_raw_asgi_helper_reaches_the_signature_check(env: Env) -> None:
    key = Key(env)
    headers = [
        (b"x-ch-apikey", key.api_key.encode()),
        (b"x-ch-ts", str(env.clock()).encode()),
        (b"x-ch-sign", b"0" * 64),
    ]
    status, data = _get_account(env, headers)
    assert (status, data["code"]) == (401, -1022)


@pytest.mark.parametrize("ts", [b"\xb9", b"1700000000000\xb2"])
def test_timestamp_with_non_ascii_digit(env: Env, ts: bytes) -> None:
    key = Key(env)
    headers = [
        (b"x-ch-apikey", key.api_key.encode()),
        (b"x-ch-ts", ts),
        (b"x-ch-sign", b"0" * 64),
    ]
    status, data = _get_account(env, headers)
    assert (status, data["code"]) == (401, -1021)
