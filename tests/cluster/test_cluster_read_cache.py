"""A gateway's read cache: public reads answered again from the engine's last answer while
nothing they show changed (``cluster.read_cache``), first on its own, then between a real
engine app and gateway app over the test NATS."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import (
    ADMIN_TOKEN,
    BASE_URL,
    Env,
    FakeClock,
    SplitAdmin,
    make_exchange,
    nats_unreachable,
    split_apps,
)
from tradehall.client import ApiError
from tradehall.cluster.engine_service import EngineService
from tradehall.cluster.protocol import Answered
from tradehall.cluster.read_cache import ANY, MAX_BYTES, ReadCache

DEPTH = ("/sapi/v1/depth", b"symbol=BTCUSDT")
OTHER = ("/sapi/v1/depth", b"symbol=ETHUSDT")
EVERY = ("/sapi/v1/symbols", b"")


class Engine:
    """Stands in for the engine: each ask answers with a new body and is counted."""

    def __init__(self) -> None:
        self.asked = 0
        self.gate: asyncio.Event | None = None

    async def ask(self) -> Answered:
        self.asked += 1
        body = str(self.asked).encode()
        if self.gate is not None:
            await self.gate.wait()
        return Answered(200, body)


def cache(clock: FakeClock | None = None, max_age_ms: int = 500) -> ReadCache:
    reads = ReadCache(max_age_ms, clock or FakeClock())
    reads.note("run", 1, [])
    return reads


async def read(reads: ReadCache, engine: Engine, key: tuple[str, bytes], symbol: str) -> bytes:
    return (await reads.read(key, symbol, engine.ask)).body


def test_a_read_is_answered_again_until_a_note_touches_its_symbol() -> None:
    async def scenario() -> None:
        reads, engine = cache(), Engine()
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"1"
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"1"
        reads.note("run", 2, ["ETHUSDT"])  # another pair: still valid
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"1"
        reads.note("run", 3, ["BTCUSDT", "E-BTC-USDT"])
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"
        assert (reads.hits, reads.misses, engine.asked) == (2, 2, 2)

    asyncio.run(scenario())


def test_a_read_of_every_pair_goes_stale_with_any_note() -> None:
    async def scenario() -> None:
        reads, engine = cache(), Engine()
        assert await read(reads, engine, EVERY, ANY) == b"1"
        assert await read(reads, engine, EVERY, ANY) == b"1"
        reads.note("run", 2, [])
        assert await read(reads, engine, EVERY, ANY) == b"2"

    asyncio.run(scenario())


def test_an_answer_is_kept_for_at_most_the_max_age() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        reads, engine = cache(clock, max_age_ms=500), Engine()
        await read(reads, engine, DEPTH, "BTCUSDT")
        clock.advance(499)
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"1"
        clock.advance(1)
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"

    asyncio.run(scenario())


def test_a_reply_ahead_of_its_note_sends_reads_to_the_engine_until_the_note_is_heard() -> None:
    async def scenario() -> None:
        reads, engine = cache(), Engine()
        await read(reads, engine, DEPTH, "BTCUSDT")
        reads.replied("run", 2)  # an order of ours was committed in commit 2
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"3"
        reads.note("run", 2, ["BTCUSDT"])
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"4"  # kept before: stale
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"4"

    asyncio.run(scenario())


def test_a_missed_note_or_a_new_engine_empties_the_cache() -> None:
    async def scenario() -> None:
        reads, engine = cache(), Engine()
        await read(reads, engine, DEPTH, "BTCUSDT")
        reads.note("run", 3, [])  # note 2 never came: it may have touched anything
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"
        reads.replied("other-run", 1)  # the engine restarted
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"3"
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"3"
        reads.note("other-run", 2, ["ETHUSDT"])
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"3"
        reads.lost_track()  # NATS reconnected
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"4"

    asyncio.run(scenario())


def test_reads_at_once_share_one_trip_unless_a_note_came_after_it_left() -> None:
    async def scenario() -> None:
        reads, engine = cache(), Engine()
        engine.gate = asyncio.Event()
        first = asyncio.ensure_future(read(reads, engine, DEPTH, "BTCUSDT"))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(read(reads, engine, DEPTH, "BTCUSDT"))
        await asyncio.sleep(0)
        reads.note("run", 2, ["BTCUSDT"])  # the first may have been rendered before it
        third = asyncio.ensure_future(read(reads, engine, DEPTH, "BTCUSDT"))
        await asyncio.sleep(0)
        engine.gate.set()
        assert list(await asyncio.gather(first, second, third)) == [b"1", b"1", b"2"]
        assert engine.asked == 2
        # The first answer is not kept (a note came while it was on its way); the third is.
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"

    asyncio.run(scenario())


def test_errors_are_not_kept_and_the_cache_is_bounded_in_bytes_and_age() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        reads = cache(clock)

        async def refused() -> Answered:
            return Answered(400, b'{"code":-1121}')

        await reads.read(DEPTH, "BTCUSDT", refused)
        assert reads.stats()["kept"] == 0

        big = b"x" * (1024 * 1024)

        async def large() -> Answered:
            return Answered(200, big)

        for n in range(MAX_BYTES // len(big) + 8):
            await reads.read(("/q", str(n).encode()), "X", large)
        assert 0 < reads.bytes <= MAX_BYTES
        assert reads.stats()["kept"] < MAX_BYTES // len(big)
        clock.advance(10_000)  # everything kept is too old: dropped by the next answer kept
        await read(reads, Engine(), DEPTH, "BTCUSDT")
        assert reads.stats()["kept"] == 1

    asyncio.run(scenario())


def test_a_clock_that_went_back_does_not_stretch_an_answers_life() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        reads, engine = cache(clock), Engine()
        await read(reads, engine, DEPTH, "BTCUSDT")
        clock.advance(-60_000)
        assert await read(reads, engine, DEPTH, "BTCUSDT") == b"2"

    asyncio.run(scenario())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("read"), st.sampled_from(["BTCUSDT", "ETHUSDT", ANY])),
            st.tuples(st.just("commit"), st.sampled_from(["BTCUSDT", "ETHUSDT", ""])),
            st.tuples(st.just("note"), st.booleans()),
            st.tuples(st.just("reply"), st.just(True)),
        ),
        max_size=40,
    )
)
def test_an_answer_never_predates_what_this_gateway_was_told(
    steps: list[tuple[str, object]],
) -> None:
    """A model engine commits; each commit's note and reply reach the gateway in any
    interleaving (notes in order among themselves, replies too; a note may be lost). Whatever
    happens, a read never shows a state older than the latest commit the gateway has heard
    of, by a note or by a reply, that changed what the read shows."""

    async def scenario() -> None:
        reads = ReadCache(10_000, FakeClock())
        commits: list[str] = []  # the symbol each commit touched ("" for none)
        notes: list[int] = []
        replies: list[int] = []
        told = 0  # the latest commit the gateway heard of

        for kind, arg in steps:
            if kind == "commit":
                commits.append(str(arg))
                notes.append(len(commits))
                replies.append(len(commits))
            elif kind == "note" and notes:
                number = notes.pop(0)
                if arg:  # delivered (False: lost on the way)
                    touched = commits[number - 1]
                    reads.note("run", number, [touched] if touched else [])
                    told = max(told, number)
            elif kind == "reply" and replies:
                number = replies.pop(0)
                reads.replied("run", number)
                told = max(told, number)
            elif kind == "read":
                symbol = str(arg)
                rendered = len(commits)

                async def ask(rendered: int = rendered) -> Answered:
                    return Answered(200, str(rendered).encode())

                answer = await reads.read(("/q", symbol.encode()), symbol, ask)
                required = max(
                    (
                        n
                        for n, touched in enumerate(commits[:told], 1)
                        if symbol == ANY or touched == symbol
                    ),
                    default=0,
                )
                assert int(answer.body) >= required, (symbol, answer.body, commits, told)

    asyncio.run(scenario())


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def split(tmp_path: Path) -> Iterator[tuple[Env, EngineService]]:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    db_path = tmp_path / "tradehall.db"
    exchange = make_exchange(db_path)
    clock = FakeClock()
    with split_apps(exchange, clock) as (engine_http, service, gateway, http):
        admin = SplitAdmin(BASE_URL, ADMIN_TOKEN, http=engine_http, gateway=gateway, engine=service)
        yield (
            Env(http, exchange, clock, admin, db_path, gateway=gateway, engine=engine_http),
            service,
        )
    exchange.store.close()


def test_the_gateway_answers_public_reads_without_the_engine_while_nothing_changed(
    split: tuple[Env, EngineService],
) -> None:
    env, engine = split
    maker = env.trader({"USDT": "100000", "ETH": "100"})
    public = env.public()
    before = engine.executed
    first = public.depth("BTCUSDT")
    for n in range(5):
        assert public.depth("btcusdt" if n % 2 else "BTCUSDT") == first
    # Two different query strings: two trips; every repeat answered by the gateway.
    assert engine.executed - before == 2
    # time: the gateway's clock, the one that judges signatures; ping: the engine's answer.
    assert public.server_time()["serverTime"] == env.clock.now
    assert engine.executed - before == 2
    assert public.ping() == {} and public.ping() == {}
    assert engine.executed - before == 4

    # An order in another pair changes nothing a BTCUSDT read shows.
    maker.create_order("ETHUSDT", "SELL", "LIMIT", "1", "3000")
    before = engine.executed
    assert public.depth("BTCUSDT") == first
    assert engine.executed == before

    # Our own order shows in the very next read through this gateway.
    placed = maker.create_order("BTCUSDT", "BUY", "LIMIT", "0.5", "20000")
    book = public.depth("BTCUSDT")
    assert book["bids"] == [["20000.00", "0.500000"]]
    assert engine.executed == before + 2
    maker.cancel_order("BTCUSDT", placed["orderId"])
    assert public.depth("BTCUSDT")["bids"] == []


def test_a_read_is_kept_under_the_market_its_handler_shows_not_any_it_is_sent(
    split: tuple[Env, EngineService],
) -> None:
    """A parameter the handler does not read names no market: a futures depth sent with a
    spot ``symbol`` too still follows its contract, a list of every spot pair sent with a
    ``contractName`` still follows every pair."""
    env, _ = split
    trader = env.trader({"USDT": "1000000"})
    trader.futures_transfer("USDT", "100000", "spot", "futures")
    env.admin.set_index_price("E-BTC-USDT", "30000")  # no orders are taken without an index
    public = env.public()
    depth = "/futures/open/fapi/v1/depth"
    mixed = {"contractName": "E-BTC-USDT", "symbol": "BTCUSDT"}
    assert env.http.get(depth, params=mixed).json()["bids"] == []
    trader.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", 10, "20000")
    assert env.http.get(depth, params=mixed).json()["bids"] != []

    every = "/spot/open/sapi/v2/ticker"
    aside = {"contractName": "E-BTC-USDT"}
    before = {t["symbol"]: t for t in env.http.get(every, params=aside).json()}
    trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.5", "20000")
    after = {t["symbol"]: t for t in env.http.get(every, params=aside).json()}
    assert after["BTCUSDT"] != before["BTCUSDT"]
    assert public.depth("BTCUSDT")["bids"] != []


def test_a_failed_engine_is_not_hidden_by_the_cache_even_to_a_reader_only(
    split: tuple[Env, EngineService],
) -> None:
    env, _ = split
    public = env.public()
    public.depth("BTCUSDT")
    public.depth("BTCUSDT")  # answered by the gateway
    env.exchange.failure = "a commit failed (test)"  # no client's command behind it
    deadline = time.monotonic() + 5
    while True:  # the engine announces the failure: the gateway forgets what it kept
        try:
            public.depth("BTCUSDT")
        except ApiError as exc:
            assert (exc.status, exc.code) == (503, -1001)
            break
        assert time.monotonic() < deadline, "the kept depth outlived the engine's failure"
        time.sleep(0.02)
    with pytest.raises(ApiError) as clock:
        public.server_time()  # asked of the engine again, which cannot serve
    assert clock.value.status == 503


def test_with_the_cache_off_every_read_goes_to_the_engine(tmp_path: Path) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    exchange = make_exchange(tmp_path / "tradehall.db")
    with split_apps(exchange, FakeClock(), read_cache_ms=0) as (_, engine, gateway, http):
        assert gateway.reads is None
        before = engine.executed
        for _ in range(3):
            depth = http.get("/spot/open/sapi/v1/depth", params={"symbol": "BTCUSDT"})
            assert depth.status_code == 200
        assert engine.executed - before == 3
    exchange.store.close()


def test_an_engine_that_stopped_after_a_failed_commit_is_not_hidden_by_the_cache(
    split: tuple[Env, EngineService],
) -> None:
    env, _ = split
    trader = env.trader({"USDT": "100000"})
    public = env.public()
    public.depth("BTCUSDT")  # kept by the gateway
    env.exchange.failure = "a commit failed (test)"  # fail-stop, as after a failed commit
    with pytest.raises(ApiError) as write:
        trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", "20000")
    assert (write.value.status, write.value.code) == (503, -1001)
    with pytest.raises(ApiError) as read:
        public.depth("BTCUSDT")
    assert (read.value.status, read.value.code) == (503, -1001)
