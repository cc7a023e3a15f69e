"""The fan-out half of the streams: who follows which channel and which account, and the
bounded outbox of every connection. Where the frames come from is a subclass's business: the
``Hub`` renders them from the committed exchange in the same process; a gateway
(``tradehall.cluster.gateway_streams``) receives them from the engine process over NATS.

The endpoints (``market``, ``private``) reach what lies behind through the four methods at
the end: a channel's snapshot, a history request, an API key and its confirmation.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from tradehall.config import WebSocketSettings
from tradehall.exchange import ApiKey

log = logging.getLogger("tradehall.stream")

Opened = Callable[[str, bytes | None], None]

SPOT = "spot"
FUTURES = "futures"
KINDS = (SPOT, FUTURES)


class Socket(Protocol):
    """Where a subscriber's frames can be written at once, without a task of its own
    (``tradehall.stream.direct``)."""

    def ready(self) -> bool:
        """Open, and its buffer under the high-water mark."""
        ...

    def write(self, frames: Sequence[bytes]) -> None: ...


class Subscriber:
    """One connection's outbox: a bounded queue of encoded frames (``frames``, oldest first).
    ``drop`` is called (once) when it overflows; the connection then closes.

    ``offer`` runs once per frame per subscriber: the fan-out's inner loop. Without a
    ``socket`` it wakes the connection's writer task if that waits on an empty outbox (the
    writer then sends every frame queued by then). With one (``attach``), no task wakes: the
    subscriber joins the ``batch`` written once the current callback is over, one write for
    all its frames; only when the socket is not ready (its buffer full, or closed) is the
    writer woken, to wait for it."""

    __slots__ = (
        "api_key",
        "batch",
        "channels",
        "drop",
        "dropped",
        "due",
        "frames",
        "kind",
        "limit",
        "socket",
        "user",
        "waiter",
    )

    def __init__(self, limit: int, drop: Callable[[str], None]) -> None:
        self.frames: deque[bytes] = deque()
        self.limit = limit
        self.waiter: asyncio.Future[None] | None = None
        self.socket: Socket | None = None
        self.batch: Batch | None = None
        self.due = False
        self.drop = drop
        self.dropped = False
        self.channels: set[str] = set()
        self.user: int | None = None
        self.kind: str | None = None
        self.api_key: str | None = None

    def attach(self, socket: Socket, batch: Batch) -> None:
        self.socket, self.batch = socket, batch

    def offer(self, frame: bytes) -> None:
        if self.dropped:
            return
        frames = self.frames
        if len(frames) >= self.limit:
            self.dropped = True
            self.drop("too slow: the client did not read its frames")
            return
        frames.append(frame)
        if self.batch is None:
            self.wake()
        elif not self.due:
            self.due = True
            self.batch.add(self)

    def flush(self) -> None:
        """Write every queued frame to the socket if it is ready; wake the writer if not."""
        self.due = False
        socket = self.socket
        if not self.frames or socket is None:
            return
        if socket.ready():
            socket.write(self.frames)
            self.frames.clear()
        else:
            self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        """Until ``wake``; at once if frames are queued that no batch will write."""
        if self.frames and not self.due:
            return
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self.waiter = None


class Batch:
    """The subscribers with frames to write to their sockets: written in one callback after
    the one that queued them (a push offered to every subscriber of a channel, or several
    pushes), so each gets one write for all its frames and no task wakes up."""

    __slots__ = ("due",)

    def __init__(self) -> None:
        self.due: list[Subscriber] = []

    def add(self, subscriber: Subscriber) -> None:
        if not self.due:
            asyncio.get_running_loop().call_soon(self.flush)
        self.due.append(subscriber)

    def flush(self) -> None:
        due, self.due = self.due, []
        for subscriber in due:
            try:
                subscriber.flush()
            except Exception:  # the transport refused the write: end that connection
                log.exception("writing to a stream connection failed")
                subscriber.dropped = True
                subscriber.drop("the connection failed")


class Fanout:
    def __init__(self, clock: Callable[[], int], settings: WebSocketSettings) -> None:
        self.clock = clock
        self.settings = settings
        self.channels: dict[str, set[Subscriber]] = {}
        self.users: dict[str, dict[int, set[Subscriber]]] = {kind: {} for kind in KINDS}
        self.connections: set[Subscriber] = set()
        self.batch = Batch()
        self.pushes = 0
        """Frames offered to subscribers (one per subscriber a push went to): ``/metrics``."""
        self.drops = 0
        """Connections closed by the server (too slow, silent, revoked key)."""

    # ------------------------------------------------------------- subscriptions

    def subscribe(self, sub: Subscriber, name: str) -> None:
        subs = self.channels.get(name)
        if subs is None:
            subs = self.channels[name] = set()
            self.opened(name)
        subs.add(sub)
        sub.channels.add(name)

    def unsubscribe(self, sub: Subscriber, name: str) -> bool:
        if name not in sub.channels:
            return False
        sub.channels.discard(name)
        subs = self.channels.get(name)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.channels[name]
                self.closed(name)
        return True

    def add_private(self, sub: Subscriber, kind: str, user: int, api_key: str | None) -> None:
        sub.user, sub.kind, sub.api_key = user, kind, api_key
        by_user = self.users[kind]
        subs = by_user.get(user)
        if subs is None:
            subs = by_user[user] = set()
            self.user_opened(kind, user)
        subs.add(sub)

    def forget(self, sub: Subscriber) -> None:
        """A connection ended: remove it everywhere."""
        for name in list(sub.channels):
            self.unsubscribe(sub, name)
        if sub.user is not None and sub.kind is not None:
            by_user = self.users[sub.kind]
            subs = by_user.get(sub.user)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del by_user[sub.user]
                    self.user_closed(sub.kind, sub.user)
        self.connections.discard(sub)

    def drop_keys(self, api_keys: Iterable[str]) -> None:
        """Close the private streams opened with any of ``api_keys`` (revoked)."""
        revoked = set(api_keys)
        for by_user in self.users.values():
            for subs in by_user.values():
                for sub in list(subs):
                    if sub.api_key in revoked:
                        sub.drop("the API key was revoked")

    def drop_all(self, reason: str) -> None:
        for sub in list(self.connections):
            sub.drop(reason)

    # ------------------------------------------------------------- delivery

    def publish(self, name: str, frame: bytes) -> None:
        subs = self.channels.get(name)
        if subs:
            self.pushes += len(subs)
            for sub in list(subs):
                sub.offer(frame)

    def publish_user(self, kind: str, user: int, frame: bytes) -> None:
        subs = self.users[kind].get(user)
        if subs:
            self.pushes += len(subs)
            for sub in list(subs):
                sub.offer(frame)

    # ------------------------------------------------------------- what subclasses provide

    def opened(self, name: str) -> None:
        """``name`` gained its first subscriber."""

    def closed(self, name: str) -> None:
        """``name`` lost its last subscriber."""

    def user_opened(self, kind: str, user: int) -> None:
        """The first private stream of ``user``'s ``kind`` account."""

    def user_closed(self, kind: str, user: int) -> None:
        """The last private stream of ``user``'s ``kind`` account ended."""

    async def open(self, kind: str, params: dict[str, Any], opened: Opened) -> None:
        """Open the channel ``params`` names on a ``kind`` endpoint: ``opened`` is called with
        its name and the frame a new subscriber gets at once (None: nothing to show yet),
        showing only what is committed, at the moment the pushes that follow that frame
        start; BadMessage or ApiError if there is no such channel."""
        raise NotImplementedError

    async def history(self, kind: str, params: dict[str, Any]) -> bytes:
        """The whole answer frame to a ``req`` event."""
        raise NotImplementedError

    def find_key(self, api_key: str) -> ApiKey | None:
        raise NotImplementedError

    async def confirm(self, kind: str, key: ApiKey, confirmed: Callable[[], None]) -> bool:
        """After a private stream authenticated with ``key``: is the key still valid once what
        is committed is all there is (not revoked a moment ago)? If so, ``confirmed`` is
        called at the moment the account's pushes start, and True returned."""
        raise NotImplementedError
