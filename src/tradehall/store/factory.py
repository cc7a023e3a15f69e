"""Choosing the store: SQLite in the data folder by default, PostgreSQL for a postgresql:// URL."""

from __future__ import annotations

import os

from tradehall.datadir import DataDir
from tradehall.store.base import Store, StoreError

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


def open_store(
    database: str | None, data_dir: str | os.PathLike[str], *, synchronous: str = "full"
) -> Store:
    """The store for ``database``: empty or None is SQLite in ``data_dir`` (with PRAGMA
    synchronous ``synchronous``); a ``postgresql://`` or ``postgres://`` URL is PostgreSQL.
    Nothing is opened until the store is first used."""
    if not database:
        from tradehall.store.sqlite import SQLiteStore

        return SQLiteStore(DataDir(data_dir).db_path, synchronous)
    problem = database_problem(database)
    if problem is not None:
        raise StoreError(problem)
    from tradehall.store.postgres import PostgresStore

    return PostgresStore(database)
