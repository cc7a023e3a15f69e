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
from collections.abc import Callable, Iterable
from typing import Any

from tradehall.config import WebSocketSettings
from tradehall.exchange import ApiKey

log = logging.getLogger("tradehall.stream")

Opened = Callable[[str, bytes | None], None]

SPOT = "spot"
FUTURES = "futures"
KINDS = (SPOT, FUTURES)


class Subscriber:
    """One connection's outbox: a bounded queue of encoded frames. ``drop`` is called (once)
    when the queue overflows; the connection then closes."""

    __slots__ = ("api_key", "channels", "drop", "dropped", "kind", "queue", "user")

    def __init__(self, limit: int, drop: Callable[[str], None]) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(limit)
        self.drop = drop
        self.dropped = False
        self.channels: set[str] = set()
        self.user: int | None = None
        self.kind: str | None = None
        self.api_key: str | None = None

    def offer(self, frame: bytes) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.dropped = True
            self.drop("too slow: the client did not read its frames")


class Fanout:
    def __init__(self, clock: Callable[[], int], settings: WebSocketSettings) -> None:
        self.clock = clock
        self.settings = settings
        self.channels: dict[str, set[Subscriber]] = {}
        self.users: dict[str, dict[int, set[Subscriber]]] = {kind: {} for kind in KINDS}
        self.connections: set[Subscriber] = set()

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
            for sub in list(subs):
                sub.offer(frame)

    def publish_user(self, kind: str, user: int, frame: bytes) -> None:
        subs = self.users[kind].get(user)
        if subs:
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
