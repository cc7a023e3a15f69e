"""The engine: applies one command at a time and returns the events it caused.

Pure: no I/O, no clock. A command that is refused raises ``Reject`` before it changes anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from tradehall.codes import Code, Reject
from tradehall.engine import futures_prices, index_sources, liquidation, spot_reference, triggers
from tradehall.engine.commands import (
    MAX_INTEREST_HOURS,
    AccrueInterest,
    AdjustPositionMargin,
    CancelBatch,
    CancelOrder,
    ChargeInterest,
    ClosePositions,
    Command,
    Deposit,
    FuturesCancel,
    FuturesCancelAll,
    FuturesPlace,
    FuturesTick,
    FuturesTransfer,
    MarginRepay,
    MarginTransfer,
    PlaceBatch,
    PlaceOrder,
    SetIndexPrice,
    SetLeverage,
    SetMarginMode,
    SettleFunding,
    Withdraw,
)
from tradehall.engine.contracts import MAX_PRICE
from tradehall.engine.events import (
    BalanceChanged,
    DebtChanged,
    Event,
    TradeExecuted,
    TransferDone,
)
from tradehall.engine.futures import Futures
from tradehall.engine.futures_model import (
    FUTURES_ACCOUNT_BASE,
    KIND_POSITION,
    KIND_TRANSFER,
    AccountTransfer,
    ContractState,
    FuturesChanged,
    FuturesOrder,
    FuturesOrderState,
    Position,
    PriceReference,
    Setting,
    Trigger,
)
from tradehall.engine.ledger import Ledger, check_move
from tradehall.engine.margin import HOUR_MS, MARGIN_ACCOUNT_BASE, Margin, MarginAccount
from tradehall.engine.markets import MarketsSpec
from tradehall.engine.orders import CANCELED, REJECTED, Order, OrderState
from tradehall.engine.spot import FEE_ACCOUNT, SpotMarkets


@dataclass(frozen=True, slots=True)
class TransferReply:
    transfer_id: int
    duplicate: bool
    """True when the tx id had already been applied with the same values: nothing changed."""
    free: int
    locked: int


@dataclass(frozen=True, slots=True)
class BatchCancelReply:
    success: list[int]
    failed: list[int]


@dataclass(frozen=True, slots=True)
class TransferRecord:
    id: int
    account: int
    asset: str
    amount: int
    """Positive for a deposit, negative for a withdrawal."""


class Result(msgspec.Struct, frozen=True, gc=False):
    """What ``Engine.apply`` returns (a Struct: a third of the cost of a slotted class)."""

    events: list[Event]
    reply: Any


class InvariantViolation(AssertionError):
    """Debug mode found the state unsound after a command (a bug, never a user error)."""


class Engine:
    def __init__(self, markets: MarketsSpec, *, check_invariants: bool = False) -> None:
        self.markets = markets
        self.check_invariants = check_invariants
        """Debug mode: audit every invariant after every command (slow; for tests and triage)."""
        self.fast_paths = True
        """Off: every command takes the general paths (tests hold the fast ones equal)."""
        self._events: list[Event] = []
        self.ledger = Ledger(self._events)
        self.spot = SpotMarkets(markets.pairs, self.ledger, self._events)
        self.margin = Margin(markets.margin, markets.pairs, self.ledger, self.spot, self._events)
        self.futures = Futures(markets.contracts, self.ledger, self.spot, self._events)
        self.transfers: dict[str, TransferRecord] = {}
        self.next_transfer_id = 1
        self._handlers: dict[type[Any], Callable[[Any], Any]] = {
            PlaceOrder: self._place,
            PlaceBatch: self._place_batch,
            CancelOrder: self._cancel,
            CancelBatch: self._cancel_batch,
            Deposit: self._deposit,
            Withdraw: self._withdraw,
            MarginTransfer: self._margin_transfer,
            MarginRepay: self._margin_repay,
            AccrueInterest: self._accrue_interest,
            ChargeInterest: self._charge_interest,
            FuturesPlace: self._futures_place,
            FuturesCancel: self._futures_cancel,
            FuturesCancelAll: self._futures_cancel_all,
            FuturesTransfer: self._futures_transfer,
            SetLeverage: self._set_leverage,
            SetMarginMode: self._set_margin_mode,
            AdjustPositionMargin: self._adjust_position_margin,
            SetIndexPrice: self._set_index_price,
            FuturesTick: self._futures_tick,
            SettleFunding: self._settle_funding,
            ClosePositions: self._close_positions,
        }

    def apply(self, cmd: Command) -> Result:
        sink = self._events  # the one list every part of the engine appends to
        try:
            reply = self._handlers[type(cmd)](cmd)
        except BaseException:
            sink.clear()  # a refused command changed nothing, so it reports nothing
            raise
        events = sink.copy()
        sink.clear()
        if self.check_invariants:
            from tradehall.engine.audit import check

            problems = check(self)
            if problems:
                raise InvariantViolation(f"after {cmd!r}: " + "; ".join(problems))
        return Result(events, reply)

    # ----------------------------------------------------------------- commands

    def _place(self, cmd: PlaceOrder) -> OrderState | None:
        if self.fast_paths and cmd.account < MARGIN_ACCOUNT_BASE and not self.margin.accounts:
            state = self.spot.rest_at_once(cmd)
            if state is not None:
                return state
        pair, hold = self.spot.validate(cmd)
        asset, amount = hold
        balance = self.ledger.balances.get((cmd.account, asset))
        shortfall = amount - (balance[0] if balance is not None else 0)
        if cmd.account < MARGIN_ACCOUNT_BASE:  # the spot fast path: no margin bookkeeping
            if shortfall > 0:
                raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient {asset} balance")
            if cmd.dry_run:
                return None
            if not self.margin.accounts:
                return self.spot.place(cmd, pair, hold, balance)
            start = len(self.spot.events)
            state = self.spot.place(cmd, pair, hold)
            self._after_trades(start, cmd.ts)
            self._retry_waiting(pair.symbol, cmd.ts)
            return state
        margin_account = self._margin_account(cmd.account, pair.symbol)
        assert margin_account is not None
        if margin_account.id in self.margin.waiting:
            # Its liquidation would cancel the order within this very command: the answer
            # would say NEW for an order already ended.
            raise Reject(
                Code.TRADING_FROZEN,
                "this margin account is being liquidated (waiting for liquidity on"
                f" {pair.symbol}): it takes no new orders until that is done",
            )
        if shortfall > 0:
            self.margin.check_borrow(margin_account, asset, shortfall)  # auto-borrow
        if cmd.dry_run:
            return None
        if shortfall > 0:
            self.margin.borrow(margin_account, asset, shortfall, self.spot.next_order_id)
        start = len(self.spot.events)
        state = self.spot.place(cmd, pair, hold)
        if shortfall > 0 and state.filled == 0 and state.status in (CANCELED, REJECTED):
            # Nothing executed and nothing rests (FOK, POST_ONLY, IOC or MARKET that found
            # nothing): the loan taken for it is returned at once, as if never taken.
            self.margin.return_loan(margin_account, asset, shortfall, state.id)
        self._after_trades(start, cmd.ts)
        self._retry_waiting(pair.symbol, cmd.ts)
        return state

    def _retry_waiting(self, symbol: str, ts: int) -> None:
        """An order may have brought the liquidity an unfinished liquidation waits for, or a
        price at which the account is no longer due."""
        if self.margin.waiting and self.margin.waiting_on(symbol):
            self.margin.release_rescued(symbol)
            start = len(self.spot.events)
            self._tell_margin()
            self.margin.sweep([symbol], ts)
            self._after_trades(start, ts)

    def _margin_account(self, account: int, symbol: str) -> MarginAccount | None:
        if account < MARGIN_ACCOUNT_BASE:
            return None
        margin_account = self.margin.accounts.get(account)
        if margin_account is None or margin_account.symbol != symbol:
            raise Reject(Code.BAD_SYMBOL, f"this margin account does not trade {symbol}")
        return margin_account

    def _after_trades(self, start: int, ts: int) -> None:
        """Margin bookkeeping once a command has traded: fills repay debts, and every account
        of a pair whose price moved is checked for liquidation (whose own trades are then
        processed the same way)."""
        if not self.margin.accounts:
            return
        self._tell_margin()
        events = self.spot.events
        while start < len(events):
            batch = events[start:]
            start = len(events)
            symbols = {e.trade.symbol for e in batch if type(e) is TradeExecuted}
            if not symbols:
                return
            symbols |= self.margin.auto_repay(batch)
            self._tell_margin()
            self.margin.sweep(symbols, ts)

    def _tell_margin(self) -> None:
        """Margin accounts the command has changed so far lose their safe price ranges: those
        whose balances fell, and those whose debts changed (more cash in harms no one)."""
        changed = set()
        for event in self._events:
            if type(event) is BalanceChanged:
                if (
                    MARGIN_ACCOUNT_BASE <= event.account < FUTURES_ACCOUNT_BASE
                    and event.d_free + event.d_locked < 0
                ):
                    changed.add(event.account)
            elif type(event) is DebtChanged:
                changed.add(event.account)
        if changed:
            self.margin.changed(changed)

    def _place_batch(self, cmd: PlaceBatch) -> list[OrderState]:
        self._margin_account(cmd.account, cmd.symbol)
        self.spot.check_batch(cmd.account, cmd.symbol, cmd.orders)
        checked = []
        for index, order in enumerate(cmd.orders):
            try:
                checked.append(self.spot.validate(order))
            except Reject as refused:  # named as the request names it
                raise Reject(refused.code, f"orders[{index}]: {refused.msg}") from None
        self.spot.check_funds(cmd.account, [hold for _, hold in checked])
        start = len(self.spot.events)
        placed = [
            self.spot.place(order, pair, hold)
            for order, (pair, hold) in zip(cmd.orders, checked, strict=True)
        ]
        self._after_trades(start, cmd.ts)
        self._retry_waiting(cmd.symbol, cmd.ts)
        return placed

    def _margin_transfer(self, cmd: MarginTransfer) -> MarginAccount:
        check_move(cmd.amount)
        if cmd.into_margin:
            account = self.margin.transfer_in(cmd.user, cmd.symbol, cmd.asset, cmd.amount)
            self.margin.release_rescued(account=account.id)
            return account
        account = self.margin.transfer_out(cmd.user, cmd.symbol, cmd.asset, cmd.amount)
        self._tell_margin()
        return account

    def _margin_repay(self, cmd: MarginRepay) -> int:
        self.margin.check_asset(cmd.symbol, cmd.asset)
        account = self.margin.account_of(cmd.user, cmd.symbol)
        if account is None or cmd.amount <= 0:
            raise Reject(Code.BAD_PARAM, "nothing to repay")
        check_move(cmd.amount)
        if self.ledger.free(account.id, cmd.asset) < cmd.amount:
            raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient free {cmd.asset} to repay")
        repaid = self.margin.repay(account, cmd.asset, cmd.amount, "repay", account.id)
        self.margin.release_rescued(account=account.id)
        self._tell_margin()
        return repaid

    def _accrue_interest(self, cmd: AccrueInterest) -> int:
        hours = self.margin.accrue(cmd.ts)
        if hours:
            self._after_interest(cmd.ts)
        return hours

    def _charge_interest(self, cmd: ChargeInterest) -> list[tuple[int, str, str, int]]:
        if not 1 <= cmd.hours <= MAX_INTEREST_HOURS:
            raise Reject(Code.BAD_PARAM, f"hours must be between 1 and {MAX_INTEREST_HOURS}")
        if not self.markets.margin:
            raise Reject(Code.BAD_SYMBOL, "no margin pairs are configured")
        charged = self.margin.charge(cmd.hours, cmd.ts // HOUR_MS)
        if charged:
            self._after_interest(cmd.ts)
        return [(account.id, account.symbol, asset, amount) for account, asset, amount in charged]

    def _after_interest(self, ts: int) -> None:
        """Debts grew: tell the margin books, then liquidate what the risk now calls for."""
        start = len(self.spot.events)
        self._tell_margin()
        self.margin.sweep(list(self.markets.margin), ts)
        self._after_trades(start, ts)

    def _cancel(self, cmd: CancelOrder) -> OrderState:
        spot = self.spot
        book = spot.book(cmd.symbol)
        order = spot.find_open(cmd.account, cmd.symbol, cmd.order_id, cmd.client_id)
        if order is None:
            raise Reject(Code.NO_SUCH_ORDER, "no such open order")
        return spot.cancel_resting(book, order, cmd.ts)

    def _cancel_batch(self, cmd: CancelBatch) -> BatchCancelReply:
        book = self.spot.book(cmd.symbol)
        success: list[int] = []
        failed: list[int] = []
        for order_id in dict.fromkeys(cmd.order_ids):  # an id named twice is one request
            order = self.spot.find_open(cmd.account, cmd.symbol, order_id, None)
            if order is None:
                failed.append(order_id)
            else:
                self.spot.cancel_resting(book, order, cmd.ts)
                success.append(order_id)
        return BatchCancelReply(success, failed)

    def _transfer_seen(self, cmd: Deposit | Withdraw, amount: int) -> TransferReply | None:
        record = self.transfers.get(cmd.tx_id)
        if record is None:
            return None
        if (record.account, record.asset, record.amount) != (cmd.account, cmd.asset, amount):
            raise Reject(Code.BAD_PARAM, f"txId {cmd.tx_id!r} was already used with other values")
        free, locked = self.ledger.get(cmd.account, cmd.asset)
        return TransferReply(record.id, True, free, locked)

    def _check_transfer(self, cmd: Deposit | Withdraw) -> None:
        if cmd.asset not in self.markets.assets:
            raise Reject(Code.BAD_PARAM, f"unknown asset {cmd.asset!r}")
        if cmd.amount <= 0:
            raise Reject(Code.BAD_PARAM, "amount must be positive")
        if not cmd.tx_id or len(cmd.tx_id) > 128:
            raise Reject(Code.BAD_PARAM, "txId must be 1 to 128 characters")
        if cmd.account == FEE_ACCOUNT or cmd.account >= MARGIN_ACCOUNT_BASE:
            raise Reject(Code.BAD_PARAM, "this account takes no transfers from outside")

    def _deposit(self, cmd: Deposit) -> TransferReply:
        self._check_transfer(cmd)
        seen = self._transfer_seen(cmd, cmd.amount)
        if seen is not None:
            return seen
        transfer_id = self.next_transfer_id
        self.ledger.deposit(cmd.account, cmd.asset, cmd.amount, transfer_id)
        return self._record_transfer(cmd, transfer_id, cmd.amount)

    def _withdraw(self, cmd: Withdraw) -> TransferReply:
        self._check_transfer(cmd)
        seen = self._transfer_seen(cmd, -cmd.amount)
        if seen is not None:
            return seen
        transfer_id = self.next_transfer_id
        self.ledger.withdraw(cmd.account, cmd.asset, cmd.amount, transfer_id)
        return self._record_transfer(cmd, transfer_id, -cmd.amount)

    def _record_transfer(
        self, cmd: Deposit | Withdraw, transfer_id: int, amount: int
    ) -> TransferReply:
        self.next_transfer_id += 1
        self.transfers[cmd.tx_id] = TransferRecord(transfer_id, cmd.account, cmd.asset, amount)
        self.ledger.events.append(
            TransferDone(transfer_id, cmd.tx_id, cmd.account, cmd.asset, amount, cmd.ts)
        )
        free, locked = self.ledger.get(cmd.account, cmd.asset)
        return TransferReply(transfer_id, False, free, locked)

    # ----------------------------------------------------------------- futures

    def _futures_place(self, cmd: FuturesPlace) -> FuturesOrderState | Trigger:
        if cmd.trigger_type:
            return triggers.place(self.futures, cmd)
        state = self.futures.place(cmd)
        # An order that did not trade moved no price and no one's equity (its hold only moves
        # funds from free to locked): unless the mark moves meanwhile, nothing can be due.
        self._futures_settle([cmd.contract], cmd.ts, traded=state.filled > 0, moved=False)
        return state

    def _futures_settle(
        self, symbols: list[str], ts: int, *, traded: bool, moved: bool = True
    ) -> None:
        """After prices, positions or balances may have changed: new marks, liquidations,
        then triggers, until the contracts are quiet (each round's trades can move the price
        again). Every command ends with no position due at the current marks, so only what
        the command changed needs looking at:

        - a contract whose mark moved, or that ``moved`` (True unless the caller knows its
          command changed nothing but by trading) names: the positions its risk bands name
          (those near liquidation, and those changed since their bands were drawn, which
          ``tell_bands`` reports; every position, the first time after a start);
        - a contract of ``symbols`` the command traded on without moving its mark: the
          positions of the users the command changed (their equity is all that moved);
        - a placement that neither traded nor moved the mark: nothing;
        - after any liquidation: every contract, whole (ADL moves other users' equity);
        - last, the users the command changed, on every other contract where they hold
          positions: their equity stands behind their cross positions there too."""
        fx = self.futures
        pending = list(symbols)
        settled: set[str] = set()
        parties_looked_at = False
        told = 0  # the command's events the risk bands have been told about

        def tell_bands() -> None:
            """The users changed since the bands were last told: their bands are stale (a
            band stays sound when only cash came in: the margin behind it only grew)."""
            nonlocal told
            closed = [
                e.doc
                for e in self._events[told:]
                if type(e) is FuturesChanged and not e.live and isinstance(e.doc, Position)
            ]
            fx.risk_bands.changed(fx, self._futures_parties(told, gains=False), closed)
            told = len(self._events)

        for _ in range(liquidation.MAX_ROUNDS):
            if not pending:
                if parties_looked_at:
                    fx.traded.clear()  # every trigger has seen this command's prices
                    return
                parties_looked_at = True
                tell_bands()
                parties = self._futures_parties()
                held = {p.contract for user in parties for p in fx.user_positions(user)}
                for symbol in fx.contracts:
                    if (
                        symbol in held
                        and symbol not in settled
                        and liquidation.sweep(fx, [symbol], ts, parties)
                    ):
                        # Settle everything again, whole, as after any liquidation.
                        pending.extend(s for s in fx.contracts if s != symbol)
                        settled.add(symbol)
                        break
                continue
            symbol = pending.pop(0)
            settled.add(symbol)
            contract = fx.contracts[symbol]
            dirty = traded or symbol not in symbols
            check = moved or dirty
            mark = fx.states[symbol].mark
            for _ in range(liquidation.MAX_ROUNDS):
                changed = futures_prices.refresh(fx, contract, ts, tick=False, dirty=dirty)
                if not (changed or check):
                    break  # nothing it depends on changed: nothing can have become due
                tell_bands()
                users = (
                    self._futures_parties()
                    if not moved and symbol in symbols and fx.states[symbol].mark == mark
                    else None
                )
                dirty = False
                check = True
                moved = True  # from the second round on, whatever ran may have moved anything
                if liquidation.sweep(fx, [symbol], ts, users):
                    # A cross liquidation may have traded on other contracts too.
                    pending.extend(s for s in fx.contracts if s != symbol and s not in pending)
                    dirty = True
                    continue
                fired = triggers.due(fx, symbol)
                if not fired:
                    break
                for trigger in fired:
                    triggers.fire(fx, trigger, ts)
                dirty = True
        raise AssertionError("futures prices did not settle")

    def _futures_parties(self, start: int = 0, *, gains: bool = True) -> set[int]:
        """Users whose futures positions or futures balances (free + locked) the command being
        applied has changed so far (by its events from ``start`` on); without ``gains``, not
        those whose balances only grew (more cash lowers nobody's margin ratio)."""
        users: set[int] = set()
        events = self._events
        for i in range(start, len(events)):
            event = events[i]
            if type(event) is FuturesChanged:
                if event.kind == KIND_POSITION:
                    users.add(event.user)
            elif type(event) is BalanceChanged and event.account >= FUTURES_ACCOUNT_BASE:
                change = event.d_free + event.d_locked
                if change < 0 or (change and gains):
                    users.add(event.account - FUTURES_ACCOUNT_BASE)
        return users

    def _futures_cancel(self, cmd: FuturesCancel) -> FuturesOrderState | Trigger:
        fx = self.futures
        fx.contract(cmd.contract)
        found = fx.find_open(cmd.user, cmd.contract, cmd.order_id, cmd.client_id)
        if found is None:
            raise Reject(Code.NO_SUCH_ORDER, "no such open order")
        if isinstance(found, Trigger):
            return triggers.cancel(fx, found, cmd.ts)
        return fx.cancel_resting(found, cmd.ts)

    def _futures_cancel_all(self, cmd: FuturesCancelAll) -> list[int]:
        fx = self.futures
        symbol = None
        if cmd.contract:
            symbol = fx.contract(cmd.contract).symbol
        cancelled = fx.cancel_user(cmd.user, cmd.ts, symbol)
        for trigger in fx.waiting_triggers(cmd.user, symbol):
            triggers.cancel(fx, trigger, cmd.ts)
            cancelled.append(trigger.id)
        return sorted(cancelled)

    def _futures_transfer(self, cmd: FuturesTransfer) -> AccountTransfer:
        record = self.futures.transfer(cmd.user, cmd.asset, cmd.amount, cmd.into_futures, cmd.ts)
        self._futures_settle([], cmd.ts, traded=False)  # less cash behind cross positions?
        return record

    def _set_leverage(self, cmd: SetLeverage) -> Setting:
        return self.futures.set_leverage(cmd.user, cmd.contract, cmd.leverage)

    def _set_margin_mode(self, cmd: SetMarginMode) -> Setting:
        return self.futures.set_margin_mode(cmd.user, cmd.contract, cmd.position_type)

    def _adjust_position_margin(self, cmd: AdjustPositionMargin) -> Position:
        pos = self.futures.adjust_margin(cmd.user, cmd.position_id, cmd.amount, cmd.ts)
        self._futures_settle([pos.contract], cmd.ts, traded=False)
        return pos

    def _set_index_price(self, cmd: SetIndexPrice) -> ContractState:
        fx = self.futures
        contract = fx.contract(cmd.contract)
        if not 0 < cmd.price <= MAX_PRICE:
            raise Reject(Code.PRICE_RANGE, "index price must be positive and in range")
        state = fx.states[contract.symbol]
        if cmd.feed:
            index_sources.feed(state, cmd.feed, cmd.price, cmd.ts)
            fx.emit_state(state)
            return state
        state.operator_index = cmd.price
        state.index = cmd.price
        state.index_time = cmd.ts
        self._futures_settle([contract.symbol], cmd.ts, traded=True)
        return state

    def _futures_tick(self, cmd: FuturesTick) -> list[str]:
        spot_reference.tick(self.spot, cmd.ts)
        fx = self.futures
        moved = [
            symbol
            for symbol, contract in fx.contracts.items()
            if futures_prices.refresh(fx, contract, cmd.ts, tick=True)
        ]
        # The first tick of each minute samples the premium of every contract with an index,
        # which counts as a move: each is then swept (its risk bands say what to look at).
        self._futures_settle(moved, cmd.ts, traded=False)
        return moved

    def _settle_funding(self, cmd: SettleFunding) -> list[str]:
        fx = self.futures
        symbols = [fx.contract(cmd.contract).symbol] if cmd.contract else list(fx.contracts)
        settled = []
        for symbol in symbols:
            state = fx.states[symbol]
            if not state.mark:
                if cmd.contract:
                    raise Reject(Code.PRICE_RANGE, f"{symbol} has no mark price yet")
                continue
            futures_prices.settle_funding(fx, fx.contracts[symbol], state, cmd.ts)
            fx.emit_state(state)
            settled.append(symbol)
        self._futures_settle(settled, cmd.ts, traded=False)  # payers may now be due
        return settled

    def _close_positions(self, cmd: ClosePositions) -> int:
        fx = self.futures
        positions = fx.user_positions(cmd.user)
        for pos in positions:
            if not fx.states[pos.contract].mark:
                raise Reject(Code.PRICE_RANGE, f"{pos.contract} has no mark price yet")
        self._futures_cancel_all(FuturesCancelAll(cmd.ts, cmd.user))
        closed = 0
        for pos in positions:
            if pos.volume:  # closing one side may have closed the user's other side with it
                liquidation.close_at_mark(fx, pos, cmd.ts)
                closed += 1
        self._futures_settle(sorted({p.contract for p in positions}), cmd.ts, traded=False)
        return closed

    # ----------------------------------------------------------------- queries

    def open_orders(self, account: int, symbol: str | None = None) -> list[Order]:
        """Open orders of an account, oldest first."""
        orders = self.spot.by_account.get(account)
        if not orders:
            return []
        return [o for o in orders.values() if symbol is None or o.symbol == symbol]

    def balances(self, account: int) -> dict[str, tuple[int, int]]:
        return {asset: self.ledger.get(account, asset) for asset in self.markets.assets}

    def state_hash(self) -> str:
        """A digest of everything that determines future behaviour: balances, external totals,
        transfers, every open order in queue order, and the id counters. The same command
        stream always gives the same hash, and so does recovery from the store."""
        digest = hashlib.sha256()

        def feed(value: object) -> None:
            digest.update(repr(value).encode())
            digest.update(b"\n")

        for key in sorted(self.ledger.balances):
            feed((key, tuple(self.ledger.balances[key])))
        feed(sorted(self.ledger.external.items()))
        for tx_id in sorted(self.transfers):
            feed((tx_id, self.transfers[tx_id]))
        for symbol in sorted(self.spot.books):
            book = self.spot.books[symbol]
            for side in (book.bids, book.asks):
                for level in side.iter_levels():
                    for order in level.orders():
                        feed(order.snapshot().as_tuple())
        feed((self.spot.next_order_id, self.spot.next_trade_id, self.next_transfer_id))
        feed(sorted(self.spot.last_price.items()))
        feed(sorted(self.spot.references.items()))
        for account_id in sorted(self.margin.accounts):
            account = self.margin.accounts[account_id]
            feed((account.id, account.user, account.symbol, sorted(account.debts.items())))
        feed((self.margin.next_account_id, self.margin.accrued_hour, sorted(self.margin.waiting)))
        fx = self.futures
        for symbol in sorted(fx.books):
            book = fx.books[symbol]
            for side in (book.bids, book.asks):
                for level in side.iter_levels():
                    for order in level.orders():
                        assert isinstance(order, FuturesOrder)
                        feed(order.state())
        for pos in sorted(fx.all_positions(), key=lambda p: p.id):
            feed(pos)
        for trigger_id in sorted(fx.triggers):
            feed(fx.triggers[trigger_id])
        for key in sorted(fx.settings):
            feed(fx.settings[key])
        for symbol in sorted(fx.states):
            feed(fx.states[symbol])
        feed((fx.next_position_id, fx.next_transfer_id))
        return digest.hexdigest()

    # ----------------------------------------------------------------- recovery

    def restore_balance(self, account: int, asset: str, free: int, locked: int) -> None:
        # In place: a record, once made, is never replaced (orders and fees keep them).
        self.ledger.record(account, asset)[:] = (free, locked)

    def restore_transfer(self, tx_id: str, record: TransferRecord) -> None:
        self.transfers[tx_id] = record
        self.ledger.external[record.asset] = (
            self.ledger.external.get(record.asset, 0) + record.amount
        )
        self.next_transfer_id = max(self.next_transfer_id, record.id + 1)

    def restore_orders(self, orders: Iterable[Order]) -> None:
        """Recovered open orders, in ascending id (= original arrival) order."""
        for order in orders:
            self.spot.restore(order)

    def restore_margin(
        self,
        accounts: Iterable[MarginAccount],
        accrued_hour: int | None,
        written_off: dict[str, int] | None = None,
    ) -> None:
        for account in accounts:
            self.margin.restore_account(account)
        self.margin.accrued_hour = accrued_hour
        self.margin.written_off = dict(written_off or {})
        self.margin.restore_waiting()

    def restore_futures(self, docs: Iterable[object], max_ids: dict[str, int]) -> None:
        """Recovered live futures documents (open orders in ascending id first, so that
        positions can count what is pending close against them)."""
        fx = self.futures
        docs = list(docs)
        for doc in docs:
            if isinstance(doc, FuturesOrderState):
                fx.restore_order(doc)
        for doc in docs:
            if isinstance(doc, Position):
                fx.restore_position(doc)
            elif isinstance(doc, Trigger):
                fx.restore_trigger(doc)
            elif isinstance(doc, Setting):
                fx.settings[(doc.user, doc.contract)] = doc
            elif isinstance(doc, ContractState) and doc.contract in fx.states:
                fx.states[doc.contract] = doc
            elif isinstance(doc, PriceReference) and doc.symbol in self.spot.pairs:
                self.spot.set_reference(doc)
        fx.next_position_id = max(fx.next_position_id, max_ids.get(KIND_POSITION, 0) + 1)
        fx.next_transfer_id = max(fx.next_transfer_id, max_ids.get(KIND_TRANSFER, 0) + 1)

    def restore_last_price(self, symbol: str, price: int) -> None:
        self.spot.last_price[symbol] = price

    def restore_counters(self, next_order_id: int, next_trade_id: int) -> None:
        self.spot.next_order_id = max(self.spot.next_order_id, next_order_id)
        self.spot.next_trade_id = max(self.spot.next_trade_id, next_trade_id)
