"""A gateway: the REST API's front half (HTTP, JSON, signature, time window, replay
protection, rate limits) in a process of its own, every admitted request forwarded to the
engine process over NATS and its answer passed back. Stateless: any number of gateways, on
any number of machines, serve the same exchange (replay protection and rate limits shared
through Redis when ``limits.storage`` names it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable

import msgspec
import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg
from starlette.responses import Response
from starlette.types import Receive, Scope

from tradehall.api.app import wall_clock_ms
from tradehall.api.auth import MAX_AHEAD_MS
from tradehall.api.errors import ApiError
from tradehall.api.http import EndpointSpec, failed_answer
from tradehall.api.monitor import Monitor
from tradehall.api.params import Params
from tradehall.api.ratelimit import RateLimiter
from tradehall.api.replay import ReplayGuard, make_guard
from tradehall.cluster import DEFAULT_TIMEOUT
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import (
    Forwarded,
    KeyInfo,
    decode_answered,
    decode_keys,
    encode,
    wire_params,
)
from tradehall.codes import Code
from tradehall.config import LimitSettings, WebSocketSettings
from tradehall.exchange import ApiKey

log = logging.getLogger("tradehall.gateway")


def engine_unreachable(why: str) -> ApiError:
    return ApiError(Code.INTERNAL, f"the engine is not reachable ({why}); try again", status=503)


class Gateway:
    """The gateway's ``Front``: admitted requests go to the engine process."""

    def __init__(
        self,
        url: str,
        subject: str,
        *,
        limits: LimitSettings,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], int] = wall_clock_ms,
        max_ahead_ms: int = MAX_AHEAD_MS,
        websocket: WebSocketSettings | None = None,
    ) -> None:
        self.url = url
        self.subject = subject
        self.timeout = timeout
        self._clock = clock
        self._limiter = RateLimiter(limits) if limits.enabled else None
        self._replay = make_guard(limits.storage)
        self._monitor = Monitor()
        self._max_ahead_ms = max_ahead_ms
        self.keys: dict[str, ApiKey] = {}
        self.keys_loaded = False
        self.nc: Nats | None = None
        self.name = f"{os.getpid():x}.{os.urandom(6).hex()}"
        """Unique among gateways: it starts the ids of the commands this one sends."""
        self._ids = self.name + "."
        self.websocket = websocket or WebSocketSettings()
        self.on_reconnect: list[Callable[[], None]] = []
        """Called when the NATS connection is back after a loss."""
        self._count = 0
        self._loading: asyncio.Task[None] | None = None

    @property
    def clock(self) -> Callable[[], int]:
        return self._clock

    @property
    def limiter(self) -> RateLimiter | None:
        return self._limiter

    @property
    def replay(self) -> ReplayGuard:
        return self._replay

    @property
    def monitor(self) -> Monitor:
        return self._monitor

    @property
    def max_ahead_ms(self) -> int:
        return self._max_ahead_ms

    def failed(
        self,
        scope: Scope,
        code: int,
        msg: str,
        status: int,
        headers: dict[str, str] | None = None,
    ) -> Response:
        return failed_answer(self._monitor, scope, code, msg, status, headers)

    # ------------------------------------------------------------- lifecycle

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        self.nc = await connect(self.url, "tradehall-gateway", reconnected=self._reconnected)
        await self.nc.subscribe(f"{self.subject}.keys.changed", cb=self._on_keys_changed)
        await self.nc.subscribe(f"{self.subject}.keys.reset", cb=self._on_keys_reset)
        await self.load_keys()

    async def stop(self) -> None:
        nc, self.nc = self.nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.drain()

    # ------------------------------------------------------------- keys

    async def load_keys(self) -> None:
        """Every key from the engine, merged into what is known: keys are never deleted and a
        revocation is final, so a change heard before an older snapshot still stands."""
        if self.nc is None:
            return
        try:
            msg = await self.nc.request(f"{self.subject}.keys", b"", timeout=self.timeout)
        except (TimeoutError, nats.errors.Error) as exc:
            log.info("keys not loaded (%s): the engine is not reachable", type(exc).__name__)
            return
        for info in decode_keys(msg.data).keys:
            self._learn(info)
        self.keys_loaded = True

    def _learn(self, info: KeyInfo) -> None:
        known = self.keys.get(info.api_key)
        if known is not None and known.row.revoked is not None:
            return
        self.keys[info.api_key] = info.api_key_object()

    async def _on_keys_changed(self, msg: Msg) -> None:
        for info in decode_keys(msg.data).keys:
            self._learn(info)

    async def _on_keys_reset(self, msg: Msg) -> None:
        self._load_soon()

    async def _reconnected(self) -> None:
        self._load_soon()
        for listener in self.on_reconnect:
            listener()

    def _load_soon(self) -> None:
        if self._loading is None or self._loading.done():
            self._loading = asyncio.get_running_loop().create_task(self.load_keys())

    # ------------------------------------------------------------- Front

    def check_writable(self) -> None:
        """The engine process knows; it checks."""

    def find_key(self, api_key: str) -> ApiKey | None:
        if not self.keys_loaded:
            self._load_soon()
            raise engine_unreachable("API keys not loaded yet")
        return self.keys.get(api_key)

    async def perform(
        self,
        spec: EndpointSpec,
        params: Params,
        now: int,
        key: ApiKey | None,
        scope: Scope,
        receive: Receive,
    ) -> bytes | Response:
        client = scope.get("client")
        self._count += 1
        fwd = Forwarded(
            self._ids + str(self._count),
            scope["method"],
            scope["path"],
            wire_params(params.data),
            key.row.api_key if key is not None else None,
            client[0] if client else "unknown",
            now,
        )
        answer = decode_answered(await self.request(fwd))
        if answer.status == 200 and not answer.headers:
            return answer.body
        return Response(
            answer.body, answer.status, headers=dict(answer.headers), media_type="application/json"
        )

    async def request(self, fwd: Forwarded) -> bytes:
        """The engine's answer to ``fwd``. A timeout (the command or its answer lost, NATS
        restarting) resends it once with the same id, which the engine answers without
        applying it again; no responder (no engine) answers 503 at once."""
        nc = self.nc
        if nc is None:
            raise engine_unreachable("not connected to NATS")
        subject = f"{self.subject}.cmd"
        for attempt in (1, 2):
            if attempt > 1:
                fwd = msgspec.structs.replace(fwd, attempt=attempt)
            try:
                msg = await nc.request(subject, encode(fwd), timeout=self.timeout)
                return msg.data
            except nats.errors.NoRespondersError:
                raise engine_unreachable("no engine process is listening") from None
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except nats.errors.Error as exc:
                raise engine_unreachable(type(exc).__name__) from None
        raise engine_unreachable("no answer in time")
