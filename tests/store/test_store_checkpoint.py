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


def deposits(exchange: Exchange, committer: GroupCommitter, count: int) -> None:
    async def run() -> None:
        for i in range(count):
            exchange.apply(Deposit(1_700_000_000_000, 1 + i % 50, "USDT", 10**6, f"tx-{i}"))
            await committer.durable()

    asyncio.run(run())


def test_checkpoints_run_on_their_own_thread(tmp_path: Path) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")
    threads: list[str] = []
    real = exchange.store.checkpoint  # type: ignore[attr-defined]

    def spy() -> None:
        threads.append(threading.current_thread().name)
        real()

    exchange.store.checkpoint = spy  # type: ignore[attr-defined]
    committer = GroupCommitter(exchange)
    # Each deposit commits 3 rows (transfer, ledger entry, balance).
    deposits(exchange, committer, writer.CHECKPOINT_ROWS // 3 * 3)
    committer.close()
    assert threads and all(name.startswith("tradehall-checkpoint") for name in threads)
    conn = sqlite3.connect(tmp_path / "tradehall.db")
    assert conn.execute("SELECT COUNT(*) FROM transfers").fetchone()[0] == 3 * (
        writer.CHECKPOINT_ROWS // 3
    )
    conn.close()
    exchange.store.close()


def test_a_failed_checkpoint_is_logged_and_commits_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    exchange = make_exchange(tmp_path / "tradehall.db")

    def broken() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    exchange.store.checkpoint = broken  # type: ignore[attr-defined]
    committer = GroupCommitter(exchange)
    deposits(exchange, committer, writer.CHECKPOINT_ROWS)
    committer.close()
    assert exchange.failure is None
    assert "background checkpoint failed" in caplog.text
    exchange.store.close()
