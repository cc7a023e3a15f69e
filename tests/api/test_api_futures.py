"""Perpetual futures through HTTP: every endpoint under /futures/open/fapi/v1 (and the market
pair at /fapi/v1), their shapes (field names and JSON types) and the catalogue's errors.

Every amount is computed by hand. E-BTC-USDT: linear, face value 0.001 BTC, price 1 dp, margin
in USDT (8 dp); fees open/close maker 0.0002, taker 0.0006; maintenance rate 0.005; default
leverage 10, cross. A contract at 30000 is worth 30 USDT; 10 contracts at 30000 are worth 300,
hold 30 of margin at 10x. The mark follows the index (set with SetIndexPrice) while the book
never has both sides (no premium is sampled) and no funding is due.
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, ClientClock, Env, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client
from tradehall.client.signing import sign, signature_payload
from tradehall.config import LimitSettings

F = "/futures/open/fapi/v1"
ROOT = "/fapi/v1"
BTC = "E-BTC-USDT"
ETH = "E-ETH-USDT"
INVERSE = "E-BTC-USD"
EXPONENT = re.compile(r"[0-9][eE][-+]?[0-9]")
NUMBER = (int, Decimal)

ORDER_FIELDS = {
    "orderId",
    "orderIdString",
    "contractName",
    "symbol",
    "price",
    "origQty",
    "executedQty",
    "avgPrice",
    "status",
    "side",
    "action",
    "type",
    "transactTime",
}
CONTRACT_FIELDS = {
    "symbol",
    "status",
    "type",
    "side",
    "multiplier",
    "multiplierCoin",
    "pricePrecision",
    "minOrderVolume",
    "minOrderMoney",
    "maxMarketVolume",
    "maxMarketMoney",
    "maxLimitVolume",
    "maxLimitMoney",
    "maxValidOrder",
}
HISTORY_FIELDS = {
    "side",
    "clientId",
    "ctimeMs",
    "ctime",
    "positionType",
    "orderId",
    "orderIdString",
    "avgPrice",
    "price",
    "volume",
    "dealVolume",
    "dealMoney",
    "openOrClose",
    "leverageLevel",
    "type",
    "status",
    "contractId",
    "contractName",
    "openMakerFeeRate",
    "openTakerFeeRate",
    "closeMakerFeeRate",
    "closeTakerFeeRate",
}
PROFIT_FIELDS = {
    "id",
    "contractId",
    "side",
    "positionType",
    "leverageLevel",
    "volume",
    "openPrice",
    "openEndPrice",
    "tradeFee",
    "capitalFee",
    "realizedAmount",
    "historyRealizedAmount",
    "settleProfit",
    "closeProfit",
    "shareAmount",
    "ctime",
    "mtime",
}
TRADE_FIELDS = {
    "symbol",
    "id",
    "tradeId",
    "bidId",
    "askId",
    "bidUserId",
    "askUserId",
    "price",
    "qty",
    "amount",
    "time",
    "fee",
    "side",
    "contractName",
    "isMaker",
    "isBuyer",
}
ACCOUNT_FIELDS = {
    "marginCoin",
    "accountNormal",
    "accountLock",
    "partPositionNormal",
    "totalPositionNormal",
    "achievedAmount",
    "unrealizedAmount",
    "totalMarginRate",
    "totalEquity",
    "partEquity",
    "totalCost",
    "sumMarginRate",
    "positionVos",
}
POSITION_NUMBERS = {
    "volume",
    "openPrice",
    "avgPrice",
    "closePrice",
    "leverageLevel",
    "holdAmount",
    "closeVolume",
    "pendingCloseVolume",
    "realizedAmount",
    "historyRealizedAmount",
    "tradeFee",
    "capitalFee",
    "closeProfit",
    "shareAmount",
    "marginRate",
    "reducePrice",
    "returnRate",
    "unRealizedAmount",
    "openRealizedAmount",
    "positionBalance",
    "indexPrice",
    "keepRate",
    "maxFeeRate",
}
POSITION_FIELDS = POSITION_NUMBERS | {
    "id",
    "uid",
    "contractId",
    "positionType",
    "side",
    "freezeLock",
    "status",
    "ctime",
    "mtime",
    "lockTime",
    "brokerId",
    "config",
}
LOCAL_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$")


# --------------------------------------------------------------------------- helpers


def ok(response: httpx2.Response) -> Any:
    """The answer's JSON, numbers as exact Decimals (ints stay ints); never an exponent."""
    assert response.status_code == 200, response.text
    assert not EXPONENT.search(response.text), response.text
    return json.loads(response.text, parse_float=Decimal)


def refused(response: httpx2.Response, code: int, status: int = 400) -> str:
    assert (response.status_code, response.json().get("code")) == (status, code), response.text
    assert set(response.json()) == {"code", "msg"}
    return str(response.json()["msg"])


def numbers(record: dict[str, Any], *names: str) -> None:
    for name in names:
        value = record[name]
        assert isinstance(value, NUMBER) and not isinstance(value, bool), (name, value)


def D(text: str) -> Decimal:
    return Decimal(text)


def rate8(value: Fraction) -> Decimal:
    """A ratio as the API writes it: truncated to 8 decimals."""
    return Decimal(int(value * 10**8)) / 10**8


def post(client: Client, path: str, body: dict[str, Any]) -> httpx2.Response:
    return client.request("POST", F + path, body=body)


def get(client: Client, path: str, params: dict[str, Any] | None = None) -> httpx2.Response:
    return client.request("GET", F + path, params=params)


def public(env: Env, path: str, params: dict[str, Any] | None = None) -> httpx2.Response:
    return env.http.get(path, params=params)


def trader(env: Env, usdt: str = "1000", *, read_only: bool = False) -> Client:
    """A user with 100000 USDT and 10 BTC in spot, ``usdt`` of it moved to futures."""
    client = env.trader({"USDT": "100000", "BTC": "10"}, read_only=read_only)
    if not read_only and usdt != "0":
        body = {"asset": "USDT", "amount": usdt, "from": "spot", "to": "futures"}
        ok(post(client, "/tradehall/transfer", body))
    return client


def uid(client: Client) -> int:
    return int(client.user_id)  # type: ignore[attr-defined]


def order(
    client: Client,
    side: str,
    action: str,
    volume: Any,
    price: Any = None,
    *,
    kind: str = "LIMIT",
    contract: str = BTC,
    **extra: Any,
) -> httpx2.Response:
    body = {"contractName": contract, "side": side, "type": kind, "open": action}
    body["volume"] = volume
    if price is not None:
        body["price"] = price
    return post(client, "/order", {**body, **extra})


def placed(response: httpx2.Response) -> int:
    body = ok(response)
    assert set(body) == {"orderId", "orderIdString"} and isinstance(body["orderId"], str)
    assert body["orderIdString"] == body["orderId"]
    return int(body["orderId"])


def set_index(env: Env, price: str, contract: str = BTC) -> None:
    """Through the admin API (committed, and on the split topology heard by the gateway)."""
    env.admin.set_index_price(contract, price)


def position_of(account: dict[str, Any], contract: str = BTC) -> dict[str, Any]:
    (record,) = account["account"]
    (group,) = [g for g in record["positionVos"] if g["contractName"] == contract]
    (pos,) = group["positions"]
    return dict(pos)


