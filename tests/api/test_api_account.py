"""Account views through HTTP: /account, /openOrders and /myTrades, and self-trade prevention.

Every balance below is computed by hand. BTCUSDT: maker fee 0.0008, taker fee 0.001, each side
pays in the asset it receives; a BUY holds quote at its own limit price and gets back at once
what a better fill price saves.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from support import Env
from tradehall.client import ApiError, Client

SPOT = "/spot/open/sapi/v1"
T0 = 1_700_000_000_000
PLAIN = re.compile(r"^[0-9]+(\.[0-9]+)?$")
ZERO = ("0.00000000", "0.00000000")

TRADE_FIELDS = {
    "symbol",
    "id",
    "bidId",
    "askId",
    "price",
    "qty",
    "time",
    "isBuyer",
    "isMaker",
    "feeCoin",
    "fee",
}
OPEN_FIELDS = {
    "orderId",
    "orderIdString",
    "symbol",
    "price",
    "origQty",
    "executedQty",
    "avgPrice",
    "status",
    "type",
    "side",
    "time",
}


def error_of(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value


def assert_error(exc: ApiError, status: int, code: int) -> None:
    assert (exc.status, exc.code) == (status, code), exc


def balances(client: Client) -> dict[str, tuple[str, str]]:
    data = client.account()
    assert set(data) == {"balances"}
    out = {}
    for entry in data["balances"]:
        assert set(entry) == {"asset", "free", "locked"}
        assert isinstance(entry["free"], str) and isinstance(entry["locked"], str)
        assert PLAIN.match(entry["free"]) and PLAIN.match(entry["locked"])
        out[entry["asset"]] = (entry["free"], entry["locked"])
    assert len(out) == len(data["balances"])
    return out


def check_trade_shape(trade: dict[str, Any]) -> None:
    assert set(trade) == TRADE_FIELDS
    for name in ("id", "bidId", "askId", "time"):
        assert type(trade[name]) is int, name
    for name in ("isBuyer", "isMaker"):
        assert type(trade[name]) is bool, name
    for name in ("symbol", "price", "qty", "feeCoin", "fee"):
        assert isinstance(trade[name], str), name
    for name in ("price", "qty", "fee"):
        assert PLAIN.match(trade[name]), trade[name]


def check_open_shape(order: dict[str, Any]) -> None:
    assert set(order) == OPEN_FIELDS
    for name in OPEN_FIELDS:
        assert isinstance(order[name], str), name
    assert order["orderId"].isdigit() and order["time"].isdigit()


def without_fee(trade: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in trade.items() if k != "fee"}


@pytest.fixture
def alice(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


@pytest.fixture
def bob(env: Env) -> Client:
    return env.trader({"USDT": "10000", "BTC": "1"})


# --------------------------------------------------------------------------- /account


def test_account_lists_every_asset(env: Env) -> None:
    empty = env.trader()
    assert balances(empty) == {"BTC": ZERO, "ETH": ZERO, "USDT": ZERO}
    funded = env.trader({"USDT": "1234.5", "ETH": "0.00000001"})
    env.admin.deposit(funded.user_id, "USDT", "0.5")  # type: ignore[attr-defined]
    assert balances(funded) == {
        "BTC": ZERO,
        "ETH": ("0.00000001", "0.00000000"),
        "USDT": ("1235.00000000", "0.00000000"),
    }


def test_an_empty_tx_id_is_refused_and_moves_nothing(env: Env) -> None:
    """An empty ``txId`` is not taken as absent (which would generate one, so that repeating
    the call would move the funds again): it is refused, on every admin transfer."""
    funded = env.trader({"USDT": "10"})
    user = funded.user_id  # type: ignore[attr-defined]
    before = balances(funded)
    bodies = {
        "/deposit": {"userId": user, "asset": "USDT", "amount": "1"},
        "/withdraw": {"userId": user, "asset": "USDT", "amount": "1"},
        "/system/deposit": {"account": "pool", "asset": "USDT", "amount": "1"},
        "/system/withdraw": {"account": "pool", "asset": "USDT", "amount": "1"},
    }
    for path, body in bodies.items():
        for _ in range(2):
            response = env.admin.request("POST", "/admin/v1" + path, body={**body, "txId": ""})
            assert response.status_code == 400, (path, response.text)
            assert response.json()["code"] == -1102, path
    assert balances(funded) == before
    env.audit()


def test_account_after_holds_fills_and_fees(env: Env, alice: Client, bob: Client) -> None:
    bid = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.02", price="30000")
    assert balances(alice)["USDT"] == ("9400.00000000", "600.00000000")

    # Bob sells 0.015 as taker into alice's bid: 450 USDT at the maker's 30000.
    env.clock.advance(1000)
    first = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.015", price="29000")
    assert first["status"] == "FILLED"
    # Alice (maker buyer): 450 of her hold used; +0.015 BTC less 0.000012 maker fee.
    assert balances(alice) == {
        "BTC": ("1.01498800", "0.00000000"),
        "ETH": ZERO,
        "USDT": ("9400.00000000", "150.00000000"),
    }
    # Bob (taker seller): -0.015 BTC; +450 USDT less 0.45 taker fee.
    assert balances(bob) == {
        "BTC": ("0.98500000", "0.00000000"),
        "ETH": ZERO,
        "USDT": ("10449.55000000", "0.00000000"),
    }

    # Bob rests 0.01 at 31000; alice takes 0.005 of it with a limit of 32000.
    env.clock.advance(1000)
    ask = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="31000")
    assert balances(bob)["BTC"] == ("0.97500000", "0.01000000")
    env.clock.advance(1000)
    second = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.005", price="32000")
    assert second["status"] == "FILLED"
    # Alice held 160 at 32000, paid 155 at 31000: net -155; +0.005 BTC less 0.000005 taker fee.
    assert balances(alice) == {
        "BTC": ("1.01998300", "0.00000000"),
        "ETH": ZERO,
        "USDT": ("9245.00000000", "150.00000000"),
    }
    # Bob: 0.005 of his 0.01 hold consumed; +155 USDT less 0.124 maker fee.
    assert balances(bob) == {
        "BTC": ("0.97500000", "0.00500000"),
        "ETH": ZERO,
        "USDT": ("10604.42600000", "0.00000000"),
    }

    # myTrades from each side.
    mine = alice.my_trades("BTCUSDT")
    theirs = bob.my_trades("BTCUSDT")
    for trade in mine + theirs:
        check_trade_shape(trade)
    t2 = {
        "symbol": "BTCUSDT",
        "id": 2,
        "bidId": int(second["orderId"]),
        "askId": int(ask["orderId"]),
        "price": "31000.00",
        "qty": "0.005000",
        "time": T0 + 3000,
    }
    t1 = {
        "symbol": "BTCUSDT",
        "id": 1,
        "bidId": int(bid["orderId"]),
        "askId": int(first["orderId"]),
        "price": "30000.00",
        "qty": "0.015000",
        "time": T0 + 1000,
    }
    assert [without_fee(t) for t in mine] == [
        {**t2, "isBuyer": True, "isMaker": False, "feeCoin": "BTC"},
        {**t1, "isBuyer": True, "isMaker": True, "feeCoin": "BTC"},
    ]
    assert [Decimal(t["fee"]) for t in mine] == [Decimal("0.000005"), Decimal("0.000012")]
    assert [without_fee(t) for t in theirs] == [
        {**t2, "isBuyer": False, "isMaker": True, "feeCoin": "USDT"},
        {**t1, "isBuyer": False, "isMaker": False, "feeCoin": "USDT"},
    ]
    assert [Decimal(t["fee"]) for t in theirs] == [Decimal("0.124"), Decimal("0.45")]

    # Cancelling the rest of alice's bid frees its 150 USDT.
    alice.cancel_order("BTCUSDT", bid["orderId"])
    assert balances(alice)["USDT"] == ("9395.00000000", "0.00000000")
    env.audit()


def test_account_other_pair_fees(env: Env) -> None:
    a = env.trader({"BTC": "1"})
    b = env.trader({"ETH": "10"})
    a.create_order("ETHBTC", "BUY", "LIMIT", "2", price="0.05")  # holds 0.1 BTC
    b.create_order("ETHBTC", "SELL", "LIMIT", "2", price="0.049")
    # a (maker buyer): pays 0.1 BTC, gets 2 ETH less 0.0016 ETH.
    assert balances(a) == {
        "BTC": ("0.90000000", "0.00000000"),
        "ETH": ("1.99840000", "0.00000000"),
        "USDT": ZERO,
    }
    # b (taker seller): gets 0.1 BTC less 0.0001 BTC.
    assert balances(b) == {
        "BTC": ("0.09990000", "0.00000000"),
        "ETH": ("8.00000000", "0.00000000"),
        "USDT": ZERO,
    }
    trade = b.my_trades("ETHBTC")[0]
    check_trade_shape(trade)
    assert (trade["price"], trade["qty"], trade["feeCoin"]) == ("0.05000", "2.000", "BTC")
    assert Decimal(trade["fee"]) == Decimal("0.0001")
    assert a.my_trades("ETHBTC")[0]["feeCoin"] == "ETH"
    assert a.my_trades("BTCUSDT") == []
    env.audit()


# --------------------------------------------------------------------------- /openOrders


def test_open_orders_newest_first_and_own_only(env: Env, alice: Client, bob: Client) -> None:
    placed = []
    for i, (side, qty, price) in enumerate([("BUY", "0.01", "30000"), ("SELL", "0.02", "40000")]):
        env.clock.advance(10)
        placed.append(alice.create_order("BTCUSDT", side, "LIMIT", qty, price=price))
        assert placed[-1]["transactTime"] == str(T0 + 10 * (i + 1))
    env.clock.advance(10)
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="29000")
    env.clock.advance(10)
    placed.append(alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price="25000.5"))

    orders = alice.open_orders("BTCUSDT")
    for order in orders:
        check_open_shape(order)
    assert orders == [
        {
            "orderId": placed[2]["orderId"],
            "orderIdString": placed[2]["orderId"],
            "symbol": "BTCUSDT",
            "price": "25000.50",
            "origQty": "0.001000",
            "executedQty": "0.000000",
            "avgPrice": "0.00",
            "status": "NEW",
            "type": "LIMIT",
            "side": "BUY",
            "time": str(T0 + 40),
        },
        {
            "orderId": placed[1]["orderId"],
            "orderIdString": placed[1]["orderId"],
            "symbol": "BTCUSDT",
            "price": "40000.00",
            "origQty": "0.020000",
            "executedQty": "0.000000",
            "avgPrice": "0.00",
            "status": "NEW",
            "type": "LIMIT",
            "side": "SELL",
            "time": str(T0 + 20),
        },
        {
            "orderId": placed[0]["orderId"],
            "orderIdString": placed[0]["orderId"],
            "symbol": "BTCUSDT",
            "price": "30000.00",
            "origQty": "0.010000",
            "executedQty": "0.000000",
            "avgPrice": "0.00",
            "status": "NEW",
            "type": "LIMIT",
            "side": "BUY",
            "time": str(T0 + 10),
        },
    ]
    assert alice.open_orders("BTCUSDT", limit=2) == orders[:2]
    assert alice.open_orders("BTCUSDT", limit=1) == orders[:1]
    assert alice.open_orders("btcusdt", limit=1000) == orders
    assert [o["price"] for o in bob.open_orders("BTCUSDT")] == ["29000.00"]
    assert alice.open_orders("ETHUSDT") == []
    env.audit()


def test_open_orders_partial_fill_and_removal(env: Env, alice: Client, bob: Client) -> None:
    order = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.03", price="30000")
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30100")
    (listed,) = alice.open_orders("BTCUSDT")
    assert (listed["status"], listed["executedQty"], listed["avgPrice"], listed["origQty"]) == (
        "PARTIALLY_FILLED",
        "0.010000",
        "30000.00",
        "0.030000",
    )
    bob.create_order("BTCUSDT", "BUY", "LIMIT", "0.02", price="30000")
    assert alice.open_orders("BTCUSDT") == []
    assert alice.get_order("BTCUSDT", order["orderId"])["status"] == "FILLED"
    env.audit()


def test_open_orders_without_symbol_lists_every_pair(env: Env) -> None:
    trader = env.trader({"USDT": "10000", "BTC": "1", "ETH": "10"})
    btc = trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    env.clock.advance(1)
    eth = trader.create_order("ETHUSDT", "SELL", "LIMIT", "1", price="2000")
    env.clock.advance(1)
    cross = trader.create_order("ETHBTC", "SELL", "LIMIT", "1", price="0.06")
    response = trader.request("GET", SPOT + "/openOrders")
    assert response.status_code == 200, response.text
    listed = response.json()
    assert [(o["orderId"], o["symbol"]) for o in listed] == [
        (cross["orderId"], "ETHBTC"),
        (eth["orderId"], "ETHUSDT"),
        (btc["orderId"], "BTCUSDT"),
    ]
    assert [o["price"] for o in listed] == ["0.06000", "2000.00", "30000.00"]
    assert [o["origQty"] for o in listed] == ["1.000", "1.0000", "0.010000"]
    limited = trader.request("GET", SPOT + "/openOrders", params={"limit": 2}).json()
    assert limited == listed[:2]
    env.audit()


def test_open_orders_errors(env: Env, alice: Client) -> None:
    for bad in (0, 1001, -1, "ten"):
        assert_error(error_of(alice.open_orders, "BTCUSDT", limit=bad), 400, -1102)
    assert_error(error_of(alice.open_orders, "NOPE"), 400, -1121)
    assert alice.open_orders("BTCUSDT", limit=1000) == []


# --------------------------------------------------------------------------- /myTrades


def make_trades(env: Env, alice: Client, bob: Client) -> list[int]:
    """Six trades; alice is in trades 1, 3, 5 and 6 (others trade among themselves)."""
    carol = env.trader({"USDT": "10000", "BTC": "1"})
    dave = env.trader({"USDT": "10000", "BTC": "1"})
    plan = [(alice, bob), (carol, dave), (alice, bob), (carol, dave), (bob, alice), (alice, bob)]
    for i, (buyer, seller) in enumerate(plan):
        env.clock.advance(100)
        seller.create_order("BTCUSDT", "SELL", "LIMIT", "0.001", price=str(30000 + i))
        buyer.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price=str(30000 + i))
    return [1, 3, 5, 6]


def test_my_trades_newest_first_and_from_id(env: Env, alice: Client, bob: Client) -> None:
    mine = make_trades(env, alice, bob)
    trades = alice.my_trades("BTCUSDT")
    assert [t["id"] for t in trades] == mine[::-1]
    assert [t["time"] for t in trades] == [T0 + 600, T0 + 500, T0 + 300, T0 + 100]
    # The seller always rests first: in trade 5 alice sold as maker; in the others she bought
    # as taker.
    by_id = {t["id"]: t for t in trades}
    assert (by_id[5]["isBuyer"], by_id[5]["isMaker"], by_id[5]["feeCoin"]) == (False, True, "USDT")
    assert (by_id[6]["isBuyer"], by_id[6]["isMaker"], by_id[6]["feeCoin"]) == (True, False, "BTC")
    # Without fromId: the most recent `limit`.
    assert [t["id"] for t in alice.my_trades("BTCUSDT", limit=2)] == [6, 5]
    # With fromId: the `limit` records with id >= fromId closest to fromId, newest first.
    assert [t["id"] for t in alice.my_trades("BTCUSDT", limit=2, from_id=2)] == [5, 3]
    assert [t["id"] for t in alice.my_trades("BTCUSDT", limit=2, from_id=3)] == [5, 3]
    assert [t["id"] for t in alice.my_trades("BTCUSDT", limit=1, from_id=1)] == [1]
    assert [t["id"] for t in alice.my_trades("BTCUSDT", limit=10, from_id=4)] == [6, 5]
    assert [t["id"] for t in alice.my_trades("BTCUSDT", from_id=0)] == [6, 5, 3, 1]
    assert alice.my_trades("BTCUSDT", from_id=7) == []
    # Paging forward: next page starts after the newest id of this one.
    page = alice.my_trades("BTCUSDT", limit=2, from_id=1)
    assert [t["id"] for t in page] == [3, 1]
    page = alice.my_trades("BTCUSDT", limit=2, from_id=page[0]["id"] + 1)
    assert [t["id"] for t in page] == [6, 5]
    # Bob was in trades 1, 3, 5 and 6 too; carol in 2 and 4.
    assert [t["id"] for t in bob.my_trades("BTCUSDT")] == [6, 5, 3, 1]
    assert alice.my_trades("ETHUSDT") == []
    env.audit()


def test_my_trades_limit_bounds(env: Env, alice: Client, bob: Client) -> None:
    make_trades(env, alice, bob)
    assert len(alice.my_trades("BTCUSDT", limit=1000)) == 4
    assert len(alice.my_trades("BTCUSDT", limit="3")) == 3
    for bad in (0, 1001, -1, "x"):
        assert_error(error_of(alice.my_trades, "BTCUSDT", limit=bad), 400, -1102)
    for bad in (-1, "abc", "1.5"):
        assert_error(error_of(alice.my_trades, "BTCUSDT", from_id=bad), 400, -1102)
    # Above the range: the message names the upper bound (it said "at least 0").
    for bad in ("9223372036854775808", "99999999999999999999"):
        refused = error_of(alice.my_trades, "BTCUSDT", from_id=bad)
        assert_error(refused, 400, -1102)
        assert "at most 9223372036854775807" in refused.msg, refused.msg
    assert_error(error_of(alice.my_trades, "NOPE"), 400, -1121)
    response = alice.request("GET", SPOT + "/myTrades")
    assert (response.status_code, response.json()["code"]) == (400, -1102)
    env.audit()


def test_my_trades_default_limit_is_100(env: Env) -> None:
    maker = env.trader({"BTC": "1"})
    taker = env.trader({"USDT": "100000"})
    for batch in range(11):
        maker.batch_orders(
            "BTCUSDT",
            [
                {
                    "price": str(30000 + batch * 10 + i),
                    "volume": "0.0002",
                    "side": "SELL",
                    "batchType": "LIMIT",
                }
                for i in range(10)
            ],
        )
    assert taker.create_order("BTCUSDT", "BUY", "LIMIT", "0.022", price="30109")["status"] == (
        "FILLED"
    )
    trades = taker.my_trades("BTCUSDT")
    assert len(trades) == 100
    assert [t["id"] for t in trades] == list(range(110, 10, -1))
    assert len(taker.my_trades("BTCUSDT", limit=1000)) == 110
    assert [t["id"] for t in maker.my_trades("BTCUSDT", limit=3, from_id=50)] == [52, 51, 50]
    assert all(t["isMaker"] and not t["isBuyer"] for t in maker.my_trades("BTCUSDT"))
    env.audit()


# --------------------------------------------------------------------------- self-trade prevention


def test_self_trade_prevention_cancels_own_resting_order(
    env: Env, alice: Client, bob: Client
) -> None:
    own = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    env.clock.advance(1)
    other = bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    env.clock.advance(1)
    taker = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.02", price="30000")
    # Her own ask is cancelled, bob's fills; the rest of her bid rests.
    assert (taker["status"], taker["executedQty"]) == ("PARTIALLY_FILLED", "0.010000")
    cancelled = alice.get_order("BTCUSDT", own["orderId"])
    assert (cancelled["status"], cancelled["executedQty"]) == ("CANCELED", "0.000000")
    assert bob.get_order("BTCUSDT", other["orderId"])["status"] == "FILLED"
    trades = alice.my_trades("BTCUSDT")
    assert len(trades) == 1
    (trade,) = trades
    assert (trade["bidId"], trade["askId"], trade["isBuyer"]) == (
        int(taker["orderId"]),
        int(other["orderId"]),
        True,
    )
    assert int(own["orderId"]) not in (trade["bidId"], trade["askId"])
    assert [o["orderId"] for o in alice.open_orders("BTCUSDT")] == [taker["orderId"]]
    assert len(env.public().trades("BTCUSDT")["list"]) == 1
    # BTC: her 0.01 hold released; +0.01 less the 0.00001 taker fee. USDT: 600 held, 300 paid.
    assert balances(alice) == {
        "BTC": ("1.00999000", "0.00000000"),
        "ETH": ZERO,
        "USDT": ("9400.00000000", "300.00000000"),
    }
    env.audit()


def test_self_trade_prevention_with_market_order(env: Env, alice: Client) -> None:
    own = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="30000")
    market = alice.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert (market["status"], market["executedQty"]) == ("CANCELED", "0.000000")
    assert alice.get_order("BTCUSDT", own["orderId"])["status"] == "CANCELED"
    assert alice.my_trades("BTCUSDT") == []
    assert alice.open_orders("BTCUSDT") == []
    assert balances(alice) == {
        "BTC": ("1.00000000", "0.00000000"),
        "ETH": ZERO,
        "USDT": ("10000.00000000", "0.00000000"),
    }
    env.audit()


def test_self_trade_prevention_spares_orders_the_taker_does_not_reach(
    env: Env, alice: Client, bob: Client
) -> None:
    # Bob's ask is first in the queue, alice's own ask behind it at the same price.
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="50000")
    own = alice.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="50000")
    # 100 USDT buys exactly bob's 0.002: the budget is gone before alice's ask is reached.
    market = alice.create_order("BTCUSDT", "BUY", "MARKET", "100")
    assert (market["status"], market["executedQty"]) == ("FILLED", "0.002000")
    assert alice.get_order("BTCUSDT", own["orderId"])["status"] == "NEW"
    # The same with a LIMIT taker whose quantity is used up on bob's order.
    bob.create_order("BTCUSDT", "SELL", "LIMIT", "0.002", price="49000")
    limit = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.002", price="50000")
    assert (limit["status"], limit["executedQty"]) == ("FILLED", "0.002000")
    assert [o["orderId"] for o in alice.open_orders("BTCUSDT")] == [own["orderId"]]
    assert env.public().depth("BTCUSDT")["asks"] == [["50000.00", "0.010000"]]
    env.audit()


def test_unknown_query_parameters_ignored(env: Env, alice: Client) -> None:
    response = alice.request("GET", SPOT + "/account", params={"foo": "bar", "recvWindow": ""})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"balances"}
    response = alice.request(
        "GET", SPOT + "/openOrders", params={"symbol": "BTCUSDT", "limit": "", "x": "1"}
    )
    assert (response.status_code, response.json()) == (200, [])
