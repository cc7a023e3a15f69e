"""Fault injection for bot robustness (off by default): an ASGI wrapper around the whole
application, so it sees every request the same way whether the app then answers it on its
exact-path fast path or through Starlette's router.

Per rule (a path prefix, or ``*`` for every API path; the admin API and its page are never
touched):

- latency: a share of requests waits a uniform delay before it is handled;
- error before: a share is answered 503 without reaching the exchange (nothing applied);
- error after: a share is handled (a write is applied and committed) and its answer replaced
  by 504: as the interface's 5xx/504 rules say, the outcome is unknown to the client, which
  must look (query the order) rather than assume it failed;
- 429 bursts: a share of requests starts a burst during which every request of the rule is
  answered 429 (-1003, ``Retry-After``);
- dropped streams: a share of WebSocket connections is closed by the server (code 1001, as a
  restarting server does) after a uniform delay.

Every injected fault is logged (``tradehall.faults``) and counted; ``status()`` is what
``tradehall sim status`` shows. Each answer carries ``X-Tradehall-Fault`` naming the fault,
so a bot's logs can tell an injected fault from a real one."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tradehall.codes import Code
from tradehall.sim.settings import FaultRule, FaultSettings

log = logging.getLogger("tradehall.faults")

API_PREFIXES = ("/spot/", "/futures/", "/fapi/", "/kline-api/", "/spotws_user/", "/position_order/")
"""What ``*`` covers: the exchange's API and streams, not the admin API nor the web pages."""
LATENCY = "latency"
ERROR_BEFORE = "error_before"
ERROR_AFTER = "error_after"
RATE_LIMITED = "rate_limited"
DROPPED = "dropped"
KINDS = (LATENCY, ERROR_BEFORE, ERROR_AFTER, RATE_LIMITED, DROPPED)
DROP_CLOSE_CODE = 1001
RECENT = 50


