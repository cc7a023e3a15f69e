"""A gateway's side of the command path, against a stand-in engine on a real NATS: commands
admitted together travel in one message, answers come back in order, a lost answer resends
the same ids, an answer that did not fit is asked for again, no engine is a 503 at once."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest
from nats.aio.msg import Msg

from support import NATS_URL, nats_unreachable
from tradehall.api.errors import ApiError
from tradehall.cluster.gateway import Gateway
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import (
    ASK_AGAIN,
    Answered,
    Commands,
    Forwarded,
    KeySet,
    Replies,
    decode_commands,
    encode,
    wire_params,
)
from tradehall.config import LimitSettings

Reply = Callable[[Commands, int], Awaitable[list[Answered] | None] | list[Answered] | None]
"""The stand-in engine: the answers to a message (its number given), or None to drop it."""


@pytest.fixture(autouse=True)
def needs_nats() -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)


def echo(batch: Commands, number: int) -> list[Answered]:
    return [Answered(200, fwd.id.encode()) for fwd in batch.commands]


def command(n: int) -> Forwarded:
    return Forwarded(f"c-{n}", "POST", "/p", wire_params({"n": n}), "key", "127.0.0.1")


async def run(
    reply: Reply | None,
    send: Callable[[Gateway], Awaitable[list[Answered]]],
    *,
    timeout: float = 2.0,
    batch_max: int = 128,
    batch_delay: float = 0.0,
    engine_wait: float = 0.0,
    engine_after: float = 0.0,
) -> tuple[list[Answered], list[Commands]]:
    """What ``send`` gets through a gateway in front of ``reply`` (no engine when None;
    one that starts listening only ``engine_after`` seconds after the gateway sent), and the
    messages the engine received."""
    subject = f"test-{uuid.uuid4().hex}"
    received: list[Commands] = []
    later: list[asyncio.Task[None]] = []
    engine = await connect(NATS_URL, "stand-in engine")
    if reply is not None:

        async def on_command(msg: Msg) -> None:
            batch = decode_commands(msg.data)
            received.append(batch)
            answers = reply(batch, len(received))
            if inspect.isawaitable(answers):
                answers = await answers
            if answers is not None:
                await msg.respond(encode(Replies(answers, "stand-in", 0)))

        async def listen() -> None:
            await asyncio.sleep(engine_after)
            await engine.subscribe(f"{subject}.cmd", cb=on_command)
            await engine.flush()

        if engine_after:
            later.append(asyncio.get_running_loop().create_task(listen()))
        else:
            await listen()
    limits = LimitSettings(enabled=False)
    gateway = Gateway(
        NATS_URL,
        subject,
        limits=limits,
        timeout=timeout,
        batch_max=batch_max,
        batch_delay=batch_delay,
        engine_wait=engine_wait,
    )
    try:
        async with gateway.running():
            return await send(gateway), received
    finally:
        await engine.close()


def gather(count: int) -> Callable[[Gateway], asyncio.Future[list[Answered]]]:
    """``count`` commands forwarded in one event-loop turn."""
    return lambda gateway: asyncio.gather(*(gateway.forward(command(n)) for n in range(count)))


def test_commands_forwarded_in_one_turn_travel_together_and_come_back_in_order() -> None:
    answers, received = asyncio.run(run(echo, gather(10), batch_max=4))
    assert [a.body for a in answers] == [f"c-{n}".encode() for n in range(10)]
    assert [[c.id for c in batch.commands] for batch in received] == [
        ["c-0", "c-1", "c-2", "c-3"],
        ["c-4", "c-5", "c-6", "c-7"],
        ["c-8", "c-9"],
    ]
    assert {batch.attempt for batch in received} == {1}


def test_commands_forwarded_in_turns_apart_travel_apart() -> None:
    async def apart(gateway: Gateway) -> list[Answered]:
        first = gateway.forward(command(0))
        await asyncio.sleep(0.05)
        return [await first, await gateway.forward(command(1))]

    answers, received = asyncio.run(run(echo, apart))
    assert [a.body for a in answers] == [b"c-0", b"c-1"]
    assert [len(batch.commands) for batch in received] == [1, 1]


def test_a_busy_worker_waits_for_more_an_idle_one_does_not() -> None:
    """With ``batch_delay``: the first command goes at once (nothing in flight); those
    forwarded while its message is in flight wait up to the delay, and go together."""

    async def slow_first(batch: Commands, number: int) -> list[Answered]:
        if number == 1:
            await asyncio.sleep(0.3)
        return echo(batch, number)

    async def spread(gateway: Gateway) -> list[Answered]:
        sent = time.monotonic()
        first = gateway.forward(command(0))
        await asyncio.sleep(0.02)
        second = gateway.forward(command(1))
        await asyncio.sleep(0.02)  # another turn, within the delay
        third = gateway.forward(command(2))
        answers = list(await asyncio.gather(first, second, third))
        assert time.monotonic() - sent < 2
        return answers

    answers, received = asyncio.run(run(slow_first, spread, batch_delay=0.15))
    assert [a.body for a in answers] == [b"c-0", b"c-1", b"c-2"]
    assert [[c.id for c in batch.commands] for batch in received] == [["c-0"], ["c-1", "c-2"]]


def test_a_lost_answer_resends_the_same_ids_once() -> None:
    def lose_first(batch: Commands, number: int) -> list[Answered] | None:
        return None if number == 1 else echo(batch, number)

    answers, received = asyncio.run(run(lose_first, gather(3), timeout=0.3))
    assert [a.body for a in answers] == [b"c-0", b"c-1", b"c-2"]
    assert [b.attempt for b in received] == [1, 2]
    assert received[0].commands == received[1].commands
    assert received[0].first_sent == received[1].first_sent


def test_no_answer_to_the_resend_either_is_a_503() -> None:
    started = time.monotonic()
    with pytest.raises(ApiError) as refused:
        asyncio.run(run(lambda batch, number: None, gather(2), timeout=0.2))
    assert (refused.value.status, refused.value.code) == (503, -1001)
    assert "outcome is unknown" in refused.value.msg  # it may have been applied
    assert time.monotonic() - started < 5


def test_an_answer_that_did_not_fit_is_asked_for_again_alone() -> None:
    def too_large(batch: Commands, number: int) -> list[Answered]:
        answers = echo(batch, number)
        if number == 1:
            answers[1] = ASK_AGAIN
        return answers

    answers, received = asyncio.run(run(too_large, gather(3)))
    assert [a.body for a in answers] == [b"c-0", b"c-1", b"c-2"]
    again = received[1]
    assert [c.id for c in again.commands] == ["c-1"]
    assert again.attempt == 2  # a resend: the engine answers it from its window


def test_an_answer_asked_for_again_in_vain_fails_alone() -> None:
    def too_large_then_lost(batch: Commands, number: int) -> list[Answered] | None:
        if number > 1:
            return None  # the ask-again and its resend get no answer
        answers = echo(batch, number)
        answers[1] = ASK_AGAIN
        return answers

    async def each(gateway: Gateway) -> list[Answered]:
        futures = [gateway.forward(command(n)) for n in range(3)]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert isinstance(outcomes[1], ApiError) and outcomes[1].code == -1001
        return [o for o in outcomes if isinstance(o, Answered)]

    answers, received = asyncio.run(run(too_large_then_lost, each, timeout=0.2))
    assert [a.body for a in answers] == [b"c-0", b"c-2"]
    sent = [[c.id for c in b.commands] for b in received]
    assert sent == [["c-0", "c-1", "c-2"], ["c-1"], ["c-1"]]


def test_no_engine_is_a_503_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(ApiError) as refused:
        asyncio.run(run(None, gather(3), timeout=5))
    assert (refused.value.status, refused.value.code) == (503, -1001)
    assert "no engine" in refused.value.msg
    assert time.monotonic() - started < 4  # not the timeout: NATS says no one listens


def test_a_gateway_keys_redis_with_the_namespace_its_engine_tells() -> None:
    """No store of its own: until its engine tells the venue's namespace (with the keys), a
    gateway on Redis admits nothing; ``[limits] namespace`` in its config wins."""
    redis = "redis://127.0.0.1:6379"

    async def scenario() -> tuple[str | None, str | None, int]:
        subject = f"test-{uuid.uuid4().hex}"
        engine = await connect(NATS_URL, "stand-in engine")

        async def on_keys(msg: Msg) -> None:
            await msg.respond(encode(KeySet([], "told-by-engine")))

        told = Gateway(NATS_URL, subject, limits=LimitSettings(storage=redis))
        configured = Gateway(
            NATS_URL, subject, limits=LimitSettings(storage=redis, namespace="own")
        )
        assert told.namespace is None and told.limiter is not None
        with pytest.raises(ApiError) as refused:
            await told.limiter.admit_ip("127.0.0.1")
        try:
            await engine.subscribe(f"{subject}.keys", cb=on_keys)
            await engine.flush()
            async with told.running(), configured.running():
                assert told.limiter.namespace == told.namespace
                return told.namespace, configured.namespace, refused.value.status
        finally:
            await engine.close()

    told, configured, status = asyncio.run(scenario())
    assert (told, configured, status) == ("told-by-engine", "own", 503)


def test_with_engine_wait_a_command_waits_for_an_engine_to_listen() -> None:
    """An HA standby taking over: no engine listens for a moment. With --engine-wait-ms the
    gateway sends again until one does (nothing was delivered: nothing can apply twice)."""
    started = time.monotonic()
    answers, received = asyncio.run(run(echo, gather(2), engine_wait=3.0, engine_after=0.5))
    assert [a.body for a in answers] == [b"c-0", b"c-1"]
    assert [b.attempt for b in received] == [1]  # delivered once, as a first send
    assert 0.4 < time.monotonic() - started < 3


def test_with_engine_wait_no_engine_is_a_503_after_the_wait() -> None:
    started = time.monotonic()
    with pytest.raises(ApiError) as refused:
        asyncio.run(run(None, gather(1), engine_wait=0.5))
    assert (refused.value.status, refused.value.code) == (503, -1001)
    assert 0.4 < time.monotonic() - started < 2.5


def test_with_engine_wait_a_lost_answer_is_resent_while_the_wait_lasts() -> None:
    """A frozen leader takes the first sends; its successor leads seconds later: the gateway
    resends (same ids) until it answers, for as long as --engine-wait-ms."""

    def lose_two(batch: Commands, number: int) -> list[Answered] | None:
        return None if number <= 2 else echo(batch, number)

    answers, received = asyncio.run(run(lose_two, gather(2), timeout=0.3, engine_wait=1.5))
    assert [a.body for a in answers] == [b"c-0", b"c-1"]
    assert [b.attempt for b in received] == [1, 2, 2]
