"""Self-service accounts (``[sandbox] self_service``) through the API, in one process and
behind a gateway: create an account, trade with its key, top it up from the faucet (at most N
times a day), reset it; the cap, the per-IP and the global limits refuse with -1003 and create
nothing; a key unused too long is refused with -2015 and then revoked; with the setting off
the endpoints are unknown paths."""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from test_api_openapi import Checker

from support import (
    ADMIN_TOKEN,
    BASE_URL,
    NATS_DOWN,
    SERVE,
    SPLIT,
    ClientClock,
    Env,
    FakeClock,
    SplitAdmin,
    make_exchange,
    split_apps,
)
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client, sign, signature_payload
from tradehall.config import LimitSettings, parse_config
from tradehall.exchange import Exchange
from tradehall.selfservice_state import DAY_MS

SANDBOX = "/sandbox/v1"
ACCOUNTS = SANDBOX + "/accounts"
FAUCET = SANDBOX + "/faucet"
RESET = SANDBOX + "/account/reset"
SPOT_USER = "/spotws_user/userData/ws"
IP_HEADER = b"x-test-peer"
"""The address a request comes from, as a proxy in front would set the peer's (tests only)."""

TOPOLOGIES = [SERVE] if NATS_DOWN else [SERVE, SPLIT]
DEMO_SPOT = {"BTC": "100.00000000", "ETH": "1000.00000000", "USDT": "10000000.00000000"}
DEMO_FUTURES = {"USDT": "1000000.00000000", "BTC": "10.00000000"}


def config(sandbox: str = "", limits: str = "", admin: str = "") -> Any:
    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    text = text.replace("[admin]\n", f"[admin]\n{admin}\n")
    sandbox_table = f"\n[sandbox]\nself_service = true\n{sandbox}\n"
    return parse_config(text + sandbox_table + f"\n[limits]\n{limits}\n", "test")


def from_peer(app: ASGIApp) -> ASGIApp:
    """``app``, seeing each request come from the address in its ``x-test-peer`` header."""

    async def peer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(IP_HEADER)
            if given is not None:
                scope = {**scope, "client": (given.decode(), 40000)}
        await app(scope, receive, send)

    return peer


@dataclass
class Venue:
    http: TestClient
    exchange: Exchange
    clock: FakeClock
    admin: AdminClient
    scheduler_http: TestClient
    scheduler_app: Starlette

    def create(self, ip: str = "10.0.0.1") -> httpx2.Response:
        return self.http.post(ACCOUNTS, json={}, headers={IP_HEADER.decode(): ip})

    def account(self, ip: str = "10.0.0.1") -> tuple[dict[str, Any], Client]:
        answer = self.create(ip)
        assert answer.status_code == 200, answer.text
        created: dict[str, Any] = answer.json()
        client = Client(
            BASE_URL,
            created["apiKey"],
            created["secret"],
            http=self.http,
            clock=ClientClock(self.clock),
        )
        return created, client

    def tick(self) -> None:
        """One step of the scheduler (the revocation of expired keys among its work)."""
        portal = self.scheduler_http.portal
        assert portal is not None
        portal.call(self.scheduler_app.state.scheduler.tick)

    def env(self) -> Env:
        return Env(self.http, self.exchange, self.clock, self.admin, Path())

    def counts(self) -> tuple[int, int, int]:
        """Users, keys and transfers of record (what a refused creation must not change)."""
        users = len(self.admin.list_users()["users"])
        return users, len(self.admin.list_keys()["keys"]), len(self.exchange.engine.transfers)


VenueFactory = Callable[..., Venue]


@pytest.fixture(params=TOPOLOGIES)
def venue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VenueFactory]:
    """Make the venue of a test's configuration: one process, or the engine behind a gateway
    (the rate limits then the gateway's)."""
    stack = contextlib.ExitStack()

    def make(
        sandbox: str = "", limits: str = "", rate_limits: bool = False, admin: str = ""
    ) -> Venue:
        cfg = config(sandbox, limits, admin)
        exchange = make_exchange(tmp_path / "sandbox.db", config=cfg)
        stack.callback(exchange.store.close)
        clock = FakeClock()
        settings = cfg.limits if rate_limits else LimitSettings(enabled=False)
        if request.param == SERVE:
            app = create_app(
                exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False, limits=settings
            )
            http = stack.enter_context(TestClient(from_peer(app)))
            operator = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
            return Venue(http, exchange, clock, operator, http, app)
        engine_http, service, gateway, http = stack.enter_context(
            split_apps(exchange, clock, limits=settings, wrap=from_peer)
        )
        operator = SplitAdmin(
            BASE_URL, ADMIN_TOKEN, http=engine_http, gateway=gateway, engine=service
        )
        assert isinstance(engine_http.app, Starlette)
        return Venue(http, exchange, clock, operator, engine_http, engine_http.app)

    with stack:
        yield make


