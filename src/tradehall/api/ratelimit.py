"""Rate limits and bans, kept by the ``limits`` library (in memory, or in Redis so several
server processes share them).

- Signed endpoints: per API key, the seed's table; endpoints it leaves open get a configurable
  default. Public endpoints: per IP. Every request also counts against a global per-IP limit.
- Creating a self-service account (``POST /sandbox/v1/accounts``) also counts against its own
  per-IP and global limits (``self_service_per_ip``, ``self_service_global``).
- Exceeding a limit: HTTP 429, code -1003, ``Retry-After``.
- An IP that keeps sending after its 429s (more than ``ban_after`` refusals within a minute) is
  banned: HTTP 418 for ``ban_seconds`` (default 2 minutes), and the ban is logged.
- In Redis every key starts with ``tradehall:<namespace>:`` (``tradehall.venue``), so venues
  sharing one Redis never share a count or a ban.
"""

from __future__ import annotations

import functools
import logging
import math
import time

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError
from limits.storage import StorageTypes, storage_from_string

from tradehall.api.errors import ApiError
from tradehall.codes import Code
from tradehall.config import LimitSettings, Rate
from tradehall.venue import key_prefix, uses_redis

log = logging.getLogger("tradehall.limits")

SEED_LIMITS: dict[str, Rate] = {
    "POST /spot/open/sapi/v1/order": (100, 2),
    "POST /spot/open/sapi/v1/batchOrders": (50, 2),
    "GET /spot/open/sapi/v1/order": (20, 2),
    "POST /spot/open/sapi/v1/cancel": (100, 2),
    "POST /spot/open/sapi/v1/batchCancel": (50, 2),
    "GET /spot/open/sapi/v1/openOrders": (20, 2),
    "GET /spot/open/sapi/v1/myTrades": (20, 2),
    "GET /spot/open/sapi/v1/account": (20, 2),
    "POST /spot/open/sapi/v1/margin/order": (10, 1),
    "POST /futures/open/fapi/v1/cancel": (20, 2),
    "GET /futures/open/fapi/v1/openOrders": (20, 2),
    "GET /futures/open/fapi/v1/myTrades": (20, 2),
    "GET /futures/open/fapi/v1/account": (20, 2),
}
"""Per API key, exactly the interface document's table."""


def _item(rate: Rate, namespace: str) -> RateLimitItem:
    return RateLimitItemPerSecond(rate[0], rate[1], namespace=namespace)


def async_storage_uri(uri: str) -> str:
    return uri if uri.startswith("async+") else "async+" + uri


def limits_storage(uri: str, namespace: str) -> StorageTypes:
    if uses_redis(uri):
        return storage_from_string(async_storage_uri(uri), key_prefix=key_prefix(namespace))
    return storage_from_string(async_storage_uri(uri))


@functools.cache
def store_errors() -> tuple[type[Exception], ...]:
    """What a shared store (Redis) raises when it cannot be reached or answer. Evaluated when
    an exception reaches an ``except store_errors():``: the Redis driver (a quarter of a second
    to import) is loaded only by a process that uses it."""
    from coredis.exceptions import RedisError

    return (StorageError, RedisError, OSError)


def store_unreachable() -> ApiError:
    """A request the shared store (Redis: rate limits, bans, replay guard) could not admit:
    503, never a 500, and ``/readyz`` says why meanwhile."""
    return ApiError(
        Code.INTERNAL,
        "the rate-limit store (Redis) is unreachable; nothing was done, try again",
        status=503,
    )


def namespace_unknown() -> ApiError:
    return ApiError(
        Code.INTERNAL,
        "this gateway does not know its venue yet (its engine has not answered); try again",
        status=503,
    )


