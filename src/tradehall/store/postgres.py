"""The production store: PostgreSQL through psycopg 3.

Everything but the dialect is in ``sql.py``. What differs from SQLite:

- One *write session* for migrations, commits and imports, used by one thread at a time (the
  main thread at start, then the group-commit writer). It holds a session-level advisory lock
  on the schema (``pg_try_advisory_lock``), so two tradehall processes never write one
  database; and since the lock lives and dies with the session that writes, a process that
  lost the lock can never acknowledge another write: its next commit fails (fail-stop).
- Reads use one connection per thread, opened again if it was lost (reads change nothing).
- Group commit: one transaction per batch, ``executemany`` per table, all in one pipeline, so a
  commit costs one network round trip plus the server's WAL flush.
- Every connection runs with ``synchronous_commit`` on at least (``off`` would acknowledge
  commits the server can still lose).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import conninfo

from tradehall.store.base import StoreError
from tradehall.store.factory import store_identity
from tradehall.store.schema import POSTGRESQL, TABLES
from tradehall.store.sql import Row, SQLStore

PgConnection = psycopg.Connection[tuple[Any, ...]]

DEFAULTS = {
    "application_name": "tradehall",
    "connect_timeout": "10",
    # A commit on a connection whose peer vanished fails within 30 s instead of hanging.
    "tcp_user_timeout": "30000",
    "keepalives_idle": "30",
}


def lock_key(schema: str) -> int:
    """The advisory-lock key of a schema: 64 signed bits of a hash of its name."""
    digest = hashlib.blake2b(f"tradehall:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresStore(SQLStore[PgConnection]):
    dialect = POSTGRESQL
    placeholder = "%s"
    errors = (psycopg.Error,)
    bytewise = ' COLLATE "C"'
    json_text = "(doc::json ->> '{field}')"
    ended_futures = "futures_docs"

    def __init__(self, url: str, *, role: str = "") -> None:
        super().__init__()
        self._url = url
        self.role = role
        """Whose advisory lock the write connection takes: the engine's (``""``) or, for
        ``"projector"``, the one projector's beside it."""
        try:
            params = conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(f"invalid PostgreSQL URL: {exc}") from None
        for key, value in DEFAULTS.items():
            params.setdefault(key, value)
        self._conninfo = conninfo.make_conninfo("", **params)
        self.where = f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/" + str(
            params.get("dbname", params.get("user", ""))
        )
        """The server and database, for messages (never the password)."""
        self.schema: str | None = None
        self._writer: PgConnection | None = None
        self._writer_lock = threading.Lock()
        self._candidate: PgConnection | None = None
        """A standby's session, bidding for the lock (``try_lead``)."""

    def identity(self) -> dict[str, str]:
        return store_identity(self._url)

    # ------------------------------------------------------------- dialect

    def _connect(self) -> PgConnection:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            raise StoreError(f"cannot connect to PostgreSQL at {self.where}: {detail}") from None
        sync = conn.execute("SHOW synchronous_commit").fetchone()
        if sync is not None and sync[0] == "off":
            conn.execute("SET synchronous_commit = on")
        return conn

    def _usable(self, conn: PgConnection) -> bool:
        return not conn.closed

    @contextlib.contextmanager
    def _transaction(self, conn: PgConnection) -> Iterator[None]:
        with conn.transaction():
            yield

    @contextlib.contextmanager
    def _read_snapshot(self, conn: PgConnection) -> Iterator[None]:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def _projected_sql(self) -> str:
        return "SELECT value FROM engine_state WHERE name = %s FOR UPDATE"

    def _executemany(self, conn: PgConnection, sql: str, rows: list[Row]) -> None:
        conn.cursor().executemany(sql, rows)

    def _stream(self, conn: PgConnection, sql: str) -> Iterator[Row]:
        cursor = conn.cursor(name="tradehall_export")  # server side: rows arrive in chunks
        cursor.itersize = 5000
        with cursor:
            cursor.execute(sql)
            yield from cursor

    def _write_conn(self) -> PgConnection:
        with self._writer_lock:
            if self._writer is not None:
                if self._writer.closed:
                    raise StoreError(
                        "the write connection to PostgreSQL was lost (an HA engine steps down;"
                        " another restarts to recover)"
                    )
                return self._writer
            conn = self._connect()
            try:
                self._lock_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._writer = conn
            with self._lock:
                self._connections.append(conn)
            return conn

    def _lock_schema(self, conn: PgConnection) -> None:
        row = conn.execute("SELECT current_schema()").fetchone()
        schema = row[0] if row else None
        if schema is None:
            raise StoreError(
                f"no schema of the search_path exists in {self.where}: create it first"
                " (CREATE SCHEMA ...) or fix search_path"
            )
        key = lock_key(schema if not self.role else f"{schema}:{self.role}")
        locked = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if not locked or not locked[0]:
            who = "another tradehall process" if not self.role else f"another {self.role}"
            raise StoreError(
                f"schema {schema!r} of {self.where} is in use by {who}"
                " (two servers must not share one database)"
            )
        self.schema = schema

    # ------------------------------------------------------------- leadership (HA)

    def try_lead(self) -> bool:
        """A standby's bid: take the schema's advisory lock on a write session of its own if
        no other session holds it (the leader's ended: its process died, its session was
        terminated, or it sat idle past its lease). True once this store writes."""
        with self._writer_lock:
            if self._writer is not None and not self._writer.closed:
                return True
            conn = self._candidate
            if conn is None or conn.closed:
                conn = self._candidate = self._connect()
            try:
                self._lock_schema(conn)
            except StoreError:
                return False
            self._candidate = None
            self._writer = conn
            with self._lock:
                self._connections.append(conn)
            return True

    def resign(self) -> None:
        """Give the lock back (a standby that won it but cannot serve): end the session."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            with self._lock:
                if writer in self._connections:
                    self._connections.remove(writer)
            with contextlib.suppress(*self.errors):
                writer.close()

    def hold_lease(self, seconds: float) -> None:
        """Make the write session (and with it the lock) end after ``seconds`` without a
        statement: a leader frozen (SIGSTOP, a stalled machine) loses the lock, so that a
        standby can lead; the leader renews it meanwhile (``cluster.standby.leader_heartbeat``)."""
        ms = int(seconds * 1000)
        with self._failing("setting the leader's lease"):
            conn = self._write_conn()
            conn.execute(f"SET idle_session_timeout = {ms}")
            conn.execute(f"SET idle_in_transaction_session_timeout = {ms}")

    def vacuum(self) -> None:
        """VACUUM ANALYZE of this schema's tables (autovacuum does the same on its own)."""
        with self._failing("vacuum"):
            self._write_conn().execute(f"VACUUM (ANALYZE) {', '.join(TABLES)}")

    def _table_sizes(self, conn: PgConnection) -> dict[str, int]:
        return {
            name: int(size)
            for name, size in conn.execute(
                "SELECT t, pg_total_relation_size(to_regclass(t)) FROM unnest(%s::text[]) t",
                (list(TABLES),),
            ).fetchall()
            if size is not None
        }

    def storage_stats(self) -> dict[str, object]:
        with self._failing("reading the schema's size"):
            row = (
                self._conn()
                .execute("SELECT current_setting('autovacuum'), current_schema()")
                .fetchone()
            )
        return {"autovacuum": row[0] if row else "?", "schema": row[1] if row else "?"}

    @contextlib.contextmanager
    def _batch_transaction(self, conn: PgConnection) -> Iterator[None]:
        """The whole group commit (BEGIN, every executemany, COMMIT) in one pipeline."""
        with conn.pipeline(), conn.transaction():
            yield

    def close(self) -> None:
        with self._writer_lock:
            writer = self._writer
            if writer is not None and not writer.closed:
                # Free the schema at once: the server would release the lock only once it has
                # noticed the disconnection, so a successor could still find it taken.
                with contextlib.suppress(*self.errors):
                    writer.execute("SELECT pg_advisory_unlock_all()")
        super().close()
        with self._writer_lock:
            self._writer = None
            if self._candidate is not None:
                with contextlib.suppress(*self.errors):
                    self._candidate.close()
                self._candidate = None
