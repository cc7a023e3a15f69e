"""The journal: the exchange's durable record, one append per group commit.

Each record holds a batch of *entries*, what replaying needs to rebuild the exchange
deterministically: the engine commands that were applied (in the order they were applied),
and the few changes made beside the engine whose outcome a replay could not reproduce (a new
user, an API key with its random secret already sealed, an admin action's trail entry).
Refused commands change nothing and are not recorded.

A record's sequence number is the table's primary key: two writers can never both append
sequence N (the second one's INSERT fails, and it stops: fail-stop). ``epoch`` says which
engine run (or which HA leadership) appended it, and fences: an append inserts only while
its epoch is the latest claimed (``append``, ``next_epoch``).

SQLite keeps the journal in a file of its own beside the projections (``journal.db`` in the
data folder), so that the projector's writes never wait on the engine's appends nor delay
them; PostgreSQL keeps it in a table of the same database.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from time import perf_counter
from typing import Any

import msgspec

from tradehall.engine import commands as c
from tradehall.store.base import StoreError
from tradehall.store.batch import AdminLogRow, KeyRow, UserRow
from tradehall.store.sql import SQLStore

MSGPACK = 1
JSON = 2
"""The encodings of a record's body (stored with it, in ``format``): a later release reads
the older ones."""


class StateNoted(msgspec.Struct, frozen=True, gc=False):
    """A named integer of the exchange's state kept beside the engine's (``engine_state``):
    a self-service key's last use, a faucet's count."""

    name: str
    value: int


class BarsSeeded(msgspec.Struct, frozen=True, gc=False):
    """A market's past candles of one interval, drawn by the simulation before it first ran
    there (``sim.history``): (open time, open, high, low, close, volume, amount) each, oldest
    first, put before any stored bar."""

    symbol: str
    interval: str
    bars: list[tuple[int, int, int, int, int, int, int]]


class CommandIds(msgspec.Struct, frozen=True, gc=False):
    """The ids of the gateways' commands whose changes the record holds: a leader that takes
    over knows which resent commands its predecessor committed (applied once, never twice)."""

    ids: list[str]


class HashMark(msgspec.Struct, frozen=True, gc=False):
    """The engine's state after this record is being hashed (``StateHashed`` follows, in a
    later record): a standby hashes its own state when it replays this record."""


class StateHashed(msgspec.Struct, frozen=True, gc=False):
    """The engine's state hash after record ``at`` (the one with the ``HashMark``): a
    standby that replayed record ``at`` checks that it reached the same state."""

    at: int
    digest: str


Record = UserRow | KeyRow | AdminLogRow | StateNoted | BarsSeeded
"""Changes made beside the engine: a new user, an API key written (created or revoked, its
secret sealed as the store keeps it), an admin action's trail entry, a named integer, a
market's drawn past."""
Marker = CommandIds | HashMark | StateHashed
"""What a record says about itself (replaying applies nothing for them)."""
Entry = c.Command | Record | Marker

KINDS: tuple[type[Any], ...] = (
    c.PlaceOrder,
    c.PlaceBatch,
    c.CancelOrder,
    c.CancelBatch,
    c.Deposit,
    c.Withdraw,
    c.MarginTransfer,
    c.MarginRepay,
    c.AccrueInterest,
    c.FuturesPlace,
    c.FuturesCancel,
    c.FuturesCancelAll,
    c.FuturesTransfer,
    c.SetLeverage,
    c.SetMarginMode,
    c.AdjustPositionMargin,
    c.SetIndexPrice,
    c.FuturesTick,
    c.SettleFunding,
    c.ClosePositions,
    UserRow,
    KeyRow,
    AdminLogRow,
    StateNoted,
    CommandIds,
    HashMark,
    StateHashed,
    BarsSeeded,
    c.ChargeInterest,
)
"""Every entry type, by its number in a record. Append only: a number, once used, keeps its
meaning (older journals are read by later releases)."""

_KIND_OF = {kind: i for i, kind in enumerate(KINDS)}
_PACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()
_OUTER_PACK = msgspec.msgpack.Decoder(list[tuple[int, msgspec.Raw]])
_OUTER_JSON = msgspec.json.Decoder(list[tuple[int, msgspec.Raw]])
_DECODERS: dict[int, list[Any]] = {
    MSGPACK: [msgspec.msgpack.Decoder(kind) for kind in KINDS],
    JSON: [msgspec.json.Decoder(kind) for kind in KINDS],
}


def encode(entries: Sequence[Entry]) -> tuple[int, bytes]:
    """A record's body and its format: MessagePack, or JSON for the rare record holding an
    integer MessagePack cannot (beyond 64 bits)."""
    kind_of = _KIND_OF
    tagged = [(kind_of[type(e)], e) for e in entries]
    try:
        return MSGPACK, _PACK.encode(tagged)
    except OverflowError:
        return JSON, _JSON.encode(tagged)