def balances(client: Client) -> dict[str, tuple[str, str]]:
    return {b["asset"]: (b["free"], b["locked"]) for b in client.account()["balances"]}


def futures_cash(client: Client) -> dict[str, Any]:
    return {a["marginCoin"]: a["accountNormal"] for a in client.futures_account()["account"]}


def refused(answer: httpx2.Response, status: int, code: int, words: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["code"] == code
    assert words in answer.json()["msg"]


# ------------------------------------------------------------------------ the account's life


def test_create_trade_faucet_and_reset(venue: VenueFactory) -> None:
    v = venue(sandbox="faucet_per_day = 2")
    created, trader = v.account()
    assert set(created) == {
        "userId", "apiKey", "secret", "spot", "futures", "faucetPerDay", "keyExpirySeconds"
    }  # fmt: skip
    assert (created["spot"], created["futures"]) == (DEMO_SPOT, DEMO_FUTURES)
    assert (created["faucetPerDay"], created["keyExpirySeconds"]) == (2, 7 * 86_400)
    # Funded by deposits, through the ledger: the balances, the audit, the tx ids.
    assert balances(trader) == {a: (amount, "0.00000000") for a, amount in DEMO_SPOT.items()}
    assert futures_cash(trader)["USDT"] == 1_000_000
    user = created["userId"]
    assert f"selfservice-{user}-USDT" in v.exchange.engine.transfers
    assert [u["name"] for u in v.admin.list_users()["users"]] == ["self-service"]
    key = next(k for k in v.admin.list_keys()["keys"] if k["apiKey"] == created["apiKey"])
    assert (key["readOnly"], key["revoked"]) == (False, None)

    # It trades: a maker's ask, bought.
    maker = v.env().trader({"BTC": "5"})
    maker.create_order("BTCUSDT", "SELL", "LIMIT", volume="2", price="30000")
    bought = trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="2", price="30000")
    assert trader.get_order("BTCUSDT", bought["orderId"])["status"] == "FILLED"
    assert balances(trader)["USDT"] == ("9940000.00000000", "0.00000000")
    # An order resting, its funds locked: held funds count as held.
    trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="1", price="20000")

    topped = trader.request("POST", FAUCET, body={}).json()
    assert topped == {
        "userId": user,
        "deposited": {"spot": {"USDT": "60000.00000000"}, "futures": {}},
        "usedToday": 1,
        "leftToday": 1,
    }
    assert balances(trader)["USDT"] == ("9980000.00000000", "20000.00000000")
    # At the starting balances (BTC above them), the faucet has nothing to do: not counted.
    again = trader.request("POST", FAUCET, body={}).json()
    assert again["deposited"] == {"spot": {}, "futures": {}} and again["usedToday"] == 1

    reset = trader.request("POST", RESET, body={}).json()
    assert reset["cancelledOrders"] == 1
    assert reset["spot"] == DEMO_SPOT and reset["futures"] == DEMO_FUTURES
    assert balances(trader) == {a: (amount, "0.00000000") for a, amount in DEMO_SPOT.items()}
    assert trader.open_orders("BTCUSDT") == []
    v.env().audit()


