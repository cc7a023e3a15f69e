"""Account isolation through HTTP: no account can see, query or cancel another account's
orders, trades, balances or margin positions, whatever ids it sends.

Three traders share a margin-enabled exchange (isolated margin on BTCUSDT and ETHUSDT): alice
(the victim) has open, filled and canceled orders and trades on both pairs, in her spot account
and in her margin accounts (one with a loan); bob is the counterparty of her trades; mallory
(the attacker) has a few orders and trades of her own and sends alice's (and bob's) order ids,
client order ids and trade ids to every signed endpoint, spot and margin, on every pair.

Every attack must answer -2013 (or ``failed`` in batchCancel, or only the caller's own
records), never a 5xx, and leave alice's view (balances, open orders, trades, order states,
margin accounts) exactly as it was. A user's spot account and each of its margin accounts are
different accounts too: ids of one are not reachable through the endpoints of the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, TEST_SECRET_BOX, Env, FakeClock
from tradehall.api.app import create_app
from tradehall.client import AdminClient, ApiError, Client
from tradehall.config import load_config
from tradehall.engine.commands import Deposit
from tradehall.engine.margin import INSURANCE_ACCOUNT, MARGIN_ACCOUNT_BASE, POOL_ACCOUNT
from tradehall.engine.markets import MarginSpec
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore
from tradehall.units import format_units

SPOT = "/spot/open/sapi/v1"
MARGIN = SPOT + "/margin"
EXT = MARGIN + "/tradehall"
PAIRS = ("BTCUSDT", "ETHUSDT")
FEE_ACCOUNT = 0
NO_SUCH_ORDER = -2013
SYSTEM_IDS = (FEE_ACCOUNT, INSURANCE_ACCOUNT, POOL_ACCOUNT)


# --------------------------------------------------------------------------- environment


@pytest.fixture
def menv(tmp_path: Path) -> Iterator[Env]:
    """The default markets with isolated margin on BTCUSDT and ETHUSDT."""
    config = load_config()
    margin = {symbol: MarginSpec(symbol) for symbol in PAIRS}
    markets = dataclasses.replace(config.markets, margin=margin)
    db_path = tmp_path / "isolation.db"
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
class Book:
    """What one account holds: order ids per pair, client order ids, trade ids per pair."""

    orders: dict[str, set[int]] = field(default_factory=lambda: {p: set() for p in PAIRS})
    trades: dict[str, set[int]] = field(default_factory=lambda: {p: set() for p in PAIRS})
    open: dict[str, set[int]] = field(default_factory=lambda: {p: set() for p in PAIRS})

    def all_orders(self) -> set[int]:
        return set().union(*self.orders.values())

    def all_trades(self) -> set[int]:
        return set().union(*self.trades.values())


@dataclass
class World:
    env: Env
    alice: Client
    bob: Client
    mallory: Client
    alice_spot: Book
    alice_margin: Book
    bob_spot: Book
    mallory_spot: Book
    mallory_margin: Book

    def alice_ids(self) -> set[int]:
        return self.alice_spot.all_orders() | self.alice_margin.all_orders()

    def foreign_ids(self) -> list[int]:
        """Every order id mallory must never reach: alice's (spot and margin) and bob's."""
        return sorted(self.alice_ids() | self.bob_spot.all_orders())


def units(amount: int, decimals: int = 8) -> int:
    return amount * int(10**decimals)


def order_id(answer: dict[str, Any]) -> int:
    return int(answer["orderId"])


def place(
    client: Client,
    book: Book,
    symbol: str,
    side: str,
    volume: str,
    price: str,
    *,
    margin: bool = False,
    cid: str | None = None,
) -> int:
    create = client.margin_create_order if margin else client.create_order
    answer = create(symbol, side, "LIMIT", volume, price, client_order_id=cid)
    oid = order_id(answer)
    book.orders[symbol].add(oid)
    if answer["status"] in ("NEW", "PARTIALLY_FILLED"):
        book.open[symbol].add(oid)
    return oid


def cancel(client: Client, book: Book, symbol: str, oid: int, *, margin: bool = False) -> None:
    (client.margin_cancel_order if margin else client.cancel_order)(symbol, oid)
    book.open[symbol].discard(oid)


def transfer(client: Client, symbol: str, asset: str, amount: str, direction: str = "IN") -> Any:
    body = {"symbol": symbol, "asset": asset, "amount": amount, "direction": direction}
    response = client.request("POST", EXT + "/transfer", body=body)
    assert response.status_code == 200, response.text
    return response.json()


def record_trades(client: Client, book: Book, *, margin: bool = False) -> None:
    for symbol in PAIRS:
        trades = (client.margin_my_trades if margin else client.my_trades)(symbol, 1000)
        book.trades[symbol] = {t["id"] for t in trades}


@pytest.fixture
def world(menv: Env) -> World:
    env = menv
    funds = {"USDT": "200000", "BTC": "10", "ETH": "100"}
    alice, bob, mallory = env.trader(funds), env.trader(funds), env.trader(funds)
    ts = env.clock.now
    for asset, amount in (("USDT", units(1_000_000)), ("BTC", units(100))):
        env.exchange.apply(Deposit(ts, POOL_ACCOUNT, asset, amount, f"pool-{asset}"))
    env.exchange.commit_now()
    w = World(env, alice, bob, mallory, Book(), Book(), Book(), Book(), Book())

    # BTCUSDT spot: bob's ask is taken by alice (filled) and by mallory (filled).
    place(bob, w.bob_spot, "BTCUSDT", "SELL", "0.5", "30000")
    place(alice, w.alice_spot, "BTCUSDT", "BUY", "0.2", "30000")
    place(mallory, w.mallory_spot, "BTCUSDT", "BUY", "0.1", "30000")
    place(alice, w.alice_spot, "BTCUSDT", "SELL", "0.1", "31000", cid="cid-a")
    gone = place(alice, w.alice_spot, "BTCUSDT", "BUY", "0.1", "20000", cid="cid-gone")
    cancel(alice, w.alice_spot, "BTCUSDT", gone)
    place(mallory, w.mallory_spot, "BTCUSDT", "BUY", "0.01", "25000", cid="cid-m")
    # ETHUSDT spot: the same client order id "cid-a" on another pair.
    place(bob, w.bob_spot, "ETHUSDT", "SELL", "1", "2000")
    place(alice, w.alice_spot, "ETHUSDT", "BUY", "0.5", "2000")
    place(alice, w.alice_spot, "ETHUSDT", "BUY", "1", "1500", cid="cid-a")
    gone = place(alice, w.alice_spot, "ETHUSDT", "BUY", "1", "1400")
    cancel(alice, w.alice_spot, "ETHUSDT", gone)

    # Alice's margin accounts: a fill against bob, an open order with "cid-a" again, a
    # canceled one, and a resting BUY that needed a loan (so the account has a debt).
    transfer(alice, "BTCUSDT", "USDT", "20000")
    transfer(alice, "BTCUSDT", "BTC", "1")
    place(alice, w.alice_margin, "BTCUSDT", "BUY", "0.1", "30000", margin=True)
    place(alice, w.alice_margin, "BTCUSDT", "SELL", "0.1", "32000", margin=True, cid="cid-a")
    gone = place(alice, w.alice_margin, "BTCUSDT", "BUY", "0.01", "21000", margin=True)
    cancel(alice, w.alice_margin, "BTCUSDT", gone, margin=True)
    place(alice, w.alice_margin, "BTCUSDT", "BUY", "1", "20000", margin=True, cid="loan")
    transfer(alice, "ETHUSDT", "USDT", "1000")
    place(alice, w.alice_margin, "ETHUSDT", "BUY", "0.1", "1000", margin=True, cid="cid-a")

    # Mallory's own margin account on BTCUSDT only (none on ETHUSDT), with a fill of its own.
    transfer(mallory, "BTCUSDT", "USDT", "1000")
    place(mallory, w.mallory_margin, "BTCUSDT", "BUY", "0.01", "30000", margin=True)
    place(mallory, w.mallory_margin, "BTCUSDT", "BUY", "0.01", "25000", margin=True, cid="cid-m")

    for client, book, margin in (
        (alice, w.alice_spot, False),
        (alice, w.alice_margin, True),
        (bob, w.bob_spot, False),
        (mallory, w.mallory_spot, False),
        (mallory, w.mallory_margin, True),
    ):
        record_trades(client, book, margin=margin)

    # The world is what the tests rely on.
    assert w.alice_spot.trades["BTCUSDT"] and w.alice_spot.trades["ETHUSDT"]
    assert w.alice_margin.trades["BTCUSDT"] and w.mallory_spot.trades["BTCUSDT"]
    assert w.mallory_margin.trades["BTCUSDT"]
    account = env.exchange.engine.margin.account_of(alice.user_id, "BTCUSDT")  # type: ignore[attr-defined]
    assert account is not None and account.has_debt()
    assert not w.alice_ids() & w.mallory_spot.all_orders()
    return w


# --------------------------------------------------------------------------- observation


def ok(response: httpx2.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def error(response: httpx2.Response) -> int:
    """The catalogue code of an error answer (never a 5xx, always {code, msg})."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"code", "msg"} and body["msg"], body
    code: int = body["code"]
    return code


