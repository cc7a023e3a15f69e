"""Choosing the store: SQLite in the data folder by default, PostgreSQL for a postgresql:// URL."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tradehall.datadir import DataDir
from tradehall.store.base import StoreError

if TYPE_CHECKING:
    from tradehall.store.journal import Journal
    from tradehall.store.journaled import JournaledStore
    from tradehall.store.sql import SQLStore

POSTGRES_SCHEMES = ("postgresql", "postgres")
ENV_VAR = "TRADEHALL_DATABASE"


def database_problem(database: str) -> str | None:
    """Why ``database`` is not a usable setting, or None. Never repeats the value itself (it
    may hold a password)."""
    if not database:
        return None
    scheme = database.split("://", 1)[0].lower() if "://" in database else ""
    if scheme in POSTGRES_SCHEMES:
        return None
    shown = f"scheme {scheme!r}" if scheme else "a value that is not a URL"
    return (
        f"unsupported database ({shown}): give a postgresql:// URL, or nothing for SQLite in"
        " the data folder"
    )


IDENTITY_KEYS = ("host", "hostaddr", "port", "dbname", "user", "options")
"""What names a PostgreSQL store (its schema by ``options``' search_path); a password or an
application name does not."""


def store_identity(database: str | None) -> dict[str, str]:
    """Which store ``database`` names, comparable between processes and safe to write down
    (never the password): SQLite is the data folder's own."""
    if not database:
        return {"kind": "sqlite"}
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(database)
    except ProgrammingError:  # unparsable: it names no store a server could be running on
        return {"kind": "postgresql", "unparsable": "yes"}
    named = {k: str(parts[k]) for k in IDENTITY_KEYS if parts.get(k) not in (None, "")}
    return {"kind": "postgresql", **named}


def open_store(
    database: str | None, data_dir: str | os.PathLike[str], *, synchronous: str = "full"
) -> JournaledStore:
    """The store for ``database``: empty or None is SQLite in ``data_dir`` (with PRAGMA
    synchronous ``synchronous``), the journal in a file of its own beside the projections;
    a ``postgresql://`` or ``postgres://`` URL is PostgreSQL, both in its database. Nothing
    is opened until the store is first used."""
    from tradehall.store.journaled import JournaledStore

    projections = open_projections(database, data_dir, synchronous=synchronous, role="")
    return JournaledStore(projections, open_journal(projections, data_dir, synchronous))


def open_journal(
    projections: SQLStore[Any], data_dir: str | os.PathLike[str], synchronous: str = "full"
) -> Journal:
    """The journal beside ``projections``: SQLite's own file in the data folder, or a table
    on PostgreSQL's connections (``projections``')."""
    from tradehall.store.journal import Journal
    from tradehall.store.sqlite import SQLiteStore

    if isinstance(projections, SQLiteStore):
        return Journal(SQLiteStore(DataDir(data_dir).journal_path, synchronous))
    return Journal(projections, blob="BYTEA")


def open_projections(
    database: str | None,
    data_dir: str | os.PathLike[str],
    *,
    synchronous: str = "full",
    role: str = "projector",
) -> SQLStore[Any]:
    """The tables alone (the projector's side): SQLite's database file in ``data_dir``, or
    PostgreSQL, whose write connection takes ``role``'s advisory lock."""
    if not database:
        from tradehall.store.sqlite import SQLiteStore

        return SQLiteStore(DataDir(data_dir).db_path, synchronous)
    problem = database_problem(database)
    if problem is not None:
        raise StoreError(problem)
    from tradehall.store.postgres import PostgresStore

    return PostgresStore(database, role=role)
