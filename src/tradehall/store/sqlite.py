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


class SQLiteStore(SQLStore[sqlite3.Connection]):
    errors = (sqlite3.Error,)

    def __init__(self, path: str | Path, synchronous: str = "full") -> None:
        super().__init__()
        self.path = str(path)
        self.synchronous = synchronous.upper()

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:" and not os.path.exists(self.path):
            # Owner-only from the start; SQLite gives its -wal and -shm files the same mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

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