class FaultInjector:
    def __init__(
        self,
        app: ASGIApp,
        settings: FaultSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.settings = settings
        self.enabled = settings.enabled and bool(settings.rules)
        self.rng = random.Random(f"{settings.seed}/faults")
        self.clock = clock
        self.counts: dict[str, dict[str, int]] = {
            _name(rule): dict.fromkeys(KINDS, 0) for rule in settings.rules
        }
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._burst_until: dict[str, float] = {}

    def __getattr__(self, name: str) -> Any:
        # The wrapped application's attributes (``state``, ``router``...) stay reachable.
        return getattr(self.app, name)

    def rule_for(self, method: str, path: str) -> FaultRule | None:
        if path == "/admin" or path.startswith("/admin/"):
            return None
        for rule in self.settings.rules:
            covered = (
                path.startswith(API_PREFIXES) if rule.path == "*" else path.startswith(rule.path)
            )
            if covered and (not rule.method or rule.method == method):
                return rule
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self.websocket(scope, receive, send)
            return
        rule = self.rule_for(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if rule is None:
            await self.app(scope, receive, send)
            return
        now = self.clock()
        rng = self.rng
        if now < self._burst_until.get(rule.path, 0.0) or rng.random() < rule.burst_share:
            if now >= self._burst_until.get(rule.path, 0.0):
                self._burst_until[rule.path] = now + rule.burst_seconds
            self._record(rule, RATE_LIMITED, scope)
            retry = max(1, round(self._burst_until[rule.path] - now))
            await _answer(
                send,
                429,
                Code.TOO_MANY_REQUESTS,
                "too many requests",
                RATE_LIMITED,
                [(b"retry-after", str(retry).encode())],
            )
            return
        delayed = False
        if rule.latency_share and rng.random() < rule.latency_share:
            delay = rng.uniform(rule.latency_ms_min, rule.latency_ms_max) / 1000
            self._record(rule, LATENCY, scope, delay_ms=round(delay * 1000))
            await asyncio.sleep(delay)
            delayed = True
        draw = rng.random()
        if draw < rule.error_before_share:
            self._record(rule, ERROR_BEFORE, scope)
            await _answer(send, 503, Code.INTERNAL, "service unavailable", ERROR_BEFORE)
            return
        if draw < rule.error_before_share + rule.error_after_share:
            await self.app(scope, receive, _swallow)
            self._record(rule, ERROR_AFTER, scope)
            await _answer(
                send, 504, Code.INTERNAL, "gateway timeout: the outcome is unknown", ERROR_AFTER
            )
            return
        # The app's own answer; when it was delayed, it says so as the injected errors do.
        await self.app(scope, receive, _marked(send, LATENCY) if delayed else send)

    async def websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A stream of a rule with ``drop_share``: that share of connections is closed by the
        server (1001) a uniform ``drop_after_ms_min``..``max`` after it opened; the stream
        handler then sees a disconnect, as when the client goes away."""
        rule = self.rule_for("GET", scope["path"])
        if rule is None or not rule.drop_share or self.rng.random() >= rule.drop_share:
            await self.app(scope, receive, send)
            return
        delay = self.rng.uniform(rule.drop_after_ms_min, rule.drop_after_ms_max) / 1000
        dropped = asyncio.Event()
        accepted = asyncio.Event()

        async def guarded_send(message: Message) -> None:
            if dropped.is_set():
                return  # the connection is gone: what the app still sends is lost
            if message["type"] == "websocket.accept":
                accepted.set()
            await send(message)

        async def guarded_receive() -> Message:
            incoming = asyncio.ensure_future(receive())
            drop = asyncio.ensure_future(dropped.wait())
            done, _ = await asyncio.wait({incoming, drop}, return_when=asyncio.FIRST_COMPLETED)
            if incoming in done:
                drop.cancel()
                return incoming.result()
            incoming.cancel()
            return {"type": "websocket.disconnect", "code": DROP_CLOSE_CODE}

        async def drop_later() -> None:
            await accepted.wait()
            await asyncio.sleep(delay)
            self._record(rule, DROPPED, scope, after_ms=round(delay * 1000))
            dropped.set()
            await send(
                {
                    "type": "websocket.close",
                    "code": DROP_CLOSE_CODE,
                    "reason": "fault injected: connection dropped",
                }
            )

        dropper = asyncio.create_task(drop_later())
        try:
            await self.app(scope, guarded_receive, guarded_send)
        finally:
            dropper.cancel()

    def _record(self, rule: FaultRule, kind: str, scope: Scope, **extra: Any) -> None:
        self.counts[_name(rule)][kind] += 1
        entry = {"kind": kind, "method": scope.get("method"), "path": scope["path"], **extra}
        self.recent.append(entry)
        log.info("fault injected: %s %s %s %s", kind, entry["method"], entry["path"], extra or "")

    def status(self) -> dict[str, Any]:
        totals = dict.fromkeys(KINDS, 0)
        for counts in self.counts.values():
            for kind, n in counts.items():
                totals[kind] += n
        return {
            "enabled": self.enabled,
            "injected": totals,
            "byRule": [{"rule": name, **counts} for name, counts in self.counts.items()],
            "recent": list(self.recent),
        }


def _name(rule: FaultRule) -> str:
    return f"{rule.method} {rule.path}" if rule.method else rule.path


def _marked(send: Send, kind: str) -> Send:
    """``send`` with ``X-Tradehall-Fault: kind`` added to the answer's headers."""

    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), (b"x-tradehall-fault", kind.encode())]
            message = {**message, "headers": headers}
        await send(message)

    return marked


async def _swallow(message: Message) -> None:
    """The answer the client never gets."""


async def _answer(
    send: Send,
    status: int,
    code: int,
    msg: str,
    kind: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = msgspec.json.encode({"code": int(code), "msg": msg})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-tradehall-fault", kind.encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