def test_the_faucet_tops_up_at_most_n_times_a_utc_day(venue: VenueFactory) -> None:
    v = venue(sandbox="faucet_per_day = 2")
    _, trader = v.account()

    def spend() -> None:  # spot USDT moved to futures: spot below its start, futures above
        trader.futures_transfer("USDT", "1000", "spot", "futures")

    for used in (1, 2):
        spend()
        answer = trader.request("POST", FAUCET, body={}).json()
        assert answer["deposited"]["spot"] == {"USDT": "1000.00000000"}
        assert (answer["usedToday"], answer["leftToday"]) == (used, 2 - used)
    spend()
    before = (balances(trader), len(v.exchange.engine.transfers))
    third = trader.request("POST", FAUCET, body={})
    refused(third, 429, -1003, "the faucet's 2 top-up(s) of the UTC day")
    midnight = DAY_MS - v.clock.now % DAY_MS
    assert int(third.headers["Retry-After"]) == -(-midnight // 1000)
    assert (balances(trader), len(v.exchange.engine.transfers)) == before  # nothing deposited
    v.clock.advance(midnight)  # the next UTC day
    assert trader.request("POST", FAUCET, body={}).json()["usedToday"] == 1
    assert balances(trader)["USDT"][0] == DEMO_SPOT["USDT"]
    v.env().audit()


def test_a_reset_closes_no_other_traders_position(venue: VenueFactory) -> None:
    """The operator's reset closes a position at the mark against other traders' positions
    (by their ranking): a stranger's reset closed other accounts' positions, any of them, at
    any moment. A self-service reset is refused while the account holds a position, and
    changes nothing; closed by the owner, the reset goes through."""
    v = venue()
    v.admin.set_index_price("E-BTC-USDT", "30000")
    _, trader = v.account()
    other = v.env().trader({"USDT": "100000"})
    other.futures_transfer("USDT", "100000", "spot", "futures")
    other.futures_create_order("E-BTC-USDT", "SELL", "LIMIT", "OPEN", 10, "30000")
    trader.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", 10, "30000")
    held = (trader.futures_positions(), other.futures_positions(), balances(trader))
    answer = trader.request("POST", RESET, body={})
    refused(answer, 400, -1020, "close your futures positions first (E-BTC-USDT)")
    assert (trader.futures_positions(), other.futures_positions(), balances(trader)) == held
    trader.futures_create_order("E-BTC-USDT", "SELL", "LIMIT", "CLOSE", 10, "30000")
    other.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "CLOSE", 10, "30000")
    reset = trader.request("POST", RESET, body={}).json()
    assert reset["closedPositions"] == 0 and reset["futures"] == DEMO_FUTURES
    v.env().audit()


def test_a_reset_cannot_mint_money_through_a_margin_account(venue: VenueFactory) -> None:
    """A reset restores spot and futures and leaves margin as it is: funds moved into margin
    and a reset after, again and again, minted money without bound (past the faucet's daily
    limit). Refused while a margin account holds anything; emptied, the reset goes through."""
    v = venue()
    _, trader = v.account()
    move = "/spot/open/sapi/v1/margin/tradehall/transfer"
    parked = {"symbol": "ETHUSDT", "asset": "USDT", "amount": "100000"}
    assert trader.request("POST", move, body={**parked, "direction": "IN"}).status_code == 200
    spot = balances(trader)
    answer = trader.request("POST", RESET, body={})
    refused(answer, 400, -1020, "repay and move your margin funds back to spot first (ETHUSDT)")
    assert balances(trader) == spot
    assert trader.request("POST", move, body={**parked, "direction": "OUT"}).status_code == 200
    reset = trader.request("POST", RESET, body={}).json()
    assert reset["spot"] == DEMO_SPOT
    v.env().audit()


def test_without_a_faucet_a_call_with_nothing_to_top_up_is_not_refused(
    venue: VenueFactory,
) -> None:
    v = venue(sandbox="faucet_per_day = 0")
    _, trader = v.account()
    nothing = trader.request("POST", FAUCET, body={}).json()
    assert nothing["deposited"] == {"spot": {}, "futures": {}}
    assert (nothing["usedToday"], nothing["leftToday"]) == (0, 0)
    trader.futures_transfer("USDT", "1000", "spot", "futures")
    answer = trader.request("POST", FAUCET, body={})
    refused(answer, 400, -1020, "this sandbox has no faucet: reset the account instead")
    assert "Retry-After" not in answer.headers


