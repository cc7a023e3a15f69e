"""The venue's namespace: the part of every Redis key that keeps one exchange's rate limits,
bans and replay guard apart from another's on the same Redis (``tradehall:<namespace>:...``).

``[limits] namespace`` names it; by default it is derived from the store's identity
(``Store.identity``: what ``server.json`` records, never a password), so the processes of one
venue agree on it. A gateway has no store: its engine tells it (``tradehall.cluster``).
"""

from __future__ import annotations

import hashlib
import json

from tradehall.config import LimitSettings
from tradehall.store.base import Store

KEY_ROOT = "tradehall"


def derived_namespace(identity: dict[str, str]) -> str:
    """Short and stable: 16 hex digits of the identity's SHA-256."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def venue_namespace(limits: LimitSettings, store: Store) -> str:
    """``[limits] namespace`` if set, else the one derived from ``store``'s identity."""
    return limits.namespace or derived_namespace(store.identity())


def key_prefix(namespace: str) -> str:
    """What every Redis key of the venue ``namespace`` starts with (then ``:``)."""
    return f"{KEY_ROOT}:{namespace}"


def uses_redis(storage: str) -> bool:
    return storage.startswith(("redis://", "rediss://", "async+redis://", "async+rediss://"))
