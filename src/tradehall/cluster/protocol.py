"""What gateways and the engine process say to each other over NATS, msgspec-encoded
(MessagePack). Subjects hang under one prefix (``--subject``, default ``tradehall``):

- ``<prefix>.cmd``: request/reply, a ``Commands`` request (the commands a gateway admitted
  in one event-loop turn, in order: each a ``Forwarded`` request, or a ``Place``, a spot
  placement the gateway read); the reply (``Replies``) is their ``Answered``, in the same
  order, once they are all done, with the number of the engine's latest ``MarketNote``.
- ``<prefix>.gateways.report``: each gateway worker publishes a ``GatewayReport`` (its
  requests, errors, streams and read cache) every few seconds and when it stops; the engine
  shows them to the operator.
- ``<prefix>.md.changed``: after every commit the engine publishes a ``MarketNote``: the
  symbols whose public data the commit may have changed (gateways' read caches,
  ``cluster.read_cache``).
- ``<prefix>.health``: request/reply, a gateway's readiness probe (``GET /readyz``): the
  reply is empty when the engine process can serve, else the reason (UTF-8 text).
- ``<prefix>.keys``: request/reply, the reply is every API key (a ``KeySet``), with the
  venue's Redis namespace.
- ``<prefix>.keys.changed``: the engine publishes a ``KeySet`` of keys created or revoked,
  once their commit is done.
- ``<prefix>.keys.reset``: the engine publishes it on start; gateways then fetch every key.
- ``<prefix>.ws.ask``: a gateway publishes a ``StreamAsk`` (a WebSocket client's ``sub`` or
  ``req``, or a private stream's key to confirm) with a reply subject of its own,
  ``<prefix>.ws.out.gw.<gateway>.<n>``; the engine answers a ``StreamAnswer`` there.
- ``<prefix>.ws.interest``: each gateway publishes a ``StreamInterest`` (every channel and
  account its clients follow) when it changes and every few seconds.
- ``<prefix>.ws.out.md.<channel>``: the engine publishes each market push (the gzip frame
  clients get, as is) of a channel some gateway follows.
- ``<prefix>.ws.out.user.<spot|futures>.<user id>``: the same for an account's private pushes.

Answers and pushes share the ``<prefix>.ws.out.`` prefix so that a gateway reads them through
one subscription, in the order the engine sent them: a client's first push never overtakes
the answer to its ``sub``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from tradehall.exchange import ApiKey, parse_networks
from tradehall.store.batch import KeyRow

_DECIMAL_EXT = 1
"""JSON numbers arrive as Decimal (exact, and told apart from strings by ``Params``); they
travel as a MessagePack extension holding their text, so the engine sees the same types."""
_BIG_INT_EXT = 2
"""A JSON integer beyond MessagePack's 64 bits (a client's ``1e23`` written out) travels as
its text too, so the engine refuses it as one process would."""
_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


class Forwarded(msgspec.Struct, array_like=True, frozen=True, tag=0):
    """A request a gateway admitted (signature, time window, replay and rate limits
    checked): the engine runs the endpoint's handler on it."""

    id: str
    """Unique per request; a resend carries the same id and is answered, not applied, again."""
    method: str
    path: str
    params: dict[str, Any]
    api_key: str | None
    ip: str
    request_id: str = ""
    """The request's ``X-Request-Id`` (the engine's log records about it carry it too)."""


class Place(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=1):
    """A spot placement (``POST /order``) a gateway admitted and read (``cluster.prepared``):
    every parameter in its usual form, so the engine only scales the numbers to the pair's
    units and applies it, instead of running the endpoint's handler on the parameters."""

    id: str
    path: str
    api_key: str
    ip: str
    request_id: str
    symbol: str
    """Upper-cased, as the handler reads it."""
    side: str
    order_type: str
    volume: int
    """Positive: the digits of its decimal text, ``volume_places`` of them after the point."""
    volume_places: int
    price: int
    """The same, for a LIMIT; 0 for a MARKET (which does not read it)."""
    price_places: int
    time_in_force: str
    """Upper-cased; empty when absent."""
    client_id: str
    """Checked; empty when absent."""


Command = Forwarded | Place
"""What a gateway sends the engine for one request."""


class Commands(msgspec.Struct, array_like=True, frozen=True):
    """One request to ``<prefix>.cmd``: commands the engine applies in this order, each
    de-duplicated by its id. A resend is the same commands with ``attempt`` 2."""

    commands: list[Command]
    first_sent: int
    """Gateway wall clock (ms) of the first send of these commands."""
    attempt: int = 1


class PackedCommands(msgspec.Struct, array_like=True, frozen=True):
    """``Commands`` as a gateway encodes it: each command encoded once, when admitted (its
    size counts against NATS's maximum message size; a resend reuses the bytes)."""

    commands: list[msgspec.Raw]
    first_sent: int
    attempt: int = 1


