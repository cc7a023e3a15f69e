"""The market-data streams against a real server and a real WebSocket client: every frame
gzip-compressed binary, every channel, history requests, heartbeats and bad input."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from stream_support import (
    TOPOLOGIES,
    Venue,
    error_of,
    next_message,
    open_ws,
    send,
    start_venue,
    subscribe,
    until,
)
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tradehall.client.stream import MarketStream, StreamError

SPOT = "/kline-api/ws"
FUTURES = "/futures/kline-api/ws"


@pytest.fixture(scope="module", params=TOPOLOGIES)
def venue(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Venue]:
    venue = start_venue(tmp_path_factory.mktemp("stream_market"), request.param)
    yield venue
    venue.stop()


def trade(venue: Venue, price: str, volume: str, symbol: str = "BTCUSDT") -> None:
    """Alice rests a SELL, Bob takes it: one trade at ``price``."""
    with venue.client(0) as alice, venue.client(1) as bob:
        alice.create_order(symbol, "SELL", "LIMIT", volume=volume, price=price)
        bob.create_order(symbol, "BUY", "LIMIT", volume=volume, price=price)


def test_spot_channels_push_book_trades_candles_and_ticker(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            for channel in (
                "market_ethusdt_depth_step0",
                "market_ethusdt_trade_ticker",
                "market_ethusdt_kline_1min",
                "market_ethusdt_kline_1day",
                "market_ethusdt_ticker",
            ):
                subed = await subscribe(ws, channel)
                assert subed["status"] == "ok" and subed["cb_id"] == "t"
                assert isinstance(subed["ts"], int)
            await asyncio.to_thread(trade, venue, "2000.5", "0.25", "ETHUSDT")
            trades = await until(ws, "market_ethusdt_trade_ticker")
            (item,) = trades["tick"]["data"]
            assert item["side"] == "BUY" and item["price"] == Decimal("2000.50")
            assert item["vol"] == Decimal("0.25") and item["amount"] == Decimal("500.125")
            assert trades["tick"]["id"] == item["id"] and isinstance(item["ds"], str)
            assert abs(trades["ts"] - time.time() * 1000) < 10_000
            candle = (await until(ws, "market_ethusdt_kline_1min"))["tick"]
            assert candle["id"] % 60 == 0 and candle["id"] <= time.time()
            assert candle["open"] == candle["close"] == Decimal("2000.50")
            assert candle["vol"] == Decimal("0.25") and candle["amount"] == Decimal("500.125")
            day = (await until(ws, "market_ethusdt_kline_1day"))["tick"]
            assert day["id"] % 86400 == 0
            ticker = (await until(ws, "market_ethusdt_ticker"))["tick"]
            assert ticker["close"] == Decimal("2000.50") and ticker["vol"] >= Decimal("0.25")
            assert set(ticker) == {"amount", "vol", "open", "close", "high", "low", "rose"}
            # A resting order changes the book: the next depth push shows it.
            with venue.client(0) as alice:
                await asyncio.to_thread(
                    alice.create_order, "ETHUSDT", "SELL", "LIMIT", volume="1.5", price="2100"
                )
            while True:
                book = (await until(ws, "market_ethusdt_depth_step0"))["tick"]
                if book["asks"]:
                    break
            assert book["asks"][0] == ["2100.00", Decimal("1.5")]
            assert set(book) == {"asks", "buys"}
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_depth_is_coalesced_and_capped_at_thirty_levels(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            await subscribe(ws, "market_btcusdt_depth_step0")
            await next_message(ws)  # the snapshot at subscription
            with venue.client(0) as alice:
                orders = [
                    {
                        "price": str(40000 + i),
                        "volume": "0.01",
                        "side": "SELL",
                        "batchType": "LIMIT",
                    }
                    for i in range(40)
                ]
                for chunk in range(0, 40, 10):
                    await asyncio.to_thread(
                        alice.batch_orders, "BTCUSDT", orders[chunk : chunk + 10]
                    )
            await asyncio.sleep(0.5)
            pushes = []
            while True:
                try:
                    pushes.append(await next_message(ws, 0.5))
                except TimeoutError:
                    break
            assert pushes and len(pushes) <= 4  # four commits at most, coalesced
            asks = pushes[-1]["tick"]["asks"]
            assert len(asks) == 30 and asks[0][0] == "40000.00" and asks[-1][0] == "40029.00"
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_history_requests_answer_klines_and_trades(venue: Venue) -> None:
    trade(venue, "30000", "0.01")
    trade(venue, "30010", "0.02")

    async def scenario() -> None:
        async with MarketStream(venue.url) as stream:
            candles = await stream.request("market_btcusdt_kline_5min", pageSize=3)
            assert isinstance(candles, list) and 1 <= len(candles) <= 3
            assert candles[-1]["close"] == Decimal("30010.00")
            trades = await stream.request("market_btcusdt_trade_ticker", pageSize=2)
            assert isinstance(trades, list) and [t["price"] for t in trades] == [
                Decimal("30010.00"),
                Decimal("30000.00"),
            ]
            before = await stream.request(
                "market_btcusdt_trade_ticker", endIdx=str(int(time.time()) - 3600)
            )
            assert before == []
            old = await stream.request("market_btcusdt_kline_1min", endIdx=1, pageSize=5)
            assert old == []
            with pytest.raises(StreamError) as refused:
                await stream.request("market_btcusdt_kline_1min", pageSize=301)
            assert refused.value.code == -1102
            # A time in milliseconds (REST's candle idx) is refused, not read as the far
            # future (the newest page again and again for a client paging back).
            with pytest.raises(StreamError) as refused:
                await stream.request("market_btcusdt_kline_1min", endIdx=int(time.time() * 1000))
            assert refused.value.code == -1102 and "milliseconds" in str(refused.value)

    asyncio.run(scenario())


def test_futures_channels_and_mark_price(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + FUTURES)
        try:
            await subscribe(ws, "market_e_btcusdt_depth_step0")
            await subscribe(ws, "mark_price_e_btcusdt")
            await asyncio.to_thread(venue.admin.set_index_price, "E-BTC-USDT", "31000")
            # The index follows BTCUSDT once it trades; whatever it is, the push says it.
            mark = (await until(ws, "mark_price_e_btcusdt", timeout=8))["tick"]
            for _ in range(20):
                if mark["indexPrice"] > 0 and mark["markPrice"] > 0:
                    break
                mark = (await until(ws, "mark_price_e_btcusdt", timeout=8))["tick"]
            rest = await asyncio.to_thread(venue.client(0).futures_index, "E-BTC-USDT")
            assert mark["indexPrice"] > 0 and Decimal(str(rest["indexPrice"])) > 0
            assert mark["contractName"] == "E-BTC-USDT" and mark["nextFundingTime"] > 0
            assert {"markPrice", "fundingRate"} <= set(mark)
            with venue.client(0) as alice:
                await asyncio.to_thread(
                    alice.futures_create_order, "E-BTC-USDT", "BUY", "LIMIT", "OPEN", 3, "30500"
                )
            while True:
                book = (await until(ws, "market_e_btcusdt_depth_step0"))["tick"]
                if book["buys"]:
                    break
            assert book["buys"][0] == ["30500.0", 3]
            # A spot symbol is not a futures market, and the other way round.
            await send(ws, {"event": "sub", "params": {"channel": "market_btcusdt_ticker"}})
            assert (await error_of(ws))["code"] == -1121
        finally:
            await ws.close()
        spot = await open_ws(venue.ws + SPOT)
        try:
            await send(spot, {"event": "sub", "params": {"channel": "mark_price_e_btcusdt"}})
            assert (await error_of(spot))["code"] == -1121
        finally:
            await spot.close()
        # The family's futures host: /kline-api/ws on a host named futures...
        port = int(venue.url.rsplit(":", 1)[1])
        host = await open_ws(f"ws://futures.localhost:{port}{SPOT}", host="127.0.0.1", port=port)
        try:
            assert (await subscribe(host, "market_e_btcusdt_ticker"))["status"] == "ok"
        finally:
            await host.close()

    asyncio.run(scenario())


def test_ping_pong_and_the_idle_client_is_closed(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT, ping_interval=None)
        try:
            await send(ws, {"ping": 1234})
            assert await next_message(ws) == {"pong": 1234}
            ping = await next_message(ws, 3, pings=True)  # heartbeat_s = 1 here
            assert set(ping) == {"ping"} and isinstance(ping["ping"], int)
            await send(ws, {"pong": ping["ping"]})
            # Silent from now on: closed after idle_timeout_s (3 s here).
            with pytest.raises(ConnectionClosed):
                while True:
                    await next_message(ws, 6, pings=True)
            assert ws.close_code == 1008
        finally:
            await ws.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("not json", -1102),
        ("[1, 2]", -1102),
        (json.dumps({"event": "subscribe", "params": {"channel": "x"}}), -1020),
        (json.dumps({"event": "sub", "params": {"channel": "depth_btcusdt"}}), -1020),
        (json.dumps({"event": "sub", "params": {"channel": "market_dogeusdt_ticker"}}), -1121),
        (json.dumps({"event": "sub", "params": {"channel": "market_btcusdt_kline_2min"}}), -1102),
        (json.dumps({"event": "sub", "params": "market_btcusdt_ticker"}), -1102),
        (json.dumps({"event": "unsub", "params": {"channel": "market_btcusdt_ticker"}}), -1102),
        (json.dumps({"event": "sub", "params": {"channel": "x" * 2000}}), -1102),
    ],
)
def test_bad_input_gets_one_error_frame_and_the_connection_stays_usable(
    venue: Venue, message: str, code: int
) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            await send(ws, message)
            error = await next_message(ws)
            assert error["code"] == code and isinstance(error["msg"], str) and error["msg"]
            assert error["event_rep"] == "error"  # also when the message names no channel
            assert (await subscribe(ws, "market_btcusdt_ticker"))["status"] == "ok"
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_a_channel_names_its_symbol_in_any_case_and_pushes_under_the_name_asked(
    venue: Venue,
) -> None:
    """Symbols are read in any case (the api contract); the channel is the name the client
    sent, so its pushes arrive under that name."""
    trade(venue, "30000", "0.01")

    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            subed = await subscribe(ws, "market_BTCUSDT_ticker")
            assert subed["status"] == "ok" and subed["channel"] == "market_BTCUSDT_ticker"
            first = await until(ws, "market_BTCUSDT_ticker")
            assert first["tick"]["close"] == Decimal("30000.00")
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_an_unknown_path_answers_the_handshake_404(venue: Venue) -> None:
    async def scenario() -> None:
        for path in ("/kline-api/wss", "/kline-api/ws/"):
            with pytest.raises(InvalidStatus) as refused:
                await open_ws(venue.ws + path)
            response = refused.value.response
            assert response.status_code == 404, path
            body = json.loads(response.body)
            assert body["code"] == -1020 and path in body["msg"]
            assert response.headers["x-request-id"]  # as every HTTP answer

    asyncio.run(scenario())


def test_a_message_without_an_event_is_named_as_json(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            await send(ws, {"params": {"channel": "market_btcusdt_ticker"}})
            error = await error_of(ws)
            assert error["code"] == -1020 and "unknown event null" in error["msg"]
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_too_many_subscriptions_are_refused(venue: Venue) -> None:
    intervals = ("1min", "5min", "15min", "30min", "60min", "1day", "1week", "1month")
    channels = [f"market_btcusdt_kline_{i}" for i in intervals] + [
        f"market_{s}_ticker" for s in ("btcusdt", "ethusdt", "ethbtc")
    ]

    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            for channel in channels:
                await subscribe(ws, channel)
            await subscribe(ws, "market_btcusdt_depth_step0")  # the 12th: the limit here
            await send(ws, {"event": "sub", "params": {"channel": "market_ethusdt_depth_step0"}})
            error = await error_of(ws)
            assert error["code"] == -1102 and "too many subscriptions" in error["msg"]
            await send(ws, {"event": "unsub", "params": {"channel": channels[0]}})
            await until(ws, channels[0], event_rep="unsubed")
            assert (await subscribe(ws, "market_ethusdt_depth_step0"))["status"] == "ok"
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_unsubscribed_channels_stop_pushing(venue: Venue) -> None:
    async def scenario() -> None:
        async with MarketStream(venue.url) as stream:
            await stream.subscribe("market_ethbtc_trade_ticker")
            await stream.unsubscribe("market_ethbtc_trade_ticker")
            await asyncio.to_thread(trade, venue, "0.05", "0.1", "ETHBTC")
            with pytest.raises(TimeoutError):
                while True:
                    message = await asyncio.wait_for(stream.receive(), 1.0)
                    assert message.get("channel") != "market_ethbtc_trade_ticker"

    asyncio.run(scenario())


def test_a_message_over_one_mebibyte_closes_the_connection(venue: Venue) -> None:
    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT)
        try:
            await send(ws, json.dumps({"event": "sub", "pad": "x" * (1 << 20)}))
            with pytest.raises(ConnectionClosed):
                await next_message(ws)
            assert ws.close_code == 1009
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_a_depth_push_that_would_repeat_the_last_one_is_not_sent(venue: Venue) -> None:
    """A book change below the 30 levels shown moves the book's version but not the tick:
    nothing is pushed (the ping, every heartbeat_s, is the heartbeat; docs/websocket.md)."""

    def sells(prices: list[int]) -> None:
        orders = [
            {"price": str(p), "volume": "0.01", "side": "SELL", "batchType": "LIMIT"}
            for p in prices
        ]
        with venue.client(0) as alice:
            for chunk in range(0, len(orders), 10):
                alice.batch_orders("BTCUSDT", orders[chunk : chunk + 10])

    async def pushes(ws: Any, seconds: float) -> list[Any]:
        out = []
        while True:
            try:
                out.append(await next_message(ws, seconds))
            except TimeoutError:
                return out

    async def scenario() -> None:
        await asyncio.to_thread(sells, list(range(41000, 41031)))  # 31 levels at least
        ws = await open_ws(venue.ws + SPOT)
        try:
            await subscribe(ws, "market_btcusdt_depth_step0")
            await next_message(ws)  # the snapshot at subscription
            await asyncio.to_thread(sells, [39990])  # shown: pushed
            shown = await pushes(ws, 0.5)
            assert shown and shown[-1]["tick"]["asks"][0][0] == "39990.00"
            await asyncio.to_thread(sells, [49000, 49001])  # below the 30 levels shown
            assert await pushes(ws, 0.6) == []
            await asyncio.to_thread(sells, [39980])  # shown again: pushed
            again = await pushes(ws, 0.5)
            assert again and again[-1]["tick"]["asks"][0][0] == "39980.00"
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_a_mark_price_push_that_would_repeat_the_last_one_is_not_sent(venue: Venue) -> None:
    """The operator setting the index it already has changes the contract's state, not its
    prices: nothing is pushed."""

    async def scenario() -> None:
        ws = await open_ws(venue.ws + FUTURES)
        try:
            await subscribe(ws, "mark_price_e_ethusdt")
            await asyncio.to_thread(venue.admin.set_index_price, "E-ETH-USDT", "2100")
            pushed = (await until(ws, "mark_price_e_ethusdt", timeout=8))["tick"]
            while pushed["indexPrice"] != Decimal("2100"):
                pushed = (await until(ws, "mark_price_e_ethusdt", timeout=8))["tick"]
            for _ in range(2):
                await asyncio.to_thread(venue.admin.set_index_price, "E-ETH-USDT", "2100")
            with pytest.raises(TimeoutError):
                await until(ws, "mark_price_e_ethusdt", timeout=0.8)
            await asyncio.to_thread(venue.admin.set_index_price, "E-ETH-USDT", "2101")
            moved = (await until(ws, "mark_price_e_ethusdt", timeout=8))["tick"]
            assert moved["indexPrice"] == Decimal("2101")
        finally:
            await ws.close()

    asyncio.run(scenario())