def test_a_cross_position_shows_where_its_account_is_liquidated(env: Env) -> None:
    """Two cross positions of one account: each one's reducePrice is where the account is
    liquidated with the other held at its mark (cross equity = the sum of both maintenance
    margins); it counted this position's maintenance alone, ~0.5 % too far. Then the ETH
    mark one tick short of it liquidates nothing, and at it the account is liquidated."""
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    account, other = trader(env), trader(env, "10000")
    placed(order(account, "BUY", "OPEN", 100, "30000", positionType=1))
    placed(order(other, "SELL", "OPEN", 100, "30000", positionType=2))
    placed(order(account, "SELL", "OPEN", 100, "2000", contract=ETH, positionType=1))
    placed(order(other, "BUY", "OPEN", 100, "2000", contract=ETH, positionType=2))
    shown = ok(get(account, "/account"))
    assert shown["account"][0]["totalEquity"] == D("999")  # 1000 less the maker fees 0.6 + 0.4
    btc, eth = position_of(shown), position_of(shown, ETH)
    # BTC long, 0.1 x P: 999 + (0.1 P - 3000) = 0.0005 P + 10 (ETH's maintenance at 2000).
    assert btc["reducePrice"] == (Decimal(2011) / Decimal("0.0995")).quantize(
        Decimal("0.1"), rounding=ROUND_FLOOR
    )
    assert btc["reducePrice"] == D("20211.0")
    # ETH short, 1 x P: 999 + (2000 - P) = 0.005 P + 15 (BTC's maintenance at 30000).
    edge = (Decimal(2984) / Decimal("1.005")).quantize(Decimal("0.01"), rounding=ROUND_CEILING)
    assert eth["reducePrice"] == edge == D("2969.16")
    # marginRate reaches 1 there too: maintenance / (backing + P&L), the backing net of the
    # other position's maintenance.
    assert btc["marginRate"] == rate8(Fraction(15) / (999 - 10))
    set_index(env, str(edge - Decimal("0.01")), ETH)
    assert position_of(ok(get(account, "/account")), ETH)["volume"] == 100
    set_index(env, str(edge), ETH)
    liquidated = ok(get(account, "/account"))["account"]  # no balance left to list
    assert all(record["positionVos"] == [] for record in liquidated)
    env.audit()


def test_a_cross_long_and_short_on_one_contract_show_one_liquidation_price(env: Env) -> None:
    """A cross long and short on one contract move with one mark: each showed its price with
    the other held at the old mark (the long 20315.5, the short 49176.2, where nothing
    happens). Both show where the account is liquidated: long 100 and short 50 on BTC and a
    short 100 on ETH, 996.1 of equity, at the BTC mark p with 996.1 + 0.05 (p - 30000) =
    0.00075 p + 10, falling (the account is net long on BTC)."""
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    account, other = trader(env), trader(env, "50000")
    for side, volume, contract, price in (
        ("BUY", 100, BTC, "30000"),
        ("SELL", 50, BTC, "30000"),
        ("SELL", 100, ETH, "2000"),
    ):
        against = "SELL" if side == "BUY" else "BUY"
        placed(order(other, against, "OPEN", volume, price, contract=contract, positionType=2))
        placed(order(account, side, "OPEN", volume, price, contract=contract, positionType=1))
    shown = ok(get(account, "/account"))
    assert shown["account"][0]["totalEquity"] == D("996.1")  # less the taker fees 1.8 + 0.9 + 1.2
    (btc_group,) = [g for g in shown["account"][0]["positionVos"] if g["contractName"] == BTC]
    edge = (Decimal("513.9") / Decimal("0.04925")).quantize(Decimal("0.1"), rounding=ROUND_FLOOR)
    assert edge == D("10434.5")
    assert [p["reducePrice"] for p in btc_group["positions"]] == [edge, edge]
    set_index(env, "10434.6")
    assert len(position_of(ok(get(account, "/account")), ETH)) > 0  # not yet
    set_index(env, str(edge))
    liquidated = ok(get(account, "/account"))["account"]
    assert all(record["positionVos"] == [] for record in liquidated)
    env.audit()


# --------------------------------------------------------------------------- public data


def test_public_endpoints_and_the_market_address(env: Env) -> None:
    assert ok(public(env, F + "/ping")) == {}
    clock = ok(public(env, F + "/time"))
    assert clock == {"serverTime": env.clock.now, "timezone": "UTC"}

    contracts = ok(public(env, F + "/contracts"))
    assert [c["symbol"] for c in contracts] == [BTC, ETH, INVERSE]
    for contract in contracts:
        assert set(contract) == CONTRACT_FIELDS
        numbers(contract, *(CONTRACT_FIELDS - {"symbol", "type", "multiplierCoin"}))
    assert contracts[0] == {
        "symbol": BTC,
        "status": 1,
        "type": "E",
        "side": 1,
        "multiplier": D("0.001"),
        "multiplierCoin": "BTC",
        "pricePrecision": 1,
        "minOrderVolume": 1,
        "minOrderMoney": 5,
        "maxMarketVolume": 500000,
        "maxMarketMoney": 50000000,
        "maxLimitVolume": 1000000,
        "maxLimitMoney": 100000000,
        "maxValidOrder": 200,
    }
    assert contracts[2]["side"] == 0  # inverse

    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 10, "30100"))
    placed(order(maker, "SELL", "OPEN", 5, "30000"))
    placed(order(taker, "BUY", "OPEN", 2, "30000"))  # trades 2 @ 30000
    placed(order(taker, "BUY", "OPEN", 4, 29000.5))

    book = ok(public(env, F + "/depth", {"contractName": "e-btc-usdt", "limit": 5}))
    assert book == {
        "time": env.clock.now,
        "bids": [["29000.5", "4"]],
        "asks": [["30000.0", "3"], ["30100.0", "10"]],
    }
    assert ok(public(env, F + "/depth", {"contractName": BTC, "limit": 1}))["asks"] == [
        ["30000.0", "3"]
    ]
    ticker = ok(public(env, F + "/ticker", {"contractName": BTC}))
    assert ticker == {
        "time": env.clock.now,
        "high": "30000.0",
        "low": "30000.0",
        "last": "30000.0",
        "vol": "2",
        "rose": "0.00",
    }
    assert ok(public(env, ROOT + "/ticker", {"contractName": "e-btc-usdt"})) == ticker
    everything = ok(public(env, F + "/ticker_all"))
    assert [t["contractName"] for t in everything] == [BTC, ETH, INVERSE]
    assert {k: v for k, v in everything[0].items() if k != "contractName"} == ticker
    assert ok(public(env, ROOT + "/ticker_all")) == everything  # as ticker: at the root too

    index = ok(public(env, F + "/index", {"contractName": BTC}))
    assert index == {
        "indexPrice": D("30000.0"),
        "markPrice": D("30000.0"),
        "contractName": BTC,
        "lastFundingRate": 0,
        "time": env.clock.now,
    }
    assert ok(public(env, ROOT + "/index", {"contractName": BTC, "limit": "1000"})) == index

    hour = ok(public(env, F + "/klines", {"contractName": BTC, "interval": "1h"}))
    assert hour == ok(public(env, F + "/klines", {"contractName": BTC, "interval": "60min"}))
    assert hour == [
        {
            "idx": env.clock.now - env.clock.now % 3_600_000,
            "open": "30000.0",
            "close": "30000.0",
            "high": "30000.0",
            "low": "30000.0",
            "vol": "2",
        }
    ]
    for interval in ("1min", "5min", "15min", "30min", "1day", "1week", "1month"):
        bars = ok(public(env, F + "/klines", {"contractName": BTC, "interval": interval}))
        assert [bar["vol"] for bar in bars] == ["2"], interval
    assert ok(public(env, F + "/klines", {"contractName": ETH, "interval": "1min"})) == []

    # Errors of the public endpoints.
    refused(public(env, F + "/depth", {"contractName": "E-XRP-USDT"}), -1121)
    refused(public(env, ROOT + "/ticker", {"contractName": "BTCUSDT"}), -1121)
    refused(public(env, ROOT + "/index"), -1102)
    refused(public(env, F + "/depth", {"contractName": "E-BTC$USDT"}), -1100)
    refused(public(env, F + "/depth", {"contractName": BTC, "limit": 101}), -1102)
    refused(public(env, F + "/klines", {"contractName": BTC, "interval": "2h"}), -1102)
    refused(
        public(env, F + "/klines", {"contractName": BTC, "interval": "1min", "limit": 301}), -1102
    )
    refused(public(env, F + "/index", {"contractName": BTC, "limit": 1001}), -1102)
    assert env.http.get(ROOT + "/depth").status_code == 404


