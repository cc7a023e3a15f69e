"""Public market reads on a gateway: the engine renders a read once, the gateway answers the
same read again from that answer while nothing it shows can have changed.

What may have changed, the engine says: after every commit it publishes a ``MarketNote``
(``<prefix>.md.changed``) with the commit's number and the symbols it touched (orders,
trades, candles, contract states). An answer stays valid while no note has touched its symbol
since the gateway asked for it (an answer without a symbol, such as every pair's ticker,
while no note at all has come), and for at most ``max_age_ms``: tickers and candles also move
with the clock, and the time a depth shows is the time it was rendered.

Read-your-writes on one gateway worker (so on one connection): every reply of the engine
carries the number of its latest note, and the gateway answers from its cache only once it
has heard every note up to the highest number any reply has told it (an order placed through
this worker is in the next depth read through it, even if the note and the reply crossed).
Through another worker or gateway, public data may be one NATS hop behind, as a real venue's
market-data caches are.

Anything that may have made the gateway miss a note (a gap in the numbers, NATS reconnecting,
a new engine) empties the cache, and so does an engine that stops or fails (its reset note, a
503 answer, no answer at all). The rate limits and the other checks in front of a read are
unchanged: only the trip to the engine is saved.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from tradehall.api import futures, spot
from tradehall.api.http import EndpointSpec, Handler
from tradehall.api.params import SYMBOL, Params
from tradehall.cluster.protocol import Answered

ANY = "*"
"""The dependency of a read that shows every market (or names none)."""

MARKET_PARAMS: dict[Handler, str] = {
    spot.depth: "symbol",
    spot.ticker: "symbol",
    spot.trades: "symbol",
    spot.klines: "symbol",
    spot.market_kline: "symbol",
    spot.ticker_v2: "symbol",  # one pair's with it; without it, a list (ANY)
    futures.depth: "contractName",
    futures.ticker: "contractName",
    futures.index: "contractName",
    futures.klines: "contractName",
}
"""The parameter naming the one market a public read shows, by handler; every other public
read (the lists: symbols, contracts, every ticker) depends on ANY. Other parameters, even
one naming a market, do not count: the handler does not read them."""

NEVER_KEPT: frozenset[Handler] = frozenset({spot.ping, spot.server_time})
"""Reads answered every time: ``ping`` tells whether the exchange answers, ``time`` is now."""

MAX_BYTES = 32 * 1024 * 1024
"""Bytes of answers kept at most (the oldest go first). A read's key is its path and query
string as sent, which a client can vary at will: that costs misses, never more memory."""

Key = tuple[str, bytes]


def dependency(spec: EndpointSpec, params: Params) -> str | None:
    """The market a public read of ``spec`` shows (``ANY`` for every market), or None when
    it is not to be kept (``NEVER_KEPT``, or a market name the engine refuses: errors are not
    kept)."""
    if spec.handler in NEVER_KEPT:
        return None
    name = MARKET_PARAMS.get(spec.handler)
    if name is None:
        return ANY
    value = params.data.get(name)
    if value is None:
        return ANY
    if type(value) is str and SYMBOL.fullmatch(value):
        return value.upper()  # as the engine reads it (``api.reading.Symbol``)
    return None


@dataclasses.dataclass(slots=True)
class _Entry:
    answer: Answered
    stamp: tuple[int, int]
    rendered: int
    """The gateway's clock when the read was asked (kept until ``rendered + max_age``)."""
    size: int


@dataclasses.dataclass(slots=True)
class _Pending:
    stamp: tuple[int, int]
    future: asyncio.Future[Answered]