class RateLimiter:
    """``namespace`` None: not known yet (a gateway whose engine has not told it); with a Redis
    storage every request is then refused (503) until ``use_namespace``."""

    def __init__(self, settings: LimitSettings, namespace: str | None) -> None:
        self.settings = settings
        self.namespace: str | None = None
        self._window: MovingWindowRateLimiter | None = None
        if namespace is not None or not uses_redis(settings.storage):
            self.use_namespace(namespace or "")
        self._global = _item(settings.global_per_ip, "TH-IP")
        self._public = _item(settings.public_per_ip, "TH-PUB")
        self._default = _item(settings.signed_default, "TH-KEY")
        self._rules = {name: _item(rate, "TH-KEY") for name, rate in SEED_LIMITS.items()}
        self._accounts = _item(settings.self_service_per_ip, "TH-ACCOUNT")
        self._all_accounts = _item(settings.self_service_global, "TH-ACCOUNT-ALL")
        self._strikes = RateLimitItemPerSecond(settings.ban_after, 60, namespace="TH-STRIKE")
        self._ban = RateLimitItemPerSecond(1, settings.ban_seconds, namespace="TH-BAN")

    def use_namespace(self, namespace: str) -> None:
        """Count in ``namespace`` from now on (a new one starts from nothing)."""
        if self._window is None or namespace != self.namespace:
            self.namespace = namespace
            self._window = MovingWindowRateLimiter(limits_storage(self.settings.storage, namespace))

    @property
    def _limiter(self) -> MovingWindowRateLimiter:
        if self._window is None:
            raise namespace_unknown()
        return self._window

    async def unreachable(self) -> str | None:
        """Why the shared store cannot count requests now (``GET /readyz``), or None."""
        if self._window is None or not uses_redis(self.settings.storage):
            return None
        try:
            reachable = await self._window.storage.check()
        except store_errors():
            reachable = False
        return None if reachable else "the rate-limit store (Redis) is unreachable"

    async def admit_ip(self, ip: str) -> None:
        """Before anything else: banned IPs get 418, then the global per-IP limit."""
        try:
            await self._admit_ip(ip)
        except store_errors():
            raise store_unreachable() from None

    async def admit_public(self, ip: str) -> None:
        try:
            if not await self._limiter.hit(self._public, ip):
                await self._refuse(self._public, ip, ip)
        except store_errors():
            raise store_unreachable() from None

    async def admit_key(self, endpoint: str, api_key: str, ip: str) -> None:
        item = self._rules.get(endpoint, self._default)
        try:
            if not await self._limiter.hit(item, api_key, endpoint):
                await self._refuse(item, ip, api_key, endpoint)
        except store_errors():
            raise store_unreachable() from None

    async def admit_account(self, ip: str) -> None:
        """A self-service account's creation: the IP's limit, then every IP's together."""
        what = "self-service accounts"
        try:
            if not await self._limiter.hit(self._accounts, ip):
                await self._refuse(self._accounts, ip, ip, what=f"{what} from this address")
            if not await self._limiter.hit(self._all_accounts, "all"):
                await self._refuse(self._all_accounts, ip, "all", what=f"{what} from anyone")
        except store_errors():
            raise store_unreachable() from None

    async def _admit_ip(self, ip: str) -> None:
        if not await self._limiter.test(self._ban, ip):
            retry = await self._retry_after(self._ban, ip)
            raise ApiError(
                Code.TOO_MANY_REQUESTS,
                f"IP banned for sending after rate-limit warnings; retry in {retry} s",
                status=418,
                headers={"Retry-After": str(retry)},
            )
        if not await self._limiter.hit(self._global, ip):
            await self._refuse(self._global, ip, ip)

    async def _refuse(
        self, item: RateLimitItem, ip: str, *identifiers: str, what: str = "requests"
    ) -> None:
        retry = await self._retry_after(item, *identifiers)
        if not await self._limiter.hit(self._strikes, ip):
            await self._limiter.hit(self._ban, ip)
            log.warning(
                "banned IP %s for %d s after more than %d rate-limit refusals in 60 s",
                ip,
                self.settings.ban_seconds,
                self.settings.ban_after,
            )
        raise ApiError(
            Code.TOO_MANY_REQUESTS,
            f"too many {what}; limit {item.amount} per {item.multiples} s; retry in {retry} s",
            status=429,
            headers={"Retry-After": str(retry)},
        )

    async def _retry_after(self, item: RateLimitItem, *identifiers: str) -> int:
        stats = await self._limiter.get_window_stats(item, *identifiers)
        return max(1, math.ceil(stats.reset_time - time.time()))