# --------------------------------------------------------------------------- a full round


def test_open_mark_and_close_a_long_against_a_short(env: Env) -> None:
    """An isolated long and a cross short: every computed field of orders, trades, accounts,
    positions, history and profit, by hand."""
    set_index(env, "30000")
    short, long_ = trader(env), trader(env)
    ask = placed(order(short, "SELL", "OPEN", "10", "30000", clientOrderId="s-open"))

    (resting,) = ok(get(short, "/openOrders", {"contractName": BTC}))
    assert resting == {
        "orderId": ask,
        "orderIdString": str(ask),
        "contractName": BTC,
        "symbol": "BTCUSDT",
        "price": D("30000.0"),
        "origQty": 10,
        "executedQty": 0,
        "avgPrice": D("0.0"),
        "status": "NEW",
        "side": "SELL",
        "action": "OPEN",
        "type": "LIMIT",
        "transactTime": env.clock.now,
    }
    (held,) = ok(get(short, "/account"))["account"]
    # The ask holds its margin (30) and its maker fee (0.06).
    assert (held["accountNormal"], held["accountLock"]) == (D("969.94"), D("30.06"))
    assert held["positionVos"] == []

    bid = placed(order(long_, "BUY", "OPEN", 10, "30500", positionType=2))
    filled = ok(get(long_, "/order", {"contractName": BTC, "orderId": bid}))
    assert set(filled) == ORDER_FIELDS
    numbers(filled, "orderId", "price", "origQty", "executedQty", "avgPrice", "transactTime")
    assert (filled["status"], filled["price"], filled["avgPrice"]) == (
        "FILLED",
        D("30500.0"),
        D("30000.0"),
    )
    assert (filled["origQty"], filled["executedQty"]) == (10, 10)
    by_client = ok(get(short, "/order", {"contractName": "e-btc-usdt", "clientOrderId": "s-open"}))
    assert (by_client["orderId"], by_client["status"], by_client["executedQty"]) == (
        ask,
        "FILLED",
        10,
    )
    assert ok(get(short, "/openOrders")) == []

    (bought,) = ok(get(long_, "/myTrades", {"contractName": BTC}))
    assert set(bought) == TRADE_FIELDS
    assert bought == {
        "symbol": "BTCUSDT",
        "id": bought["id"],
        "tradeId": bought["id"],
        "bidId": bid,
        "askId": ask,
        "bidUserId": uid(long_),
        "askUserId": uid(short),
        "price": D("30000.0"),
        "qty": 10,
        "amount": D("300"),
        "time": env.clock.now,
        "fee": D("0.18"),
        "side": "BUY",
        "contractName": BTC,
        "isMaker": False,
        "isBuyer": True,
    }
    (sold,) = ok(get(short, "/myTrades", {"contractName": BTC}))
    assert (sold["fee"], sold["side"], sold["isMaker"], sold["isBuyer"]) == (
        D("0.06"),
        "SELL",
        True,
        False,
    )

    # The mark moves to 31000: the long gains 10, the short loses 10.
    env.clock.advance(1_000)
    set_index(env, "31000")
    index = ok(public(env, F + "/index", {"contractName": BTC}))
    assert (index["indexPrice"], index["markPrice"]) == (D("31000.0"), D("31000.0"))

    account = ok(get(long_, "/account"))
    (record,) = account["account"]
    assert set(record) == ACCOUNT_FIELDS
    numbers(record, *(ACCOUNT_FIELDS - {"marginCoin", "positionVos"}))
    maintenance = Fraction(155, 100)  # 310 x 0.005
    assert {k: v for k, v in record.items() if k != "positionVos"} == {
        "marginCoin": "USDT",
        "accountNormal": D("969.82"),  # 1000 - 30 margin - 0.18 fee
        "accountLock": 0,
        "partPositionNormal": D("30"),
        "totalPositionNormal": 0,
        "achievedAmount": D("-0.18"),
        "unrealizedAmount": D("10"),
        "totalMarginRate": 0,
        "totalEquity": D("969.82"),
        "partEquity": D("40"),
        "totalCost": 0,
        "sumMarginRate": rate8(maintenance / Fraction("1009.82")),
    }
    (group,) = record["positionVos"]
    assert (group["contractId"], group["contractName"], group["contractSymbol"]) == (
        1,
        BTC,
        "BTCUSDT",
    )
    (pos,) = group["positions"]
    assert set(pos) == POSITION_FIELDS
    numbers(pos, *POSITION_NUMBERS)
    assert LOCAL_TIME.match(pos["ctime"]) and LOCAL_TIME.match(pos["mtime"])
    # Isolated long: liquidated where 30 + P&L = 0.005 x value, i.e. value 270 / 0.995
    # (27135.678..): shown as the first tick at which it is, rounded down.
    exact = Decimal(270) / Decimal("0.995") / Decimal("0.01")
    liquidation = exact.quantize(Decimal("0.1"), rounding=ROUND_FLOOR)
    assert {k: pos[k] for k in POSITION_FIELDS - {"id", "ctime", "mtime"}} == {
        "uid": uid(long_),
        "contractId": 1,
        "positionType": 2,
        "side": "BUY",
        "volume": 10,
        "openPrice": D("30000.0"),
        "avgPrice": D("30000.0"),
        "closePrice": 0,
        "leverageLevel": 10,
        "holdAmount": D("30"),
        "closeVolume": 0,
        "pendingCloseVolume": 0,
        "realizedAmount": D("-0.18"),
        "historyRealizedAmount": D("-0.18"),
        "tradeFee": D("0.18"),
        "capitalFee": 0,
        "closeProfit": 0,
        "shareAmount": 0,
        "freezeLock": 0,
        "status": 1,
        "lockTime": None,
        "brokerId": 0,
        "marginRate": rate8(maintenance / 40),
        "reducePrice": liquidation,
        "returnRate": D("0.33333333"),
        "unRealizedAmount": D("10"),
        "openRealizedAmount": D("10"),
        "positionBalance": D("310"),
        "indexPrice": D("31000.0"),
        "keepRate": D("0.005"),
        "maxFeeRate": D("0.0006"),
        "config": {"contractId": 1, "contractName": BTC, "symbol": "BTCUSDT"},
    }
    assert liquidation == D("27135.6")

    (crossed,) = ok(get(short, "/account"))["account"]
    equity = Fraction("989.94")  # 969.94 free + 30 margin - 10 unrealized
    assert (crossed["accountNormal"], crossed["totalEquity"]) == (D("959.94"), D("989.94"))
    assert (crossed["totalPositionNormal"], crossed["totalCost"]) == (D("30"), D("300"))
    assert crossed["unrealizedAmount"] == D("-10")
    assert crossed["totalMarginRate"] == crossed["sumMarginRate"] == rate8(maintenance / equity)
    short_pos = position_of({"account": [crossed]})
    # Cross short: backed by the equity without its own P&L (999.94); liquidated where
    # 999.94 - (value - 300) = 0.005 x value, i.e. value 1299.94 / 1.005 (129347.26..):
    # the first tick at which it is, rounded up.
    value = Decimal("1299.94") / Decimal("1.005")
    exact = value / Decimal("0.01")
    assert short_pos["reducePrice"] == exact.quantize(Decimal("0.1"), rounding=ROUND_CEILING)
    assert short_pos["reducePrice"] == D("129347.3")
    assert short_pos["marginRate"] == rate8(maintenance / equity)
    assert short_pos["returnRate"] == D("-0.33333333")

    # Both close at 31000: the short's BUY CLOSE rests, the long's SELL CLOSE takes it.
    buy_close = placed(order(short, "BUY", "CLOSE", 10, "31000"))
    pending = position_of(ok(get(short, "/account")))
    assert pending["pendingCloseVolume"] == 10
    refused(order(short, "BUY", "CLOSE", 1, "31000"), -2017)  # all of it is pending already
    sell_close = placed(order(long_, "SELL", "CLOSE", 10, "31000"))

    (closed,) = ok(get(long_, "/account"))["account"]
    assert closed["positionVos"] == []
    # 969.82 + 30 released + 10 profit - 0.186 close taker fee.
    assert (closed["accountNormal"], closed["accountLock"]) == (D("1009.634"), 0)
    (short_closed,) = ok(get(short, "/account"))["account"]
    assert short_closed["accountNormal"] == D("989.878")  # 969.94 + 30 - 10 - 0.062

    (record_p,) = ok(post(long_, "/profitHistorical", {"contractName": BTC}))
    assert set(record_p) == PROFIT_FIELDS
    numbers(record_p, *(PROFIT_FIELDS - {"side"}))
    assert {k: v for k, v in record_p.items() if k not in ("id", "ctime", "mtime")} == {
        "contractId": 1,
        "side": "BUY",
        "positionType": 2,
        "leverageLevel": 10,
        "volume": 10,
        "openPrice": D("30000.0"),
        "openEndPrice": D("31000.0"),
        "tradeFee": D("0.366"),
        "capitalFee": 0,
        "realizedAmount": D("9.634"),
        "historyRealizedAmount": D("9.634"),
        "settleProfit": 0,
        "closeProfit": D("10"),
        "shareAmount": 0,
    }
    assert record_p["id"] == pos["id"]
    assert (record_p["ctime"], record_p["mtime"]) == (env.clock.now - 1_000, env.clock.now)
    (short_profit,) = ok(post(short, "/profitHistorical", {}))
    assert (short_profit["closeProfit"], short_profit["realizedAmount"]) == (
        D("-10"),
        D("-10.122"),  # -10 - 0.06 - 0.062
    )

    history = ok(post(long_, "/orderHistorical", {"contractName": BTC, "limit": "10"}))
    assert [h["orderId"] for h in history] == [sell_close, bid]
    for record_h in history:
        assert set(record_h) == HISTORY_FIELDS
        numbers(
            record_h,
            *(
                HISTORY_FIELDS
                - {"side", "clientId", "ctime", "openOrClose", "contractName", "orderIdString"}
            ),
        )
        assert LOCAL_TIME.match(record_h["ctime"])
    assert history[1] == {
        "side": "BUY",
        "clientId": "",
        "ctimeMs": env.clock.now - 1_000,
        "ctime": "2023-11-14T22:13:20",
        "positionType": 2,
        "orderId": bid,
        "orderIdString": str(bid),
        "avgPrice": D("30000.0"),
        "price": D("30500.0"),
        "volume": 10,
        "dealVolume": 10,
        "dealMoney": D("300"),
        "openOrClose": "OPEN",
        "leverageLevel": 10,
        "type": 1,
        "status": 2,
        "contractId": 1,
        "contractName": BTC,
        "openMakerFeeRate": D("0.0002"),
        "openTakerFeeRate": D("0.0006"),
        "closeMakerFeeRate": D("0.0002"),
        "closeTakerFeeRate": D("0.0006"),
    }
    assert (history[0]["openOrClose"], history[0]["ctime"]) == ("CLOSE", "2023-11-14T22:13:21")
    short_history = ok(post(short, "/orderHistorical", {}))
    assert [h["orderId"] for h in short_history] == [buy_close, ask]
    assert short_history[1]["clientId"] == "s-open"
    # fromId pages: the records with id >= fromId closest to it, newest first.
    assert ok(post(long_, "/orderHistorical", {"fromId": bid, "limit": 1}))[0]["orderId"] == bid
    assert ok(post(long_, "/orderHistorical", {"fromId": bid + 1})) == history[:1]
    assert ok(post(long_, "/profitHistorical", {"contractName": ETH})) == []
    env.audit()


