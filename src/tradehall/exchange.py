"""The exchange as one object: the engine plus what lives beside it (market data, users and
API keys) and the batch of rows waiting for the next group commit.

Everything that changes state goes through ``apply`` (engine commands) or the user/key methods;
each stages its rows in ``pending``. The caller then makes them durable: the server through the
group committer, the offline CLI with ``commit_now``.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from tradehall.codes import Code, Reject
from tradehall.config import Config
from tradehall.engine.commands import Command
from tradehall.engine.engine import Engine
from tradehall.engine.events import Liquidated, OrderChanged, TradeExecuted
from tradehall.engine.futures_model import (
    BY_ADL,
    BY_LIQUIDATION,
    KIND_ORDER,
    FuturesChanged,
    FuturesOrderState,
)
from tradehall.engine.margin import MarginAccount
from tradehall.engine.orders import SELL
from tradehall.marketdata import INTERVALS, Bar, MarketData, keep_for
from tradehall.secretbox import SecretBox
from tradehall.selfservice_state import SelfServiceBook
from tradehall.state_digest import ForkedDigest
from tradehall.store.base import Store, StoreError, collector_paused
from tradehall.store.batch import (
    ACCRUED_HOUR,
    PROJECTED,
    WRITTEN_OFF,
    AdminLogRow,
    Batch,
    KeyRow,
    UserRow,
)
from tradehall.store.journal import (
    BarsSeeded,
    CommandIds,
    Entry,
    HashMark,
    StateHashed,
    StateNoted,
)
from tradehall.store.journaled import JournaledStore
from tradehall.units import format_units

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
FORCED = frozenset({BY_LIQUIDATION, BY_ADL})
risk_log = logging.getLogger("tradehall.risk")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key as authentication needs it, with its IP allow-list parsed once."""

    row: KeyRow
    networks: tuple[IpNetwork, ...]

    @property
    def user_id(self) -> int:
        return self.row.user_id


def parse_networks(ips: tuple[str, ...] | list[str]) -> tuple[IpNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(ip.strip(), strict=False) for ip in ips)
    except ValueError as exc:
        raise Reject(Code.BAD_PARAM, f"invalid IP or CIDR: {exc}") from None


@dataclass(slots=True)
class ExchangeStats:
    """What ``/metrics`` counts of the commands applied (the engine itself counts nothing)."""

    enabled: bool = True
    """Count (off: the benchmark's baseline, ``bench/metrics_cost.py``)."""
    commands: dict[type, int] = field(default_factory=dict)
    """Commands applied, by command type (refused and failed ones included)."""
    rejected: dict[type, int] = field(default_factory=dict)
    failed: dict[type, int] = field(default_factory=dict)
    traded: dict[str, list[int]] = field(default_factory=dict)
    """By spot pair or contract: [trades, quantity in lots or contracts]."""
    forced: dict[tuple[str, str], int] = field(default_factory=dict)
    """Futures orders the engine placed and closed, by (contract, source): liquidations and
    auto-deleveraging (ADL)."""
    margin_liquidations: dict[str, int] = field(default_factory=dict)
    """Margin accounts liquidated to the end (debts repaid, or the rest covered), by pair."""
    audit: tuple[int, bool, int] | None = None
    """The last audit through the running server: (when, ok, problems)."""

    def closed_order(self, event: FuturesChanged) -> None:
        doc = event.doc
        if type(doc) is FuturesOrderState and doc.source in FORCED:
            key = (event.contract, doc.source)
            self.forced[key] = self.forced.get(key, 0) + 1


def _log_forced(event: FuturesChanged) -> None:
    """One line for each futures order the engine placed to close a position by force."""
    doc = event.doc
    if type(doc) is not FuturesOrderState or doc.source not in FORCED:
        return
    what = "liquidation" if doc.source == BY_LIQUIDATION else "auto-deleveraging"
    held = "long" if doc.side == SELL else "short"  # the CLOSE sells a long
    risk_log.warning(
        "futures %s: order %d closed %d of %d contracts of user %d's %s on %s (%s)",
        what, doc.id, doc.filled, doc.qty, doc.user, held, doc.contract, doc.status,
    )  # fmt: skip