def view(w: World, client: Client, spot: Book, margin: Book) -> dict[str, Any]:
    """Everything an account's owner can see of it through the API."""
    seen: dict[str, Any] = {
        "account": ok(client.request("GET", SPOT + "/account")),
        "open": ok(client.request("GET", SPOT + "/openOrders", params={"limit": 1000})),
    }
    for symbol in PAIRS:
        query = {"symbol": symbol, "limit": 1000}
        seen[f"trades {symbol}"] = ok(client.request("GET", SPOT + "/myTrades", params=query))
        seen[f"open {symbol}"] = ok(client.request("GET", SPOT + "/openOrders", params=query))
        seen[f"m-trades {symbol}"] = ok(client.request("GET", MARGIN + "/myTrades", params=query))
        seen[f"m-open {symbol}"] = ok(client.request("GET", MARGIN + "/openOrders", params=query))
        m_account = client.request("GET", EXT + "/account", params={"symbol": symbol})
        seen[f"m-account {symbol}"] = (m_account.status_code, m_account.json())
        for prefix, book in ((SPOT, spot), (MARGIN, margin)):
            for oid in sorted(book.orders[symbol]):
                query = {"symbol": symbol, "orderId": oid}
                seen[f"{prefix} {oid}"] = ok(client.request("GET", prefix + "/order", params=query))
    return seen