def test_history_codes_of_ended_orders(env: Env) -> None:
    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 3, "30000"))
    placed(order(maker, "BUY", "OPEN", 1, "29500"))
    ioc = placed(order(taker, "BUY", "OPEN", 5, "30000", timeInForce="IOC"))
    rejected = placed(order(taker, "SELL", "OPEN", 2, "29000", timeInForce="POST_ONLY"))
    fok = placed(order(taker, "BUY", "OPEN", 1, "29000", timeInForce="FOK"))
    resting = placed(order(taker, "BUY", "OPEN", 1, "29000", timeInForce="GTC"))
    history = {h["orderId"]: h for h in ok(post(taker, "/orderHistorical", {}))}
    assert [(history[i]["type"], history[i]["status"]) for i in (ioc, rejected, fok, resting)] == [
        (3, 4),  # IOC, canceled after 3 of 5
        (5, 6),  # POST_ONLY that would take: expired
        (4, 4),  # FOK with nothing to meet: canceled
        (1, 1),  # GTC, new
    ]
    assert history[ioc]["dealVolume"] == 3
    assert ok(get(taker, "/order", {"contractName": BTC, "orderId": rejected}))["status"] == (
        "REJECTED"
    )
    ended = ok(get(taker, "/order", {"contractName": BTC, "orderId": ioc}))
    assert (ended["status"], ended["executedQty"], ended["origQty"]) == ("CANCELED", 3, 5)


# --------------------------------------------------------------------------- orders