def test_the_faucet_and_the_reset_serve_self_service_accounts_only(venue: VenueFactory) -> None:
    v = venue()
    operators = v.env().trader({"USDT": "5"})
    for path in (FAUCET, RESET):
        refused(operators.request("POST", path, body={}), 403, -2015, "self-service accounts only")
    assert balances(operators)["USDT"] == ("5.00000000", "0.00000000")
    # Signed like any signed endpoint: a wrong signature is refused before anything else.
    created, _ = v.account()
    forged = Client(BASE_URL, created["apiKey"], "0" * 32, http=v.http, clock=v.clock)
    refused(forged.request("POST", FAUCET, body={}), 401, -1022, "signature")


# ------------------------------------------------------------------------ limits


def test_the_cap_refuses_and_creates_nothing_until_a_key_expires(venue: VenueFactory) -> None:
    v = venue(sandbox="max_accounts = 2\nkey_expiry_s = 60")
    v.account()
    v.clock.advance(10_000)
    v.account()
    counts = v.counts()
    answer = v.create()
    refused(answer, 429, -1003, "most self-service accounts (2)")
    # The first account is freed 60 s after its creation (its key's last use): 50 s from now.
    assert answer.headers["Retry-After"] == "50"
    assert v.counts() == counts
    v.env().audit()
    v.clock.advance(50_001)
    assert v.create().status_code == 200  # the first one's key expired: a place is free
    assert v.counts()[0] == counts[0] + 1


def test_per_ip_and_global_limits_refuse_and_create_nothing(venue: VenueFactory) -> None:
    v = venue(
        limits="self_service_per_ip = [2, 3600]\nself_service_global = [3, 3600]",
        rate_limits=True,
    )
    assert v.create("10.0.0.1").status_code == 200
    assert v.create("10.0.0.1").status_code == 200
    counts = v.counts()
    answer = v.create("10.0.0.1")
    refused(answer, 429, -1003, "too many self-service accounts from this address")
    assert int(answer.headers["Retry-After"]) > 3500
    assert v.counts() == counts
    assert v.create("10.0.0.2").status_code == 200  # another address: its own count
    counts = v.counts()
    refused(v.create("10.0.0.3"), 429, -1003, "too many self-service accounts from anyone")
    assert v.counts() == counts
    # Only creation counts against these: the accounts made trade on.
    public = Client(BASE_URL, http=v.http)
    assert public.request("GET", "/spot/open/sapi/v1/time", signed=False).status_code == 200


def test_funds_above_the_deposit_ceiling_create_nothing(venue: VenueFactory) -> None:
    """The demo account's funds (the default) are deposits like any: ``[admin] max_deposit``
    refuses them before anything is made."""
    v = venue(admin='max_deposit = { BTC = "5" }')
    counts = v.counts()
    refused(v.create(), 400, -1102, "above [admin] max_deposit (5 BTC)")
    assert v.counts() == counts


# ------------------------------------------------------------------------ expiry


def test_a_key_unused_too_long_is_refused_then_revoked(venue: VenueFactory) -> None:
    v = venue(sandbox="key_expiry_s = 5\nmax_accounts = 1")
    created, trader = v.account()
    for _ in range(3):  # each signed request is activity: 4 s apart, for 12 s
        v.clock.advance(4_000)
        trader.account()
    # The operator sees when it will expire (behind gateways, as the engine last heard of its
    # use); an operator's key never does.
    keys = {k["apiKey"]: k for k in v.admin.list_keys()["keys"]}
    assert v.clock.now - 4_000 + 5_000 <= keys[created["apiKey"]]["expires"] <= v.clock.now + 5_000
    operators = v.env().trader()
    listed = {k["userId"]: k["expires"] for k in v.admin.list_keys()["keys"]}
    assert listed[operators.user_id] is None  # type: ignore[attr-defined]
    v.clock.advance(5_001)
    answer = trader.request("GET", "/spot/open/sapi/v1/account")
    refused(answer, 401, -2015, "expired")
    refused(trader.request("POST", FAUCET, body={}), 401, -2015, "expired")
    # The scheduler revokes it (gateways and streams let go of it); a place is free again.
    v.tick()
    key = next(k for k in v.admin.list_keys()["keys"] if k["apiKey"] == created["apiKey"])
    assert key["revoked"] == v.clock.now and key["expires"] is None
    refused(trader.request("GET", "/spot/open/sapi/v1/account"), 401, -2015, "invalid API key")
    assert v.create().status_code == 200


