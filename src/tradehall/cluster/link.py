"""The NATS connection both sides keep: it must be there at start (a clear error, not an
endless retry), and once up it reconnects for as long as it takes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import nats
import nats.errors
from nats.aio.client import Client as Nats

from tradehall.cluster import LinkError

log = logging.getLogger("tradehall.nats")

PING_INTERVAL_S = 2
MAX_OUTSTANDING_PINGS = 2
"""A link that goes silent without closing (a partition, a peer frozen) is found stale after
about ``PING_INTERVAL_S * (MAX_OUTSTANDING_PINGS + 1)`` seconds, not the client's default of
minutes: an HA leader then steps down (``cluster.standby``), a gateway reconnects."""


async def _log_error(exc: Exception) -> None:
    log.warning("NATS: %s", exc or type(exc).__name__)


async def connect(
    url: str, name: str, *, reconnected: Callable[[], Awaitable[None]] | None = None
) -> Nats:
    try:
        nc = await nats.connect(
            url,
            name=name,
            connect_timeout=2,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.2,
            error_cb=_log_error,
            reconnected_cb=reconnected,
            pending_size=64 * 1024 * 1024,
            ping_interval=PING_INTERVAL_S,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        )
    except (OSError, TimeoutError, nats.errors.Error) as exc:
        raise LinkError(f"cannot connect to NATS at {url}: {exc or type(exc).__name__}") from None
    nc.options["max_reconnect_attempts"] = -1  # from now on, reconnect forever
    return nc


def check_reachable(url: str) -> None:
    """Raise LinkError unless NATS answers at ``url`` (before a process starts serving)."""

    async def probe() -> None:
        nc = await connect(url, "tradehall-probe")
        await nc.close()

    asyncio.run(probe())


def reachable(url: str) -> bool:
    """Whether NATS answers at ``url`` now (a standby about to lead)."""
    try:
        check_reachable(url)
    except LinkError as exc:
        log.warning("%s", exc)
        return False
    return True


class Service:
    """Something that starts and stops beside a server (the engine's NATS service, a
    gateway, a gateway's streams); ``running()`` is both around a block."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()