def test_market_open_is_sized_by_value(env: Env) -> None:
    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 100, "30000"))
    # 1500 USDT buys 50 contracts of 30 USDT.
    bought = placed(order(taker, "BUY", "OPEN", "1500", kind="MARKET"))
    detail = ok(get(taker, "/order", {"contractName": BTC, "orderId": bought}))
    assert {k: detail[k] for k in ("price", "origQty", "executedQty", "avgPrice", "status")} == {
        "price": D("0.0"),
        "origQty": 1500,
        "executedQty": 50,
        "avgPrice": D("30000.0"),
        "status": "FILLED",
    }
    assert detail["type"] == "MARKET"
    assert position_of(ok(get(taker, "/account")))["volume"] == 50
    refused(order(taker, "BUY", "OPEN", "10.123456789", kind="MARKET"), -1111)
    below = refused(order(taker, "BUY", "OPEN", "1", kind="MARKET"), -1136)
    assert below == "order value below the minimum 5 USDT"
    # MARKET CLOSE is in contracts: whole numbers only.
    refused(order(taker, "SELL", "CLOSE", "1.5", kind="MARKET"), -1111)
    refused(order(taker, "SELL", "CLOSE", 51, kind="MARKET"), -2017)
    # 3000 USDT would buy 100 contracts; the book has the other 50: they fill, and the order
    # ends CANCELED (its remainder dropped), not FILLED.
    short = placed(order(taker, "BUY", "OPEN", "3000", kind="MARKET"))
    detail = ok(get(taker, "/order", {"contractName": BTC, "orderId": short}))
    assert (detail["executedQty"], detail["status"]) == (50, "CANCELED")
    history = {h["orderId"]: h for h in ok(post(taker, "/orderHistorical", {}))}
    assert (history[short]["dealVolume"], history[short]["status"]) == (50, 4)
    assert (history[bought]["dealVolume"], history[bought]["status"]) == (50, 2)
    # orderUnit 2 or 1 sizes it in contracts or coin instead: test_api_futures_order_unit.py.


def test_an_open_far_from_the_mark_that_would_start_bankrupt_is_refused(env: Env) -> None:
    """Two accounts of one owner must not drain the insurance fund: a short opened far below
    the mark (or a long far above it) would be liquidated at once and auto-deleveraged
    against the other account at the mark, the fund paying the gap. The price band (5 %)
    stops the far prices; within it, a high leverage carries less than the distance."""
    set_index(env, "30000")
    alice, bob = trader(env, "10000"), trader(env, "10")
    env.admin.fund("insurance", "USDT", "100000", "fund-1")
    ok(post(bob, "/edit_lever", {"contractName": BTC, "nowLevel": 50}))
    before = (env.admin.system(), ok(get(alice, "/account")), ok(get(bob, "/account")))
    msg = refused(order(bob, "SELL", "OPEN", 10, "1000"), -1138)
    assert "below the price band: at most 5 % below the mark price 30000.0, 28500.0" in msg
    placed(order(alice, "BUY", "OPEN", 10, "29000"))  # a long below the mark: in profit
    msg = refused(order(bob, "SELL", "OPEN", 10, "29000", timeInForce="IOC"), -1138)
    assert "too far from the mark price 30000.0" in msg and "leverage 50" in msg
    # Resting at such a price is refused as well: it would start bankrupt when it fills.
    refused(order(bob, "SELL", "OPEN", 1, "29500"), -1138)
    # A MARKET OPEN that would sweep into such a price: refused as a whole.
    cancel_all = post(alice, "/cancel_all", {"contractName": BTC})
    ok(cancel_all)
    placed(order(alice, "SELL", "OPEN", 5, "31000"))
    refused(order(bob, "BUY", "OPEN", "150", kind="MARKET"), -1138)
    assert env.admin.system() == before[0]
    assert ok(get(bob, "/account")) == before[2]
    # Near the mark, within what the margin carries at 50x: accepted and traded.
    ok(post(alice, "/cancel_all", {"contractName": BTC}))
    placed(order(alice, "SELL", "OPEN", 1, "30100"))
    placed(order(bob, "BUY", "OPEN", 1, "30100"))
    assert position_of(ok(get(bob, "/account")))["volume"] == 1
    env.audit()


def test_catalogue_errors_of_orders(env: Env) -> None:
    set_index(env, "30000")
    client = trader(env, "100")
    base = {"contractName": BTC, "side": "BUY", "type": "LIMIT", "open": "OPEN", "volume": 1}
    base["price"] = "30000"

    def place(**changes: Any) -> httpx2.Response:
        body = {**base, **changes}
        return post(client, "/order", {k: v for k, v in body.items() if v is not ...})

    refused(place(contractName="E-XRP-USDT"), -1121)
    refused(place(contractName="BTCUSDT"), -1121)
    refused(place(contractName=...), -1102)
    refused(place(side="LONG"), -1117)
    refused(place(type="STOP"), -1116)
    refused(place(timeInForce="GTD"), -1116)
    refused(place(type="MARKET", timeInForce="IOC"), -1116)
    refused(place(open="REDUCE"), -1102)
    refused(place(open=...), -1102)
    refused(place(volume="1.5"), -1111)
    refused(place(volume=1.25), -1111)
    refused(place(price="30000.05"), -1111)
    refused(place(price=...), -1102)
    refused(place(volume=0), -1102)
    refused(place(volume="abc"), -1102)
    refused(place(positionType=3), -1102)
    refused(place(clientOrderId="x" * 33), -1102)
    refused(place(volume=100), -2017)  # 100 contracts hold 300 + fees; 100 USDT in futures
    refused(place(side="SELL", open="CLOSE"), -2017)  # no long to close
    refused(place(side="BUY", open="CLOSE"), -2017)  # no short to close
    # orderUnit 3 (value) on a LIMIT order would change what volume means: refused, never
    # ignored (100 USDT of value read as 100 contracts is 30 times the order meant).
    before = ok(get(client, "/account"))
    for unit in (3, "3"):
        msg = refused(place(orderUnit=unit), -1102)
        assert "orderUnit" in msg and "contracts" in msg
        msg = refused(post(client, "/conditionOrder", {**base, "orderUnit": unit,
                                                       "triggerType": 1, "triggerPrice": 29000}),
                      -1102)  # fmt: skip
        assert "orderUnit" in msg
    refused(place(orderUnit=4), -1102)
    refused(place(orderUnit="coin"), -1102)
    assert ok(get(client, "/account")) == before
    assert placed(place(volume="1.0", price=30000, positionType="1", orderUnit=2, foo=None))
    assert placed(place(orderUnit=None))
    assert placed(place(clientOrderId="c" * 32, positionType=None))
    refused(place(clientOrderId="c" * 32), -1102)  # in use by an open order
    refused(place(positionType=2), -1102)  # differs from the open orders' margin mode

    refused(get(client, "/order", {"contractName": BTC, "orderId": 999999}), -2013)
    refused(get(client, "/order", {"contractName": BTC, "clientOrderId": "nope"}), -2013)
    no_id = refused(get(client, "/order", {"contractName": BTC}), -1102)
    assert "'orderId' (or 'clientOrderId')" in no_id
    refused(get(client, "/order", {"contractName": "E-NOPE-USDT", "orderId": 1}), -1121)
    refused(post(client, "/cancel", {"contractName": BTC, "orderId": "999999"}), -2013)
    refused(get(client, "/openOrders", {"contractName": "nope"}), -1121)
    refused(get(client, "/myTrades", {"contractName": "nope"}), -1121)
    refused(post(client, "/orderHistorical", {"contractName": "nope"}), -1121)
    refused(post(client, "/profitHistorical", {"limit": 1001}), -1102)