def ledger_of(w: World, user: int) -> dict[Any, Any]:
    """Engine balances of a user's spot account and margin accounts, and their debts."""
    engine = w.env.exchange.engine
    found: dict[Any, Any] = {"spot": engine.balances(user)}
    for symbol in PAIRS:
        account = engine.margin.account_of(user, symbol)
        if account is not None:
            debts = sorted((a, tuple(d)) for a, d in account.debts.items())
            found[symbol] = (account.id, engine.balances(account.id), debts)
    return found


def system_balances(w: World) -> dict[int, Any]:
    engine = w.env.exchange.engine
    return {account: engine.balances(account) for account in SYSTEM_IDS}


class Guard:
    """Snapshots of alice (through the API and in the engine) and of the system accounts,
    compared when the attack is over; ``frozen`` also demands the whole engine unchanged."""

    def __init__(self, w: World, *, frozen: bool) -> None:
        self.w = w
        self.frozen = frozen
        self.alice = view(w, w.alice, w.alice_spot, w.alice_margin)
        self.ledger = ledger_of(w, self.user(w.alice))
        self.system = system_balances(w)
        self.hash = w.env.exchange.engine.state_hash()

    @staticmethod
    def user(client: Client) -> int:
        user: int = client.user_id  # type: ignore[attr-defined]
        return user

    def check(self) -> None:
        w = self.w
        assert view(w, w.alice, w.alice_spot, w.alice_margin) == self.alice
        assert ledger_of(w, self.user(w.alice)) == self.ledger
        if self.frozen:
            assert system_balances(w) == self.system
            assert w.env.exchange.engine.state_hash() == self.hash
        w.env.audit()


def id_forms(oid: int) -> list[Any]:
    """Ways of writing one id that the API reads as that id (or refuses as malformed)."""
    return [oid, str(oid), f"0{oid}", f"{oid}.0", f" {oid}", f"{oid} ", f"+{oid}"]


# --------------------------------------------------------------------------- GET /order


