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

from tradehall.store.schema import TABLES
from tradehall.store.sql import Row, SQLStore

FREE_PAGES_KEPT = 1024
"""Free pages (4 KiB each) left in the file after pruning, for the next inserts to reuse;
``reclaim_space`` gives back the rest."""
RECLAIM_PAGES = 8192
"""At most this many pages (32 MB) given back per call: the vacuum is one write transaction
that moves pages from the end of the file, and commits wait for it."""
AUTO_VACUUM_MODES = {0: "none", 1: "full", 2: "incremental"}

WAL_SIZE_LIMIT = 32 << 20
"""Bytes the WAL file is cut back to each time it starts over (``journal_size_limit``): it
otherwise keeps the size of its largest moment for good, and counts in the data folder."""

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
        # Takes effect in a new database (before its first table) and at the next VACUUM of
        # an older one (`tradehall db vacuum`): pruned pages can then be given back.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
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

    def auto_vacuum(self) -> str:
        with self._failing("reading auto_vacuum"):
            mode = self._conn().execute("PRAGMA auto_vacuum").fetchone()[0]
        return AUTO_VACUUM_MODES.get(int(mode), str(mode))

    def reclaim_space(self) -> int:
        """``PRAGMA incremental_vacuum`` of the free pages beyond ``FREE_PAGES_KEPT`` (at most
        ``RECLAIM_PAGES``), on the write connection (it writes); nothing in a database still
        in auto_vacuum none mode."""
        with self._failing("incremental vacuum"):
            conn = self._write_conn()
            if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
                return 0
            free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            if free <= FREE_PAGES_KEPT:
                return 0
            pages = min(free - FREE_PAGES_KEPT, RECLAIM_PAGES)
            # executescript steps the statement to its end: through execute, Python's sqlite3
            # stops after one step, which frees one page.
            conn.executescript(f"PRAGMA incremental_vacuum({pages});")
            return free - int(conn.execute("PRAGMA freelist_count").fetchone()[0])

    def vacuum(self) -> None:
        """Rewrite the whole file compactly, in incremental auto_vacuum mode from now on; the
        WAL the rewrite went through is truncated afterwards."""
        with self._failing("vacuum"):
            conn = self._write_conn()
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _table_sizes(self, conn: sqlite3.Connection) -> dict[str, int]:
        """From the dbstat virtual table when SQLite was built with it, indexes counted with
        their table; nothing otherwise (``storage_stats`` still gives the page counts)."""
        try:
            pages = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        except sqlite3.OperationalError:
            return {}
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
        sizes: dict[str, int] = {}
        for name, size in pages:
            table = owner.get(name, name)
            if table in TABLES:
                sizes[table] = sizes.get(table, 0) + int(size)
        return sizes

    def storage_stats(self) -> dict[str, object]:
        with self._failing("reading page counts"):
            conn = self._conn()

            def pragma(name: str) -> int:
                return int(conn.execute(f"PRAGMA {name}").fetchone()[0])

            files = {
                os.path.basename(path): os.path.getsize(path)
                for path in (self.path, self.path + "-wal")
                if os.path.exists(path)
            }
            return {
                "pageSize": pragma("page_size"),
                "pages": pragma("page_count"),
                "freePages": pragma("freelist_count"),
                "autoVacuum": AUTO_VACUUM_MODES.get(pragma("auto_vacuum"), "?"),
                "files": files,
            }

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

    @contextlib.contextmanager
    def _read_snapshot(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN")
        try:
            yield
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _executemany(self, conn: sqlite3.Connection, sql: str, rows: list[Row]) -> None:
        conn.executemany(sql, rows)