def decode(body: bytes, fmt: int = MSGPACK) -> list[Entry]:
    decoders = _DECODERS.get(fmt)
    if decoders is None:
        raise StoreError(f"a journal record has format {fmt}, which this release cannot read")
    outer: Any = _OUTER_PACK if fmt == MSGPACK else _OUTER_JSON
    try:
        return [decoders[kind].decode(raw) for kind, raw in outer.decode(body)]
    except (msgspec.DecodeError, msgspec.ValidationError, IndexError) as exc:
        raise StoreError(f"a journal record could not be read: {exc}") from exc


class Fenced(StoreError):
    """An append refused because another engine has claimed a later epoch since this one
    claimed its own: this engine no longer leads, and must never acknowledge a write again."""


class JournalRecord(msgspec.Struct, frozen=True, gc=False):
    seq: int
    epoch: int
    time: int
    entries: list[Entry]


def _record(row: Sequence[Any]) -> JournalRecord:
    """A record from its row (seq, epoch, time, format, body)."""
    seq, epoch, time, fmt, body = row
    return JournalRecord(int(seq), int(epoch), int(time), decode(bytes(body), int(fmt)))


TABLE = (
    "CREATE TABLE IF NOT EXISTS journal ("
    " seq BIGINT PRIMARY KEY,"
    " epoch BIGINT NOT NULL,"
    " time BIGINT NOT NULL,"
    " format INTEGER NOT NULL,"
    " body {blob} NOT NULL)"
)
META = "CREATE TABLE IF NOT EXISTS journal_meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL)"