@pytest.mark.parametrize("prefix", [SPOT, MARGIN])
def test_get_order_never_answers_another_accounts_order(world: World, prefix: str) -> None:
    w = world
    guard = Guard(w, frozen=True)
    for symbol in PAIRS:
        for oid in w.foreign_ids():
            query = {"symbol": symbol, "orderId": oid}
            response = w.mallory.request("GET", prefix + "/order", params=query)
            assert error(response) == NO_SUCH_ORDER, (symbol, oid, response.text)
        # Other spellings of one of alice's ids: -2013 or malformed (-1102), never her order.
        for form in id_forms(max(w.alice_spot.open[symbol])):
            query = {"symbol": symbol, "orderId": form}
            response = w.mallory.request("GET", prefix + "/order", params=query)
            assert error(response) in (NO_SUCH_ORDER, -1102), (form, response.text)
        # Alice's client order ids (open, ended, on every account of hers): unknown here.
        for cid in ("cid-a", "cid-gone", "loan"):
            query = {"symbol": symbol, "newClientOrderId": cid}
            response = w.mallory.request("GET", prefix + "/order", params=query)
            assert error(response) == NO_SUCH_ORDER, (symbol, cid, response.text)
        # An id of alice's with mallory's own client order id next to it: the id decides.
        alice_open = max(w.alice_spot.open[symbol] | w.alice_margin.open[symbol])
        query = {"symbol": symbol, "orderId": alice_open, "newClientOrderId": "cid-m"}
        response = w.mallory.request("GET", prefix + "/order", params=query)
        assert error(response) == NO_SUCH_ORDER
    # Ids far beyond any issued: -2013 as well.
    for oid in (2**63 - 1, w.env.exchange.engine.spot.next_order_id):
        query = {"symbol": "BTCUSDT", "orderId": oid}
        assert error(w.mallory.request("GET", prefix + "/order", params=query)) == NO_SUCH_ORDER
    # Mallory's own order is found, by id and by client order id: the endpoint works.
    own = w.mallory_spot if prefix == SPOT else w.mallory_margin
    (mine,) = own.open["BTCUSDT"]
    by_cid = {"symbol": "BTCUSDT", "newClientOrderId": "cid-m"}
    assert order_id(ok(w.mallory.request("GET", prefix + "/order", params=by_cid))) == mine
    guard.check()


# --------------------------------------------------------------------------- cancels


@pytest.mark.parametrize("prefix", [SPOT, MARGIN])
def test_cancel_never_touches_another_accounts_order(world: World, prefix: str) -> None:
    """-2013 for every foreign id, open or ended (never -1145, which would tell that the
    order exists and has ended), and the order stays as it was."""
    w = world
    guard = Guard(w, frozen=True)
    for symbol in PAIRS:
        for oid in w.foreign_ids():
            body = {"symbol": symbol, "orderId": str(oid)}
            response = w.mallory.request("POST", prefix + "/cancel", body=body)
            assert error(response) == NO_SUCH_ORDER, (symbol, oid, response.text)
        alice_open = max(w.alice_spot.open[symbol])
        for form in [*id_forms(alice_open), alice_open * 1.0]:
            body = {"symbol": symbol, "orderId": form}
            response = w.mallory.request("POST", prefix + "/cancel", body=body)
            assert error(response) in (NO_SUCH_ORDER, -1102), (form, response.text)
        for cid in ("cid-a", "cid-gone", "loan"):
            body = {"symbol": symbol, "newClientOrderId": cid}
            response = w.mallory.request("POST", prefix + "/cancel", body=body)
            assert error(response) == NO_SUCH_ORDER, (symbol, cid, response.text)
        body = {"symbol": symbol, "orderId": str(alice_open), "newClientOrderId": "cid-m"}
        assert error(w.mallory.request("POST", prefix + "/cancel", body=body)) == NO_SUCH_ORDER
    guard.check()


def test_batch_cancel_lists_every_foreign_id_as_failed(world: World) -> None:
    w = world
    guard = Guard(w, frozen=True)
    foreign = w.foreign_ids()
    for symbol in PAIRS:
        for start in range(0, len(foreign), 10):
            chunk = foreign[start : start + 10]
            for ids in (chunk, [str(i) for i in chunk]):
                body = {"symbol": symbol, "orderIds": ids}
                answer = ok(w.mallory.request("POST", SPOT + "/batchCancel", body=body))
                assert answer == {"success": [], "failed": chunk}, (symbol, answer)
    guard.check()
    # Mixed with one of mallory's own ids: only hers is canceled.
    (mine,) = w.mallory_spot.open["BTCUSDT"]
    alice_open = sorted(w.alice_spot.open["BTCUSDT"] | w.alice_margin.open["BTCUSDT"])
    body = {"symbol": "BTCUSDT", "orderIds": [*alice_open, mine]}
    answer = ok(w.mallory.request("POST", SPOT + "/batchCancel", body=body))
    assert answer == {"success": [mine], "failed": alice_open}
    w.mallory_spot.open["BTCUSDT"].discard(mine)
    guard.frozen = False
    guard.check()