class ReadCache:
    def __init__(self, max_age_ms: int, clock: Callable[[], int]) -> None:
        self.max_age_ms = max_age_ms
        self.clock = clock
        self.epoch: str | None = None
        """The engine run the notes and replies come from (a new engine starts over)."""
        self.heard = 0
        """The number of the latest note taken in."""
        self.promised = 0
        """The highest note number any reply carried."""
        self.hits = 0
        self.misses = 0
        self.bytes = 0
        """Bytes of the answers kept (bodies, keys and a fixed allowance each)."""
        self._entries: dict[Key, _Entry] = {}
        self._pending: dict[Key, _Pending] = {}
        self._versions: dict[str, int] = {}
        self._any = 0
        """Moves with every note: the version of reads that name no symbol."""
        self._resets = 0

    # ------------------------------------------------------------- what the engine says

    def note(self, epoch: str, number: int, symbols: list[str]) -> None:
        """A commit's note: ``symbols`` may have changed."""
        if epoch != self.epoch:
            self.reset()
            self.epoch, self.heard, self.promised = epoch, number, 0
        elif number != self.heard + 1:
            self.reset()  # a note was missed (or came twice): what it touched is unknown
        self.heard = max(self.heard, number)
        self._any += 1
        versions = self._versions
        for symbol in symbols:
            versions[symbol] = versions.get(symbol, 0) + 1

    def replied(self, epoch: str, number: int) -> None:
        """A reply of the engine, whose latest note then was ``number``."""
        if epoch != self.epoch:
            # A new engine: nothing kept from the old one stands, and nothing is kept from
            # before this reply, so its notes so far need not be waited for.
            self.reset()
            self.epoch, self.heard, self.promised = epoch, number, number
        elif number > self.promised:
            self.promised = number

    def reset(self) -> None:
        """Forget every answer (and let no answer in flight be kept)."""
        self._resets += 1
        self._entries.clear()
        self.bytes = 0
        self._pending.clear()

    def lost_track(self) -> None:
        """Notes may have been missed (NATS reconnected, the engine restarted)."""
        self.reset()
        self.epoch = None

    # ------------------------------------------------------------- reads

    def _stamp(self, symbol: str) -> tuple[int, int]:
        version = self._any if symbol == ANY else self._versions.get(symbol, 0)
        return (self._resets, version)

    async def read(self, key: Key, symbol: str, ask: Callable[[], Awaitable[Answered]]) -> Answered:
        """The answer to the read ``key`` of ``symbol``: kept, joined (the same read is on its
        way to the engine, asked after every change this gateway heard of), or asked."""
        if self.heard < self.promised:
            # A reply told of a commit whose note is not here yet: what it changed is unknown.
            self.misses += 1
            return await ask()
        stamp = self._stamp(symbol)
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None:
            # A clock that went back does not stretch an answer's life.
            if entry.stamp == stamp and entry.rendered <= now < entry.rendered + self.max_age_ms:
                self.hits += 1
                return entry.answer
            self._forget(key)
        pending = self._pending.get(key)
        if pending is not None and pending.stamp == stamp:
            self.hits += 1
            try:
                return await asyncio.shield(pending.future)
            except asyncio.CancelledError:
                if not pending.future.cancelled():
                    raise  # this read was cancelled
            return await ask()  # the one it joined was cancelled, not this one
        self.misses += 1
        future: asyncio.Future[Answered] = asyncio.get_running_loop().create_future()
        self._pending[key] = _Pending(stamp, future)
        try:
            answer = await ask()
        except BaseException as exc:
            self._settle(key, future)
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: no warning when no one joined
            else:
                future.cancel()
            raise
        self._settle(key, future)
        future.set_result(answer)
        if answer.status == 200 and self._stamp(symbol) == stamp:
            self._keep(key, _Entry(answer, stamp, now, len(answer.body) + len(key[1]) + 200))
        return answer

    def _keep(self, key: Key, entry: _Entry) -> None:
        """Keep ``entry``, after dropping the answers too old to serve and, while over the
        byte budget, the oldest (answers are kept in the order they were asked for)."""
        entries = self._entries
        self._forget(key)
        oldest_kept = entry.rendered - self.max_age_ms
        while entries:
            first = next(iter(entries))
            if entries[first].rendered > oldest_kept and self.bytes + entry.size <= MAX_BYTES:
                break
            self._forget(first)
        entries[key] = entry
        self.bytes += entry.size

    def _forget(self, key: Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size

    def _settle(self, key: Key, future: asyncio.Future[Answered]) -> None:
        pending = self._pending.get(key)
        if pending is not None and pending.future is future:
            del self._pending[key]

    def stats(self) -> dict[str, Any]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "kept": len(self._entries),
            "bytes": self.bytes,
        }