@pytest.mark.parametrize("venue", [SERVE], indirect=True)  # (the test gateway relays no stream)
def test_an_expired_key_opens_no_private_stream(venue: VenueFactory) -> None:
    """Streams are authenticated by the engine's hub in either topology (``Hub.confirm``)."""
    v = venue(sandbox="key_expiry_s = 5")
    created, _ = v.account()

    def login() -> dict[str, Any]:
        ts = str(v.clock.now)
        signature = sign(created["secret"], signature_payload(ts, "GET", SPOT_USER, b""))
        with v.http.websocket_connect(SPOT_USER) as ws:
            ws.send_text(json.dumps({"event": "sub", "params": {
                "apiKey": created["apiKey"], "ts": ts, "sign": signature,
            }}))  # fmt: skip
            answer: dict[str, Any] = json.loads(gzip.decompress(ws.receive_bytes()))
            return answer

    first = login()
    assert first["event_rep"] == "subed", first  # a login is activity too
    v.clock.advance(5_000)
    assert login()["event_rep"] == "subed"
    v.clock.advance(5_001)
    assert login()["code"] == -2015


def test_an_operators_key_never_expires(venue: VenueFactory) -> None:
    v = venue(sandbox="key_expiry_s = 5")
    operators = v.env().trader({"USDT": "5"})
    v.clock.advance(60_000)
    v.tick()
    assert balances(operators)["USDT"][0] == "5.00000000"


@pytest.mark.parametrize("venue", [SERVE], indirect=True)
def test_last_use_and_faucet_count_survive_a_restart(venue: VenueFactory, tmp_path: Path) -> None:
    v = venue(sandbox="key_expiry_s = 5\nfaucet_per_day = 1")
    created, trader = v.account()
    trader.futures_transfer("USDT", "1000", "spot", "futures")
    trader.request("POST", FAUCET, body={})
    v.clock.advance(3_000)
    trader.account()  # persisted: a tenth of the expiry has passed since the last write
    v.env().audit()
    cfg = v.exchange.config
    v.exchange.store.close()
    again = make_exchange(tmp_path / "sandbox.db", config=cfg)
    try:
        book = again.selfservice
        assert book.used == {created["apiKey"]: v.clock.now}
        assert book.faucet_count(created["userId"], v.clock.now) == 1
        assert book.users == {created["userId"]}
    finally:
        again.store.close()


# ------------------------------------------------------------------------ off, and documented


def test_off_by_default_the_endpoints_are_unknown_paths(env: Env) -> None:
    assert not env.exchange.config.sandbox.self_service
    unknown = env.http.post(SANDBOX + "/nothing", json={})
    assert unknown.status_code == 404
    for method, path in (("GET", SANDBOX + "/info"), ("POST", ACCOUNTS), ("GET", ACCOUNTS),
                         ("POST", FAUCET), ("POST", RESET)):  # fmt: skip
        answer = env.http.request(method, path, json={} if method == "POST" else None)
        assert answer.status_code == 404, (method, path)
        assert answer.json() == {"code": -1020, "msg": f"unknown path {path}"}
    assert len(env.admin.list_users()["users"]) == 0
    page = env.http.get("/")
    assert page.status_code == 200 and b"data-self-service" not in page.content


def test_the_endpoints_answer_as_documented(venue: VenueFactory) -> None:
    v = venue(sandbox="max_accounts = 1")
    doc = v.http.get("/openapi.json").json()
    sandbox_paths = {p for p in doc["paths"] if p.startswith(SANDBOX)}
    assert sandbox_paths == {SANDBOX + "/info", ACCOUNTS, FAUCET, RESET}
    checker = Checker(doc)
    info = checker.check(v.http.get(SANDBOX + "/info"))
    assert info["selfService"] is True and info["spot"] == DEMO_SPOT
    created = checker.check(v.create())
    checker.check(v.create())  # the cap: 429
    trader = Client(
        BASE_URL, created["apiKey"], created["secret"], http=v.http, clock=ClientClock(v.clock)
    )
    checker.check(trader.request("POST", FAUCET, body={}))
    checker.check(trader.request("POST", RESET, body={}))
    assert b'data-self-service="on"' in v.http.get("/").content