class Answered(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """An answer as the endpoint gave it. The engine keeps the last ``window`` of them (for
    resends): untracked by the garbage collector (no references but to strings and bytes),
    they cost its full collections nothing."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class Replies(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The engine's reply to a ``Commands`` request."""

    answers: list[Answered]
    epoch: str
    """The engine run (random, new at every start)."""
    note: int
    """The number of the latest ``MarketNote`` the engine had published when it replied."""


class MarketNote(msgspec.Struct, array_like=True, frozen=True):
    """A commit's public footprint, numbered 1, 2, ... in each engine run (``epoch``)."""

    epoch: str
    number: int
    symbols: list[str]
    """Spot pairs and futures contracts whose orders, trades, candles or contract state the
    commit changed."""
    reset: bool = False
    """Not a commit's: the engine stops or has failed, nothing kept from it stands."""


class Placed(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """What the engine answers a ``Place`` it placed (in an ``Answered`` of status
    ``PLACED``): the order as the answer shows it, which the gateway renders (it knows the
    rest: the symbol, side, type and client order id it sent)."""

    order_id: int
    time: int
    status: str
    price: int
    """In units of ``price_decimals`` places."""
    price_decimals: int
    orig: int
    """What the order asked for (``api.wire.orig_units``): the quantity, or for a MARKET BUY
    the quote amount to spend."""
    orig_decimals: int
    executed: int
    """The quantity executed, in units of ``quantity_decimals`` places."""
    quantity_decimals: int


PLACED = 1
"""The status of the answer to a ``Place`` the engine placed: its body is a ``Placed``."""

ASK_AGAIN = Answered(0, b"")
"""In place of an answer that did not fit in the reply (NATS's maximum message size): the
gateway asks for it again, alone (a resend of its id: answered, not applied, again)."""


class KeyInfo(msgspec.Struct, array_like=True, frozen=True):
    """An API key as a gateway authenticates with it (its secret in clear: NATS must be a
    private, authenticated network; docs/deployment.md)."""

    api_key: str
    secret: str
    user_id: int
    read_only: bool
    ips: tuple[str, ...]
    created: int
    revoked: int | None

    @classmethod
    def of(cls, row: KeyRow) -> KeyInfo:
        return cls(
            row.api_key, row.secret, row.user_id, row.read_only, row.ips, row.created, row.revoked
        )

    def api_key_object(self) -> ApiKey:
        row = KeyRow(
            self.api_key,
            self.secret,
            self.user_id,
            self.read_only,
            self.ips,
            self.created,
            self.revoked,
        )
        return ApiKey(row, parse_networks(self.ips))


class KeySet(msgspec.Struct, array_like=True, frozen=True):
    keys: list[KeyInfo]
    namespace: str = ""
    """The venue's namespace in Redis (``tradehall.venue``): the gateways key their rate
    limits and replay guard with the engine's, so one venue's processes agree on it."""


class StreamAsk(msgspec.Struct, array_like=True, frozen=True):
    gateway: str
    kind: str
    """``spot`` or ``futures``."""
    event: str
    """``sub`` (the channel's snapshot; the gateway follows it from then on), ``req`` (the
    answer frame) or ``user`` (confirm ``api_key``; the gateway follows its account)."""
    params: dict[str, Any]
    api_key: str | None = None


class StreamAnswer(msgspec.Struct, array_like=True, frozen=True):
    code: int = 0
    """0, or the catalogue code of the error ``msg`` explains."""
    msg: str = ""
    channel: str = ""
    frame: bytes | None = None
    user: int = 0


class StreamInterest(msgspec.Struct, array_like=True, frozen=True):
    gateway: str
    channels: list[tuple[str, str]]
    """(kind, channel name) pairs."""
    users: list[tuple[str, int]]
    """(kind, user id) pairs."""
    leaving: bool = False
    """The gateway is stopping: forget all it followed."""
    resync: bool = False
    """The gateway may have missed pushes (NATS reconnected, the engine restarted): push the
    current state of every channel it follows."""


class GatewayReport(msgspec.Struct, array_like=True, frozen=True):
    """What a gateway worker tells the engine (for the operator) every few seconds."""

    gateway: str
    host: str
    pid: int
    started: int
    """Wall clock (ms) of the worker's start."""
    activity: dict[str, Any]
    """Its ``Monitor.snapshot()``: requests and errors, totals and rates, recent errors."""
    connections: int
    """WebSocket connections open."""
    reads: dict[str, int]
    """Its read cache's counts (``ReadCache.stats``), empty when the cache is off."""
    leaving: bool = False


def _to_wire(value: Any) -> Any:
    kind = type(value)
    if kind is Decimal:
        return msgspec.msgpack.Ext(_DECIMAL_EXT, str(value).encode())
    if kind is int and not _INT64_MIN <= value <= _UINT64_MAX:
        return msgspec.msgpack.Ext(_BIG_INT_EXT, str(value).encode())
    if kind is dict:
        return {k: _to_wire(v) for k, v in value.items()}
    if kind is list:
        return [_to_wire(v) for v in value]
    return value


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _DECIMAL_EXT:
        return Decimal(bytes(data).decode())
    if code == _BIG_INT_EXT:
        return int(bytes(data).decode())
    raise msgspec.ValidationError(f"unknown extension type {code}")


def wire_params(data: Any) -> dict[str, Any]:
    """Request parameters (parsed JSON or query) as ``Forwarded.params`` carries them."""
    return {k: _to_wire(v) for k, v in data.items()}


encode = msgspec.msgpack.Encoder().encode
decode_forwarded = msgspec.msgpack.Decoder(Forwarded, ext_hook=_ext_hook).decode
decode_commands = msgspec.msgpack.Decoder(Commands, ext_hook=_ext_hook).decode
decode_replies = msgspec.msgpack.Decoder(Replies).decode
decode_note = msgspec.msgpack.Decoder(MarketNote).decode
decode_placed = msgspec.msgpack.Decoder(Placed).decode


def decode_answers(data: bytes) -> list[Answered]:
    """The answers of a ``Replies``."""
    return decode_replies(data).answers


decode_keys = msgspec.msgpack.Decoder(KeySet).decode
decode_stream_ask = msgspec.msgpack.Decoder(StreamAsk).decode
decode_stream_answer = msgspec.msgpack.Decoder(StreamAnswer).decode
decode_interest = msgspec.msgpack.Decoder(StreamInterest).decode
decode_report = msgspec.msgpack.Decoder(GatewayReport).decode
