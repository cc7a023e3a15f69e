"""The private streams against a real server: authentication, each account's own events and
nobody else's, and a revoked key's stream closed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from stream_support import TOPOLOGIES, Venue, error_of, next_message, open_ws, send, start_venue
from websockets.exceptions import ConnectionClosed

from tradehall.client import Client, sign, signature_payload
from tradehall.client.stream import UserStream

SPOT_USER = "/spotws_user/userData/ws"


@pytest.fixture(scope="module", params=TOPOLOGIES)
def venue(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Venue]:
    venue = start_venue(tmp_path_factory.mktemp("stream_private"), request.param)
    yield venue
    venue.stop()


async def drain(stream: UserStream, seconds: float) -> list[dict[str, Any]]:
    out = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        try:
            out.append(await asyncio.wait_for(stream.receive(), left))
        except TimeoutError:
            break
    return out


def test_each_user_sees_only_its_own_orders_and_balances(venue: Venue) -> None:
    (_, alice_key, alice_secret), (_, bob_key, bob_secret) = venue.users

    async def scenario() -> None:
        async with (
            UserStream(venue.url, alice_key, alice_secret) as alice,
            UserStream(venue.url, bob_key, bob_secret) as bob,
        ):
            with venue.client(0) as a, venue.client(1) as b:
                sell = await asyncio.to_thread(
                    a.create_order, "BTCUSDT", "SELL", "LIMIT", volume="0.5", price="25000"
                )
                alice_events = await drain(alice, 1.0)
                assert await drain(bob, 0.3) == []  # nothing of Alice's reaches Bob
                await asyncio.to_thread(
                    b.create_order, "BTCUSDT", "BUY", "LIMIT", volume="0.2", price="25000"
                )
                alice_events += await drain(alice, 1.0)
                bob_events = await drain(bob, 1.0)
                rest_order = await asyncio.to_thread(a.get_order, "BTCUSDT", sell["orderId"])
            orders = [e["tick"] for e in alice_events if e["channel"] == "user_order"]
            assert [o["status"] for o in orders] == ["NEW", "PARTIALLY_FILLED"]
            assert {o["orderId"] for o in orders} == {sell["orderId"]}
            assert orders[-1] == rest_order  # the fields of the REST order record
            assert all(e["accountType"] == "spot" for e in alice_events if "accountType" in e)
            balances = {
                e["tick"]["asset"]: e["tick"]
                for e in alice_events
                if e["channel"] == "user_balance"
            }
            assert balances["BTC"]["locked"] == "0.30000000"
            assert {"free", "locked", "accountType"} <= set(balances["USDT"])
            bob_orders = [e["tick"] for e in bob_events if e["channel"] == "user_order"]
            assert [o["status"] for o in bob_orders] == ["FILLED"]
            assert all(o["orderId"] != sell["orderId"] for o in bob_orders)
            assert all(e["channel"] in ("user_order", "user_balance") for e in bob_events)

    asyncio.run(scenario())


def test_futures_stream_pushes_orders_and_positions(venue: Venue) -> None:
    (_, alice_key, alice_secret), (_, bob_key, bob_secret) = venue.users

    async def scenario() -> None:
        async with (
            UserStream(venue.url, alice_key, alice_secret, futures=True) as alice,
            UserStream(venue.url, bob_key, bob_secret, futures=True) as bob,
        ):
            await asyncio.to_thread(venue.admin.set_index_price, "E-ETH-USDT", "2000")
            with venue.client(0) as a, venue.client(1) as b:
                await asyncio.to_thread(
                    a.futures_create_order, "E-ETH-USDT", "SELL", "LIMIT", "OPEN", 2, "2000"
                )
                await asyncio.to_thread(
                    b.futures_create_order, "E-ETH-USDT", "BUY", "LIMIT", "OPEN", 2, "2000"
                )
            alice_events = await drain(alice, 1.5)
            bob_events = await drain(bob, 1.0)
        channels = {e["channel"] for e in alice_events}
        assert {"user_order", "user_position", "user_balance"} <= channels
        pushed = next(e for e in alice_events if e["channel"] == "user_position")
        position = pushed["tick"]
        assert pushed["contractName"] == "E-ETH-USDT" and position["side"] == "SELL"
        assert position["config"] == {
            "contractId": 2,
            "contractName": "E-ETH-USDT",
            "symbol": "ETHUSDT",
        }
        bob_position = next(e["tick"] for e in bob_events if e["channel"] == "user_position")
        assert bob_position["side"] == "BUY"
        assert all(e["tick"].get("accountType", "futures") == "futures" for e in alice_events)

    asyncio.run(scenario())


def _auth(key: str, secret: str, path: str, ts: int | None = None) -> dict[str, Any]:
    stamp = str(ts if ts is not None else time.time_ns() // 1_000_000)
    signature = sign(secret, signature_payload(stamp, "GET", path, b""))
    return {"event": "sub", "params": {"apiKey": key, "ts": stamp, "sign": signature}}


def test_authentication_is_checked_and_revoked_keys_are_closed(venue: Venue) -> None:
    (alice_id, alice_key, alice_secret) = venue.users[0]

    async def scenario() -> None:
        ws = await open_ws(venue.ws + SPOT_USER)
        try:
            await send(ws, {"event": "sub", "params": {"channel": "market_btcusdt_ticker"}})
            assert (await error_of(ws))["code"] == -1002  # no apiKey
            await send(ws, _auth(alice_key, "0" * 32, SPOT_USER))
            assert (await error_of(ws))["code"] == -1022  # wrong secret
            await send(ws, _auth("f" * 32, alice_secret, SPOT_USER))
            assert (await error_of(ws))["code"] == -2015  # unknown key
            await send(ws, _auth(alice_key, alice_secret, SPOT_USER, ts=1))
            assert (await error_of(ws))["code"] == -1021  # outside the time window
            await send(ws, _auth(alice_key, alice_secret, "/position_order/ws"))
            assert (await error_of(ws))["code"] == -1022  # signed for another path
            good = _auth(alice_key, alice_secret, SPOT_USER)
            await send(ws, good)
            ok = await next_message(ws)
            assert ok["event_rep"] == "subed" and ok["status"] == "ok"
            # A second connection cannot replay the same signature.
            other = await open_ws(venue.ws + SPOT_USER)
            try:
                await send(other, good)
                assert (await error_of(other))["code"] == -1022
            finally:
                await other.close()
            # A fresh key of Alice's, revoked: its stream is closed.
            key = await asyncio.to_thread(venue.admin.create_key, alice_id)
            async with UserStream(venue.url, key["apiKey"], key["secret"]) as doomed:
                await asyncio.to_thread(venue.admin.revoke_key, key["apiKey"])
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(doomed.receive(), 5)
            # Alice's first key still streams.
            await send(ws, {"ping": 7})
            assert await next_message(ws) == {"pong": 7}
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_futures_stream_pushes_a_conditional_order_and_its_firing(venue: Venue) -> None:
    (_, alice_key, alice_secret) = venue.users[0]
    # The mark where this test trades (an earlier test's spot trades moved the index): an
    # OPEN far from the mark would start below its maintenance margin and be refused.
    venue.admin.set_index_price("E-BTC-USDT", "30000")

    async def scenario() -> None:
        async with UserStream(venue.url, alice_key, alice_secret, futures=True) as alice:
            with venue.client(0) as a, venue.client(1) as b:
                await asyncio.to_thread(
                    b.futures_create_order, "E-BTC-USDT", "SELL", "LIMIT", "OPEN", 1, "30000"
                )
                await asyncio.to_thread(
                    a.futures_create_order, "E-BTC-USDT", "BUY", "LIMIT", "OPEN", 1, "30000"
                )
                # A stop BUY above the last price: it fires when a trade reaches 30100.
                stop = await asyncio.to_thread(
                    a.futures_condition_order,
                    "E-BTC-USDT",
                    "BUY",
                    "MARKET",
                    "OPEN",
                    "1000",
                    1,
                    "30100",
                )
                waiting = await drain(alice, 1.0)
                await asyncio.to_thread(
                    b.futures_create_order, "E-BTC-USDT", "SELL", "LIMIT", "OPEN", 2, "30100"
                )
                await asyncio.to_thread(
                    a.futures_create_order, "E-BTC-USDT", "BUY", "LIMIT", "OPEN", 1, "30100"
                )
                fired = await drain(alice, 2.0)
        triggers = [e["tick"] for e in waiting + fired if e["channel"] == "user_trigger"]
        assert triggers and all(str(t["orderId"]) == stop["orderId"] for t in triggers)
        assert triggers[0]["status"] != triggers[-1]["status"]  # waiting, then fired
        orders = [e["tick"] for e in fired if e["channel"] == "user_order"]
        submitted = [o for o in orders if str(o["orderId"]) != stop["orderId"]]
        assert submitted  # the one it submitted
        # The fired conditional order reads as that order's progress, as GET /order shows it
        # (it said FILLED with nothing executed while the order it submitted rested or ended).
        last = triggers[-1]
        assert (last["status"], last["executedQty"]) == (
            submitted[-1]["status"],
            submitted[-1]["executedQty"],
        )

    asyncio.run(scenario())


def test_a_position_is_pushed_once_per_command_with_its_end_state(venue: Venue) -> None:
    """An OPEN that fills in two trades, then a CLOSE that does too: each command changes the
    taker's position twice, and its stream shows only the state after the command."""
    venue.admin.set_index_price("E-ETH-USDT", "2000")
    users = []
    for name in ("maker", "taker"):
        user = venue.admin.create_user(name)
        key = venue.admin.create_key(user["id"])
        venue.admin.deposit(user["id"], "USDT", "1000000")
        venue.admin.futures_transfer(user["id"], "USDT", "500000", "spot", "futures")
        users.append((key["apiKey"], key["secret"]))
    maker = Client(venue.url, *users[0])
    taker_key, taker_secret = users[1]
    taker = Client(venue.url, taker_key, taker_secret)

    async def positions_after(*orders: tuple[str, str, int]) -> list[dict[str, Any]]:
        """The taker's position pushes caused by its last order (the maker's rest first)."""
        for side, action, volume in orders[:-1]:
            await asyncio.to_thread(
                maker.futures_create_order, "E-ETH-USDT", side, "LIMIT", action, volume, "2000"
            )
        side, action, volume = orders[-1]
        async with UserStream(venue.url, taker_key, taker_secret, futures=True) as stream:
            await asyncio.to_thread(
                taker.futures_create_order, "E-ETH-USDT", side, "LIMIT", action, volume, "2000"
            )
            events = await drain(stream, 1.5)
        return [e["tick"] for e in events if e["channel"] == "user_position"]

    async def scenario() -> None:
        opened = await positions_after(
            ("SELL", "OPEN", 8), ("SELL", "OPEN", 4), ("BUY", "OPEN", 12)
        )
        assert [(p["side"], p["volume"]) for p in opened] == [("BUY", 12)]
        closed = await positions_after(
            ("BUY", "CLOSE", 6), ("BUY", "CLOSE", 6), ("SELL", "CLOSE", 12)
        )
        assert [p["volume"] for p in closed] == [0]

    asyncio.run(scenario())


def test_a_connection_that_never_logs_in_is_closed(venue: Venue) -> None:
    """Answering pings keeps a connection alive, not a private one without a login: it is
    closed (1008) once idle_timeout_s (3 s here) has passed since it opened."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        # Before the handshake: the server's clock starts when it accepts, which the client
        # learns later (2.998 s were measured once on a loaded machine, timed from after it).
        opened = loop.time()
        ws = await open_ws(venue.ws + SPOT_USER, ping_interval=None)
        try:
            with pytest.raises(ConnectionClosed):
                while True:
                    message = await next_message(ws, 6, pings=True)
                    if "ping" in message:
                        await send(ws, {"pong": message["ping"]})
            assert ws.close_code == 1008 and "no login" in (ws.close_reason or "")
            assert 3 <= loop.time() - opened < 8
        finally:
            await ws.close()

    asyncio.run(scenario())