class Journal:
    """The journal table on a store's connections (SQLite: a file of its own)."""

    def __init__(self, db: SQLStore[Any], *, blob: str = "BLOB") -> None:
        self.db = db
        self._blob = blob
        self._ready = False
        self.last_sync_seconds: float | None = None

    def _sql(self, text: str) -> str:
        return text if self.db.placeholder == "?" else text.replace("?", self.db.placeholder)

    def prepare(self) -> None:
        """Create the tables if they are not there (the journal has no other migrations)."""
        if self._ready:
            return
        with self.db._failing("creating the journal"):
            conn = self.db._write_conn()
            with self.db._transaction(conn):
                conn.execute(TABLE.format(blob=self._blob))
                conn.execute(META)
        self._ready = True

    def exists(self) -> bool:
        """Whether the journal's table is there (a store of an older release has none)."""
        with self.db._failing("looking for the journal"):
            return self.db._exists(self.db._write_conn(), "journal")

    def head(self, *, reader: bool = False) -> int:
        """The highest sequence number appended (or the base it starts after), 0 if none.
        ``reader``: read on a read connection (a standby, which holds no write session)."""
        if not reader:
            self.prepare()
        with self.db._failing("reading the journal's head"):
            conn = self.db._conn() if reader else self.db._write_conn()
            top = conn.execute("SELECT MAX(seq) FROM journal").fetchone()[0]
            return max(int(top or 0), self._meta(conn, "base"))

    def first(self) -> int | None:
        """The lowest sequence number still kept (None when empty)."""
        self.prepare()
        with self.db._failing("reading the journal"):
            row = self.db._conn().execute("SELECT MIN(seq) FROM journal").fetchone()
            return None if row[0] is None else int(row[0])

    def _meta(self, conn: Any, name: str) -> int:
        row = conn.execute(
            self._sql("SELECT value FROM journal_meta WHERE name = ?"), (name,)
        ).fetchone()
        return int(row[0]) if row else 0

    def set_base(self, seq: int) -> None:
        """The journal continues after ``seq`` (an imported store's projections were made
        from a journal that is not here)."""
        self.prepare()
        with self.db._failing("writing the journal's base"):
            conn = self.db._write_conn()
            with self.db._transaction(conn):
                self._set_meta(conn, "base", seq)

    def _set_meta(self, conn: Any, name: str, value: int) -> None:
        conn.execute(self._sql("DELETE FROM journal_meta WHERE name = ?"), (name,))
        conn.execute(
            self._sql("INSERT INTO journal_meta (name, value) VALUES (?, ?)"), (name, value)
        )

    def next_epoch(self) -> int:
        """Claim the next epoch (one per engine run, one per leadership): recorded with every
        append, and the fence: once it is claimed, no append of an earlier epoch succeeds.
        One statement, an update of the epoch's row: it waits for an append in progress
        (which holds that row shared) to commit, so every append of the previous epoch is in
        the journal before the caller reads its head."""
        self.prepare()
        with self.db._failing("claiming an epoch"):
            conn = self.db._write_conn()
            with self.db._transaction(conn):
                row = conn.execute(
                    "INSERT INTO journal_meta (name, value) VALUES ('epoch', 1)"
                    " ON CONFLICT (name) DO UPDATE SET value = journal_meta.value + 1"
                    " RETURNING value"
                ).fetchone()
            return int(row[0])

    def epoch(self) -> int:
        """The latest epoch claimed (read on a read connection)."""
        with self.db._failing("reading the journal's epoch"):
            return self._meta(self.db._conn(), "epoch")

    def append(self, seq: int, epoch: int, time: int, fmt: int, body: bytes) -> None:
        """One record, durable when this returns (the store's commit syncs). Fails (and the
        caller stops) if ``seq`` is already taken, or with ``Fenced`` if an epoch later than
        ``epoch`` has been claimed: the insert happens only while the epoch's row still holds
        ``epoch``, a row it locks shared (PostgreSQL) until the append commits."""
        with self.db._failing("journal append"):
            conn = self.db._write_conn()
            with self.db._transaction(conn):
                cur = conn.execute(self._append_sql, (seq, epoch, time, fmt, body, epoch))
                if getattr(cur, "rowcount", 1) == 0:
                    raise Fenced(
                        f"this engine's epoch {epoch} is over (another engine claimed a later"
                        " one): it no longer leads, and commits nothing more"
                    )
                written = perf_counter()
            self.last_sync_seconds = perf_counter() - written

    @property
    def _append_sql(self) -> str:
        share = " FOR SHARE" if self.db.placeholder != "?" else ""  # SQLite: one writer
        return self._sql(
            "INSERT INTO journal (seq, epoch, time, format, body)"
            " SELECT ?, ?, ?, ?, ? FROM journal_meta WHERE name = 'epoch' AND value = ?" + share
        )

    def read(self, after: int, limit: int = 256) -> list[JournalRecord]:
        """Records with a sequence number above ``after``, ascending, at most ``limit``."""
        self.prepare()
        with self.db._failing("reading the journal"):
            rows = (
                self.db._conn()
                .execute(
                    self._sql(
                        "SELECT seq, epoch, time, format, body FROM journal WHERE seq > ?"
                        " ORDER BY seq LIMIT ?"
                    ),
                    (after, limit),
                )
                .fetchall()
            )
        return [_record(row) for row in rows]

    def since(self, time_ms: int, upto: int) -> Iterator[JournalRecord]:
        """The records appended from ``time_ms`` on, up to ``upto``, newest first."""
        while upto > 0:
            with self.db._failing("reading the journal"):
                rows = (
                    self.db._conn()
                    .execute(
                        self._sql(
                            "SELECT seq, epoch, time, format, body FROM journal WHERE seq <= ?"
                            " ORDER BY seq DESC LIMIT 256"
                        ),
                        (upto,),
                    )
                    .fetchall()
                )
            for row in rows:
                record = _record(row)
                if record.time < time_ms:
                    return
                yield record
            if len(rows) < 256:
                return
            upto = int(rows[-1][0]) - 1

    def records(self, after: int, upto: int | None = None) -> Iterator[JournalRecord]:
        """Every record above ``after`` (up to ``upto``), read in chunks."""
        while True:
            chunk = self.read(after)
            for record in chunk:
                if upto is not None and record.seq > upto:
                    return
                yield record
            if len(chunk) < 256:
                return
            after = chunk[-1].seq

    def compact(self, upto: int, before: int, limit: int = 5000) -> int:
        """Delete up to ``limit`` of the oldest records numbered at most ``upto`` and
        appended before ``before`` (ms); how many went. Short, so that an append waiting
        behind it waits little."""
        self.prepare()
        with self.db._failing("compacting the journal"):
            conn = self.db._write_conn()
            with self.db._transaction(conn):
                low = conn.execute("SELECT MIN(seq) FROM journal").fetchone()[0]
                if low is None:
                    return 0
                row = conn.execute(
                    self._sql("SELECT MAX(seq) FROM journal WHERE seq <= ? AND time < ?"),
                    (min(upto, int(low) + limit - 1), before),
                ).fetchone()
                if row[0] is None:
                    return 0
                high = int(row[0])
                if high > self._meta(conn, "base"):
                    self._set_meta(conn, "base", high)  # the head never goes back
                cur = conn.execute(self._sql("DELETE FROM journal WHERE seq <= ?"), (high,))
                return int(getattr(cur, "rowcount", 0) or 0)

    def stats(self) -> dict[str, int | None]:
        self.prepare()
        with self.db._failing("reading the journal"):
            conn = self.db._conn()
            low, high, count = conn.execute(
                "SELECT MIN(seq), MAX(seq), COUNT(*) FROM journal"
            ).fetchone()
            return {
                "first": None if low is None else int(low),
                "last": None if high is None else int(high),
                "records": int(count),
            }
