"""The group committer checkpoints SQLite's WAL on a thread of its own, so that no commit waits
for a checkpoint; a failed checkpoint loses nothing and stops nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from support import make_exchange
from tradehall.engine.commands import Deposit
from tradehall.exchange import Exchange
from tradehall.store import writer
from tradehall.store.writer import GroupCommitter


def deposits(exchange: Exchange, committer: GroupCommitter, count: int, start: int = 0) -> None:
    """``count`` deposits, each committed on its own."""

    async def run() -> None:
        for i in range(start, start + count):
            exchange.apply(Deposit(1_700_000_000_000, 1 + i % 50, "USDT", 10**6, f"tx-{i}"))
            await committer.durable()

    asyncio.run(run())


def spied(exchange: Exchange) -> list[str]:
    """The names of the threads the store's checkpoints ran on, as they run."""
    threads: list[str] = []
    real = exchange.store.checkpoint  # type: ignore[attr-defined]

    def spy() -> None:
        threads.append(threading.current_thread().name)
        real()

    exchange.store.checkpoint = spy  # type: ignore[attr-defined]
    return threads


def test_checkpoints_run_on_their_own_thread_after_so_many_commits(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")
    threads = spied(exchange)
    committer = GroupCommitter(exchange)
    deposits(exchange, committer, writer.CHECKPOINT_COMMITS - 1)
    assert threads == []
    deposits(exchange, committer, 1, start=writer.CHECKPOINT_COMMITS - 1)
    committer.close()
    assert len(threads) == 1 and threads[0].startswith("tradehall-checkpoint")
    conn = sqlite3.connect(tmp_path / "tradehall.db")
    count = conn.execute("SELECT COUNT(*) FROM transfers").fetchone()[0]
    assert count == writer.CHECKPOINT_COMMITS
    conn.close()
    exchange.store.close()


def test_a_commit_of_many_rows_is_followed_by_a_checkpoint(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")
    threads = spied(exchange)
    committer = GroupCommitter(exchange)
    # Each deposit stages a transfer and a ledger entry, and the batch one balance per account
    # (50): one commit of them all, just over the row count.
    count = writer.CHECKPOINT_ROWS // 2

    async def run() -> None:
        for i in range(count):
            exchange.apply(Deposit(1_700_000_000_000, 1 + i % 50, "USDT", 10**6, f"tx-{i}"))
        await committer.durable()

    asyncio.run(run())
    committer.close()
    assert committer.commits == 1
    assert len(threads) == 1 and threads[0].startswith("tradehall-checkpoint")
    exchange.store.close()


def test_a_failed_checkpoint_is_logged_and_commits_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")

    def broken() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    exchange.store.checkpoint = broken  # type: ignore[attr-defined]
    committer = GroupCommitter(exchange)
    deposits(exchange, committer, writer.CHECKPOINT_COMMITS)
    committer.close()
    assert exchange.failure is None
    assert "background checkpoint failed" in caplog.text
    exchange.store.close()
