"""The rows one group commit writes: the engine's events of many commands, coalesced.

Events are snapshots taken when each command was applied, so a batch always describes a
prefix of the command stream: committing it can never record half a command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tradehall.engine.events import (
    BalanceChanged,
    DebtChanged,
    Event,
    InterestAccrued,
    MarginAccountOpened,
    OrderChanged,
    Trade,
    TradeExecuted,
    TransferDone,
    WrittenOff,
)
from tradehall.engine.futures_model import FuturesChanged
from tradehall.engine.orders import OrderState
from tradehall.marketdata import Bar

ACCRUED_HOUR = "margin.accrued_hour"
WRITTEN_OFF = "margin.written_off."
"""The prefix of each asset's total of margin debts written off (``engine_state``)."""
PROJECTED = "journal.projected"
"""The last journal record the projections hold (``engine_state``)."""


@dataclass(frozen=True, slots=True)
class UserRow:
    id: int
    name: str
    created: int


@dataclass(frozen=True, slots=True)
class KeyRow:
    api_key: str
    secret: str
    user_id: int
    read_only: bool
    ips: tuple[str, ...]
    created: int
    revoked: int | None = None

    def with_secret(self, secret: str) -> KeyRow:
        """The same row with another secret (sealed or opened). Built directly: recovery
        opens every key's secret, and ``dataclasses.replace`` costs ~7 us a row."""
        return KeyRow(
            self.api_key, secret, self.user_id, self.read_only, self.ips, self.created,
            self.revoked,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class AdminLogRow:
    """One admin action as the audit trail keeps it (its id is given at commit)."""

    time: int
    actor: str
    """Who: ``token:<fingerprint>`` (the admin API's token) or ``local`` (the CLI on the data
    folder, without a server)."""
    agent: str
    """Through what, as the caller says: ``cli:<user>@<host>``, ``operator-page``, ``api``."""
    action: str
    params: str
    """The request's parameters (JSON; never a secret)."""
    result: str
    """``ok`` or ``refused``."""
    code: int
    """0, or the catalogue code of the refusal."""
    detail: str
    """What was created or changed (JSON of the answer's identifiers), or the refusal."""


class LedgerRow(NamedTuple):
    """One ledger entry as staged (its id is given at commit). Staging builds plain tuples
    of these fields, in this order: a tuple costs a fraction of an object per entry."""

    account: int
    asset: str
    d_free: int
    d_locked: int
    reason: str
    ref: int
    time: int


LedgerTuple = tuple[int, str, int, int, str, int, int]


@dataclass(slots=True)
class Batch:
    orders: dict[int, OrderState] = field(default_factory=dict)
    trades: list[Trade] = field(default_factory=list)
    ledger: list[LedgerTuple] = field(default_factory=list)
    """LedgerRow fields, as LedgerRow or plain tuples."""
    balances: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)
    transfers: list[TransferDone] = field(default_factory=list)
    bars: dict[tuple[str, str, int], Bar] = field(default_factory=dict)
    users: list[UserRow] = field(default_factory=list)
    keys: dict[str, KeyRow] = field(default_factory=dict)
    margin_accounts: list[MarginAccountOpened] = field(default_factory=list)
    debts: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)
    engine_state: dict[str, int] = field(default_factory=dict)
    """Scalars of the engine's state that no other row carries (the interest clock)."""
    futures: dict[tuple[str, int, str, int], FuturesChanged] = field(default_factory=dict)
    """Futures documents by (kind, user, contract, id): the latest change of each wins."""
    admin_log: list[AdminLogRow] = field(default_factory=list)
    changes: list[OrderChanged | FuturesChanged] = field(default_factory=list)
    """Every order and futures change in the order they happened, kept (only while someone
    listens: ``Exchange.keep_changes``) for the streams after the commit; never stored."""
    entries: list[object] = field(default_factory=list)
    """What the journal records of this batch (``store.journal``): the commands applied and
    the changes made beside the engine, in order. Empty when the exchange writes rows."""
    command_ids: list[str] = field(default_factory=list)
    """The ids of the gateways' commands whose changes the batch holds (the journal records
    them: ``CommandIds``)."""
    journal_seq: int = 0
    """The journal record this batch was committed as (set by the commit)."""
    projects: tuple[int, int] | None = None
    """A projector's batch: the journal records (after, upto] it holds; its commit advances
    the projection's sequence number from ``after`` to ``upto``, or fails if another
    projector got there first."""

    def __bool__(self) -> bool:
        return bool(
            self.entries
            or self.orders
            or self.ledger
            or self.transfers
            or self.users
            or self.keys
            or self.bars
            or self.trades
            or self.margin_accounts
            or self.debts
            or self.engine_state
            or self.futures
            or self.admin_log
        )

    def row_count(self) -> int:
        """How many rows committing this batch writes."""
        return (
            len(self.orders)
            + len(self.trades)
            + len(self.ledger)
            + len(self.balances)
            + len(self.transfers)
            + len(self.bars)
            + len(self.users)
            + len(self.keys)
            + len(self.margin_accounts)
            + len(self.debts)
            + len(self.engine_state)
            + len(self.futures)
            + len(self.admin_log)
        )

    def symbols(self) -> set[str]:
        """The spot pairs and futures contracts whose public data (book, trades, candles,
        contract state) this batch changes."""
        out = {order.symbol for order in self.orders.values()}
        out.update(trade.symbol for trade in self.trades)
        out.update(symbol for symbol, _, _ in self.bars)
        out.update(contract for _, _, contract, _ in self.futures)
        return out

    def add_events(self, events: list[Event], ts: int, ledger_rows: bool = True) -> None:
        """Stage ``events``' changes; the ledger entries only with ``ledger_rows`` (an
        exchange whose batches go to the journal alone writes no rows, and nothing else
        reads them)."""
        ledger = self.ledger if ledger_rows else None
        balances = self.balances
        for event in events:
            if type(event) is BalanceChanged:  # most events: every balance change
                account = event.account
                asset = event.asset
                if ledger is not None:
                    ledger.append(
                        (account, asset, event.d_free, event.d_locked, event.reason, event.ref, ts)
                    )
                balances[account, asset] = (event.free, event.locked)
            elif type(event) is OrderChanged:
                order = event.order
                self.orders[order.id] = order
            elif type(event) is TradeExecuted:
                self.trades.append(event.trade)
            elif type(event) is TransferDone:
                self.transfers.append(event)
            elif type(event) is DebtChanged:
                self.debts[(event.account, event.asset)] = (event.principal, event.interest)
            elif type(event) is MarginAccountOpened:
                self.margin_accounts.append(event)
            elif type(event) is FuturesChanged:
                self.futures[(event.kind, event.user, event.contract, event.id)] = event
            elif type(event) is InterestAccrued:
                self.engine_state[ACCRUED_HOUR] = event.hour
            elif type(event) is WrittenOff:
                self.engine_state[WRITTEN_OFF + event.asset] = event.total

    def add_bars(self, bars: list[tuple[str, str, Bar]]) -> None:
        for symbol, interval, bar in bars:
            self.bars[(symbol, interval, bar.open_time)] = bar