def _log_margin_liquidated(engine: Engine, event: Liquidated) -> None:
    account = engine.margin.accounts.get(event.account)
    user = account.user if account is not None else 0
    pair = engine.spot.pairs[event.symbol]
    quote, decimals = pair.quote, pair.quote_decimals
    risk_log.warning(
        "margin liquidation done: account %d of user %d on %s (insurance fund paid %s %s,"
        " written off %s %s; debts in %s valued at the last price)",
        event.account, user, event.symbol, format_units(event.deficit_covered, decimals),
        quote, format_units(event.written_off, decimals), quote, pair.base,
    )  # fmt: skip


class Exchange:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        secret_box: SecretBox,
        check_invariants: bool = False,
    ) -> None:
        self.config = config
        self.store = store
        self.secret_box = secret_box
        """Seals API secrets before they are staged for the store; opens them on recovery."""
        self.engine = Engine(config.markets, check_invariants=check_invariants)
        self.marketdata = MarketData([*config.markets.pairs, *config.markets.contracts])
        self.users: dict[int, UserRow] = {}
        self.keys: dict[str, ApiKey] = {}
        self.pending = Batch()
        self.journaling = isinstance(store, JournaledStore)
        """Record what is applied in the journal (the engine process); otherwise write rows
        (the projector, and stores without a journal)."""
        self.writes_rows = not self.journaling
        """Batches carry every row (the ledger's too): where they are written as rows (the
        projector; an offline command that projects its own records)."""
        self.projected = 0
        """The last journal record the store's tables held when this exchange was loaded."""
        self.replayed = 0
        """The last journal record this exchange applied (recovery, a standby following)."""
        self.keep_changes = False
        """Keep each batch's order and futures changes in order (``Batch.changes``) for the
        streams; set while a stream hub listens to commits."""
        self.failure: str | None = None
        """Set when a commit failed: from then on nothing is acknowledged (fail-stop)."""
        self._replaying = False
        """Applying journal records (recovery, a standby, the projector): what they did was
        logged when it happened, by the engine that did it."""
        self._bars_changed = False
        """Trades moved bars since the last cut (``take_pending`` stages them)."""
        self.book_versions: dict[str, int] = dict.fromkeys(
            [*config.markets.pairs, *config.markets.contracts], 0
        )
        """Per symbol (spot pair or futures contract), a counter that moves whenever that book
        may have changed (an order of the symbol changed, or a command failed unexpectedly):
        views rendered from a book (``GET /depth``) stay valid while it stands still."""
        self.stats = ExchangeStats()
        """Counts for ``/metrics``, kept where the events already pass."""
        self.selfservice = SelfServiceBook(config.sandbox.key_expiry_s * 1000)
        """The self-service accounts (``[sandbox]``): their keys' last use, their faucet."""
        self.hash_every_s = 0.0
        """Record the engine's state hash in the journal at most this often, in seconds (0:
        never): a leader followed by standbys (``tradehall.cluster.standby``)."""
        self._digest = ForkedDigest()
        self._marked: Batch | None = None
        """The batch whose state is being hashed (its record is the ``StateHashed``'s ``at``)."""
        self._digested: str | None = None
        self._hashed_at = 0.0

    # ----------------------------------------------------------------- recovery

    def recover(self) -> None:
        """Load the store's state into this (fresh) exchange (with the garbage collector
        paused: see ``collector_paused``)."""
        with collector_paused():
            self._recover()

    def _recover(self) -> None:
        pairs = self.config.markets.pairs
        symbols = [*pairs, *self.config.markets.contracts]
        snap = self.store.load(symbols, {i.name: keep_for(i) for i in INTERVALS})
        self.projected = snap.engine_state.get(PROJECTED, 0)
        self.replayed = self.projected
        for user in snap.users:
            self.users[user.id] = user
        for stored in snap.keys:
            if SecretBox.is_sealed(stored.secret):
                key = stored.with_secret(self.secret_box.open(stored.secret, stored.api_key))
            else:  # written before secrets were sealed: seal it now
                key = stored
                self._stage_key(self._sealed(key))
            self.keys[key.api_key] = ApiKey(key, parse_networks(key.ips))
        self.selfservice.restore(snap.engine_state, self.keys)
        for account, asset, free, locked in snap.balances:
            self.engine.restore_balance(account, asset, free, locked)
        for tx_id, record in snap.transfers:
            self.engine.restore_transfer(tx_id, record)
        self.engine.restore_orders(snap.open_orders)
        self.engine.restore_futures(snap.futures_docs, snap.futures_max_ids)
        self.engine.restore_counters(snap.next_order_id, snap.next_trade_id)
        for symbol, interval, bars in snap.bars:
            self.marketdata.restore_bars(symbol, interval, bars)
        self._touch_all_books()
        for symbol, trades in snap.recent_trades:
            self.marketdata.restore_trades(symbol, trades)
            if symbol in pairs:  # a contract keeps its last price in its ContractState
                self.engine.restore_last_price(symbol, trades[-1].price)
        accounts = {
            id: MarginAccount(id, user, symbol) for id, user, symbol in snap.margin_accounts
        }
        for account_id, asset, principal, interest in snap.debts:
            accounts[account_id].debts[asset] = [principal, interest]
        written_off = {
            name.removeprefix(WRITTEN_OFF): total
            for name, total in snap.engine_state.items()
            if name.startswith(WRITTEN_OFF)
        }
        self.engine.restore_margin(
            accounts.values(), snap.engine_state.get(ACCRUED_HOUR), written_off
        )
        store = self.store
        if isinstance(store, JournaledStore):
            self._replay_tail(store)

    def _replay_tail(self, store: JournaledStore) -> None:
        """The journal after what the tables hold, applied as it was live; what replaying
        stages is not written again (the projector writes it from the journal)."""
        staged = self.pending
        self.journaling = False
        try:
            for record in store.tail(self.projected):
                self.replay(record.entries, record.seq)
                self.pending = Batch()
        finally:
            self.journaling = True
            self.pending = staged
        self._bars_changed = False

    def replay(self, entries: list[Entry], seq: int) -> None:
        """Apply journal record ``seq``'s entries as they were applied live, staging their
        rows. A command refused now was accepted then: the replay has diverged (a bug), and
        it stops there."""
        self._replaying = True
        try:
            self._replay(entries, seq)
        finally:
            self._replaying = False
        self.replayed = seq

    def _replay(self, entries: list[Entry], seq: int) -> None:
        for entry in entries:
            kind = type(entry)
            if kind is UserRow:
                user: UserRow = entry  # type: ignore[assignment]
                self.users[user.id] = user
                self.pending.users.append(user)
            elif kind is KeyRow:
                sealed: KeyRow = entry  # type: ignore[assignment]
                opened = sealed.with_secret(self.secret_box.open(sealed.secret, sealed.api_key))
                self.keys[sealed.api_key] = ApiKey(opened, parse_networks(sealed.ips))
                self.pending.keys[sealed.api_key] = sealed
            elif kind is StateNoted:
                noted: StateNoted = entry  # type: ignore[assignment]
                self.pending.engine_state[noted.name] = noted.value
                self.selfservice.restore({noted.name: noted.value}, self.keys)
            elif kind is AdminLogRow:
                self.pending.admin_log.append(entry)  # type: ignore[arg-type]
            elif kind is BarsSeeded:
                self._seed_bars(entry)  # type: ignore[arg-type]
            elif kind is CommandIds or kind is HashMark or kind is StateHashed:
                continue  # what the record says of itself (read by a standby)
            else:
                try:
                    self.apply(entry)  # type: ignore[arg-type]
                except Reject as exc:
                    raise StoreError(
                        f"replaying journal record {seq} diverged: {type(entry).__name__}"
                        f" was refused ({exc.msg})"
                    ) from exc

    # ----------------------------------------------------------------- state changes

    def check_writable(self) -> None:
        if self.failure is not None:
            raise StoreError(self.failure)

    def apply(self, cmd: Command) -> Any:
        """Apply an engine command and stage its rows. Raises Reject (nothing changed)."""
        self.check_writable()
        stats = self.stats
        counting = stats.enabled
        kind = type(cmd)
        if counting:
            applied = stats.commands
            applied[kind] = applied.get(kind, 0) + 1
        try:
            result = self.engine.apply(cmd)
        except Reject:
            if counting:
                stats.rejected[kind] = stats.rejected.get(kind, 0) + 1
            raise
        except BaseException as exc:
            if counting:
                stats.failed[kind] = stats.failed.get(kind, 0) + 1
            # Not a clean refusal: the engine may have changed part of its memory and staged
            # no rows for it, so memory and store may now disagree. Fail-stop, as for a failed
            # commit: every endpoint but the status answers 503 (nothing staged and not yet
            # committed is acknowledged), and a restart rebuilds memory from the store.
            self.failure = f"the engine failed on a command: {exc!r}"
            self._touch_all_books()  # the books may have moved
            raise
        if self.journaling:
            self.pending.entries.append(cmd)
        events = result.events
        if events:
            pending = self.pending
            pending.add_events(events, cmd.ts, self.writes_rows)
            versions = self.book_versions
            keep = self.keep_changes
            for event in events:
                if type(event) is OrderChanged:
                    symbol = event.order.symbol
                    versions[symbol] = versions.get(symbol, 0) + 1
                    if keep:
                        pending.changes.append(event)
                elif type(event) is FuturesChanged:
                    if keep:
                        pending.changes.append(event)
                    if event.kind == KIND_ORDER:
                        symbol = event.contract
                        versions[symbol] = versions.get(symbol, 0) + 1
                        if not event.live:
                            if counting:
                                stats.closed_order(event)
                            if not self._replaying:
                                _log_forced(event)
                elif type(event) is TradeExecuted:
                    t = event.trade
                    if counting:
                        traded = stats.traded.get(t.symbol)
                        if traded is None:
                            stats.traded[t.symbol] = [1, t.qty]
                        else:
                            traded[0] += 1
                            traded[1] += t.qty
                    self.marketdata.on_trade(
                        t.symbol, t.id, t.time, t.price, t.qty, t.taker_side, t.quote
                    )
                    self._bars_changed = True
                elif type(event) is Liquidated:
                    if counting:
                        done = stats.margin_liquidations
                        done[event.symbol] = done.get(event.symbol, 0) + 1
                    if not self._replaying:
                        _log_margin_liquidated(self.engine, event)
        return result.reply

    def _touch_all_books(self) -> None:
        for symbol in self.book_versions:
            self.book_versions[symbol] += 1

    def create_user(self, name: str, ts: int) -> UserRow:
        self.check_writable()
        user = UserRow(max(self.users, default=0) + 1, name, ts)
        self.users[user.id] = user
        if self.journaling:
            self.pending.entries.append(user)
        self.pending.users.append(user)
        return user

    def create_key(self, user_id: int, read_only: bool, ips: list[str], ts: int) -> KeyRow:
        self.check_writable()
        self.require_user(user_id)
        networks = parse_networks(ips)
        row = KeyRow(
            secrets.token_hex(16),
            secrets.token_hex(16),
            user_id,
            read_only,
            tuple(str(n) for n in networks),
            ts,
        )
        self.keys[row.api_key] = ApiKey(row, networks)
        self._stage_key(self._sealed(row))
        return row

    def revoke_key(self, api_key: str, ts: int) -> KeyRow:
        self.check_writable()
        key = self.keys.get(api_key)
        if key is None:
            raise Reject(Code.BAD_KEY, "no such API key")
        if key.row.revoked is not None:
            return key.row  # revoking is idempotent: the first revocation stands
        row = KeyRow(
            key.row.api_key,
            key.row.secret,
            key.row.user_id,
            key.row.read_only,
            key.row.ips,
            key.row.created,
            ts,
        )
        self.keys[api_key] = ApiKey(row, key.networks)
        self._stage_key(self._sealed(row))
        return row

    def log_admin(self, row: AdminLogRow) -> None:
        """Stage an admin action's entry in the audit trail (committed with the next batch)."""
        self.check_writable()
        if self.journaling:
            self.pending.entries.append(row)
        self.pending.admin_log.append(row)

    def note_state(self, name: str, value: int) -> None:
        """Stage one ``engine_state`` row of state kept beside the engine's."""
        if self.journaling:
            self.pending.entries.append(StateNoted(name, value))
        self.pending.engine_state[name] = value

    def seed_bars(self, symbol: str, bars: dict[str, list[Bar]]) -> int:
        """Put a market's drawn past (``sim.history``: bars of each interval, oldest first)
        before its stored bars, journaled so a replay, the projector and a standby put the
        same. How many bars were taken (none where the market already has older ones)."""
        self.check_writable()
        taken = 0
        for interval, series in bars.items():
            entry = BarsSeeded(
                symbol,
                interval,
                [(b.open_time, b.open, b.high, b.low, b.close, b.volume, b.amount) for b in series],
            )
            count = self._seed_bars(entry)
            if count and self.journaling:
                self.pending.entries.append(entry)
            taken += count
        return taken

    def _seed_bars(self, entry: BarsSeeded) -> int:
        bars = [Bar(*row) for row in entry.bars]
        taken = self.marketdata.seed_bars(entry.symbol, entry.interval, bars)
        if taken:
            self._bars_changed = True
        return taken

    def _stage_key(self, sealed: KeyRow) -> None:
        if self.journaling:
            self.pending.entries.append(sealed)
        self.pending.keys[sealed.api_key] = sealed

    def _sealed(self, row: KeyRow) -> KeyRow:
        """The row as the store keeps it: the secret sealed, never in clear."""
        return row.with_secret(self.secret_box.seal(row.secret, row.api_key))

    def require_user(self, user_id: int) -> UserRow:
        user = self.users.get(user_id)
        if user is None:
            raise Reject(Code.BAD_PARAM, f"unknown user {user_id}")
        return user

    # ----------------------------------------------------------------- durability

    def take_pending(self) -> Batch:
        """Cut the batch: everything applied so far. The bars trades changed are copied now,
        once per batch rather than once per command: their state at the cut is the state
        after the batch's last command, as the rest of the batch."""
        batch = self.pending
        if self._bars_changed:
            self._bars_changed = False
            batch.add_bars(self.marketdata.take_changed_bars())
        if self.hash_every_s and batch.entries:
            self._hash(batch)
        self.pending = Batch()
        return batch

    def _hash(self, batch: Batch) -> None:
        """Now and then, mark ``batch`` and hash the state it leaves in a forked child
        (``state_digest``); the digest goes into a later batch, once the child is done and
        the marked batch has its record number."""
        marked = self._marked
        if marked is not None:
            if self._digest.busy:
                self._digested = self._digest.poll()
                if self._digest.busy:
                    return
            if not marked.journal_seq and self.failure is None:
                return  # its commit is still being written
            if self._digested is not None and marked.journal_seq:
                batch.entries.append(StateHashed(marked.journal_seq, self._digested))
            self._marked = self._digested = None
            return
        now = time.monotonic()
        if now - self._hashed_at >= self.hash_every_s:
            self._hashed_at = now
            if self._digest.start(self.engine.state_hash):
                batch.entries.append(HashMark())
                self._marked = batch

    def commit_now(self) -> None:
        """Synchronous commit of everything staged (the offline CLI's path)."""
        batch = self.take_pending()
        if batch:
            try:
                self.store.commit(batch)
            except StoreError as exc:
                self.failure = str(exc)
                raise