def test_cancel_and_open_orders_of_every_contract(env: Env) -> None:
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    client = trader(env)
    first = placed(order(client, "BUY", "OPEN", 1, "29000", clientOrderId="b1"))
    second = placed(order(client, "BUY", "OPEN", 1, "1900.55", contract="e-eth-usdt"))
    listed = ok(get(client, "/openOrders"))
    assert [(o["orderId"], o["contractName"], o["symbol"]) for o in listed] == [
        (second, ETH, "ETHUSDT"),
        (first, BTC, "BTCUSDT"),
    ]
    assert listed[0]["price"] == D("1900.55")
    assert [o["orderId"] for o in ok(get(client, "/openOrders", {"contractName": ETH}))] == [second]
    cancelled = ok(post(client, "/cancel", {"contractName": BTC, "clientOrderId": "b1"}))
    assert cancelled == {"orderId": str(first), "orderIdString": str(first)}
    refused(post(client, "/cancel", {"contractName": BTC, "orderId": first}), -1145)
    refused(post(client, "/cancel", {"contractName": ETH, "orderId": first}), -2013)
    assert ok(get(client, "/order", {"contractName": BTC, "orderId": first}))["status"] == (
        "CANCELED"
    )
    assert ok(post(client, "/cancel", {"contractName": ETH, "orderId": second})) == {
        "orderId": str(second),
        "orderIdString": str(second),
    }
    assert ok(get(client, "/openOrders")) == []
    (record,) = ok(get(client, "/account"))["account"]
    assert (record["accountNormal"], record["accountLock"]) == (D("1000"), 0)


def test_my_trades_of_every_contract(env: Env) -> None:
    """Without contractName, myTrades lists the caller's trades on every contract, newest
    first, and fromId pages through them (as openOrders and orderHistorical do)."""
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 1, "30000"))
    placed(order(taker, "BUY", "OPEN", 1, "30000"))
    placed(order(maker, "SELL", "OPEN", 2, "2000", contract=ETH))
    placed(order(taker, "BUY", "OPEN", 2, "2000", contract=ETH))
    placed(order(maker, "SELL", "OPEN", 3, "30000"))
    placed(order(taker, "BUY", "OPEN", 3, "30000"))
    every = ok(get(taker, "/myTrades"))
    assert [(t["contractName"], t["qty"]) for t in every] == [(BTC, 3), (ETH, 2), (BTC, 1)]
    assert [t["id"] for t in every] == sorted((t["id"] for t in every), reverse=True)
    by_contract = ok(get(taker, "/myTrades", {"contractName": BTC})) + ok(
        get(taker, "/myTrades", {"contractName": ETH})
    )
    assert sorted(every, key=lambda t: t["id"]) == sorted(by_contract, key=lambda t: t["id"])
    oldest = every[-1]["id"]
    page = ok(get(taker, "/myTrades", {"fromId": oldest, "limit": 2}))
    assert [t["qty"] for t in page] == [2, 1]
    assert ok(get(maker, "/myTrades", {"limit": 1}))[0]["side"] == "SELL"


def test_conditional_orders_are_listed_found_and_cancelled(env: Env) -> None:
    set_index(env, "30000")
    maker, client = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 10, "30000"))
    placed(order(client, "BUY", "OPEN", 10, "30000"))
    stop_body = {
        "contractName": BTC,
        "side": "SELL",
        "type": "MARKET",
        "open": "CLOSE",
        "volume": 5,
        "triggerType": "1",
        "triggerPrice": "29000",
        "clientOrderId": "stop-1",
    }
    stop = placed(post(client, "/conditionOrder", stop_body))
    take = placed(
        post(
            client,
            "/conditionOrder",
            {
                **stop_body,
                "type": "LIMIT",
                "price": 32000,
                "triggerType": 2,
                "triggerPrice": 31900,
                "clientOrderId": None,
            },
        )
    )
    listed = ok(get(client, "/openOrders", {"contractName": BTC}))
    assert [o["orderId"] for o in listed] == [take, stop]
    assert set(listed[1]) == ORDER_FIELDS | {"triggerType", "triggerPrice"}
    assert listed[1] == {
        "orderId": stop,
        "orderIdString": str(stop),
        "contractName": BTC,
        "symbol": "BTCUSDT",
        "price": D("0.0"),
        "origQty": 5,
        "executedQty": 0,
        "avgPrice": D("0.0"),
        "status": "NEW",
        "side": "SELL",
        "action": "CLOSE",
        "type": "MARKET",
        "transactTime": env.clock.now,
        "triggerType": 1,
        "triggerPrice": D("29000.0"),
    }
    assert (listed[0]["triggerType"], listed[0]["price"]) == (2, D("32000.0"))
    assert ok(get(client, "/order", {"contractName": BTC, "orderId": stop})) == listed[1]
    by_client = ok(get(client, "/order", {"contractName": BTC, "clientOrderId": "stop-1"}))
    assert by_client == listed[1]
    assert ok(post(client, "/cancel", {"contractName": BTC, "orderId": str(stop)})) == {
        "orderId": str(stop),
        "orderIdString": str(stop),
    }
    gone = ok(get(client, "/order", {"contractName": BTC, "orderId": stop}))
    assert (gone["status"], gone["triggerType"]) == ("CANCELED", 1)
    assert ok(get(client, "/order", {"contractName": BTC, "clientOrderId": "stop-1"})) == gone
    refused(post(client, "/cancel", {"contractName": BTC, "orderId": stop}), -1145)
    assert [o["orderId"] for o in ok(get(client, "/openOrders"))] == [take]

    # Refusals: a trigger already reached, bad trigger types, a trailing buy that sells.
    reached = {**stop_body, "triggerPrice": "30500", "clientOrderId": None}
    refused(post(client, "/conditionOrder", reached), -1138)
    refused(post(client, "/conditionOrder", {**stop_body, "triggerType": 5}), -1102)
    refused(post(client, "/conditionOrder", {**stop_body, "triggerType": None}), -1102)
    refused(post(client, "/conditionOrder", {**stop_body, "triggerPrice": "1.55"}), -1111)
    refused(post(client, "/conditionOrder", {**stop_body, "triggerType": 3}), -1117)
    refused(post(client, "/conditionOrder", {**stop_body, "contractName": "X"}), -1121)

    # The take-profit fires when the last price reaches 31900: it then rests at 32000 (within
    # the price band around the mark, which has followed the index up).
    set_index(env, "31500")
    placed(order(maker, "SELL", "OPEN", 1, "31900"))
    placed(order(client, "BUY", "OPEN", 1, "31900"))
    (fired,) = ok(get(client, "/openOrders"))
    assert fired["orderId"] != take and "triggerType" not in fired
    assert (fired["action"], fired["price"], fired["origQty"]) == ("CLOSE", D("32000.0"), 5)
    # The conditional order reads as the progress of the order it submitted: resting, then
    # partly filled, then filled (never FILLED with nothing executed).
    progress = ("status", "executedQty", "avgPrice", "triggerType")

    def condition() -> tuple[Any, ...]:
        found = ok(get(client, "/order", {"contractName": BTC, "orderId": take}))
        return tuple(found[k] for k in progress)

    assert condition() == ("NEW", 0, D("0.0"), 2)
    placed(order(maker, "BUY", "OPEN", 2, "32000"))
    assert condition() == ("PARTIALLY_FILLED", 2, D("32000.0"), 2)
    placed(order(maker, "BUY", "OPEN", 3, "32000"))
    assert condition() == ("FILLED", 5, D("32000.0"), 2)
    # Cancelling it now names the order it submitted.
    message = refused(post(client, "/cancel", {"contractName": BTC, "orderId": take}), -1145)
    assert f"the order it submitted is {fired['orderId']}" in message
    env.audit()


