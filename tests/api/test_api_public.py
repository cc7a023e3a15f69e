"""Public market-data endpoints through HTTP: exact shapes, values, ordering and bounds.

The fake clock starts at 1_700_000_000_000 ms = 2023-11-14T22:13:20Z (a Tuesday).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from support import Env
from tradehall.client import ApiError, Client

SPOT = "/spot/open/sapi/v1"
T0 = 1_700_000_000_000
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
PLAIN = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def error_of(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value


def assert_error(exc: ApiError, status: int, code: int) -> None:
    assert (exc.status, exc.code) == (status, code), exc


def places(text: str) -> int:
    assert PLAIN.match(text), text
    return len(text.split(".")[1]) if "." in text else 0


def trade(maker: Client, taker: Client, taker_side: str, qty: str, price: str) -> None:
    """One trade of ``qty`` at ``price``: ``maker`` rests, ``taker`` crosses it fully."""
    maker_side = "SELL" if taker_side == "BUY" else "BUY"
    resting = maker.create_order("BTCUSDT", maker_side, "LIMIT", qty, price=price)
    assert resting["status"] == "NEW"
    taken = taker.create_order("BTCUSDT", taker_side, "LIMIT", qty, price=price)
    assert taken["status"] == "FILLED"


@pytest.fixture
def pair(env: Env) -> tuple[Client, Client]:
    funds = {"USDT": "1000000", "BTC": "100", "ETH": "1000"}
    return env.trader(funds), env.trader(funds)


# --------------------------------------------------------------------------- ping, time, symbols


def test_ping(env: Env) -> None:
    response = env.http.get(SPOT + "/ping")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {}
    assert env.public().ping() == {}


def test_time(env: Env) -> None:
    data = env.public().server_time()
    assert set(data) == {"serverTime", "timezone"}
    assert type(data["serverTime"]) is int
    assert data["serverTime"] == T0
    assert isinstance(data["timezone"], str) and data["timezone"]
    env.clock.advance(1234)
    assert env.public().server_time()["serverTime"] == T0 + 1234


def test_symbols(env: Env) -> None:
    data = env.public().symbols()
    assert set(data) == {"symbols"}
    by_symbol = {s["symbol"]: s for s in data["symbols"]}
    assert by_symbol == {
        "BTCUSDT": {
            "symbol": "BTCUSDT",
            "baseAsset": "BTC",
            "quoteAsset": "USDT",
            "pricePrecision": 2,
            "quantityPrecision": 6,
        },
        "ETHUSDT": {
            "symbol": "ETHUSDT",
            "baseAsset": "ETH",
            "quoteAsset": "USDT",
            "pricePrecision": 2,
            "quantityPrecision": 4,
        },
        "ETHBTC": {
            "symbol": "ETHBTC",
            "baseAsset": "ETH",
            "quoteAsset": "BTC",
            "pricePrecision": 5,
            "quantityPrecision": 3,
        },
    }
    for entry in data["symbols"]:
        assert type(entry["pricePrecision"]) is int
        assert type(entry["quantityPrecision"]) is int


# --------------------------------------------------------------------------- depth


def test_depth_empty_book(env: Env) -> None:
    assert env.public().depth("BTCUSDT") == {"time": T0, "bids": [], "asks": []}


def test_depth_aggregates_levels_best_first(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    a.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="29000")
    b.create_order("BTCUSDT", "BUY", "LIMIT", "0.015", price="29000")
    a.create_order("BTCUSDT", "BUY", "LIMIT", "0.2", price="29500.5")
    b.create_order("BTCUSDT", "BUY", "LIMIT", "1", price="28000")
    a.create_order("BTCUSDT", "SELL", "LIMIT", "0.3", price="31000")
    b.create_order("BTCUSDT", "SELL", "LIMIT", "0.004", price="30000.01")
    a.create_order("BTCUSDT", "SELL", "LIMIT", "0.006", price="30000.01")
    b.create_order("BTCUSDT", "SELL", "LIMIT", "2", price="35000")
    env.clock.advance(5)
    depth = env.public().depth("BTCUSDT")
    assert depth == {
        "time": T0 + 5,
        "bids": [
            ["29500.50", "0.200000"],
            ["29000.00", "0.025000"],
            ["28000.00", "1.000000"],
        ],
        "asks": [
            ["30000.01", "0.010000"],
            ["31000.00", "0.300000"],
            ["35000.00", "2.000000"],
        ],
    }
    # A seller sweeping two bid levels: its remainder rests as the new best ask.
    c = env.trader({"BTC": "10"})
    swept = c.create_order("BTCUSDT", "SELL", "LIMIT", "0.25", price="29000")
    assert (swept["status"], swept["executedQty"]) == ("PARTIALLY_FILLED", "0.225000")
    depth = env.public().depth("BTCUSDT", limit=2)
    assert depth["bids"] == [["28000.00", "1.000000"]]
    assert depth["asks"] == [["29000.00", "0.025000"], ["30000.01", "0.010000"]]
    env.audit()


def test_depth_after_fills_and_cancel(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    a.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="29000")
    b.create_order("BTCUSDT", "BUY", "LIMIT", "0.015", price="29000")
    a.create_order("BTCUSDT", "BUY", "LIMIT", "0.2", price="29500.5")
    last = b.create_order("BTCUSDT", "BUY", "LIMIT", "1", price="28000")
    c = env.trader({"BTC": "10"})
    # Takes 0.2 at 29500.50 and 0.015 of the 0.025 at 29000 (0.01 of a, 0.005 of b).
    taken = c.create_order("BTCUSDT", "SELL", "LIMIT", "0.215", price="29000")
    assert (taken["status"], taken["executedQty"]) == ("FILLED", "0.215000")
    assert env.public().depth("BTCUSDT")["bids"] == [
        ["29000.00", "0.010000"],
        ["28000.00", "1.000000"],
    ]
    b.cancel_order("BTCUSDT", last["orderId"])
    assert env.public().depth("BTCUSDT")["bids"] == [["29000.00", "0.010000"]]
    env.audit()


def test_depth_limit_default_and_maximum(env: Env) -> None:
    maker = env.trader({"USDT": "10000000", "BTC": "100"})
    for batch in range(11):
        orders = [
            {
                "price": str(20000 + batch * 10 + i),
                "volume": "0.001",
                "side": "BUY",
                "batchType": "LIMIT",
            }
            for i in range(10)
        ]
        assert len(maker.batch_orders("BTCUSDT", orders)["ids"]) == 10
    public = env.public()
    bids = public.depth("BTCUSDT")["bids"]
    assert len(bids) == 100
    assert bids[0] == ["20109.00", "0.001000"]
    assert bids[-1] == ["20010.00", "0.001000"]
    assert public.depth("BTCUSDT", limit=100)["bids"] == bids
    assert public.depth("BTCUSDT", limit=3)["bids"] == bids[:3]
    assert public.depth("BTCUSDT", limit=1)["bids"] == bids[:1]
    for bad in (101, 0, -1, "abc", "1.5"):
        assert_error(error_of(public.depth, "BTCUSDT", limit=bad), 400, -1102)
    env.audit()


# --------------------------------------------------------------------------- ticker


def test_ticker_without_trades(env: Env) -> None:
    assert env.public().ticker("BTCUSDT") == {
        "high": "0.00",
        "low": "0.00",
        "last": "0.00",
        "vol": "0.000000",
        "rose": "0.00",
        "time": T0,
    }


def test_ticker_after_trades_and_24h_window(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    trade(a, b, "BUY", "0.01", "30000")
    env.clock.advance(10 * MINUTE)
    trade(a, b, "SELL", "0.02", "31500")
    env.clock.advance(10 * MINUTE)
    trade(b, a, "BUY", "0.005", "28500")
    now = T0 + 20 * MINUTE
    ticker = env.public().ticker("BTCUSDT")
    assert ticker == {
        "high": "31500.00",
        "low": "28500.00",
        "last": "28500.00",
        "vol": "0.035000",
        "rose": "-5.00",  # (28500 - 30000) / 30000 = -5 %
        "time": now,
    }
    assert type(ticker["time"]) is int

    # 24 h (plus a minute) after the first trade, it has left the window.
    env.clock.advance(DAY - 20 * MINUTE + MINUTE)
    ticker = env.public().ticker("BTCUSDT")
    assert ticker["high"] == "31500.00"
    assert ticker["low"] == "28500.00"
    assert ticker["last"] == "28500.00"
    assert ticker["vol"] == "0.025000"
    assert ticker["rose"] == "-9.52"  # (28500 - 31500) / 31500 = -9.5238 %

    # A day after the last trade nothing is left in the window but the last price.
    env.clock.advance(DAY)
    ticker = env.public().ticker("BTCUSDT")
    assert ticker["last"] == "28500.00"
    assert ticker["vol"] == "0.000000"
    assert ticker["rose"] == "0.00"
    assert ticker["time"] == env.clock()
    env.audit()


def test_ticker_positive_rose_rounding(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    trade(a, b, "BUY", "0.01", "30000")
    trade(a, b, "BUY", "0.01", "31000")
    ticker = env.public().ticker("BTCUSDT")
    assert ticker["rose"] == "3.33"  # 1000 / 30000 = 3.333 %
    assert (ticker["high"], ticker["low"], ticker["vol"]) == ("31000.00", "30000.00", "0.020000")
    trade(a, b, "BUY", "0.01", "30001")
    assert env.public().ticker("BTCUSDT")["rose"] == "0.00"  # 0.0033 % rounds to 0.00
    env.audit()


# --------------------------------------------------------------------------- trades


def test_trades_newest_first_with_taker_side(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    assert env.public().trades("BTCUSDT") == {"list": []}
    trade(a, b, "BUY", "0.01", "30000")
    env.clock.advance(1000)
    trade(a, b, "SELL", "0.02", "29999.99")
    env.clock.advance(1000)
    trade(b, a, "BUY", "0.000215", "30100")
    data = env.public().trades("BTCUSDT")
    assert data == {
        "list": [
            {"price": "30100.00", "qty": "0.000215", "time": T0 + 2000, "side": "BUY"},
            {"price": "29999.99", "qty": "0.020000", "time": T0 + 1000, "side": "SELL"},
            {"price": "30000.00", "qty": "0.010000", "time": T0, "side": "BUY"},
        ]
    }
    for item in data["list"]:
        assert type(item["time"]) is int
    # Other pairs are separate.
    assert env.public().trades("ETHUSDT") == {"list": []}
    env.audit()


def test_trades_limit_bounds(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    for i in range(5):
        trade(a, b, "BUY", "0.001", str(30000 + i))
    public = env.public()
    assert len(public.trades("BTCUSDT")["list"]) == 5
    assert [t["price"] for t in public.trades("BTCUSDT", limit=2)["list"]] == [
        "30004.00",
        "30003.00",
    ]
    assert len(public.trades("BTCUSDT", limit=1000)["list"]) == 5
    assert len(public.trades("BTCUSDT", limit="3")["list"]) == 3
    for bad in (0, 1001, -5, "x"):
        assert_error(error_of(public.trades, "BTCUSDT", limit=bad), 400, -1102)
    env.audit()


def test_trades_default_limit_is_100(env: Env) -> None:
    maker = env.trader({"BTC": "10"})
    taker = env.trader({"USDT": "1000000"})
    for batch in range(11):
        maker.batch_orders(
            "BTCUSDT",
            [
                {
                    "price": str(30000 + batch * 10 + i),
                    "volume": "0.001",
                    "side": "SELL",
                    "batchType": "LIMIT",
                }
                for i in range(10)
            ],
        )
    # One taker order sweeps 110 levels: 110 trades.
    swept = taker.create_order("BTCUSDT", "BUY", "LIMIT", "0.11", price="30109")
    assert swept["status"] == "FILLED"
    public = env.public()
    default = public.trades("BTCUSDT")["list"]
    assert len(default) == 100
    assert default[0]["price"] == "30109.00"
    assert default[-1]["price"] == "30010.00"
    assert len(public.trades("BTCUSDT", limit=1000)["list"]) == 110
    env.audit()


# --------------------------------------------------------------------------- klines

# Bar open times of T0 (2023-11-14T22:13:20Z) for every interval, in ms.
BAR_OPEN = {
    "1min": 1_699_999_980_000,  # 22:13
    "5min": 1_699_999_800_000,  # 22:10
    "15min": 1_699_999_200_000,  # 22:00
    "30min": 1_699_999_200_000,  # 22:00
    "60min": 1_699_999_200_000,  # 22:00
    "1h": 1_699_999_200_000,  # alias of 60min
    "1day": 1_699_920_000_000,  # 2023-11-14 00:00
    "1week": 1_699_833_600_000,  # Monday 2023-11-13 00:00
    "1month": 1_698_796_800_000,  # 2023-11-01 00:00
}


def test_klines_empty(env: Env) -> None:
    assert env.public().klines("BTCUSDT", "1min") == []


@pytest.mark.parametrize("interval", list(BAR_OPEN))
def test_klines_every_interval(env: Env, pair: tuple[Client, Client], interval: str) -> None:
    a, b = pair
    trade(a, b, "BUY", "0.01", "30000")
    env.clock.advance(20_000)  # 22:13:40, same minute
    trade(a, b, "BUY", "0.02", "30500.5")
    trade(a, b, "SELL", "0.005", "29900")
    trade(a, b, "BUY", "0.001", "30100")
    bars = env.public().klines("BTCUSDT", interval)
    assert bars == [
        {
            "idx": BAR_OPEN[interval],
            "open": "30000.00",
            "close": "30100.00",
            "high": "30500.50",
            "low": "29900.00",
            "vol": "0.036000",
        }
    ]
    assert type(bars[0]["idx"]) is int
    env.audit()


def test_klines_oldest_first_with_flat_gap_bars(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    trade(a, b, "BUY", "0.01", "30000")  # 22:13:20
    trade(a, b, "BUY", "0.01", "30200")
    env.clock.advance(3 * MINUTE)  # 22:16:20
    trade(a, b, "SELL", "0.02", "29800")
    env.clock.advance(2 * MINUTE)  # 22:18:20, no trade
    m = BAR_OPEN["1min"]
    bars = env.public().klines("BTCUSDT", "1min")
    assert bars == [
        {
            "idx": m,
            "open": "30000.00",
            "close": "30200.00",
            "high": "30200.00",
            "low": "30000.00",
            "vol": "0.020000",
        },
        {
            "idx": m + MINUTE,
            "open": "30200.00",
            "close": "30200.00",
            "high": "30200.00",
            "low": "30200.00",
            "vol": "0.000000",
        },
        {
            "idx": m + 2 * MINUTE,
            "open": "30200.00",
            "close": "30200.00",
            "high": "30200.00",
            "low": "30200.00",
            "vol": "0.000000",
        },
        {
            "idx": m + 3 * MINUTE,
            "open": "29800.00",
            "close": "29800.00",
            "high": "29800.00",
            "low": "29800.00",
            "vol": "0.020000",
        },
        {
            "idx": m + 4 * MINUTE,
            "open": "29800.00",
            "close": "29800.00",
            "high": "29800.00",
            "low": "29800.00",
            "vol": "0.000000",
        },
        {
            "idx": m + 5 * MINUTE,
            "open": "29800.00",
            "close": "29800.00",
            "high": "29800.00",
            "low": "29800.00",
            "vol": "0.000000",
        },
    ]
    # Every idx is in ms and aligned to its interval.
    for interval, step in (("1min", MINUTE), ("5min", 5 * MINUTE), ("15min", 15 * MINUTE)):
        for bar in env.public().klines("BTCUSDT", interval):
            assert bar["idx"] % step == 0
            assert bar["idx"] > 10**12
    five = env.public().klines("BTCUSDT", "5min")
    assert [(k["idx"], k["open"], k["close"], k["vol"]) for k in five] == [
        (BAR_OPEN["5min"], "30000.00", "30200.00", "0.020000"),
        (BAR_OPEN["5min"] + 5 * MINUTE, "29800.00", "29800.00", "0.020000"),
    ]
    assert env.public().klines("BTCUSDT", "1min", limit=2) == bars[-2:]
    env.audit()


def test_klines_limit_default_and_maximum(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    trade(a, b, "BUY", "0.01", "30000")
    env.clock.advance(400 * MINUTE)
    public = env.public()
    default = public.klines("BTCUSDT", "1min")
    assert len(default) == 100
    assert default[-1]["idx"] == BAR_OPEN["1min"] + 400 * MINUTE
    assert all(default[i + 1]["idx"] - default[i]["idx"] == MINUTE for i in range(99))
    assert len(public.klines("BTCUSDT", "1min", limit=300)) == 300
    assert len(public.klines("BTCUSDT", "1min", limit=1)) == 1
    # Nothing is invented before the first bar: 401 bars exist at most.
    assert len(public.klines("BTCUSDT", "60min", limit=300)) == 7  # 22:00 .. 04:00
    for bad in (301, 0, "many"):
        assert_error(error_of(public.klines, "BTCUSDT", "1min", limit=bad), 400, -1102)
    env.audit()


@pytest.mark.parametrize("interval", ["2min", "1H", "1d", "60", "", "1MIN", "week"])
def test_klines_bad_interval(env: Env, interval: str) -> None:
    exc = error_of(env.public().klines, "BTCUSDT", interval)
    assert_error(exc, 400, -1102)


def test_klines_missing_interval(env: Env) -> None:
    response = env.public().request(
        "GET", SPOT + "/klines", params={"symbol": "BTCUSDT"}, signed=False
    )
    assert response.status_code == 400
    assert response.json()["code"] == -1102


# --------------------------------------------------------------------------- symbols in requests


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/depth", {}),
        ("/ticker", {}),
        ("/trades", {}),
        ("/klines", {"interval": "1min"}),
    ],
)
def test_unknown_symbol(env: Env, path: str, params: dict[str, str]) -> None:
    public = env.public()
    response = public.request(
        "GET", SPOT + path, params={"symbol": "DOGEUSDT", **params}, signed=False
    )
    assert response.status_code == 400
    data = response.json()
    assert set(data) == {"code", "msg"}
    assert data["code"] == -1121
    missing = public.request("GET", SPOT + path, params=params, signed=False)
    assert missing.status_code == 400
    assert missing.json()["code"] == -1102


@pytest.mark.parametrize("symbol", ["A" * 41, "A" * 64, "BTC/USDT", "BTC USDT"])
def test_a_symbol_out_of_the_legal_range_is_refused_naming_the_range(env: Env, symbol: str) -> None:
    response = env.public().request(
        "GET", SPOT + "/ticker", params={"symbol": symbol}, signed=False
    )
    assert response.status_code == 400
    assert response.json() == {
        "code": -1100,
        "msg": "illegal characters in parameter 'symbol'; legal range is '[A-Za-z0-9_-]{1,40}'",
    }


def test_lower_case_symbol_accepted(env: Env, pair: tuple[Client, Client]) -> None:
    a, b = pair
    order = a.create_order("btcusdt", "SELL", "LIMIT", "0.01", price="30000")
    assert order["symbol"] == "BTCUSDT"
    public = env.public()
    assert public.depth("btcusdt")["asks"] == [["30000.00", "0.010000"]]
    assert public.depth("BtcUsdt") == public.depth("BTCUSDT")
    b.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    assert public.ticker("btcusdt") == public.ticker("BTCUSDT")
    assert public.trades("btcusdt") == public.trades("BTCUSDT")
    assert public.klines("btcusdt", "1min") == public.klines("BTCUSDT", "1min")
    assert public.ticker("btcusdt")["last"] == "30000.00"
    env.audit()


@pytest.mark.parametrize(
    "path",
    [
        "/spot/open/sapi/v1/nope",
        "/spot/open/sapi/v4/ping",
        "/nothing/here",
        "/web/nothing.js",
        "/admin/",
        "/spot/open/sapi/v1/order/nope",
    ],
)
def test_unknown_path(env: Env, path: str) -> None:
    response = env.http.get(path)
    assert response.status_code == 404
    data = response.json()
    assert set(data) == {"code", "msg"}
    assert type(data["code"]) is int and data["code"] < 0
    assert isinstance(data["msg"], str)


def test_public_amounts_use_pair_precision(env: Env) -> None:
    a = env.trader({"BTC": "10", "ETH": "100"})
    b = env.trader({"BTC": "10", "ETH": "100"})
    a.create_order("ETHBTC", "SELL", "LIMIT", "1.5", price="0.05")
    b.create_order("ETHBTC", "BUY", "LIMIT", "0.5", price="0.05")
    public = env.public()
    assert public.depth("ETHBTC")["asks"] == [["0.05000", "1.000"]]
    assert public.trades("ETHBTC")["list"][0]["price"] == "0.05000"
    assert public.trades("ETHBTC")["list"][0]["qty"] == "0.500"
    ticker = public.ticker("ETHBTC")
    assert (ticker["last"], ticker["vol"]) == ("0.05000", "0.500")
    bar = public.klines("ETHBTC", "1min")[0]
    assert [places(bar[k]) for k in ("open", "close", "high", "low", "vol")] == [5, 5, 5, 5, 3]
    env.audit()
