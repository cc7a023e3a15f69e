"""A gateway: the REST API's front half (HTTP, JSON, signature, time window, replay
protection, rate limits) in a process of its own, every admitted request forwarded to the
engine process over NATS and its answer passed back. Stateless: any number of gateways, on
any number of machines, serve the same exchange (replay protection and rate limits shared
through Redis when ``limits.storage`` names it, under the venue's namespace: the configured
``[limits] namespace``, else the one the engine tells with the keys)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from time import perf_counter

import msgspec
import nats.errors
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg
from starlette.responses import Response
from starlette.types import Receive, Scope

from tradehall.api import wire
from tradehall.api.app import wall_clock_ms
from tradehall.api.auth import MAX_AHEAD_MS
from tradehall.api.errors import ApiError
from tradehall.api.http import EndpointSpec, encoded
from tradehall.api.monitor import Monitor
from tradehall.api.params import Params
from tradehall.api.ratelimit import RateLimiter, namespace_unknown
from tradehall.api.replay import ReplayGuard, make_guard
from tradehall.api.spot import create_order, server_time
from tradehall.cluster import (
    DEFAULT_BATCH_DELAY,
    DEFAULT_BATCH_MAX,
    DEFAULT_READ_CACHE_MS,
    DEFAULT_TIMEOUT,
)
from tradehall.cluster.link import Service, connect
from tradehall.cluster.prepared import prepare_place, render_placed
from tradehall.cluster.protocol import (
    ASK_AGAIN,
    PLACED,
    Answered,
    Command,
    Forwarded,
    GatewayReport,
    KeyInfo,
    PackedCommands,
    decode_keys,
    decode_note,
    decode_placed,
    decode_replies,
    encode,
    wire_params,
)
from tradehall.cluster.read_cache import ReadCache, dependency
from tradehall.codes import Code
from tradehall.config import LimitSettings, WebSocketSettings
from tradehall.exchange import ApiKey
from tradehall.metrics.histogram import Histogram
from tradehall.sim.faults import FaultInjector
from tradehall.sim.settings import FaultSettings
from tradehall.venue import uses_redis

log = logging.getLogger("tradehall.gateway")


REPORT_EVERY = 5.0
"""Seconds between two of a gateway worker's reports to the engine (the operator's view)."""

NO_ENGINE_PAUSE = 0.05
"""Seconds between two sends of a command no engine was listening for (``engine_wait``)."""
HEALTH_TIMEOUT = 1.0
"""Seconds a readiness probe waits for the engine's word (at most the gateway's timeout)."""

REQUEST_MARGIN = 4096
"""Bytes of NATS's maximum message size kept for the request's subjects and headers."""


def engine_unreachable(why: str) -> ApiError:
    return ApiError(Code.INTERNAL, f"the engine is not reachable ({why}); try again", status=503)


class _PendingGuard:
    """The replay guard until the venue's namespace is known."""

    async def first_use(self, signature: str, expires_at: int, now: int) -> bool:
        raise namespace_unknown()