# --------------------------------------------------------------------------- extensions


def test_a_conditional_orders_position_type_switches_the_setting_as_an_orders_does(
    env: Env,
) -> None:
    """With nothing open, positionType 2 on /conditionOrder switches the caller's mode to
    isolated (as on /order): a second trigger in that mode is accepted, one asking for cross
    is refused, and the trigger's order is placed isolated when it fires."""
    set_index(env, "30000")
    maker, client = trader(env), trader(env, "50000")
    body = {
        "contractName": BTC,
        "side": "BUY",
        "type": "LIMIT",
        "price": "30200",
        "open": "OPEN",
        "volume": 1,
        "triggerType": "1",
        "triggerPrice": "30100",
        "positionType": 2,
    }
    placed(post(client, "/conditionOrder", body))
    lever = ok(post(client, "/edit_lever", {"contractName": BTC, "nowLevel": 10}))
    assert lever["positionModel"] == 2
    placed(post(client, "/conditionOrder", {k: v for k, v in body.items() if k != "positionType"}))
    refused(post(client, "/conditionOrder", {**body, "positionType": 1}), -1102)
    # A trade at 30100 fires both: their orders are placed isolated and fill.
    placed(order(maker, "SELL", "OPEN", 5, "30100"))
    placed(order(trader(env), "BUY", "OPEN", 1, "30100"))
    pos = position_of(ok(get(client, "/account")))
    assert (pos["positionType"], pos["volume"]) == (2, D("2"))
    assert ok(get(client, "/openOrders", {"contractName": BTC})) == []
    env.audit()


def test_leverage_margin_mode_and_position_margin(env: Env) -> None:
    set_index(env, "30000")
    maker, client = trader(env), trader(env)
    assert ok(post(client, "/edit_lever", {"contractName": "e-btc-usdt", "nowLevel": 20})) == {
        "contractName": BTC,
        "nowLevel": 20,
        "positionModel": 1,
    }
    model = ok(post(client, "/edit_user_margin_model", {"contractName": BTC, "positionModel": "2"}))
    assert model == {"contractName": BTC, "nowLevel": 20, "positionModel": 2}
    refused(post(client, "/edit_lever", {"contractName": BTC, "nowLevel": 101}), -1102)
    refused(post(client, "/edit_lever", {"contractName": BTC}), -1102)
    refused(post(client, "/edit_lever", {"contractName": "nope", "nowLevel": 2}), -1121)
    refused(
        post(client, "/edit_user_margin_model", {"contractName": BTC, "positionModel": 3}), -1102
    )

    placed(order(maker, "SELL", "OPEN", 10, "30000"))
    placed(order(client, "BUY", "OPEN", 10, "30000"))  # isolated, 20x: margin 15
    refused(post(client, "/edit_lever", {"contractName": BTC, "nowLevel": 5}), -1020)
    pos = position_of(ok(get(client, "/account")))
    assert (pos["positionType"], pos["leverageLevel"], pos["holdAmount"]) == (2, 20, D("15"))

    body = {"positionId": pos["id"], "amount": "5.5"}
    env.clock.advance(2_000)
    added = ok(post(client, "/edit_position_margin", body))
    assert set(added) == POSITION_FIELDS
    assert (added["id"], added["holdAmount"]) == (pos["id"], D("20.5"))
    assert added["config"] == {"contractId": 1, "contractName": BTC, "symbol": "BTCUSDT"}
    assert (added["ctime"], added["mtime"]) != (pos["ctime"], pos["mtime"])  # a change
    assert added["ctime"] == pos["ctime"]
    taken = ok(post(client, "/edit_position_margin", {**body, "amount": -5.5}))
    assert taken["holdAmount"] == D("15")
    too_much = refused(post(client, "/edit_position_margin", {**body, "amount": "-0.01"}), -2017)
    assert "at most 0 USDT may be taken out" in too_much  # in the coin, not in its units
    refused(post(client, "/edit_position_margin", {**body, "amount": "0.000000001"}), -1111)
    refused(post(client, "/edit_position_margin", {**body, "amount": 0}), -1102)
    for huge in ("1" * 41, "-" + "1" * 41):  # beyond any balance: a bad amount (it was -2017)
        refused(post(client, "/edit_position_margin", {**body, "amount": huge}), -1102)
    refused(post(client, "/edit_position_margin", {**body, "amount": "99999"}), -2017)
    refused(post(client, "/edit_position_margin", {**body, "positionId": 999}), -1102)
    (record,) = ok(get(client, "/account"))["account"]
    assert (record["partPositionNormal"], record["totalPositionNormal"]) == (D("15"), 0)
    env.audit()


def test_cancel_all(env: Env) -> None:
    set_index(env, "30000")
    set_index(env, "2000", ETH)
    maker, client = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 10, "30000"))
    placed(order(client, "BUY", "OPEN", 5, "30000"))
    a = placed(order(client, "BUY", "OPEN", 1, "29000"))
    b = placed(order(client, "BUY", "OPEN", 1, "1900", contract=ETH))
    trigger = {"contractName": BTC, "side": "SELL", "type": "MARKET", "open": "CLOSE"}
    c = placed(
        post(
            client, "/conditionOrder", {**trigger, "volume": 1, "triggerType": 1, "triggerPrice": 1}
        )
    )
    assert ok(post(client, "/cancel_all", {"contractName": "e-btc-usdt"})) == {"orderIds": [a, c]}
    assert [o["orderId"] for o in ok(get(client, "/openOrders"))] == [b]
    assert ok(post(client, "/cancel_all", {})) == {"orderIds": [b]}
    assert ok(post(client, "/cancel_all", {})) == {"orderIds": []}
    refused(post(client, "/cancel_all", {"contractName": "nope"}), -1121)


def test_user_transfer_between_spot_and_futures(env: Env) -> None:
    client = trader(env, "0")
    body = {"asset": "usdt", "amount": "250.5", "from": "spot", "to": "futures"}
    assert ok(post(client, "/tradehall/transfer", body)) == {
        "userId": uid(client),
        "account": "futures",
        "asset": "USDT",
        "free": "250.50000000",
        "locked": "0.00000000",
    }
    back = ok(post(client, "/tradehall/transfer", {**body, "from": "futures", "to": "spot"}))
    assert back["free"] == "0.00000000"
    assert ok(get(client, "/account")) == {"account": []}
    refused(post(client, "/tradehall/transfer", {**body, "from": "futures", "to": "spot"}), -2017)
    refused(post(client, "/tradehall/transfer", {**body, "amount": "1000000"}), -2017)
    refused(post(client, "/tradehall/transfer", {**body, "asset": "ETH"}), -1102)
    refused(post(client, "/tradehall/transfer", {**body, "to": "margin"}), -1102)
    refused(post(client, "/tradehall/transfer", {**body, "amount": None}), -1102)
    # Beyond what any balance holds: a bad amount, not a balance too small (it was -2017).
    huge = {**body, "amount": "1" + "0" * 40}
    assert "larger than any balance can hold" in refused(
        post(client, "/tradehall/transfer", huge), -1102
    )
    balances = {b["asset"]: b["free"] for b in client.account()["balances"]}
    assert balances["USDT"] == "100000.00000000"


