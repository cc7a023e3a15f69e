"""The engine process's side of NATS: it takes requests gateways admitted, runs their
endpoint's handler (state checks, apply, commit, render) and answers once the commit is done;
it hands gateways the API keys and tells them of every key change.

Commands are de-duplicated by id: a resend (a gateway's retry after a lost answer, NATS
redelivering after a restart) of an id seen in the last ``window`` commands gets the first
answer (waiting for it if the first is still running), never a second application.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import msgspec
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Scope

from tradehall.api.app import client_routes, wall_clock_ms
from tradehall.api.errors import ApiError
from tradehall.api.http import AppState, EndpointSpec, execute, failure_response, spec_of
from tradehall.api.params import Params
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import (
    Answered,
    Forwarded,
    KeyInfo,
    KeySet,
    decode_forwarded,
    encode,
)
from tradehall.codes import Code
from tradehall.exchange import ApiKey
from tradehall.store.batch import Batch

log = logging.getLogger("tradehall.engine")

DEFAULT_WINDOW = 100_000
"""Recent command ids kept for de-duplication (a few seconds of traffic at full load, far
more than a gateway's retry takes)."""


def endpoint_table(routes: Iterable[BaseRoute]) -> dict[tuple[str, str], EndpointSpec]:
    """(method, path) -> the endpoint serving it, for the routes made by ``endpoint()``."""
    table: dict[tuple[str, str], EndpointSpec] = {}
    for route in routes:
        spec = spec_of(route.endpoint) if isinstance(route, Route) else None
        if spec is None:
            continue
        assert isinstance(route, Route)
        for method in route.methods or ():
            if method != "HEAD":
                table.setdefault((method, route.path), spec)
    return table


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def answered(out: bytes | Response) -> Answered:
    if type(out) is bytes:
        return Answered(200, out)
    assert isinstance(out, Response)
    headers = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in out.raw_headers
        if name not in (b"content-length", b"content-type")
    ]
    return Answered(out.status_code, bytes(out.body), headers)


class EngineService:
    def __init__(
        self,
        state: AppState,
        url: str,
        subject: str,
        *,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.state = state
        self.url = url
        self.subject = subject
        self.window = window
        self.started = clock()
        self.table = endpoint_table(client_routes())
        self.nc: Nats | None = None
        self._commands: Subscription | None = None
        self._answers: OrderedDict[str, asyncio.Future[bytes]] = OrderedDict()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.executed = 0
        self.duplicates = 0

    # ------------------------------------------------------------- lifecycle

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        self.nc = await connect(self.url, "tradehall-engine")
        # Unbounded pending: a burst must queue here rather than be dropped by the client.
        await self.nc.subscribe(
            f"{self.subject}.cmd",
            cb=self._on_command,
            pending_msgs_limit=-1,
            pending_bytes_limit=-1,
        )
        await self.nc.subscribe(f"{self.subject}.keys", cb=self._on_keys)
        self.state.committer.listeners.append(self._on_commit)
        await self.nc.publish(f"{self.subject}.keys.reset", b"")
        await self.nc.flush()

    async def stop(self) -> None:
        """Take no more commands, answer those taken (their commits are still to come: the
        committer is flushed after this), then leave NATS."""
        nc, self.nc = self.nc, None
        if self._on_commit in self.state.committer.listeners:
            self.state.committer.listeners.remove(self._on_commit)
        if nc is None:
            return
        if self._commands is not None:
            with contextlib.suppress(Exception):
                # Those already received are still sorted (nats-py leaves drain unannotated).
                await self._commands.drain()  # type: ignore[no-untyped-call]
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)
        with contextlib.suppress(Exception):
            await nc.drain()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------- commands

    async def _on_command(self, msg: Msg) -> None:
        """NATS hands messages to this callback one at a time: it only sorts them, the work
        runs in a task each, started in arrival order (so applied in arrival order)."""
        try:
            fwd = decode_forwarded(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("dropped an undecodable command: %s", exc)
            return
        known = self._answers.get(fwd.id)
        if known is not None:
            self.duplicates += 1
            self._spawn(self._answer_again(msg, known))
            return
        if fwd.attempt > 1 and fwd.first_sent < self.started:
            # First sent before this engine started: the previous one may have applied and
            # committed it without answering; applying it again could do it twice.
            error = ApiError(
                Code.INTERNAL,
                "the engine restarted while this request was in flight: its outcome is unknown"
                " (look the order up before sending it again)",
                status=503,
            )
            self._spawn(
                self._respond(msg, encode(answered(failure_response(self.state, error, {}))))
            )
            return
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._answers[fwd.id] = future
        if len(self._answers) > self.window:
            self._answers.popitem(last=False)
        self._spawn(self._run(fwd, msg, future))

    async def _run(self, fwd: Forwarded, msg: Msg, future: asyncio.Future[bytes]) -> None:
        try:
            out = await self.run(fwd)
            data = encode(answered(out))
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: a resend gets it when it awaits
            raise
        future.set_result(data)
        self.executed += 1
        await self._respond(msg, data)

    async def run(self, fwd: Forwarded) -> bytes | Response:
        """One forwarded request, as the endpoint would answer it in one process."""
        scope: Scope = {
            "type": "http",
            "method": fwd.method,
            "path": fwd.path,
            "client": (fwd.ip, 0),
            "headers": [],
            "query_string": b"",
        }
        spec = self.table.get((fwd.method, fwd.path))
        if spec is None:
            error = ApiError(Code.UNSUPPORTED, f"unknown path {fwd.path}", status=404)
            return failure_response(self.state, error, scope)
        key: ApiKey | None = None
        if spec.signed:
            # Checked again here, against the keys of record: a key revoked a moment ago on
            # the engine is refused even if a gateway has not heard of it yet.
            key = self.state.exchange.keys.get(fwd.api_key or "")
            if key is None or key.row.revoked is not None:
                error = ApiError(Code.BAD_KEY, "invalid API key", 401)
                return failure_response(self.state, error, scope)
            if spec.trade and key.row.read_only:
                error = ApiError(Code.BAD_KEY, "this API key has no trade permission", 403)
                return failure_response(self.state, error, scope)
        params = Params(fwd.params)
        return await execute(self.state, spec, params, self.state.clock(), key, scope, _no_body)

    async def _answer_again(self, msg: Msg, first: asyncio.Future[bytes]) -> None:
        with contextlib.suppress(Exception):
            await self._respond(msg, await asyncio.shield(first))

    async def _respond(self, msg: Msg, data: bytes) -> None:
        try:
            await msg.respond(data)
        except Exception as exc:  # NATS is away: the gateway times out and resends
            log.warning("could not answer a command: %s", exc)

    # ------------------------------------------------------------- keys

    def _key_set(self, keys: Iterable[ApiKey]) -> bytes:
        return encode(KeySet([KeyInfo.of(key.row) for key in keys]))

    async def _on_keys(self, msg: Msg) -> None:
        await self._respond(msg, self._key_set(self.state.exchange.keys.values()))

    def _on_commit(self, batch: Batch) -> None:
        if not batch.keys or self.nc is None:
            return
        keys = self.state.exchange.keys
        changed = [keys[name] for name in batch.keys if name in keys]
        self._spawn(self.nc.publish(f"{self.subject}.keys.changed", self._key_set(changed)))
