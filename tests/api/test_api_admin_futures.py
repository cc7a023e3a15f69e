"""The admin API's futures routes (POST /admin/v1/futures/transfer and /futures/index-price)
and the contracts in GET /admin/v1/markets: answers, refusals with their codes, and the same
results as the operations the offline CLI runs."""

from __future__ import annotations

from typing import Any

import pytest

from support import Env
from tradehall import operations as ops
from tradehall.api.openapi import OPERATIONS
from tradehall.client import ApiError
from tradehall.engine.commands import FuturesPlace, SetIndexPrice
from tradehall.engine.futures_model import futures_account

ADMIN = "/admin/v1"
ZERO = "0.00000000"


def refused(response: Any, code: int, status: int = 400) -> str:
    assert (response.status_code, response.json()["code"]) == (status, code), response.text
    assert set(response.json()) == {"code", "msg"}
    return str(response.json()["msg"])


def funded_user(env: Env, **funds: str) -> int:
    user: int = env.admin.create_user()["id"]
    for asset, amount in funds.items():
        env.admin.deposit(user, asset, amount)
    return user


def spot(env: Env, user: int) -> dict[str, str]:
    return {b["asset"]: b["free"] for b in env.admin.balances(user)["balances"]}


def test_futures_transfer_both_ways(env: Env) -> None:
    user = funded_user(env, USDT="1000", BTC="2")
    moved = env.admin.futures_transfer(user, "usdt", "250.5", "spot", "futures")
    assert moved == {
        "userId": user,
        "account": "futures",
        "asset": "USDT",
        "free": "250.50000000",
        "locked": ZERO,
    }
    assert env.exchange.engine.ledger.get(futures_account(user), "USDT") == (25_050_000_000, 0)
    assert env.admin.futures_transfer(user, "BTC", 1, "spot", "futures")["free"] == "1.00000000"
    back = env.admin.futures_transfer(user, "USDT", "50.5", "Futures", "SPOT")
    assert back["free"] == "200.00000000"
    assert spot(env, user) == {"BTC": "1.00000000", "ETH": ZERO, "USDT": "800.00000000"}
    env.audit()


def test_futures_transfer_refusals(env: Env) -> None:
    user = funded_user(env, USDT="100")
    env.admin.futures_transfer(user, "USDT", "40", "spot", "futures")
    base = {"userId": user, "asset": "USDT", "amount": "1", "from": "spot", "to": "futures"}
    for change, code in (
        ({"amount": "60.00000001"}, -2017),  # more than spot holds
        ({"from": "futures", "to": "spot", "amount": "40.00000001"}, -2017),
        ({"from": "spot", "to": "spot"}, -1102),
        ({"from": "margin", "to": "futures"}, -1102),
        ({"to": "margin"}, -1102),
        ({"asset": "ETH"}, -1102),  # not a margin coin
        ({"asset": "NOPE"}, -1102),
        ({"amount": "0"}, -1102),
        ({"amount": "-1"}, -1102),
        ({"amount": "0.000000001"}, -1111),
        ({"userId": 999}, -1102),
        ({"userId": "x"}, -1102),
        ({"from": None}, -1102),
        ({"asset": None}, -1102),
        ({"amount": True}, -1102),
    ):
        body = {**base, **change}
        refused(env.admin.request("POST", ADMIN + "/futures/transfer", body=body), code)
    msg = refused(
        env.admin.request("POST", ADMIN + "/futures/transfer", body={**base, "asset": "ETH"}),
        -1102,
    )
    assert "margin coin" in msg
    # Nothing moved.
    assert env.exchange.engine.ledger.get(futures_account(user), "USDT") == (40 * 10**8, 0)
    assert spot(env, user)["USDT"] == "60.00000000"
    env.audit()


def test_set_index_price(env: Env) -> None:
    answer = env.admin.set_index_price("e-btc-usd", "30000.5")
    assert answer == {"contract": "E-BTC-USD", "indexPrice": "30000.5", "indexSource": "BTCUSDT"}
    assert env.admin.set_index_price("E-ETH-USDT", 2000)["indexPrice"] == "2000.00"
    for body, code in (
        ({"contract": "E-DOGE-USDT", "price": "1"}, -1121),
        ({"contract": "BTCUSDT", "price": "1"}, -1121),
        ({"contract": "E-BTC-USDT", "price": "30000.05"}, -1111),
        ({"contract": "E-BTC-USDT", "price": "0"}, -1102),
        ({"contract": "E-BTC-USDT", "price": "-5"}, -1102),
        ({"contract": "E-BTC-USDT", "price": "abc"}, -1102),
        ({"contract": "E-BTC-USDT"}, -1102),
        ({"price": "1"}, -1102),
    ):
        refused(env.admin.request("POST", ADMIN + "/futures/index-price", body=body), code)
    with pytest.raises(ApiError) as info:
        env.admin.set_index_price("E-BTC-USDT", "0.01")
    assert info.value.code == -1111