# --------------------------------------------------------------------------- signing


def _signed(
    env: Env, key: dict[str, Any], method: str, path: str, signed_path: str, body: bytes = b""
) -> httpx2.Response:
    ts = str(env.clock.now - 1)
    signature = sign(key["secret"], signature_payload(ts, method, signed_path, body))
    headers = {
        "X-CH-APIKEY": key["apiKey"],
        "X-CH-TS": ts,
        "X-CH-SIGN": signature,
        "Content-Type": "application/json",
    }
    return env.http.request(method, path, content=body, headers=headers)


def test_signing_strips_the_futures_gateway_prefix(env: Env) -> None:
    user = env.admin.create_user()
    key = env.admin.create_key(user["id"])
    query = "contractName=E-BTC-USDT"
    answer = _signed(env, key, "GET", f"{F}/openOrders?{query}", f"/fapi/v1/openOrders?{query}")
    assert ok(answer) == []
    env.clock.advance(1)
    refused(
        _signed(env, key, "GET", f"{F}/openOrders?{query}", f"{F}/openOrders?{query}"),
        -1022,
        401,
    )
    body = b'{"contractName":"E-BTC-USDT","limit":"5"}'
    env.clock.advance(1)
    assert (
        ok(_signed(env, key, "POST", F + "/orderHistorical", "/fapi/v1/orderHistorical", body))
        == []
    )
    env.clock.advance(1)
    refused(
        _signed(env, key, "POST", F + "/orderHistorical", F + "/orderHistorical", body), -1022, 401
    )
    # The spot prefix is still stripped for spot paths.
    env.clock.advance(1)
    assert "balances" in ok(
        _signed(env, key, "GET", "/spot/open/sapi/v1/account", "/sapi/v1/account")
    )

    # recvWindow from the body: a request signed 8 s ago passes with recvWindow 10000.
    client = trader(env)
    stale = env.clock.now - 8_000
    body_ = {"contractName": BTC, "recvWindow": 10000}
    assert client.request("POST", F + "/orderHistorical", body=body_, ts=stale).status_code == 200
    refused(
        client.request("POST", F + "/orderHistorical", body={"contractName": BTC}, ts=stale - 1),
        -1021,
        401,
    )

    # Unsigned and read-only callers.
    refused(env.http.get(F + "/account"), -1002, 401)
    reader = trader(env, read_only=True)
    assert ok(get(reader, "/account")) == {"account": []}
    assert ok(post(reader, "/orderHistorical", {})) == []
    refused(order(reader, "BUY", "OPEN", 1, "30000"), -2015, 403)
    refused(post(reader, "/cancel_all", {}), -2015, 403)


def test_futures_rate_limits_follow_the_seed(tmp_path: Any) -> None:
    exchange = make_exchange(tmp_path / "limits.db")
    clock = FakeClock()
    limits = LimitSettings(signed_default=(1000, 2), public_per_ip=(1000, 2))
    app = create_app(
        exchange, clock=clock, admin_token=ADMIN_TOKEN, limits=limits, run_scheduler=False
    )
    try:
        with TestClient(app) as http:
            admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
            key = admin.create_key(admin.create_user()["id"])
            client = Client(
                BASE_URL, key["apiKey"], key["secret"], http=http, clock=ClientClock(clock)
            )
            for path in ("/account", "/openOrders"):
                answers = [client.request("GET", F + path).status_code for _ in range(21)]
                assert answers == [200] * 20 + [429], path
            cancels = [
                client.request("POST", F + "/cancel", body={"contractName": BTC, "orderId": 1})
                for _ in range(21)
            ]
            assert [r.json()["code"] for r in cancels] == [-2013] * 20 + [-1003]
    finally:
        exchange.store.close()


@pytest.mark.parametrize("path", ["/ticker", "/index"])
def test_market_pair_is_served_at_both_addresses(env: Env, path: str) -> None:
    set_index(env, "2000.5", ETH)
    prefixed = ok(public(env, F + path, {"contractName": ETH}))
    assert ok(public(env, ROOT + path, {"contractName": "e-eth-usdt"})) == prefixed
    assert prefixed.get("indexPrice", D("2000.50")) == D("2000.50")


def test_client_futures_methods(env: Env) -> None:
    set_index(env, "30000")
    maker, client = trader(env), env.trader({"USDT": "10000"})
    assert client.futures_transfer("USDT", "1000", "spot", "futures")["free"] == "1000.00000000"
    assert client.futures_ping() == {} and client.futures_server_time()["timezone"] == "UTC"
    assert len(client.futures_contracts()) == 3
    assert client.futures_edit_lever(BTC, 5)["nowLevel"] == 5
    assert client.futures_edit_margin_model(BTC, 2)["positionModel"] == 2
    placed(order(maker, "SELL", "OPEN", 10, "30000"))
    bought = client.futures_create_order(BTC, "BUY", "MARKET", "OPEN", 10, order_unit=2)
    assert client.futures_get_order(BTC, bought["orderId"])["executedQty"] == 10
    stop = client.futures_condition_order(
        BTC, "SELL", "MARKET", "CLOSE", 5, 1, "29000", order_unit=2
    )
    resting = client.futures_create_order(
        BTC, "BUY", "LIMIT", "OPEN", 1, "29000", client_order_id="r", time_in_force="GTC"
    )
    assert [o["orderId"] for o in client.futures_open_orders()] == [
        int(resting["orderId"]),
        int(stop["orderId"]),
    ]
    assert client.futures_cancel_order(BTC, client_order_id="r") == resting
    assert client.futures_cancel_all(BTC) == {"orderIds": [int(stop["orderId"])]}
    account = client.futures_account()
    (pos,) = account["account"][0]["positionVos"][0]["positions"]
    assert client.futures_edit_position_margin(pos["id"], "1")["holdAmount"] == 61
    assert client.futures_my_trades(BTC, limit=5)[0]["qty"] == 10
    assert len(client.futures_order_history(BTC, 10)) == 2  # the trigger is no order
    assert client.futures_profit_history() == []
    assert client.futures_depth(BTC)["asks"] == []
    assert client.futures_ticker(BTC)["last"] == "30000.0"
    assert client.futures_index(BTC)["markPrice"] == 30000
    assert client.futures_ticker_all()[0]["vol"] == "10"
    assert client.futures_klines(BTC, "1h", 1)[0]["vol"] == "10"


def test_depth_follows_the_book_behind_its_cache(env: Env) -> None:
    """The rendered depth is kept per book version: fills and new orders show at once."""
    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 5, "30000"))
    query = {"contractName": BTC, "limit": 1}
    assert ok(public(env, F + "/depth", query))["asks"] == [["30000.0", "5"]]
    placed(order(taker, "BUY", "OPEN", 2, "30000"))
    assert ok(public(env, F + "/depth", query))["asks"] == [["30000.0", "3"]]
    placed(order(maker, "SELL", "OPEN", 1, "29999"))
    assert ok(public(env, F + "/depth", query))["asks"] == [["29999.0", "1"]]
