"""The venue's Redis namespace: derived from the store's identity (stable, short, never from a
password), or configured as ``[limits] namespace`` (validated)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tradehall
from tradehall.config import ConfigError, LimitSettings, parse_config
from tradehall.store.factory import store_identity
from tradehall.store.postgres import PostgresStore
from tradehall.store.sqlite import SQLiteStore
from tradehall.venue import derived_namespace, key_prefix, venue_namespace

PG = "postgresql://trader:{password}@db.example:5432/exchange"


def config_with(limits: str) -> str:
    default = (Path(tradehall.__file__).parent / "default_config.toml").read_text()
    return default + "\n[limits]\n" + limits + "\n"


def test_derived_namespace_is_short_stable_and_per_identity() -> None:
    first = derived_namespace({"kind": "sqlite", "path": "/srv/a/tradehall.db"})
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert first == derived_namespace({"path": "/srv/a/tradehall.db", "kind": "sqlite"})
    assert first != derived_namespace({"kind": "sqlite", "path": "/srv/b/tradehall.db"})


def test_sqlite_stores_in_two_data_folders_are_two_venues(tmp_path: Path) -> None:
    a = SQLiteStore(tmp_path / "a" / "tradehall.db")
    b = SQLiteStore(tmp_path / "b" / "tradehall.db")
    assert a.identity() == {"kind": "sqlite", "path": str(tmp_path / "a" / "tradehall.db")}
    assert venue_namespace(LimitSettings(), a) != venue_namespace(LimitSettings(), b)
    # The same file however it is named: one venue.
    relative = SQLiteStore(Path("..") / Path.cwd().name / "x.db")
    assert relative.identity() == SQLiteStore(Path.cwd() / "x.db").identity()


def test_postgresql_namespace_is_server_json_identity_without_the_password() -> None:
    one = PostgresStore(PG.format(password="s3cret"))
    other = PostgresStore(PG.format(password="changed"))
    assert one.identity() == store_identity(PG.format(password="s3cret"))
    assert "s3cret" not in repr(one.identity())
    assert venue_namespace(LimitSettings(), one) == venue_namespace(LimitSettings(), other)
    schema = PostgresStore(PG.format(password="x") + "?options=-csearch_path%3Dtestnet")
    assert venue_namespace(LimitSettings(), schema) != venue_namespace(LimitSettings(), one)


def test_configured_namespace_wins(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "tradehall.db")
    assert venue_namespace(LimitSettings(namespace="prod-1"), store) == "prod-1"
    assert key_prefix("prod-1") == "tradehall:prod-1"


@pytest.mark.parametrize("value", ["prod", "testnet.eu-1", "A_b-9", "x" * 48])
def test_namespace_setting_accepted(value: str) -> None:
    config = parse_config(config_with(f'namespace = "{value}"'), "inline")
    assert config.limits.namespace == value


def test_namespace_defaults_to_derived() -> None:
    assert parse_config(config_with('storage = "memory://"'), "inline").limits.namespace == ""


@pytest.mark.parametrize(
    "value", ['""', '"a:b"', '"a/b"', '"a b"', '"*"', '"-lead"', f'"{"x" * 49}"', "3"]
)
def test_bad_namespace_is_a_config_error_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^inline:\d+: limits\.namespace: "):
        parse_config(config_with(f"namespace = {value}"), "inline")