# --------------------------------------------------------------------------- lists


def assert_only(orders: list[dict[str, Any]], allowed: set[int]) -> None:
    ids = {order_id(o) for o in orders}
    assert ids <= allowed, ids - allowed


def test_open_orders_list_only_the_callers_own(world: World) -> None:
    w = world
    guard = Guard(w, frozen=True)
    mallory_open = set().union(*w.mallory_spot.open.values())
    mallory_margin_open = set().union(*w.mallory_margin.open.values())
    # Parameters naming another account are unknown parameters: ignored.
    extras: list[dict[str, Any]] = [
        {},
        {"userId": Guard.user(w.alice)},
        {"uid": Guard.user(w.alice), "accountId": MARGIN_ACCOUNT_BASE},
        {"userId": FEE_ACCOUNT, "account": POOL_ACCOUNT},
    ]
    for extra in extras:
        every = ok(w.mallory.request("GET", SPOT + "/openOrders", params={**extra, "limit": 1000}))
        assert {order_id(o) for o in every} == mallory_open
        for symbol in PAIRS:
            query = {**extra, "symbol": symbol, "limit": 1000}
            spot = ok(w.mallory.request("GET", SPOT + "/openOrders", params=query))
            assert {order_id(o) for o in spot} == w.mallory_spot.open[symbol]
            margin = ok(w.mallory.request("GET", MARGIN + "/openOrders", params=query))
            assert {order_id(o) for o in margin} == w.mallory_margin.open[symbol]
            assert_only(spot + margin, mallory_open | mallory_margin_open)
    guard.check()


@pytest.mark.parametrize("prefix", [SPOT, MARGIN])
def test_my_trades_list_only_the_callers_own(world: World, prefix: str) -> None:
    """With and without fromId, whatever trade id it names (alice's, bob's, 0, huge)."""
    w = world
    guard = Guard(w, frozen=True)
    own = w.mallory_spot if prefix == SPOT else w.mallory_margin
    foreign = sorted(
        (w.alice_spot.all_trades() | w.alice_margin.all_trades() | w.bob_spot.all_trades())
        - own.all_trades()
    )
    for symbol in PAIRS:
        mine = own.trades[symbol]
        base = {"symbol": symbol, "limit": 1000}
        every = ok(w.mallory.request("GET", prefix + "/myTrades", params=base))
        assert {t["id"] for t in every} == mine
        for from_id in [*foreign, 0, 1, 2**63 - 1]:
            query = {**base, "fromId": from_id}
            page = ok(w.mallory.request("GET", prefix + "/myTrades", params=query))
            assert {t["id"] for t in page} == {i for i in mine if i >= from_id}, from_id
        for extra in ({"userId": Guard.user(w.alice)}, {"accountId": MARGIN_ACCOUNT_BASE}):
            page = ok(w.mallory.request("GET", prefix + "/myTrades", params={**base, **extra}))
            assert page == every
    guard.check()


def test_account_shows_only_the_callers_balances(world: World) -> None:
    w = world
    guard = Guard(w, frozen=True)
    own = ok(w.mallory.request("GET", SPOT + "/account"))
    alice = ok(w.alice.request("GET", SPOT + "/account"))
    assert own != alice
    engine = w.env.exchange.engine
    held = engine.balances(Guard.user(w.mallory))
    shown = {b["asset"]: b for b in own["balances"]}
    assert set(shown) == set(held)
    for who in [Guard.user(w.alice), Guard.user(w.bob), *SYSTEM_IDS, MARGIN_ACCOUNT_BASE]:
        for name in ("userId", "uid", "accountId", "account"):
            response = w.mallory.request("GET", SPOT + "/account", params={name: who})
            assert ok(response) == own, (name, who)
    # Margin account views: mallory's own, whatever the request names; none on ETHUSDT.
    mine = ok(w.mallory.request("GET", EXT + "/account", params={"symbol": "BTCUSDT"}))
    assert mine.get("userId", Guard.user(w.mallory)) == Guard.user(w.mallory)
    for extra in ({"userId": Guard.user(w.alice)}, {"accountId": MARGIN_ACCOUNT_BASE}):
        query = {"symbol": "BTCUSDT", **extra}
        assert ok(w.mallory.request("GET", EXT + "/account", params=query)) == mine
        query = {"symbol": "ETHUSDT", **extra}
        assert error(w.mallory.request("GET", EXT + "/account", params=query)) == -2017
    guard.check()


