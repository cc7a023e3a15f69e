"""The admin audit trail through the admin API, in one process and behind a gateway: every
admin action, done or refused, with who (the token's fingerprint), through what, when, what
and the result; reads are not actions; never a secret; append-only, checked by the audit."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

import pytest

from support import ADMIN_TOKEN, BASE_URL, Env
from tradehall.client import AdminClient, ApiError

TOKEN_ACTOR = "token:" + hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()[:12]


def log(env: Env, **query: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = env.admin.admin_log(**query)["entries"]
    return entries


def test_every_action_is_recorded_done_or_refused(env: Env) -> None:
    http = env.engine or env.http
    admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http, agent="runbook-7")
    user = admin.create_user("alice")
    key = admin.create_key(user["id"], ips=["10.0.0.0/8"])
    admin.deposit(user["id"], "USDT", "100", "tx-1")
    with pytest.raises(ApiError) as refused:
        admin.deposit(999, "USDT", "5", "tx-2")
    admin.set_index_price("E-BTC-USDT", "30000")
    admin.revoke_key(key["apiKey"])
    admin.list_users()  # reads are no actions
    admin.audit()
    entries = log(env)
    assert [e["action"] for e in entries] == [
        "key.revoke", "index-price", "deposit", "deposit", "key.create", "user.create",
    ]  # fmt: skip
    assert [e["id"] for e in entries] == [6, 5, 4, 3, 2, 1]
    assert {e["actor"] for e in entries} == {TOKEN_ACTOR}
    assert {e["agent"] for e in entries} == {"runbook-7"}
    assert all(e["time"] == env.clock.now for e in entries)
    created = entries[4]
    assert created["params"] == {"userId": user["id"], "readOnly": False, "ips": ["10.0.0.0/8"]}
    assert created["result"] == "ok" and created["code"] == 0
    assert key["apiKey"] in created["detail"] and key["secret"] not in str(entries)
    failed = entries[2]
    assert (failed["result"], failed["code"]) == ("refused", refused.value.code)
    assert failed["params"]["userId"] == 999 and "unknown user" in failed["detail"]
    assert entries[3]["params"]["txId"] == "tx-1" and entries[3]["result"] == "ok"
    assert [e["id"] for e in log(env, limit=2, before=5)] == [4, 3]
    assert env.audit()["ok"]


def test_an_agent_is_api_unless_the_caller_says(env: Env) -> None:
    env.admin.create_user()
    (entry,) = log(env)
    assert (entry["agent"], entry["actor"]) == ("api", TOKEN_ACTOR)


def test_bad_queries_are_catalogue_errors(env: Env) -> None:
    for query in ({"limit": 0}, {"limit": 1001}, {"before": 0}):
        with pytest.raises(ApiError) as bad:
            env.admin.admin_log(**query)
        assert bad.value.code == -1102


@pytest.mark.one_process
def test_the_trail_is_append_only_and_a_missing_entry_fails_the_audit(env: Env) -> None:
    for name in ("a", "b", "c"):
        env.admin.create_user(name)
    db = sqlite3.connect(env.db_path)
    try:
        for statement in ("UPDATE admin_log SET result = 'ok'", "DELETE FROM admin_log"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                db.execute(statement)
        # Someone with the database file and the will to drop the guard: the audit tells.
        db.execute("DROP TRIGGER admin_log_no_delete")
        db.execute("DELETE FROM admin_log WHERE id = 2")
        db.commit()
    finally:
        db.close()
    report = env.admin.audit()
    assert not report["ok"]
    assert report["problems"] == ["admin log: 2 entries with ids 1..3: entries are missing"]


def test_a_duplicate_deposit_and_a_feed_say_so_in_the_trail(env: Env) -> None:
    """A repeated deposit credits nothing: its entry must say duplicate, or an auditor adds
    it up twice; an index feed's entry names the feed and its price."""
    user = env.admin.create_user("bob")
    made = env.admin.deposit(user["id"], "USDT", "100", "tx-dup")
    env.admin.deposit(user["id"], "USDT", "100", "tx-dup")
    env.admin.set_index_price("E-BTC-USDT", "30000", feed="venue-x")
    fed, again, first = log(env)[:3]
    assert '"duplicate":true' in again["detail"] and '"duplicate":false' in first["detail"]
    # The entry joins the ledger by the transfer's id, as the answer gives it.
    assert f'"transferId":{json.dumps(made["transferId"])}' in first["detail"]
    assert '"feed":"venue-x"' in fed["detail"] and '"feedPrice":"30000.0"' in fed["detail"]
