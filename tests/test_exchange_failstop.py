"""Fail-stop on an engine failure: a command that fails with anything but a clean refusal may
have changed part of the engine's memory and staged no rows for it. The exchange then takes no
more writes and answers 503 / -1001, like after a failed commit; a restart rebuilds memory from
the last commit, without the half-made change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import Env, make_exchange
from tradehall.client import ApiError
from tradehall.engine import audit
from tradehall.engine.commands import Command, Deposit, PlaceOrder
from tradehall.store.base import StoreError
from tradehall.store.writer import GroupCommitter

USDT = 10**8


def test_an_engine_failure_stops_writes_and_restart_drops_the_half_made_change(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = env.trader({"USDT": "100000"})
    kept = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="30000")
    acknowledged = env.exchange.engine.state_hash()
    engine = env.exchange.engine
    real_apply = engine.apply

    def half_then_fail(cmd: Command) -> Any:
        if isinstance(cmd, PlaceOrder):
            # A bug in the middle of a command: one balance moved, nothing reported.
            engine.ledger.balances[(cmd.account, "USDT")][0] += 5 * USDT
            raise RuntimeError("a bug in the middle of a command")
        return real_apply(cmd)

    monkeypatch.setattr(engine, "apply", half_then_fail)
    with pytest.raises(ApiError) as failed:
        alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="29000")
    assert (failed.value.status, failed.value.code) == (500, -1000)
    assert env.exchange.failure is not None and "a bug in the middle" in env.exchange.failure

    # Nothing more is acknowledged, and memory (which holds the half-made change) is not
    # shown: writes, signed reads and public reads all answer 503 / -1001.
    monkeypatch.setattr(engine, "apply", real_apply)
    calls: list[Callable[[], object]] = [
        lambda: alice.cancel_order("BTCUSDT", order_id=kept["orderId"]),
        alice.account,
        lambda: env.public().depth("BTCUSDT"),
        lambda: env.admin.deposit(1, "USDT", "1"),
    ]
    for call in calls:
        with pytest.raises(ApiError) as refused:
            call()
        assert (refused.value.status, refused.value.code) == (503, -1001)
    status = env.admin.status()
    assert status["writable"] is False and "engine failed" in status["failure"]

    env.exchange.store.close()
    recovered = make_exchange(env.db_path)
    try:
        assert recovered.engine.state_hash() == acknowledged
        assert audit.check(recovered.engine) == []
        assert int(kept["orderId"]) in recovered.engine.spot.books["BTCUSDT"].orders
    finally:
        recovered.store.close()


def test_requests_waiting_for_a_commit_get_the_failure(tmp_path: Path) -> None:
    """A request whose command was applied but not yet committed when the engine fails on
    another one is not acknowledged: its wait ends with the failure (it does not hang)."""
    exchange = make_exchange(tmp_path / "tradehall.db")
    committer = GroupCommitter(exchange)

    async def scenario() -> None:
        exchange.apply(Deposit(1, 1, "USDT", USDT, "waiting"))
        waiting = committer.durable()  # the commit task has not run yet
        with pytest.raises(KeyError):
            exchange.apply(object())  # type: ignore[arg-type]  # the engine fails
        with pytest.raises(StoreError, match="engine failed"):
            await asyncio.wait_for(waiting, 5)

    try:
        asyncio.run(scenario())
    finally:
        committer.close()
        exchange.store.close()