# --------------------------------------------------------------------------- creating orders


def test_client_order_ids_are_per_account(world: World) -> None:
    """Mallory may use alice's client order id: it names mallory's order in mallory's account
    only; alice's order of that id is neither found, refused as a duplicate, nor canceled."""
    w = world
    guard = Guard(w, frozen=False)
    alice_cid = {
        prefix: {
            symbol: ok(
                w.alice.request(
                    "GET", prefix + "/order", params={"symbol": symbol, "newClientOrderId": "cid-a"}
                )
            )
            for symbol in PAIRS
        }
        for prefix in (SPOT, MARGIN)
    }
    created = {}
    spot = w.mallory.create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.001", "10000", client_order_id="cid-a"
    )
    created[SPOT] = order_id(spot)
    margin = w.mallory.margin_create_order(
        "BTCUSDT", "BUY", "LIMIT", "0.001", "10000", client_order_id="cid-a"
    )
    created[MARGIN] = order_id(margin)
    for prefix, oid in created.items():
        query = {"symbol": "BTCUSDT", "newClientOrderId": "cid-a"}
        found = ok(w.mallory.request("GET", prefix + "/order", params=query))
        assert order_id(found) == oid and found["clientOrderId"] == "cid-a"
        assert oid not in w.alice_ids()
    # A batch of mallory's carrying alice's ids and naming alice's accounts: mallory's orders.
    alice_user = Guard.user(w.alice)
    element = {"price": "10000", "volume": "0.001", "side": "BUY", "batchType": "LIMIT"}
    foreign = {"orderId": str(max(w.alice_spot.open["BTCUSDT"])), "userId": alice_user}
    body = {
        "symbol": "BTCUSDT",
        "userId": alice_user,
        "accountId": MARGIN_ACCOUNT_BASE,
        "orders": [element, {**element, **foreign}],
    }
    ids = ok(w.mallory.request("POST", SPOT + "/batchOrders", body=body))["ids"]
    orders = w.env.exchange.engine.spot.books["BTCUSDT"].orders
    for oid in [*ids, created[SPOT]]:
        assert orders[oid].account == Guard.user(w.mallory)
    assert orders[created[MARGIN]].account >= MARGIN_ACCOUNT_BASE
    assert orders[created[MARGIN]].account != ledger_of(w, alice_user)["BTCUSDT"][0]
    # Mallory cancels "cid-a" on both endpoints: her orders end, alice's stay open.
    for prefix, oid in created.items():
        body = {"symbol": "BTCUSDT", "newClientOrderId": "cid-a"}
        answer = ok(w.mallory.request("POST", prefix + "/cancel", body=body))
        assert order_id(answer) == oid and answer["status"] == "CANCELED"
        assert error(w.mallory.request("POST", prefix + "/cancel", body=body)) in (
            NO_SUCH_ORDER,
            -1145,
        )
    for prefix in (SPOT, MARGIN):
        for symbol in PAIRS:
            query = {"symbol": symbol, "newClientOrderId": "cid-a"}
            again = ok(w.alice.request("GET", prefix + "/order", params=query))
            assert again == alice_cid[prefix][symbol]
            assert again["status"] == "NEW"
    guard.check()


# --------------------------------------------------------------------------- spot vs margin


