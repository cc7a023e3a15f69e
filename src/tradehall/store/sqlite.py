"""The embedded default store: stdlib sqlite3 in WAL mode.

Writes happen on one thread (the group-commit writer), reads on others; each thread gets its
own connection, which WAL lets read while the writer writes. Everything but the dialect is in
``sql.py``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from tradehall.store.sql import Row, SQLStore

WAL_AUTOCHECKPOINT_PAGES = 10_000
"""The WAL size (pages of 4 KiB) at which a commit checkpoints by itself. The group committer
checkpoints from another thread well before that (``checkpoint``), so a commit rarely pays for
it; at SQLite's default (1,000) commits under load paid for one every few commits."""


class SQLiteStore(SQLStore[sqlite3.Connection]):
    errors = (sqlite3.Error,)
    checkpoints = True

    def __init__(self, path: str | Path, synchronous: str = "full") -> None:
        super().__init__()
        self.path = str(path)
        self.synchronous = synchronous.upper()

    def identity(self) -> dict[str, str]:
        path = self.path if self.path == ":memory:" else str(Path(self.path).resolve())
        return {"kind": "sqlite", "path": path}

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:" and not os.path.exists(self.path):
            # Owner-only from the start; SQLite gives its -wal and -shm files the same mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        return conn

    def checkpoint(self) -> None:
        """A PASSIVE checkpoint on this thread's own connection: it copies what it can while
        commits go on (it never waits for the writer, which never waits for it). Durability
        does not depend on it: each commit is already in the synced WAL."""
        with self._failing("checkpoint"):
            self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _after_migration(self, conn: sqlite3.Connection) -> None:
        """A migration that rebuilt a table wrote all of it to the WAL, which stays that large
        on disk until truncated: copy it into the database file and truncate it now."""
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # keep the error that got us here
                    conn.execute("ROLLBACK")
            raise

    def _executemany(self, conn: sqlite3.Connection, sql: str, rows: list[Row]) -> None:
        conn.executemany(sql, rows)
