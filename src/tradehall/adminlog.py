"""The admin audit trail's entries: who (the admin token's fingerprint, or ``local`` for the
CLI working on the data folder without a server), through what, when, what (the action and
its parameters) and the result. Entries are staged with the exchange's other rows and
committed by the same machinery (``admin_log`` table, append-only; ``tradehall admin-log``,
the operator page, ``GET /admin/v1/admin-log``)."""

from __future__ import annotations

import getpass
import hashlib
import json
import socket
from collections.abc import Mapping
from typing import Any

from tradehall.store.batch import AdminLogRow
from tradehall.store.schema import TABLES

AGENT_HEADER = "x-tradehall-agent"
"""What an admin API caller says it is (the CLI, the operator page); clipped, printable."""
LOCAL = "local"
MAX_PARAMS = 2000
MAX_DETAIL = 1000
MAX_AGENT = 80
_HIDDEN = ("secret", "token", "password")
_SUMMARY = ("id", "userId", "apiKey", "account", "asset", "amount", "txId", "transferId",
            "duplicate", "contract", "indexPrice", "feed", "feedPrice", "revoked", "started",
            "stopped",
            "running", "cancelledOrders", "closedPositions", "spot", "futures", "settled",
            "hours", "charged")  # fmt: skip
"""The answer fields a success's ``detail`` keeps: what was created or changed."""


def token_actor(token: str) -> str:
    """The admin token's identity in the trail: a fingerprint, never the token."""
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def cli_agent() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return clean_agent(f"cli:{user}@{socket.gethostname()}")


def clean_agent(text: str | None, default: str = "api") -> str:
    if not text:
        return default
    kept = "".join(c for c in text if c.isprintable())[:MAX_AGENT]
    return kept or default


def _public(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            str(k): _public(v)
            for k, v in value.items()
            if not any(word in str(k).lower() for word in _HIDDEN)
        }
    if isinstance(value, list | tuple):
        return [_public(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _text(value: Any, limit: int) -> str:
    text = json.dumps(_public(value), separators=(",", ":"), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def entry(
    ts: int,
    actor: str,
    agent: str,
    action: str,
    params: Mapping[str, Any],
    outcome: Any,
) -> AdminLogRow:
    """The row for one action: ``outcome`` is its answer, or the exception that refused it."""
    if isinstance(outcome, BaseException):
        code = int(getattr(outcome, "code", 0) or -1000)
        msg = getattr(outcome, "msg", None) or str(outcome) or type(outcome).__name__
        return AdminLogRow(
            ts, actor, agent, action, _text(params, MAX_PARAMS), "refused", code, msg[:MAX_DETAIL]
        )
    summary = (
        {k: outcome[k] for k in _SUMMARY if k in outcome} if isinstance(outcome, Mapping) else {}
    )
    return AdminLogRow(
        ts, actor, agent, action, _text(params, MAX_PARAMS), "ok", 0, _text(summary, MAX_DETAIL)
    )


def view(row: tuple[Any, ...]) -> dict[str, Any]:
    """A stored row as the admin API and ``tradehall admin-log --json`` show it."""
    record = dict(zip(TABLES["admin_log"].columns, row, strict=True))
    return {
        "id": int(record["id"]),
        "time": int(record["time"]),
        "actor": record["actor"],
        "agent": record["agent"],
        "action": record["action"],
        "params": _parsed(record["params"]),
        "result": record["result"],
        "code": int(record["code"]),
        "detail": record["detail"],
    }


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # clipped: shown as the text kept
        return {"clipped": text}