def test_spot_and_margin_accounts_of_one_user_are_separate(world: World) -> None:
    """Alice's margin order ids are not reachable through her spot endpoints and vice versa,
    and neither through the endpoints of another pair."""
    w = world
    guard = Guard(w, frozen=True)
    a = w.alice
    for symbol in PAIRS:
        other = next(p for p in PAIRS if p != symbol)
        wrong = {
            SPOT: w.alice_margin.all_orders() | w.alice_spot.orders[other],
            MARGIN: w.alice_spot.all_orders() | w.alice_margin.orders[other],
        }
        for prefix, ids in wrong.items():
            for oid in sorted(ids):
                query = {"symbol": symbol, "orderId": oid}
                response = a.request("GET", prefix + "/order", params=query)
                assert error(response) == NO_SUCH_ORDER, (prefix, symbol, oid)
                body = {"symbol": symbol, "orderId": str(oid)}
                response = a.request("POST", prefix + "/cancel", body=body)
                assert error(response) == NO_SUCH_ORDER, (prefix, symbol, oid)
        spot_ids = sorted(wrong[SPOT])
        for start in range(0, len(spot_ids), 10):
            batch = {"symbol": symbol, "orderIds": spot_ids[start : start + 10]}
            answer = ok(a.request("POST", SPOT + "/batchCancel", body=batch))
            assert answer == {"success": [], "failed": spot_ids[start : start + 10]}
        # "cid-a" names a different order in each account.
        query = {"symbol": symbol, "newClientOrderId": "cid-a"}
        spot_order = order_id(ok(a.request("GET", SPOT + "/order", params=query)))
        margin_order = order_id(ok(a.request("GET", MARGIN + "/order", params=query)))
        assert spot_order in w.alice_spot.open[symbol]
        assert margin_order in w.alice_margin.open[symbol]
        # Lists: each account's own records only.
        query = {"symbol": symbol, "limit": 1000}
        spot_open = ok(a.request("GET", SPOT + "/openOrders", params=query))
        assert {order_id(o) for o in spot_open} == w.alice_spot.open[symbol]
        margin_open = ok(a.request("GET", MARGIN + "/openOrders", params=query))
        assert {order_id(o) for o in margin_open} == w.alice_margin.open[symbol]
        spot_trades = ok(a.request("GET", SPOT + "/myTrades", params=query))
        assert {t["id"] for t in spot_trades} == w.alice_spot.trades[symbol]
        margin_trades = ok(a.request("GET", MARGIN + "/myTrades", params=query))
        assert {t["id"] for t in margin_trades} == w.alice_margin.trades[symbol]
        for from_id in sorted(w.alice_margin.all_trades() | w.alice_spot.trades[other]):
            page = ok(a.request("GET", SPOT + "/myTrades", params={**query, "fromId": from_id}))
            assert {t["id"] for t in page} == {
                i for i in w.alice_spot.trades[symbol] if i >= from_id
            }
    every = ok(a.request("GET", SPOT + "/openOrders", params={"limit": 1000}))
    assert {order_id(o) for o in every} == set().union(*w.alice_spot.open.values())
    # The spot balances are the spot account's, the margin views the margin accounts'.
    engine = w.env.exchange.engine
    spot_balances = {
        b["asset"]: (b["free"], b["locked"])
        for b in ok(a.request("GET", SPOT + "/account"))["balances"]
    }
    assert spot_balances == {
        asset: (format_units(free, 8), format_units(locked, 8))
        for asset, (free, locked) in engine.balances(Guard.user(a)).items()
    }
    for symbol in PAIRS:
        found = engine.margin.account_of(Guard.user(a), symbol)
        assert found is not None
        shown = ok(a.request("GET", EXT + "/account", params={"symbol": symbol}))
        held = engine.balances(found.id)
        assert {e["asset"] for e in shown["assets"]} == {symbol[:3], "USDT"}
        for entry in shown["assets"]:
            free, locked = held[entry["asset"]]
            assert (entry["free"], entry["locked"]) == (
                format_units(free, 8),
                format_units(locked, 8),
            )
    guard.check()


# --------------------------------------------------------------------------- margin extensions