def test_an_empty_scope_is_refused_not_widened(env: Env) -> None:
    """Optional names whose absence widens an action that cannot be undone (every contract's
    funding, the whole index instead of one feed): an empty one is refused, not taken as
    absent, as the family's other empty optional fields are (an unset variable in a script)."""
    before = env.admin.index_sources("E-BTC-USDT")
    for path, body in (
        ("/futures/funding-now", {"contract": ""}),
        ("/futures/funding-now", {"contract": " "}),
        ("/futures/index-price", {"contract": "E-BTC-USDT", "price": "30100", "feed": ""}),
    ):
        refused(env.admin.request("POST", ADMIN + path, body=body), -1102)
    with pytest.raises(ApiError) as info:
        env.admin.set_index_price("E-BTC-USDT", "30100", feed="")
    assert info.value.code == -1102
    assert env.admin.index_sources("E-BTC-USDT") == before


def test_markets_list_contracts_as_the_cli_does(env: Env) -> None:
    markets = env.admin.markets()
    assert markets == ops.markets(env.exchange)
    contracts = {c["symbol"]: c for c in markets["contracts"]}
    assert list(contracts) == ["E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"]
    eth = contracts["E-ETH-USDT"]
    assert (eth["id"], eth["side"], eth["marginCoin"], eth["multiplier"]) == (
        2,
        "linear",
        "USDT",
        "0.01",
    )
    assert (eth["pricePrecision"], eth["indexSource"], eth["maxLeverage"]) == (2, "ETHUSDT", 100)
    inverse = contracts["E-BTC-USD"]
    assert (inverse["side"], inverse["marginCoin"], inverse["multiplierCoin"]) == (
        "inverse",
        "BTC",
        "USD",
    )


@pytest.mark.one_process  # admin routes: the engine's, not a gateway's
def test_routes_are_admin_only_and_documented(env: Env) -> None:
    for path in ("/futures/transfer", "/futures/index-price"):
        op = OPERATIONS["POST", ADMIN + path]
        assert (op.tag, op.auth, op.extension) == ("Admin", "ADMIN", True)
        response = env.http.post(ADMIN + path, json={})
        assert response.status_code == 401 and response.json()["code"] == -2015
    doc = env.http.get("/openapi.json").json()
    transfer = doc["paths"][ADMIN + "/futures/transfer"]["post"]
    body = transfer["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][body.rsplit("/", 1)[-1]]
    assert set(schema["required"]) == {"userId", "asset", "amount", "from", "to"}
    markets = doc["components"]["schemas"]["AdminMarketsWithContracts"]
    assert set(markets["required"]) == {"assets", "pairs", "contracts"}


def test_the_system_view_shows_each_contracts_socialised_losses(env: Env) -> None:
    """A loss nobody paid (here the close fee of a liquidation at its bankruptcy price, the
    insurance fund empty) is socialised and recorded on the contract: the system view (and
    `tradehall system`) says how much, per contract, in its margin coin."""
    assert {s["contract"]: s["amount"] for s in env.admin.system()["socialized"]} == {
        "E-BTC-USD": "0.00000000",
        "E-BTC-USDT": ZERO,
        "E-ETH-USDT": ZERO,
    }
    ts = env.clock.now
    long_, short = funded_user(env, USDT="1000"), funded_user(env, USDT="1000")
    for user in (long_, short):
        env.admin.futures_transfer(user, "USDT", "1000", "spot", "futures")
    ex = env.exchange
    ex.apply(SetIndexPrice(ts, "E-BTC-USDT", 500_000))
    ex.apply(FuturesPlace(ts, short, "E-BTC-USDT", "SELL", "OPEN", "LIMIT", 500_000, 10))
    ex.apply(FuturesPlace(ts, long_, "E-BTC-USDT", "BUY", "OPEN", "MARKET", 0, 10, 0, 2))
    # The only bid is at the long's bankruptcy price, 45,000.0; the index falls to 45,200.0.
    ex.apply(FuturesPlace(ts, short, "E-BTC-USDT", "BUY", "OPEN", "LIMIT", 450_000, 10))
    ex.apply(SetIndexPrice(ts + 1, "E-BTC-USDT", 452_000))
    # Sold 10 @ 45,000.0: the margin pays the loss, the close fee 450 x 0.06 % = 0.27 is left.
    socialized = {s["contract"]: s for s in env.admin.system()["socialized"]}
    assert socialized["E-BTC-USDT"] == {
        "contract": "E-BTC-USDT",
        "asset": "USDT",
        "amount": "0.27000000",
    }
