"""Replay protection: inside the time window a signature is accepted once.

A signed request stays valid until ``ts + recvWindow``; its signature is remembered until then
(in memory, or in Redis when configured so several processes share it), and a second request
with the same signature is refused. Two byte-identical requests signed in the same millisecond
are, by construction, one request sent twice. In Redis the key is
``tradehall:<namespace>:sig:<signature>`` (``tradehall.venue``): venues sharing one Redis
never see each other's signatures.
"""

from __future__ import annotations

import heapq
from typing import Protocol

from tradehall.api.errors import ApiError
from tradehall.api.ratelimit import store_errors, store_unreachable
from tradehall.codes import Code
from tradehall.venue import key_prefix, uses_redis

EXPIRY_MARGIN_MS = 1000


class ReplayGuard(Protocol):
    async def first_use(self, signature: str, expires_at: int, now: int) -> bool:
        """Record ``signature`` until ``expires_at`` (ms); False if it was already recorded."""
        ...


class MemoryReplayGuard:
    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._expiries: list[tuple[int, str]] = []

    async def first_use(self, signature: str, expires_at: int, now: int) -> bool:
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            expiry, old = heapq.heappop(expiries)
            if self._seen.get(old) == expiry:
                del self._seen[old]
        if signature in self._seen:
            return False
        self._seen[signature] = expires_at
        heapq.heappush(expiries, (expires_at, signature))
        return True

    def __len__(self) -> int:
        return len(self._seen)


class RedisReplayGuard:
    def __init__(self, url: str, namespace: str) -> None:
        import coredis

        self._redis = coredis.Redis.from_url(url)
        self._prefix = f"{key_prefix(namespace)}:sig:"

    async def first_use(self, signature: str, expires_at: int, now: int) -> bool:
        from coredis import PureToken

        ttl = max(1, expires_at - now)
        stored = await self._redis.set(
            self._prefix + signature, "1", condition=PureToken.NX, px=ttl
        )
        return bool(stored)


def make_guard(storage: str, namespace: str) -> ReplayGuard:
    if uses_redis(storage):
        return RedisReplayGuard(storage.removeprefix("async+"), namespace)
    return MemoryReplayGuard()


async def check_replay(
    guard: ReplayGuard, signature: str, ts: int, recv_window: int, now: int
) -> None:
    expires_at = max(ts + recv_window, now) + EXPIRY_MARGIN_MS
    try:
        first = await guard.first_use(signature.lower(), expires_at, now)
    except store_errors():
        raise store_unreachable() from None
    if not first:
        raise ApiError(Code.BAD_SIGNATURE, "replayed request: this signature was already used")