def test_margin_transfer_and_repay_act_only_on_the_callers_accounts(world: World) -> None:
    w = world
    guard = Guard(w, frozen=False)
    alice_user = Guard.user(w.alice)
    alice_btc_account = ledger_of(w, alice_user)["BTCUSDT"][0]
    naming = {
        "userId": alice_user,
        "uid": alice_user,
        "accountId": alice_btc_account,
        "account": alice_btc_account,
    }
    before = ledger_of(w, Guard.user(w.mallory))
    body = {"symbol": "BTCUSDT", "asset": "USDT", "amount": "10", "direction": "IN", **naming}
    view_in = ok(w.mallory.request("POST", EXT + "/transfer", body=body))
    assert view_in.get("userId", Guard.user(w.mallory)) == Guard.user(w.mallory)
    after = ledger_of(w, Guard.user(w.mallory))
    assert after["BTCUSDT"][0] == before["BTCUSDT"][0] != alice_btc_account
    usdt_before = before["BTCUSDT"][1]["USDT"][0]
    assert after["BTCUSDT"][1]["USDT"][0] == usdt_before + 10 * 10**8
    # Out: only what mallory's margin account holds (alice's holds far more).
    body = {**body, "direction": "OUT", "amount": "15000"}
    assert error(w.mallory.request("POST", EXT + "/transfer", body=body)) == -2017
    body = {**body, "amount": "10"}
    ok(w.mallory.request("POST", EXT + "/transfer", body=body))
    assert ledger_of(w, Guard.user(w.mallory)) == before
    # Orders in a margin account mallory does not have (alice has one on ETHUSDT): refused,
    # never placed in alice's.
    order = {"symbol": "ETHUSDT", "side": "BUY", "type": "LIMIT", "volume": "0.1", "price": "900"}
    for extra in ({}, naming):
        response = w.mallory.request("POST", MARGIN + "/order", body={**order, **extra})
        assert error(response) == -2017
    # Out of a margin account mallory does not have.
    body = {**body, "symbol": "ETHUSDT"}
    assert error(w.mallory.request("POST", EXT + "/transfer", body=body)) == -2017
    # Repay: mallory has no debt (alice has one): nothing repaid, alice's debt untouched.
    body = {"symbol": "BTCUSDT", "asset": "USDT", "amount": "100", **naming}
    response = w.mallory.request("POST", EXT + "/repay", body=body)
    if response.status_code == 200:
        assert response.json()["repaid"] in ("0", "0.00000000")
    else:
        assert error(response) in (-1102, -2017)
    body = {**body, "symbol": "ETHUSDT"}
    assert error(w.mallory.request("POST", EXT + "/repay", body=body)) in (-1102, -2017)
    assert ledger_of(w, Guard.user(w.mallory)) == before
    guard.check()


# --------------------------------------------------------------------------- system accounts


SIGNED_READS = [
    (SPOT, "/order", {"symbol": "BTCUSDT", "orderId": "1"}),
    (SPOT, "/openOrders", {"symbol": "BTCUSDT"}),
    (SPOT, "/myTrades", {"symbol": "BTCUSDT"}),
    (SPOT, "/account", {}),
    (MARGIN, "/order", {"symbol": "BTCUSDT", "orderId": "1"}),
    (MARGIN, "/openOrders", {"symbol": "BTCUSDT"}),
    (MARGIN, "/myTrades", {"symbol": "BTCUSDT"}),
    (EXT, "/account", {"symbol": "BTCUSDT"}),
]


def test_fee_and_system_accounts_are_unreachable(world: World) -> None:
    """No parameter selects an account: naming the fee account (user 0), the insurance fund,
    the lending pool or a margin account id changes nothing and shows only the caller's own
    records. No API key can be made for them either."""
    w = world
    guard = Guard(w, frozen=True)
    plain = {
        prefix + path: w.mallory.request("GET", prefix + path, params=query)
        for prefix, path, query in SIGNED_READS
    }
    for who in [*SYSTEM_IDS, MARGIN_ACCOUNT_BASE, MARGIN_ACCOUNT_BASE + 1]:
        for prefix, path, query in SIGNED_READS:
            for name in ("userId", "uid", "accountId", "account", "user"):
                response = w.mallory.request("GET", prefix + path, params={**query, name: who})
                expected = plain[prefix + path]
                assert response.status_code == expected.status_code, (path, name, who)
                assert response.json() == expected.json(), (path, name, who)
        # Writes naming them fail as they would without the name, and change nothing.
        naming = {"userId": who, "accountId": who}
        body = {"symbol": "BTCUSDT", "orderId": "1", **naming}
        assert error(w.mallory.request("POST", SPOT + "/cancel", body=body)) == NO_SUCH_ORDER
        assert error(w.mallory.request("POST", MARGIN + "/cancel", body=body)) == NO_SUCH_ORDER
        body = {"symbol": "BTCUSDT", "orderIds": [1, 2, 3], **naming}
        answer = ok(w.mallory.request("POST", SPOT + "/batchCancel", body=body))
        assert answer["success"] == []
        body = {"symbol": "BTCUSDT", "asset": "USDT", "amount": "1000000000", "direction": "OUT"}
        assert error(w.mallory.request("POST", EXT + "/transfer", body={**body, **naming})) in (
            -1102,
            -2017,
        )
    # The exchange's accounts have no user, so no key.
    for who in SYSTEM_IDS:
        with pytest.raises(ApiError) as refused:
            w.env.admin.create_key(who)
        assert 400 <= refused.value.status < 500
    guard.check()
