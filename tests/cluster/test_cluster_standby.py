"""A standby's follower (``cluster.standby``): it replays the journal as the leader commits
it, to the leader's state, checks the leader's state hashes, and keeps the ids of the
commands committed lately (what a new leader answers resends from)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support import TEST_SECRET_BOX, journaled_store
from tradehall.cluster.standby import Diverged, Follower, recent_commands
from tradehall.config import load_config
from tradehall.engine.commands import Deposit, PlaceOrder
from tradehall.exchange import Exchange
from tradehall.store.journal import CommandIds, HashMark, StateHashed, encode
from tradehall.store.journaled import JournaledStore


def leader(store: JournaledStore, hash_every_s: float = 0.0) -> Exchange:
    store.migrate()
    store.start_appending()
    exchange = Exchange(load_config(), store, secret_box=TEST_SECRET_BOX)
    exchange.recover()
    exchange.hash_every_s = hash_every_s
    return exchange


def follower_of(path: Path) -> Follower:
    store = journaled_store(path)
    store.journal._ready = True  # a standby writes nothing, not even the journal's table
    follower = Follower(load_config(), store, TEST_SECRET_BOX, "standby")
    follower.load()
    return follower


def trade(exchange: Exchange, user: int, n: int, ids: list[str] | None = None) -> None:
    for i in range(n):
        price = 2_000_000 + (i % 7) * 100
        side = "BUY" if i % 2 else "SELL"
        exchange.apply(PlaceOrder(1, user, "BTCUSDT", side, "LIMIT", price, 1_000))
    if ids:
        exchange.pending.command_ids.extend(ids)
    exchange.commit_now()


def funded_user(exchange: Exchange) -> int:
    user = exchange.create_user("u", 1)
    exchange.apply(Deposit(1, user.id, "USDT", 10**14, "tx-usdt"))
    exchange.apply(Deposit(1, user.id, "BTC", 10**10, "tx-btc"))
    exchange.commit_now()
    return user.id


def test_a_follower_reaches_the_leaders_state_record_by_record(tmp_path: Path) -> None:
    live = leader(journaled_store(tmp_path / "tradehall.db"), hash_every_s=0.001)
    user = funded_user(live)
    trade(live, user, 10)
    follower = follower_of(tmp_path / "tradehall.db")  # cold: the journal after the tables
    assert follower.exchange is not None
    assert follower.seq == live.store.head  # type: ignore[attr-defined]
    assert follower.exchange.engine.state_hash() == live.engine.state_hash()
    for round in range(8):  # warm: record by record as they are committed
        trade(live, user, 3 + round, ids=[f"cmd-{round}"])
        assert follower.step() == 1
        assert follower.exchange.engine.state_hash() == live.engine.state_hash()
        time.sleep(0.05)  # the leader's digest is made in a forked child meanwhile
    assert follower.step() == 0
    # The leader's digests are made in forked children and land in later records: on a
    # loaded machine a child can outlast the rounds above, so a few more rounds may be needed.
    deadline = time.monotonic() + 20
    extra = 0
    while follower.checked < 2 and time.monotonic() < deadline:
        trade(live, user, 1, ids=[f"more-{extra}"])
        assert follower.step() == 1
        assert follower.exchange.engine.state_hash() == live.engine.state_hash()
        extra += 1
        time.sleep(0.05)
    assert follower.checked >= 2  # the leader's digests were checked, and matched
    assert {f"cmd-{r}" for r in range(5)} <= set(follower.recent.ids)


def test_a_follower_that_reaches_another_state_stops(tmp_path: Path) -> None:
    live = leader(journaled_store(tmp_path / "tradehall.db"))
    user = funded_user(live)
    follower = follower_of(tmp_path / "tradehall.db")
    live.apply(PlaceOrder(1, user, "BTCUSDT", "BUY", "LIMIT", 2_000_000, 1_000))
    marked = live.take_pending()
    marked.entries.append(HashMark())
    live.store.commit(marked)
    assert follower.step() == 1  # it hashes its state after the marked record
    live.apply(PlaceOrder(1, user, "BTCUSDT", "BUY", "LIMIT", 2_000_000, 1_000))
    later = live.take_pending()
    later.entries.append(StateHashed(marked.journal_seq, "not the leader's state"))
    live.store.commit(later)
    with pytest.raises(Diverged, match="must not lead"):
        follower.step()


def test_recent_commands_are_the_journals_last_seconds(tmp_path: Path) -> None:
    store = journaled_store(tmp_path / "tradehall.db")
    live = leader(store)
    old = time.time_ns() // 1_000_000 - 120_000  # two minutes ago: beyond the horizon
    fmt, body = encode([Deposit(1, 1, "USDT", 1, "tx-old"), CommandIds(["old-id"])])
    store.journal.append(1, store.epoch, old, fmt, body)
    store.head = 1
    user = funded_user(live)
    trade(live, user, 2, ids=["new-a", "new-b"])
    recent = recent_commands(store, store.head)
    assert set(recent.ids) == {"new-a", "new-b"}
    assert recent.ids["new-a"] == store.head
    assert recent.since > old
