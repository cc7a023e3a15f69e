"""API secrets are sealed at rest: never in clear in the database, recovered with the right key,
refused with a wrong one; secrets stored in clear by an older version are sealed on start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from support import TEST_SECRET_BOX, make_exchange
from tradehall.config import load_config
from tradehall.exchange import Exchange
from tradehall.secretbox import SecretBox, SecretKeyError
from tradehall.store.sqlite import SQLiteStore


def test_round_trip_and_binding_to_the_api_key() -> None:
    box = SecretBox(SecretBox.new_key())
    sealed = box.seal("s3cret", "key-a")
    assert sealed.startswith("v1:") and "s3cret" not in sealed
    assert box.open(sealed, "key-a") == "s3cret"
    assert box.seal("s3cret", "key-a") != sealed  # fresh nonce each time
    with pytest.raises(SecretKeyError):
        box.open(sealed, "key-b")  # moved to another key's row
    with pytest.raises(SecretKeyError):
        SecretBox(SecretBox.new_key()).open(sealed, "key-a")  # another sealing key


def test_the_store_never_holds_a_secret_in_clear(tmp_path: Path) -> None:
    db = tmp_path / "db"
    exchange = make_exchange(db)
    user = exchange.create_user("alice", 1)
    row = exchange.create_key(user.id, False, [], 1)
    exchange.commit_now()
    exchange.store.close()
    stored = sqlite3.connect(db).execute("SELECT secret FROM api_keys").fetchone()[0]
    assert row.secret not in stored and stored.startswith("v1:")
    assert row.secret.encode() not in db.read_bytes() + (tmp_path / "db-wal").read_bytes()

    recovered = make_exchange(db)
    assert recovered.keys[row.api_key].row.secret == row.secret
    recovered.store.close()

    wrong = SQLiteStore(db, "normal")
    with pytest.raises(SecretKeyError):
        Exchange(load_config(), wrong, secret_box=SecretBox(SecretBox.new_key())).recover()
    wrong.close()


def test_secrets_stored_in_clear_are_sealed_on_recovery(tmp_path: Path) -> None:
    db = tmp_path / "db"
    exchange = make_exchange(db)
    user = exchange.create_user("alice", 1)
    row = exchange.create_key(user.id, False, [], 1)
    exchange.commit_now()
    exchange.store.close()
    with sqlite3.connect(db) as conn:  # what an older version left behind
        conn.execute("UPDATE api_keys SET secret = ?", (row.secret,))
    upgraded = make_exchange(db)
    upgraded.commit_now()
    assert upgraded.keys[row.api_key].row.secret == row.secret
    upgraded.store.close()
    stored = sqlite3.connect(db).execute("SELECT secret FROM api_keys").fetchone()[0]
    assert stored.startswith("v1:") and TEST_SECRET_BOX.open(stored, row.api_key) == row.secret