class Gateway(Service):
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
        batch_max: int = DEFAULT_BATCH_MAX,
        batch_delay: float = DEFAULT_BATCH_DELAY,
        read_cache_ms: int = DEFAULT_READ_CACHE_MS,
        faults: FaultSettings | None = None,
        report_every: float = REPORT_EVERY,
        allowed_hosts: tuple[str, ...] = ("*",),
        drain_s: float = 0,
        metrics_host: str = "127.0.0.1",
        metrics_port: int | None = None,
        self_service: bool = False,
        engine_wait: float = 0.0,
    ) -> None:
        self.url = url
        self.engine_wait = engine_wait
        """Seconds a command that finds no engine listening waits for one (an HA standby
        taking over) before the client gets 503: nothing was delivered, so sending it again
        cannot apply it twice. 0: 503 at once."""
        self.self_service = self_service
        """Serve the self-service accounts' endpoints (``[sandbox] self_service``; the engine
        answers them only when its configuration says so too)."""
        self.allowed_hosts = allowed_hosts
        """The ``Host`` names its app answers (``[server] allowed_hosts``)."""
        self.drain_s = drain_s
        """Seconds a stopping worker serves on, not ready (``[server] drain_s``)."""
        self.subject = subject
        self.timeout = timeout
        self.clock = clock
        self.storage = limits.storage
        self.configured_namespace = limits.namespace
        self.namespace: str | None = None
        """The venue's Redis namespace; None until known (with Redis, nothing is admitted
        until then)."""
        self.limiter = RateLimiter(limits, None) if limits.enabled else None
        self.replay: ReplayGuard = _PendingGuard()
        if limits.namespace or not uses_redis(limits.storage):
            self._use_namespace(limits.namespace)
        self.monitor = Monitor()
        self.max_ahead_ms = max_ahead_ms
        self.keys: dict[str, ApiKey] = {}
        self.keys_loaded = False
        self.nc: Nats | None = None
        self.name = f"{os.getpid():x}.{os.urandom(6).hex()}"
        """Unique among gateways: it starts the ids of the commands this one sends."""
        self._ids = self.name + "."
        self.websocket = websocket or WebSocketSettings()
        self.on_resync: list[Callable[[], None]] = []
        """Called when this gateway may have missed what the engine said: the NATS connection
        is back after a loss, or the engine announced it (re)started."""
        self.on_revoked: list[Callable[[str], None]] = []
        """Called with each API key this gateway learns is revoked."""
        self._count = 0
        self._loading: asyncio.Task[None] | None = None
        self.batch_max = batch_max
        self.batch_delay = batch_delay
        self._queue: list[msgspec.Raw] = []
        self._waiters: list[asyncio.Future[Answered]] = []
        self._queued_bytes = 0
        self._flush_at: asyncio.TimerHandle | asyncio.Handle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self.reads = ReadCache(read_cache_ms, clock) if read_cache_ms > 0 else None
        """Public reads answered again while what they show stands still (None: off)."""
        self.faults = faults
        """Fault injection in front of this gateway's app (``[simulation.faults]``)."""
        self.report_every = report_every
        self.connections: Callable[[], int] = lambda: 0
        """How many WebSocket connections this worker has open (its streams set it)."""
        self.started = clock()
        self.engine_answers = False
        """The engine's latest word was an answer (not silence, not 503, not its reset)."""
        self._reporting: asyncio.Task[None] | None = None
        self.draining = False
        """The worker was asked to stop: ``/readyz`` answers 503 from then on."""
        self.metrics_host = metrics_host
        self.metrics_port = metrics_port
        """Where this worker serves ``/metrics`` (None: nowhere)."""
        self.round_trips = Histogram()
        """Seconds from sending a message of commands to the engine to its reply."""
        self.reconnects = 0
        """NATS connections lost and made again."""
        self._sampling: asyncio.Task[None] | None = None
        self.injector: FaultInjector | None = None
        """The fault injector around this worker's app, when faults are enabled."""

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self.nc = await connect(self.url, "tradehall-gateway", reconnected=self._reconnected)
        await self.nc.subscribe(f"{self.subject}.keys.changed", cb=self._on_keys_changed)
        await self.nc.subscribe(f"{self.subject}.keys.reset", cb=self._on_keys_reset)
        if self.reads is not None:
            await self.nc.subscribe(f"{self.subject}.md.changed", cb=self._on_market_note)
        await self.load_keys()
        self._reporting = asyncio.get_running_loop().create_task(self._report_forever())
        self._sampling = asyncio.get_running_loop().create_task(self.monitor.run())

    async def stop(self) -> None:
        for task in (self._reporting, self._sampling):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        nc, self.nc = self.nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.publish(f"{self.subject}.gateways.report", encode(self.report(True)))
                await nc.drain()

    # ------------------------------------------------------------- the operator's view

    def report(self, leaving: bool = False) -> GatewayReport:
        return GatewayReport(
            self.name,
            socket.gethostname(),
            os.getpid(),
            self.started,
            self.monitor.snapshot(),
            self.connections(),
            self.reads.stats() if self.reads is not None else {},
            leaving,
        )

    async def _report_forever(self) -> None:
        """Tell the engine how this worker is doing, now and every ``report_every`` s."""
        while True:
            nc = self.nc
            if nc is not None and nc.is_connected:
                try:
                    await nc.publish(f"{self.subject}.gateways.report", encode(self.report()))
                except Exception as exc:  # NATS away: the next one goes when it is back
                    log.debug("report not sent: %s", exc)
            await asyncio.sleep(self.report_every)

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
        keys = decode_keys(msg.data)
        self._learn_namespace(keys.namespace)
        for info in keys.keys:
            self._learn(info)
        self.keys_loaded = True
        self.engine_answers = True

    def _learn_namespace(self, told: str) -> None:
        """The engine's namespace, unless ``[limits] namespace`` names one (or no Redis)."""
        if not uses_redis(self.storage):
            return
        if self.configured_namespace:
            if told and told != self.configured_namespace:
                log.warning(
                    "[limits] namespace %r differs from the engine's %r: this gateway's limits"
                    " are apart from those of gateways without the setting",
                    self.configured_namespace,
                    told,
                )
        elif told:
            self._use_namespace(told)
        else:
            log.error("the engine told no Redis namespace: set [limits] namespace")

    def _use_namespace(self, namespace: str) -> None:
        if namespace == self.namespace:
            return
        self.namespace = namespace
        if self.limiter is not None:
            self.limiter.use_namespace(namespace)
        self.replay = make_guard(self.storage, namespace)

    def _learn(self, info: KeyInfo) -> None:
        known = self.keys.get(info.api_key)
        if known is not None and known.row.revoked is not None:
            return
        self.keys[info.api_key] = info.api_key_object()
        if info.revoked is not None:
            # Heard from a change event or from a full reload (a change event missed while
            # NATS was away): either way, what was opened with the key closes now.
            for listener in self.on_revoked:
                listener(info.api_key)

    async def _on_keys_changed(self, msg: Msg) -> None:
        for info in decode_keys(msg.data).keys:
            self._learn(info)

    async def _on_keys_reset(self, msg: Msg) -> None:
        self._resync()

    async def _reconnected(self) -> None:
        self.reconnects += 1
        self._resync()

    async def _on_market_note(self, msg: Msg) -> None:
        if self.reads is None:
            return
        try:
            note = decode_note(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.reads.lost_track()
            return
        if note.reset:  # the engine stops, or failed: what it showed stands no more
            self._engine_lost()
        else:
            self.reads.note(note.epoch, note.number, note.symbols)

    def _resync(self) -> None:
        if self.reads is not None:
            self.reads.lost_track()
        self._load_soon()
        for listener in self.on_resync:
            listener()

    def _load_soon(self) -> None:
        if self._loading is None or self._loading.done():
            self._loading = asyncio.get_running_loop().create_task(self.load_keys())

    # ------------------------------------------------------------- Front

    async def not_ready(self) -> str | None:
        """Why this worker cannot serve now (``GET /readyz``), or None: it asks the engine
        (``<prefix>.health``), which answers with its own reason or nothing."""
        if self.draining:
            return "draining: the gateway is stopping"
        nc = self.nc
        if nc is None or not nc.is_connected:
            return "not connected to NATS"
        try:
            msg = await nc.request(
                f"{self.subject}.health", b"", timeout=min(self.timeout, HEALTH_TIMEOUT)
            )
        except nats.errors.NoRespondersError:
            self._engine_lost()
            return "the engine is not reachable (no engine process is listening)"
        except (TimeoutError, nats.errors.Error) as exc:
            return f"the engine is not reachable ({type(exc).__name__})"
        if msg.data:
            return "the engine cannot serve: " + msg.data.decode("utf-8", "replace")
        if not self.keys_loaded:
            self._load_soon()
            return "the API keys are not loaded from the engine yet"
        return await self.limiter.unreachable() if self.limiter is not None else None

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
        command_id = self._ids + str(self._count)
        ip = client[0] if client else "unknown"
        if spec.handler is create_order and key is not None:
            place = prepare_place(
                params.data,
                command_id,
                scope["path"],
                key.row.api_key,
                ip,
                scope.get("request_id", ""),
            )
            if place is not None:
                answer = await self.forward(place)
                if answer.status == PLACED:
                    return render_placed(place, decode_placed(answer.body))
                return self._answered(answer)
        fwd = Forwarded(
            command_id,
            scope["method"],
            scope["path"],
            wire_params(params.data),
            key.row.api_key if key is not None else None,
            ip,
            scope.get("request_id", ""),
        )
        reads = self.reads
        if spec.signed or scope["method"] != "GET":
            answer = await self.forward(fwd)
        elif spec.handler is server_time and self.engine_answers:
            # This clock is the one that judges the signatures' timestamps.
            return encoded(wire.server_time(now))
        elif reads is None or (symbol := dependency(spec, params)) is None:
            answer = await self.forward(fwd)
        else:
            read = (scope["path"], scope.get("query_string", b""))
            answer = await reads.read(read, symbol, lambda: self.forward(fwd))
        return self._answered(answer)

    @staticmethod
    def _answered(answer: Answered) -> bytes | Response:
        if answer.status == 200 and not answer.headers:
            return answer.body
        return Response(
            answer.body, answer.status, headers=dict(answer.headers), media_type="application/json"
        )

    def forward(self, fwd: Command) -> asyncio.Future[Answered]:
        """The engine's answer to ``fwd``, which goes with the others forwarded in this
        event-loop turn in one message, up to ``batch_max`` commands and NATS's maximum
        message size. While messages are in flight (the worker is busy), it waits up to
        ``batch_delay`` for more to join it; an idle worker sends at the end of the turn."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answered] = loop.create_future()
        if self.nc is None:
            future.set_exception(engine_unreachable("not connected to NATS"))
            return future
        data = encode(fwd)
        if self._queue and self._queued_bytes + len(data) > self._max_bytes():
            self._flush()
        self._queue.append(msgspec.Raw(data))
        self._waiters.append(future)
        self._queued_bytes += len(data)
        if len(self._queue) >= self.batch_max:
            self._flush()
        elif self._flush_at is None:
            if self.batch_delay > 0 and self._sending:
                self._flush_at = loop.call_later(self.batch_delay, self._flush)
            else:
                self._flush_at = loop.call_soon(self._flush)
        return future

    def _max_bytes(self) -> int:
        size = self.nc.max_payload if self.nc is not None else 0
        return (size or 1024 * 1024) - REQUEST_MARGIN

    def _flush(self) -> None:
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        if not self._queue:
            return
        commands, waiters = self._queue, self._waiters
        self._queue, self._waiters, self._queued_bytes = [], [], 0
        task = asyncio.get_running_loop().create_task(self._send(commands, waiters))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(
        self, commands: list[msgspec.Raw], waiters: list[asyncio.Future[Answered]]
    ) -> None:
        first_sent = self.clock()
        try:
            answers = await self.request(commands, first_sent)
        except Exception as exc:
            for waiter in waiters:
                _fail(waiter, exc)
            return
        for command, waiter, answer in zip(commands, waiters, answers, strict=True):
            if answer.status == ASK_AGAIN.status:  # did not fit in the reply: alone, it does
                try:
                    (answer,) = await self.request([command], first_sent, 2)
                except Exception as exc:
                    _fail(waiter, exc)
                    continue
            if not waiter.done():
                waiter.set_result(answer)

    async def request(
        self, commands: list[msgspec.Raw], first_sent: int, first_attempt: int = 1
    ) -> list[Answered]:
        """The engine's answers to ``commands``, in order. A timeout (the message or its
        answer lost, NATS restarting) resends it once with the same ids, which the engine
        answers without applying them again (and again while ``engine_wait`` lasts); no
        responder (no engine) answers 503 at once, or once ``engine_wait`` has passed with
        none appearing."""
        nc = self.nc
        if nc is None:
            raise engine_unreachable("not connected to NATS")
        subject = f"{self.subject}.cmd"
        started = perf_counter()
        attempt, sends = first_attempt, 0
        while True:
            sends += 1
            data = encode(PackedCommands(commands, first_sent, attempt))
            while True:
                sent = perf_counter()
                try:
                    msg = await nc.request(subject, data, timeout=self.timeout)
                    break
                except nats.errors.NoRespondersError:
                    self._engine_lost()
                    if perf_counter() - started + NO_ENGINE_PAUSE > self.engine_wait:
                        raise engine_unreachable("no engine process is listening") from None
                    await asyncio.sleep(NO_ENGINE_PAUSE)  # delivered to no one: send again
                except (TimeoutError, nats.errors.TimeoutError):
                    msg = None
                    break
                except nats.errors.Error as exc:
                    raise engine_unreachable(type(exc).__name__) from None
            if msg is None:
                # Sent once more, with the same ids (applied once at most); and more while
                # ``engine_wait`` lasts: a frozen leader's successor takes over in seconds.
                if sends < 2 or perf_counter() - started < self.engine_wait:
                    attempt = 2
                    continue
                break
            self.round_trips.observe(perf_counter() - sent)
            replies = decode_replies(msg.data)
            answers = replies.answers
            if self.reads is not None:
                self.reads.replied(replies.epoch, replies.note)
            if any(answer.status == 503 for answer in answers):
                self._engine_lost()  # it stopped after a failed commit, or restarted
            else:
                self.engine_answers = True
            if len(answers) != len(commands):
                raise engine_unreachable("an answer that does not match the request")
            return answers
        self._engine_lost()
        raise ApiError(
            Code.INTERNAL,
            "the engine did not answer in time: if this was a write, its outcome is unknown"
            " (look it up, by clientOrderId for an order, before sending it again)",
            status=503,
        )

    def _engine_lost(self) -> None:
        """No engine answers, or it says it cannot serve: kept reads are not served on (they
        may show what a dead or failed engine held in memory), and ``time`` is asked of the
        engine again (so it answers 503 while the engine does)."""
        self.engine_answers = False
        if self.reads is not None:
            self.reads.lost_track()


def _fail(waiter: asyncio.Future[Answered], exc: Exception) -> None:
    if not waiter.done():
        waiter.set_exception(
            exc if isinstance(exc, ApiError) else engine_unreachable(type(exc).__name__)
        )
