"""The engine process's side of NATS: it takes the requests gateways admitted, in messages
of several commands, runs their endpoint's handlers in order (state checks, apply, commit,
render) and answers each message once its commands are committed; it hands gateways the API
keys and tells them of every key change.

Commands are de-duplicated by id: a resend (a gateway's retry after a lost answer, NATS
redelivering after a restart) of an id seen in the last ``window`` commands (at least; see
``RecentIds``) gets the first answer (waiting for it if the first is still running), never a
second application.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import time
import types
from collections.abc import Callable, Coroutine, Generator, Iterable
from time import perf_counter
from typing import Any, Generic, TypeVar, cast

import msgspec
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Scope

from tradehall import logs
from tradehall.api.app import client_routes, wall_clock_ms
from tradehall.api.errors import ApiError, error_response
from tradehall.api.http import (
    AppState,
    Call,
    EndpointSpec,
    admit_key_use,
    encoded,
    failure_response,
    spec_of,
)
from tradehall.api.params import Params
from tradehall.cluster.gateway_registry import GatewayRegistry
from tradehall.cluster.link import Service, connect
from tradehall.cluster.metrics import EngineServiceCollector
from tradehall.cluster.prepared import as_forwarded, place_order, placed
from tradehall.cluster.protocol import (
    ASK_AGAIN,
    PLACED,
    Answered,
    Commands,
    Forwarded,
    KeyInfo,
    KeySet,
    MarketNote,
    Place,
    Replies,
    decode_answers,
    decode_commands,
    decode_report,
    encode,
)
from tradehall.cluster.standby import (
    HEARTBEAT_S,
    NATS_GRACE_S,
    RecentCommands,
    Role,
    leader_heartbeat,
)
from tradehall.codes import Code
from tradehall.exchange import ApiKey
from tradehall.store.batch import Batch
from tradehall.venue import derived_namespace

log = logging.getLogger("tradehall.engine")

T = TypeVar("T")
V = TypeVar("V")

DEFAULT_WINDOW = 100_000
"""Recent command ids kept for de-duplication, at least (a few seconds of traffic at full
load, far more than a gateway's retry takes)."""


class RecentIds(Generic[V]):
    """The last ``size`` ids at least (at most twice as many), each with a value, in two
    generations of plain dicts: the newer takes every id; once it holds ``size`` it becomes
    the older, and the previous older is dropped whole.

    This replaced an OrderedDict trimmed by one id per insert: no linked node per id and no
    eviction per insert (a command costs a lookup in each dict and an insert; the old ids
    leave ``size`` at a time). Measured alone, the two cost about the same; what cost the
    engine ~2 us per command was what the window kept, an answer per id (see ``_Work``)."""

    __slots__ = ("_new", "_old", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._new: dict[str, V] = {}
        self._old: dict[str, V] = {}

    def get(self, key: str) -> V | None:
        found = self._new.get(key)
        return found if found is not None else self._old.get(key)

    def add(self, key: str, value: V) -> None:
        """Keep ``key`` (not kept yet) with ``value``."""
        new = self._new
        new[key] = value
        if len(new) >= self.size:
            self._old = new
            self._new = {}

    def __contains__(self, key: str) -> bool:
        return key in self._new or key in self._old

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


GC_YOUNG_THRESHOLD = 10_000
"""Allocations (net) between two young-generation collections, instead of Python's 700."""


def tune_gc() -> None:
    """The engine process's heap is large and long-lived (books, orders, keys, the answers
    window) and its commands leave few reference cycles. Python's default thresholds start a
    young collection every 700 allocations and, now and then, a full one that walks the
    whole heap: under a flood of placements that cost ~10 us per placement and pauses of
    tens of ms (docs/deployment.md). Young collections are made rarer (garbage cycles are
    still collected, later), and what is alive when the service starts is frozen (never
    walked again): the recovered exchange already is (``server.recover_for_serving``), this
    adds what came after it (the app, the demo account, the NATS client)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


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


FAILURE_WATCH = 0.1
"""Seconds between two looks at whether the exchange has failed (stopped writing)."""

REPLY_MARGIN = 4096
"""Bytes of NATS's maximum message size kept for the reply's subject and headers."""

TOO_LARGE = 500


_Handler = Coroutine[Any, Any, Any]
"""An endpoint handler's coroutine: its result is the answer's JSON (``encoded``)."""

_Waiting = tuple[int, _Handler | None, Any, Any]
"""A command waiting in a message: its place, its handler's coroutine, what that waits for
and the request's scope; or, for a placement applied at once (``_place``), its place, None,
the commit and its answer."""


@dataclasses.dataclass(slots=True)
class _Work:
    """A message's commands on their way: its answers (None until known), the commands
    still waiting (``_Waiting``) and the resent ids (index, the future of the message that
    first had the id, its place there).

    The de-duplication window maps each id the message applied to it. Once the message is
    answered (``_settle``) it keeps only its ids and its reply: a resend of one of them is
    answered from the reply. The answers are not kept one by one: under load that was two
    objects per command (the answer and its body) alive for the whole window, each
    allocated where memory had gone cold; the reply is one object, made anyway."""

    msg: Msg | None
    done: asyncio.Future[list[Answered]] | None
    """Resolves to the answers once they are all known; None once answered."""
    slots: list[Answered | None]
    waiting: list[_Waiting] = dataclasses.field(default_factory=list)
    copies: list[tuple[int, asyncio.Future[list[Answered]], int]] = dataclasses.field(
        default_factory=list
    )
    ids: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    """The ids this message put in the window, with their places."""
    reply: bytes = b""
    """Once answered: every answer, encoded as a reply carries them (``decode_answers``)."""
    commit: asyncio.Future[None] | None = None
    """The commit its placements applied at once (``EngineService._place``) wait for."""

    def place(self, command_id: str) -> int:
        """Where the command ``command_id`` (one this message put in the window) is."""
        for known, index in self.ids:
            if known == command_id:
                return index
        raise KeyError(command_id)

    def answer(self, at: int) -> Answered:
        """The answer at ``at``, once the message is answered."""
        return decode_answers(self.reply)[at]

    def fail(self, state: AppState, exc: BaseException, count: int, unknown: Answered) -> None:
        """What is not answered yet of the message's ``count`` commands gets the error (a
        resend waiting on it included); a command whose handler had started (it may have
        been applied) gets ``unknown``, the outcome-unknown answer, not a plain error."""
        error = exc if isinstance(exc, Exception) else RuntimeError(type(exc).__name__)
        started = {index for index, _, _, _ in self.waiting}
        self.slots.extend([None] * (count - len(self.slots)))
        for index, slot in enumerate(self.slots):
            if slot is None:
                self.slots[index] = (
                    unknown if index in started else answered(failure_response(state, error, {}))
                )


@types.coroutine
def _go_on(coro: Coroutine[Any, Any, T], step: Any) -> Generator[Any, None, T]:
    """The rest of a started coroutine that yielded ``step`` (what it waits for), for a
    task to run: the task waits for ``step``, then the coroutine carries on."""
    yield step
    result: T = yield from coro.__await__()
    return result


def _shared_blocker(waiting: list[_Waiting]) -> asyncio.Future[Any] | None:
    """The one future every started handler of a message waits for (the commit: the usual
    case), or None (some wait for something else)."""
    first = waiting[0][2]
    if not isinstance(first, asyncio.Future):
        return None
    for _, _, step, _ in waiting:
        if step is not first:
            return None
    return cast(asyncio.Future[Any], first)


def _answer_of(first: asyncio.Future[list[Answered]], at: int) -> Answered:
    return first.result()[at]


def _fit(answers: list[Answered], limit: int) -> list[Answered]:
    """``answers`` with the ones that overflow ``limit`` bytes, in order, replaced by
    ``ASK_AGAIN`` (a lone answer too large for any message becomes a 500)."""
    if len(answers) == 1:
        msg = f"the answer is larger than NATS's maximum message size ({limit} bytes)"
        return [answered(error_response(Code.UNKNOWN, msg, TOO_LARGE))]
    fitted = []
    size = 16
    for answer in answers:
        size += len(answer.body) + sum(len(n) + len(v) + 8 for n, v in answer.headers) + 16
        fitted.append(answer if size <= limit else ASK_AGAIN)
    return fitted


def answered(out: bytes | Response) -> Answered:
    if type(out) is bytes:
        return Answered(200, out)
    assert isinstance(out, Response)
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in out.raw_headers
        if name not in (b"content-length", b"content-type")
    )
    return Answered(out.status_code, bytes(out.body), headers)


class EngineService(Service):
    def __init__(
        self,
        state: AppState,
        url: str,
        subject: str,
        *,
        namespace: str | None = None,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], int] = wall_clock_ms,
        role: Role | None = None,
        recent: RecentCommands | None = None,
    ) -> None:
        self.state = state
        self.role = role
        """An HA engine's standing (``--standby``): it answers only while it leads and its
        lease holds."""
        self.recent = role.recent if role is not None else recent
        """The ids of the commands committed lately, from the journal: a resend of a command
        first sent before this engine started is applied only if it was never committed."""
        self.url = url
        self.subject = subject
        self.namespace = (
            derived_namespace(state.exchange.store.identity()) if namespace is None else namespace
        )
        """The venue's Redis namespace, told to the gateways with the keys."""
        self.window = window
        self.started = clock()
        self.table = endpoint_table(client_routes(state.exchange.config.sandbox.self_service))
        self.nc: Nats | None = None
        self._commands: Subscription | None = None
        self._answers: RecentIds[_Work] = RecentIds(window)
        """Recent command ids, each with the message that first had it (its answer is known
        once the message's is)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.epoch = os.urandom(8).hex()
        """This engine run, in every reply and market note."""
        self.notes = 0
        """The number of the latest ``MarketNote`` published."""
        self._reset_sent = False
        self._watcher: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self.gateways = GatewayRegistry()
        """The gateways heard from lately (the operator's view)."""
        self._open: set[asyncio.Future[list[Answered]]] = set()
        """Messages whose handlers wait for their commit (resumed by a callback, no task)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.executed = 0
        self.duplicates = 0
        self.reconnects = 0
        self._collector = EngineServiceCollector(self)
        self._access_log = logs.ACCESS.isEnabledFor(logging.INFO)

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        tune_gc()
        self._loop = asyncio.get_running_loop()
        self.nc = await connect(self.url, "tradehall-engine", reconnected=self._reconnected)
        # Unbounded pending: a burst must queue here rather than be dropped by the client.
        self._commands = await self.nc.subscribe(
            f"{self.subject}.cmd",
            cb=self._on_command,
            pending_msgs_limit=-1,
            pending_bytes_limit=-1,
        )
        await self.nc.subscribe(f"{self.subject}.keys", cb=self._on_keys)
        await self.nc.subscribe(f"{self.subject}.gateways.report", cb=self._on_report)
        await self.nc.subscribe(f"{self.subject}.health", cb=self._on_health)
        self.state.readiness_checks.append(self._linked)
        if self.state.metrics is not None:
            self.state.metrics.register(self._collector)
        self.state.gateways = self.gateways
        self.state.committer.listeners.append(self._on_commit)
        self._watcher = asyncio.get_running_loop().create_task(self._watch_failure())
        if self.role is not None:
            self._keeper = asyncio.get_running_loop().create_task(self._keep_lease(self.role))
        await self.nc.publish(f"{self.subject}.keys.reset", b"")
        await self.nc.flush()

    async def stop(self) -> None:
        """Take no more commands, answer those taken (their commits are still to come: the
        committer is flushed after this), tell gateways to forget what they kept, then leave
        NATS."""
        if self._watcher is not None:
            self._watcher.cancel()
        if self._keeper is not None:
            self._keeper.cancel()
        nc = self.nc
        if nc is None:
            return
        if self._commands is not None:
            with contextlib.suppress(Exception):
                # Those already received are still sorted (nats-py leaves drain unannotated).
                await self._commands.drain()  # type: ignore[no-untyped-call]
        if self._tasks or self._open:
            await asyncio.wait([*self._tasks, *self._open], timeout=10)
        if self._linked in self.state.readiness_checks:
            self.state.readiness_checks.remove(self._linked)
        if self.state.metrics is not None:
            with contextlib.suppress(KeyError):
                self.state.metrics.unregister(self._collector)
        if self._on_commit in self.state.committer.listeners:
            self.state.committer.listeners.remove(self._on_commit)
        self._announce_reset()
        self.nc = None
        with contextlib.suppress(Exception):
            await nc.drain()

    def _spawn(self, coro: Any) -> None:
        task = (self._loop or asyncio.get_running_loop()).create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run_inline(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` here, at once; if it has to wait (rare: a publish into a full
        buffer), a task carries it on."""
        try:
            step = coro.send(None)
        except StopIteration:
            return
        self._spawn(_go_on(coro, step))

    # ------------------------------------------------------------- commands

    async def _on_command(self, msg: Msg) -> None:
        """NATS hands messages to this callback one at a time, and each command of a message
        is started here, in order, before the next message: so commands are applied in
        arrival order. A command's handler runs inline up to its first wait (for most, the
        commit: every command of the message shares it). When they all wait for the same
        commit, a callback on it finishes the handlers and answers them all (no task, no
        ``asyncio.wait``: this runs for every message); otherwise one task per message
        waits for what they wait for (and for the first answers of resent ids)."""
        if self.role is not None and not self._leads(self.role):
            return  # another engine may lead: the gateway hears from it, or resends to it
        try:
            batch = decode_commands(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("dropped an undecodable command: %s", exc)
            return
        done: asyncio.Future[list[Answered]] = (
            self._loop or asyncio.get_running_loop()
        ).create_future()
        work = _Work(msg, done, [])
        try:
            self._begin_all(batch, work)
        except BaseException as exc:
            self._give_up(work, exc, len(batch.commands))
            raise
        if work.waiting and not work.copies:
            blocker = _shared_blocker(work.waiting)
            if blocker is not None:
                self._open.add(done)
                blocker.add_done_callback(functools.partial(self._committed, work))
                return
        if work.waiting or work.copies:
            self._spawn(self._finish(work))
        else:
            await self._reply(work)

    def _committed(self, work: _Work, _: asyncio.Future[Any]) -> None:
        """The commit every started handler of ``work`` waited for is done: each goes on (to
        its answer, or to another wait: then a task finishes the message)."""
        try:
            rest = self._step_all(work)
        except BaseException as exc:
            self._give_up(work, exc, len(work.slots))
            raise
        if rest:
            self._spawn(self._finish_rest(work, rest))
        else:
            self._run_inline(self._reply(work))

    def _begin_all(self, batch: Commands, work: _Work) -> None:
        slots, waiting, ids = work.slots, work.waiting, work.ids
        answers = self._answers
        stale = batch.attempt > 1 and batch.first_sent < self.started
        # A resend first sent before this engine started: the journal's recent ids say
        # which were committed (by the engine before, whose answer was lost), if they reach
        # back to its first send; the others were never committed (that engine is dead or
        # fenced off) and are run now, once.
        recent = self.recent
        committed = (
            recent.ids
            if stale and recent is not None and batch.first_sent >= recent.since
            else None
        )
        exchange = self.state.exchange
        now: int | None = None
        for index, fwd in enumerate(batch.commands):
            command_id = fwd.id
            known = answers.get(command_id)
            if known is not None:
                self.duplicates += 1
                at = known.place(command_id)
                if known.done is None:  # answered
                    slots.append(known.answer(at))
                else:
                    work.copies.append((index, known.done, at))
                    slots.append(None)
                continue
            if stale:
                if committed is None:
                    slots.append(self._outcome_unknown())
                    continue
                seq = committed.get(command_id)
                if seq is not None:
                    self.duplicates += 1
                    slots.append(self._applied_before(seq))
                    continue
            answers.add(command_id, work)
            ids.append((command_id, index))
            if type(fwd) is Place:
                if now is None:
                    now = self.state.clock()  # the message's commands arrived together
                if self._place(fwd, work, index, now):
                    continue
                fwd = as_forwarded(fwd)  # the handler answers it
            started = self.begin(cast(Forwarded, fwd))
            if type(started) is Answered:
                slots.append(started)
                continue
            handler, scope = cast(tuple[_Handler, Scope], started)
            pending = exchange.pending
            staged = len(pending.entries)
            try:
                step = handler.send(None)
            except StopIteration as stop:
                slots.append(self._rendered(stop.value, scope))
                continue
            except Exception as exc:
                slots.append(self._failure(exc, scope))
                continue
            finally:
                if len(pending.entries) != staged:
                    pending.command_ids.append(command_id)  # the journal records it
            if isinstance(step, asyncio.Future):
                # What a task does with a future it is handed: the next command may await
                # the same one (the commit), which asyncio refuses while the flag is set.
                step._asyncio_future_blocking = False
            slots.append(None)
            waiting.append((index, handler, step, scope))
        self.executed += len(ids)

    def _place(self, place: Place, work: _Work, index: int, now: int) -> bool:
        """``place`` applied, its answer (or the refusal of its application) in ``work``; or
        False, nothing done, when the handler must answer it (``cluster.prepared``)."""
        exchange = self.state.exchange
        if self._access_log or exchange.failure is not None:
            return False
        api_key = place.api_key
        key = exchange.keys.get(api_key)
        if key is None:
            return False
        row = key.row
        if row.revoked is not None or row.read_only:
            return False
        prepared = place_order(exchange.config.markets.pairs, place, now, row.user_id)
        if prepared is None:
            return False
        pair, command = prepared
        entries = exchange.pending.entries
        staged = len(entries)
        try:
            if not exchange.selfservice.use(exchange.note_state, api_key, now):
                admit_key_use(exchange, key, now)  # expired: its refusal
            order = exchange.apply(command)
        except Exception as exc:
            scope = self._scope(place.path, place.ip, place.request_id, "POST")
            scope["user_id"] = row.user_id
            work.slots.append(self._failure(exc, scope))
            if len(entries) != staged:  # the key's use was noted
                exchange.pending.command_ids.append(place.id)  # the journal records it
            return True
        if exchange.journaling:  # the command is among the journal's entries
            exchange.pending.command_ids.append(place.id)  # and so is its id
        work.slots.append(None)
        commit = work.commit
        if commit is None:  # the same for every command of the message
            commit = work.commit = self.state.committer.durable()
        # The gateway renders the answer.
        work.waiting.append((index, None, commit, Answered(PLACED, encode(placed(pair, order)))))
        return True

    def _applied_before(self, seq: int) -> Answered:
        error = ApiError(
            Code.INTERNAL,
            f"this request was applied (journal record {seq}) by the engine that led before"
            " this one, which stopped before answering: its answer is lost (look the order"
            " up, by clientOrderId, rather than send it again)",
            status=503,
        )
        return answered(failure_response(self.state, error, {}))

    def _rendered(self, result: Any, scope: Scope) -> Answered:
        """A handler's result as its answer (what ``endpoint`` makes of it in ``serve``)."""
        try:
            out = Answered(200, encoded(result))
        except Exception as exc:
            return self._failure(exc, scope)
        if self._access_log:
            self._access(scope, 200)
        return out

    def _failure(self, exc: Exception, scope: Scope) -> Answered:
        out = answered(failure_response(self.state, exc, scope))
        if self._access_log:
            self._access(scope, out.status)
        return out

    def _access(self, scope: Scope, status: int) -> None:
        """The access log's record of a forwarded request (``--access-log``)."""
        started = scope.get("started")
        logs.ACCESS.info(
            "%s %s %d",
            scope.get("method"),
            scope.get("path"),
            status,
            extra={
                "request_id": scope.get("request_id") or None,
                "user_id": scope.get("user_id"),
                "endpoint": scope.get("path"),
                "method": scope.get("method"),
                "code": status,
                "duration_ms": round((perf_counter() - started) * 1000, 3) if started else None,
            },
        )

    def _settle(self, work: _Work) -> list[Answered]:
        """The message's answers are all known: resends waiting get them, and the message
        keeps its reply and drops the rest (see ``_Work``)."""
        slots = cast(list[Answered], work.slots)
        done = work.done
        if done is not None:
            if not done.done():
                done.set_result(slots)
            self._open.discard(done)
        if self.state.exchange.failure is not None and not self._reset_sent:
            self._announce_reset()  # gateways stop serving what this engine showed before
        work.reply = encode(Replies(slots, self.epoch, self.notes))
        work.done = None
        work.slots = []
        work.waiting = []
        work.commit = None
        work.copies = []
        return slots

    def _reply(self, work: _Work) -> Coroutine[Any, Any, None]:
        """Settle ``work`` now; the coroutine sends its reply."""
        answers = self._settle(work)
        msg, work.msg = work.msg, None
        return self._answer(msg, answers, work.reply)

    def _outcome_unknown(
        self, why: str = "the engine restarted while this request was in flight"
    ) -> Answered:
        # First sent before this engine started: the previous one may have applied and
        # committed it without answering; applying it again could do it twice.
        error = ApiError(
            Code.INTERNAL,
            f"{why}: its outcome is unknown (look the order up before sending it again)",
            status=503,
        )
        return answered(failure_response(self.state, error, {}))

    async def _finish(self, work: _Work) -> None:
        slots = work.slots
        try:
            if work.waiting:
                await self._resume(work)
            for index, earlier, at in work.copies:
                if earlier is not work.done:  # a command of an earlier message: its answer
                    await asyncio.wait([earlier])
                    slots[index] = _answer_of(earlier, at)
            for index, earlier, at in work.copies:
                if earlier is work.done:  # the same id twice in this message
                    slots[index] = slots[at]
        except BaseException as exc:
            self._give_up(work, exc, len(work.slots))
            raise
        await self._reply(work)

    def _give_up(self, work: _Work, exc: BaseException, count: int) -> None:
        """Something no handler catches (cancellation at shutdown): every command of the
        message still gets an answer, and the window holds one for each of its ids."""
        unknown = self._outcome_unknown("the engine stopped working on this request")
        work.fail(self.state, exc, count, unknown)
        self._spawn(self._reply(work))

    async def _resume(self, work: _Work) -> None:
        """Wait for what the started handlers wait for (without ever cancelling it: the
        commit's future is shared), then run each on, in order; one that waits again (a
        store read) goes on in a task of its own."""
        blockers = {
            id(step): step for _, _, step, _ in work.waiting if isinstance(step, asyncio.Future)
        }
        if blockers:
            await asyncio.wait(blockers.values())
        rest = self._step_all(work)
        if rest:
            await self._rest(work, rest)

    def _step_all(self, work: _Work) -> list[tuple[int, asyncio.Task[Any], Scope]]:
        """Run on each started handler whose future is done, in order, to its answer; those
        that wait again (or waited for something else) go on in tasks of their own, which
        this returns."""
        rest: list[tuple[int, asyncio.Task[Any], Scope]] = []
        slots = work.slots
        for index, handler, step, scope in work.waiting:
            if handler is None:  # applied at once (``_place``): its answer, now committed
                slots[index] = scope
                continue
            if isinstance(step, asyncio.Future):
                try:
                    step = handler.send(None)
                except StopIteration as stop:
                    slots[index] = self._rendered(stop.value, scope)
                    continue
                except Exception as exc:
                    slots[index] = self._failure(exc, scope)
                    continue
            task = (self._loop or asyncio.get_running_loop()).create_task(_go_on(handler, step))
            rest.append((index, task, scope))
        return rest

    async def _rest(self, work: _Work, rest: list[tuple[int, asyncio.Task[Any], Scope]]) -> None:
        await asyncio.wait([task for _, task, _ in rest])
        for index, task, scope in rest:
            try:
                result = task.result()
            except Exception as exc:
                work.slots[index] = self._failure(exc, scope)
            else:
                work.slots[index] = self._rendered(result, scope)

    async def _finish_rest(
        self, work: _Work, rest: list[tuple[int, asyncio.Task[Any], Scope]]
    ) -> None:
        """What ``_committed`` left: handlers waiting again (a store read), then the answer."""
        try:
            await self._rest(work, rest)
        except BaseException as exc:
            self._give_up(work, exc, len(work.slots))
            raise
        await self._reply(work)

    def begin(self, fwd: Forwarded) -> tuple[_Handler, Scope] | Answered:
        """One forwarded request, as the endpoint would answer it in one process: its
        handler's coroutine (not started) with the request's scope, or the refusal. The
        engine runs the handler itself, with what ``endpoint`` does after admission around
        it (``_rendered``, ``failure_response``): a coroutine less to start and resume for
        every command."""
        scope = self._scope(fwd.path, fwd.ip, fwd.request_id, fwd.method)
        if self._access_log:
            scope["started"] = perf_counter()
        spec = self.table.get((fwd.method, fwd.path))
        if spec is None:
            error = ApiError(Code.UNSUPPORTED, f"unknown path {fwd.path}", status=404)
            return self._failure(error, scope)
        key: ApiKey | None = None
        state = self.state
        now = state.clock()
        if spec.signed:
            # Checked again here, against the keys of record: a key revoked a moment ago on
            # the engine is refused even if a gateway has not heard of it yet.
            key = state.exchange.keys.get(fwd.api_key or "")
            if key is None or key.row.revoked is not None:
                error = ApiError(Code.BAD_KEY, "invalid API key", 401)
                return self._failure(error, scope)
            if spec.trade and key.row.read_only:
                error = ApiError(Code.BAD_KEY, "this API key has no trade permission", 403)
                return self._failure(error, scope)
            try:
                admit_key_use(state.exchange, key, now)
            except ApiError as expired:
                return self._failure(expired, scope)
            scope["user_id"] = key.row.user_id
        if not spec.when_failed:
            try:
                state.check_writable()
            except Exception as exc:
                return self._failure(exc, scope)
        call = Call(state, Params(fwd.params), now, key, scope, _no_body)
        return cast(_Handler, spec.handler(call)), scope  # every handler is a coroutine function

    @staticmethod
    def _scope(path: str, ip: str, request_id: str, method: str) -> Scope:
        return {
            "type": "http",
            "method": method,
            "path": path,
            "client": (ip, 0),
            "headers": [],
            "query_string": b"",
            "request_id": request_id,
        }

    async def _answer(self, msg: Msg | None, answers: list[Answered], data: bytes) -> None:
        """Send ``data``, ``answers`` encoded in a ``Replies``, as the reply to ``msg``
        (fitted to NATS's maximum message size)."""
        if self.role is not None and not self._leads(self.role):
            # An HA engine that stopped leading answers nothing, not even the commands it
            # could not commit: the new leader gets the same messages (or the gateway's
            # resends), and its answer is the one that holds. An error from here could beat
            # it and tell a client that an order the new leader placed was not.
            return
        limit = self._max_payload()
        if len(data) > limit:
            data = encode(Replies(_fit(answers, limit), self.epoch, self.notes))
        if msg is not None:
            await self._respond(msg, data)

    def _max_payload(self) -> int:
        nc = self.nc
        size = nc.max_payload if nc is not None else 0
        return (size or 1024 * 1024) - REPLY_MARGIN

    async def _respond(self, msg: Msg, data: bytes) -> None:
        try:
            await msg.respond(data)
        except Exception as exc:  # NATS is away: the gateway times out and resends
            log.warning("could not answer a command: %s", exc)

    # ------------------------------------------------------------- leadership (HA)

    def _leads(self, role: Role) -> bool:
        """Whether this engine may answer: it leads and its lease holds. A lease that lapsed
        (the process was frozen, its store unreachable) means another engine may lead now:
        it steps down."""
        if not role.leading:
            return False
        failure = self.state.exchange.failure
        if failure is not None:  # its store failed: another engine may lead already
            role.step_down(f"its store failed: {failure}")
            return False
        if role.lease_valid():
            return True
        role.step_down("its lease lapsed (the process was stalled or frozen)")
        return False

    async def _keep_lease(self, role: Role) -> None:
        """Renew the lease while leading; step down when it cannot be, when the store failed,
        or when NATS has been unreachable for ``NATS_GRACE_S``."""
        exchange = self.state.exchange
        committer = self.state.committer
        cut_off: float | None = None
        while role.leading:
            await asyncio.sleep(HEARTBEAT_S)
            if not self._leads(role):
                return
            if exchange.failure is not None:
                role.step_down(f"its store failed: {exchange.failure}")
                return
            asked = time.monotonic()
            try:
                await committer.on_writer(leader_heartbeat, exchange.store, role)
            except Exception as exc:
                role.step_down(f"its lease could not be renewed: {exc}")
                return
            role.renewed = max(role.renewed, asked)
            nc = self.nc
            if nc is not None and nc.is_connected:
                cut_off = None
            elif cut_off is None:
                cut_off = time.monotonic()
            elif time.monotonic() - cut_off >= NATS_GRACE_S:
                role.step_down(f"NATS unreachable for {NATS_GRACE_S:.0f} s")
                return

    # ------------------------------------------------------------- health

    async def _reconnected(self) -> None:
        self.reconnects += 1

    def _linked(self) -> str | None:
        nc = self.nc
        return None if nc is not None and nc.is_connected else "not connected to NATS"

    async def _on_health(self, msg: Msg) -> None:
        """A gateway's readiness probe: nothing when this process can serve, else why not."""
        if self.role is not None and not self._leads(self.role):
            return
        reason = await self.state.not_ready()
        await self._respond(msg, (reason or "").encode())

    # ------------------------------------------------------------- gateways

    async def _on_report(self, msg: Msg) -> None:
        try:
            report = decode_report(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("dropped an undecodable gateway report: %s", exc)
            return
        self.gateways.heard(report)

    # ------------------------------------------------------------- keys

    def _key_set(self, keys: Iterable[ApiKey]) -> bytes:
        return encode(KeySet([KeyInfo.of(key.row) for key in keys], self.namespace))

    async def _on_keys(self, msg: Msg) -> None:
        if self.role is not None and not self._leads(self.role):
            return
        await self._respond(msg, self._key_set(self.state.exchange.keys.values()))

    def _on_commit(self, batch: Batch) -> None:
        if self.role is not None:
            self.role.renewed = time.monotonic()  # a commit is a statement on the session
        if self.nc is None:
            return
        # Numbered, so that a gateway can tell it heard every one, and so that a reply
        # (``Replies.note``) tells which notes came before it.
        self.notes += 1
        note = MarketNote(self.epoch, self.notes, sorted(batch.symbols()))
        self._publish_now(f"{self.subject}.md.changed", encode(note))
        if not batch.keys:
            return
        keys = self.state.exchange.keys
        changed = [keys[name] for name in batch.keys if name in keys]
        self._publish_now(f"{self.subject}.keys.changed", self._key_set(changed))

    async def _watch_failure(self) -> None:
        """A failure with no client's command behind it (a scheduled funding or interest
        commit, the simulation's) is answered to no one: announce it all the same."""
        while not self._reset_sent:
            if self.state.exchange.failure is not None:
                self._announce_reset()
                return
            await asyncio.sleep(FAILURE_WATCH)

    def _announce_reset(self) -> None:
        """A note that is no commit's: gateways forget every public answer they kept."""
        if self.nc is None:
            return
        self._reset_sent = True
        self.notes += 1
        note = MarketNote(self.epoch, self.notes, [], reset=True)
        self._publish_now(f"{self.subject}.md.changed", encode(note))

    def _publish_now(self, subject: str, data: bytes) -> None:
        """Publish from a commit listener: nats-py's ``publish`` only queues the message for
        its writer unless its buffer is full, so it runs here (``_run_inline``: no task per
        commit, and the message is queued ahead of every reply this commit lets go)."""
        self._run_inline(self._publish(subject, data))

    async def _publish(self, subject: str, data: bytes) -> None:
        nc = self.nc
        if nc is None:
            return
        try:
            await nc.publish(subject, data)
        except Exception as exc:  # NATS is away: gateways resync when it is back
            log.warning("could not publish %s: %s", subject, exc)
