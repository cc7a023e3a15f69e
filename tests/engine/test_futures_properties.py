"""Random futures command streams on E-BTC-USDT (linear) and E-BTC-USD (inverse), checked after
every command.

Four users trade with small accounts and leverages up to 50, so that index moves liquidate
them often; the streams mix LIMIT (GTC/IOC/FOK/POST_ONLY) and MARKET opens and closes,
conditional orders, cancels, index price jumps, scheduler ticks across funding times, margin
mode and leverage changes, isolated margin top-ups and withdrawals and transfers between spot
and futures. The engine runs in debug mode (the full audit after every command) and after
every command, applied or refused:

* long open interest == short open interest, per contract;
* funding nets to zero: the ledger entries of funding sum to zero per asset, the paying side's
  ``capital_fee`` went down by exactly the recorded amount and the receiving side's up by it;
* per asset, all accounts (users, fee account, insurance fund, clearing) hold deposits -
  withdrawals, counted here independently of the ledger's own tally;
* no balance is negative except the clearing accounts';
* no position is left at or below its maintenance margin (isolated) and no cross account at
  or below the maintenance of its cross positions;
* the last document reported (``FuturesChanged``) for every open order, open position,
  waiting trigger and contract state is the live object (what the store would recover);
* a loss is socialised only after the insurance fund was emptied;
* a refused command changed nothing.

Finally the same commands on a fresh engine give the same outcomes and the same state hash
after every command.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import msgspec
import pytest
from futures_support import (
    BUY,
    CLOSE,
    INSURANCE_ACCOUNT,
    INVERSE,
    LINEAR,
    OPEN,
    SELL,
    UNIT,
    markets,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tradehall.codes import Reject
from tradehall.engine import futures_prices, liquidation
from tradehall.engine.commands import (
    AdjustPositionMargin,
    Deposit,
    FuturesCancel,
    FuturesCancelAll,
    FuturesPlace,
    FuturesTick,
    FuturesTransfer,
    SetIndexPrice,
    SetLeverage,
    SetMarginMode,
)
from tradehall.engine.engine import Engine
from tradehall.engine.events import BalanceChanged
from tradehall.engine.futures_model import (
    CLEARING_ACCOUNT_BASE,
    CROSS,
    ISOLATED,
    KIND_CONTRACT,
    KIND_ORDER,
    KIND_POSITION,
    KIND_TRIGGER,
    TRAILING_BUY,
    ContractState,
    FundingRecord,
    FuturesChanged,
    FuturesOrderState,
    Position,
)
from tradehall.engine.futures_risk import maintenance, unrealized
from tradehall.engine.orders import FOK, GTC, IOC, LIMIT, MARKET, POST_ONLY
from tradehall.engine.risk_bands import RiskBands
from tradehall.engine.trigger_book import is_trailing, reached

T = TypeVar("T")

USERS = (1, 2, 3, 4)
CONTRACTS = (LINEAR, INVERSE)
COIN = {LINEAR: "USDT", INVERSE: "BTC"}
FUNDS = {"USDT": 3_000 * UNIT, "BTC": UNIT // 10}
"""Spot deposit of each user; most of it goes to futures at the start."""
T0 = 1_700_006_400_000
MINUTE = 60_000
INTERVAL = 8 * 3_600_000
START_INDEX = 500_000
MAX_VOLUME = {LINEAR: 40, INVERSE: 300}
"""40 x 0.001 BTC, 300 x 10 USD: about 2,000 / 3,000 USD at the start price."""


class Source(Protocol):
    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...


class HypothesisSource:
    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def choice(self, options: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(options))

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))


class RandomSource:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return self.rng.choice(options)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


# --------------------------------------------------------------------------- the run


class Run:
    def __init__(self) -> None:
        self.engine = Engine(markets(), check_invariants=True)
        self.fx = self.engine.futures
        self.ts = T0 + 1_000
        self.tick_ts = T0
        self.commands: list[Any] = []
        self.outcomes: list[tuple[Any, str]] = []
        self.external: dict[str, int] = defaultdict(int)
        """Deposits - withdrawals per asset, counted by the test."""
        self.positions: dict[int, Position] = {}
        """Every position seen, by id (closed ones keep their funding record)."""
        self.stats: dict[str, int] = defaultdict(int)
        self.documents: dict[tuple[str, int, str, int], Any] = {}
        """The last FuturesChanged document per (kind, user, contract, id)."""
        self.fund_before: dict[str, int] = {}
        self._tx = 0

    def step(self, cmd: Any) -> None:
        fx = self.fx
        before = {pid: p.capital_fee for pid, p in self.positions.items()}
        sides = {pid: (p.contract, p.is_long) for pid, p in self.positions.items()}
        snapshot = self.engine.state_hash()
        socialized = {c: s.socialized for c, s in fx.states.items()}
        self.fund_before = {c: self.engine.ledger.free(INSURANCE_ACCOUNT, c) for c in FUNDS}
        try:
            result = self.engine.apply(cmd)
        except Reject as exc:
            self.stats["refused"] += 1
            assert self.engine.state_hash() == snapshot, f"refused {cmd!r} changed state"
            self.commands.append(cmd)
            self.outcomes.append((exc.code, snapshot))
            return
        self.commands.append(cmd)
        self.outcomes.append((type(result.reply).__name__, self.engine.state_hash()))
        if isinstance(cmd, Deposit):
            self.external[cmd.asset] += cmd.amount
        for pos in fx.all_positions():
            self.positions.setdefault(pos.id, pos)
        self.count(result.events)
        self.check_sized(cmd, result.reply)
        self.check_funding(result.events, before, sides)
        self.check_state(cmd)
        self.check_documents(result.events, cmd)
        self.check_socialized(socialized, result.events, cmd)

    def check_sized(self, cmd: Any, reply: Any) -> None:
        """An order sized in contracts never trades more than it asked for, and ends FILLED
        exactly when it got all of them (a MARKET order's rest is canceled, not rested)."""
        if not isinstance(cmd, FuturesPlace) or cmd.trigger_type or cmd.money:
            return
        assert isinstance(reply, FuturesOrderState)
        assert reply.qty == cmd.volume and reply.filled <= cmd.volume, (cmd, reply)
        if cmd.type == MARKET:
            assert (reply.status == "FILLED") == (reply.filled == cmd.volume), (cmd, reply)
            assert reply.status in ("FILLED", "CANCELED"), (cmd, reply)

    def count(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, FuturesChanged):
                doc = event.doc
                if isinstance(doc, FundingRecord) and doc.paid:
                    self.stats["funding payments"] += 1
                elif isinstance(doc, Position) and doc.liquidated and doc.volume == 0:
                    self.stats["liquidations"] += 1
                elif getattr(doc, "source", "") == "adl":
                    self.stats["adl fills"] += 1
                elif getattr(doc, "status", "") == "FILLED" and hasattr(doc, "trigger_type"):
                    self.stats["triggers fired"] += 1
            elif isinstance(event, BalanceChanged) and event.account == INSURANCE_ACCOUNT:
                self.stats["insurance moves"] += 1

    def check_funding(
        self,
        events: list[Any],
        before: dict[int, int],
        sides: dict[int, tuple[str, bool]],
    ) -> None:
        net: dict[str, int] = defaultdict(int)
        for event in events:
            if isinstance(event, BalanceChanged) and event.reason == "funding":
                net[event.asset] += event.d_free + event.d_locked
        assert all(v == 0 for v in net.values()), f"funding does not net to zero: {net}"
        for event in events:
            if not (isinstance(event, FuturesChanged) and isinstance(event.doc, FundingRecord)):
                continue
            record = event.doc
            if record.contract not in CONTRACTS:
                continue
            paid = received = 0
            for pid, old in before.items():
                contract, is_long = sides[pid]
                if contract != record.contract:
                    continue
                delta = self.positions[pid].capital_fee - old
                if is_long == (record.rate > 0):
                    paid -= delta
                else:
                    received += delta
            assert paid == record.paid, (record, paid)
            # Everything paid is received, unless no receiver was owed anything (the fund
            # then takes it).
            assert received in (record.paid, 0), (record, received)

    def check_state(self, cmd: Any) -> None:
        engine, fx = self.engine, self.fx
        for contract in CONTRACTS:
            positions = list(fx.by_contract[contract].values())
            longs = sum(p.volume for p in positions if p.is_long)
            shorts = sum(p.volume for p in positions if not p.is_long)
            assert longs == shorts, f"{contract}: OI {longs} long != {shorts} short after {cmd}"
        totals: dict[str, int] = defaultdict(int)
        for (account, asset), (free, locked) in engine.ledger.balances.items():
            totals[asset] += free + locked
            if account > CLEARING_ACCOUNT_BASE:
                assert free >= 0 and locked >= 0, (account, asset, free, locked)
        assert {a: v for a, v in totals.items() if v} == {
            a: v for a, v in self.external.items() if v
        }
        # No waiting trigger is left reached by its contract's last price, and the indexes
        # that find them (per user, per contract by price) hold exactly the waiting ones.
        for trigger in fx.triggers.values():
            last = fx.states[trigger.contract].last
            if last and not is_trailing(trigger):
                assert not reached(
                    trigger.trigger_type, trigger.side, trigger.trigger_price, last
                ), f"trigger {trigger} reached by {last} but waiting after {cmd}"
            elif last:
                trailing_buy = trigger.trigger_type == TRAILING_BUY
                assert (
                    (last < trigger.trigger_price)
                    if trailing_buy
                    else (last > trigger.trigger_price)
                ), f"trailing trigger {trigger} reached by {last} but waiting after {cmd}"
        indexed = {t.id for ts in fx.user_triggers.values() for t in ts.values()}
        assert indexed == set(fx.triggers), (indexed, set(fx.triggers))
        booked = {i for b in fx.trigger_books.values() for i in (*b.fixed, *b.trailing)}
        assert booked == set(fx.triggers), (booked, set(fx.triggers))
        # Nobody stays at or below maintenance.
        for contract in CONTRACTS:
            spec = fx.contracts[contract]
            mark = fx.states[contract].mark
            for pos in fx.by_contract[contract].values():
                if pos.position_type == ISOLATED:
                    equity = pos.margin + unrealized(spec, pos, mark)
                    assert equity > maintenance(spec, pos, mark), (
                        f"isolated position {pos} left below maintenance after {cmd}"
                    )
        for user in USERS:
            for coin in FUNDS:
                if any(
                    p.position_type == CROSS and COIN[p.contract] == coin
                    for p in fx.user_positions(user)
                ):
                    equity, needed = fx.cross_equity(user, coin)
                    assert equity > needed, (
                        f"user {user} {coin} cross equity {equity} <= {needed} after {cmd}"
                    )

    def check_documents(self, events: list[Any], cmd: Any) -> None:
        """The last document the engine reported for every live futures object is the
        object as it is (the store keeps those documents and recovery loads them)."""
        for event in events:
            if isinstance(event, FuturesChanged):
                key = (event.kind, event.user, event.contract, event.id)
                self.documents[key] = event.doc
        fx = self.fx
        for symbol, state in fx.states.items():
            doc = self.documents.get((KIND_CONTRACT, 0, symbol, 0))
            if doc is not None or state != ContractState(symbol):
                assert doc == state, f"{symbol}: state {state} but reported {doc} after {cmd}"
        for pos in fx.all_positions():
            doc = self.documents.get((KIND_POSITION, pos.user, pos.contract, pos.id))
            # (the volume pending close is recounted from the open orders on recovery)
            assert isinstance(doc, Position)
            assert msgspec.structs.replace(doc, pending_close=pos.pending_close) == pos, (
                f"position {pos} reported as {doc} after {cmd}"
            )
        for trigger in fx.triggers.values():
            doc = self.documents.get((KIND_TRIGGER, trigger.user, trigger.contract, trigger.id))
            assert doc == trigger, f"trigger {trigger} reported as {doc} after {cmd}"
        for user in USERS:
            for order in fx.open_orders(user):
                doc = self.documents.get((KIND_ORDER, user, order.symbol, order.id))
                assert doc == order.state(), f"order {order.state()} reported {doc} after {cmd}"

    def check_socialized(self, before: dict[str, int], events: list[Any], cmd: Any) -> None:
        """A loss is socialised only once the insurance fund has nothing left to pay it: the
        fund of that coin was empty at some point of the command."""
        for symbol, state in self.fx.states.items():
            if state.socialized == before[symbol]:
                continue
            coin = self.fx.contracts[symbol].margin_coin
            lowest = self.fund_before[coin]
            for e in events:
                if isinstance(e, BalanceChanged) and (e.account, e.asset) == (
                    INSURANCE_ACCOUNT,
                    coin,
                ):
                    lowest = min(lowest, e.free)
            assert lowest == 0, (
                f"{symbol}: {state.socialized - before[symbol]} socialised while the fund "
                f"held at least {lowest} after {cmd}"
            )

    # ------------------------------------------------------------------ helpers

    def deposit(self, account: int, asset: str, amount: int) -> None:
        self._tx += 1
        self.step(Deposit(self.ts, account, asset, amount, f"prop-{self._tx}"))

    def index(self, contract: str) -> int:
        return self.fx.states[contract].index or START_INDEX


# --------------------------------------------------------------------------- the streams


def start(run: Run, source: Source) -> None:
    for user in USERS:
        for asset, amount in FUNDS.items():
            run.deposit(user, asset, amount)
            run.step(FuturesTransfer(run.ts, user, asset, amount // 3, True))
    fund = source.choice((0, 0, 1, 50 * UNIT))
    if fund:
        run.deposit(INSURANCE_ACCOUNT, "USDT", fund)
        run.deposit(INSURANCE_ACCOUNT, "BTC", fund // 50_000)
    for contract in CONTRACTS:
        run.step(SetIndexPrice(run.ts, contract, START_INDEX))
    run.step(FuturesTick(T0 + MINUTE))
    run.tick_ts = T0 + MINUTE


def draw_price(source: Source, run: Run, contract: str) -> int:
    index = run.index(contract)
    return max(1, index + index * source.integer(-40, 40) // 1_000)


def draw_place(source: Source, run: Run) -> FuturesPlace:
    user = source.choice(USERS)
    contract = source.choice(CONTRACTS)
    side = source.choice((BUY, SELL))
    action = source.choice((OPEN, OPEN, CLOSE))
    kind = source.choice((LIMIT, LIMIT, LIMIT, MARKET))
    volume = source.integer(1, MAX_VOLUME[contract])
    if action == CLOSE:
        held = run.fx.positions.get((user, contract, SELL if side == BUY else BUY))
        if held is not None and source.choice((True, True, False)):
            volume = max(1, min(volume, held.volume - held.pending_close))
    money = 0
    if kind == MARKET and action == OPEN and source.choice((True, False)):  # else in contracts
        spec = run.fx.contracts[contract]
        money = spec.money(volume, run.index(contract))
        volume = 0
    price = draw_price(source, run, contract) if kind == LIMIT else 0
    tif = source.choice((GTC, GTC, IOC, FOK, POST_ONLY)) if kind == LIMIT else GTC
    trigger_type = trigger_price = 0
    if source.integer(0, 9) == 0:
        trigger_type = source.integer(1, 4)
        tif = GTC
        side = {3: BUY, 4: SELL}.get(trigger_type, side)
        trigger_price = draw_price(source, run, contract)
    return FuturesPlace(
        run.ts,
        user,
        contract,
        side,
        action,
        kind,
        price,
        volume,
        money,
        tif=tif,
        trigger_type=trigger_type,
        trigger_price=trigger_price,
    )


def draw_command(run: Run, source: Source) -> Any:
    fx = run.fx
    run.ts += source.integer(1, 3_000)
    what = source.choice(
        (
            "place",
            "place",
            "place",
            "place",
            "place",
            "cancel",
            "index",
            "index",
            "tick",
            "mode",
            "leverage",
            "margin",
            "transfer",
        )
    )
    user = source.choice(USERS)
    contract = source.choice(CONTRACTS)
    if what == "place":
        return draw_place(source, run)
    if what == "cancel":
        ids = [o.id for o in fx.open_orders(user)] + [t.id for t in fx.waiting_triggers(user)]
        if source.integer(0, 5) == 0:
            return FuturesCancelAll(run.ts, user, source.choice(("", contract)))
        order_id = source.choice(ids) if ids else source.integer(1, 50)
        owner = next(
            (o.symbol for o in fx.open_orders(user) if o.id == order_id),
            next((t.contract for t in fx.waiting_triggers(user) if t.id == order_id), contract),
        )
        return FuturesCancel(run.ts, user, owner, order_id=order_id)
    if what == "index":
        index = run.index(contract)
        move = source.choice((-150, -80, -30, -10, -3, 3, 10, 30, 80, 150))
        price = min(1_000_000, max(200_000, index + index * move // 1_000))
        return SetIndexPrice(run.ts, contract, price)
    if what == "tick":
        step = source.choice((MINUTE, MINUTE, 5 * MINUTE, 3_600_000, INTERVAL, 3 * INTERVAL))
        run.tick_ts = max(run.tick_ts, run.ts) + step
        run.ts = run.tick_ts
        return FuturesTick(run.ts)
    if what == "mode":
        return SetMarginMode(run.ts, user, contract, source.choice((CROSS, ISOLATED)))
    if what == "leverage":
        return SetLeverage(run.ts, user, contract, source.choice((1, 2, 5, 10, 20, 50)))
    if what == "margin":
        isolated = [p for p in fx.user_positions(user) if p.position_type == ISOLATED]
        if not isolated:
            return None
        pos = source.choice(isolated)
        unit = UNIT // 100 if COIN[pos.contract] == "USDT" else UNIT // 100_000
        amount = source.choice((-1, 1, 1)) * source.integer(1, 5_000) * unit
        return AdjustPositionMargin(run.ts, user, pos.id, amount)
    coin = source.choice(tuple(FUNDS))
    amount = source.integer(1, FUNDS[coin] // 10)
    return FuturesTransfer(run.ts, user, coin, amount, source.choice((True, False)))


def check_replay(run: Run) -> None:
    replay = Engine(markets())
    for cmd, outcome in zip(run.commands, run.outcomes, strict=True):
        try:
            result = replay.apply(cmd)
        except Reject as exc:
            assert outcome == (exc.code, replay.state_hash()), cmd
        else:
            assert outcome == (type(result.reply).__name__, replay.state_hash()), cmd
    assert replay.state_hash() == run.engine.state_hash()


def run_stream(source: Source, length: int) -> Run:
    run = Run()
    start(run, source)
    for _ in range(length):
        cmd = draw_command(run, source)
        if cmd is not None:
            run.step(cmd)
    check_replay(run)
    return run


@settings(
    max_examples=150,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_futures_streams_keep_every_invariant(data: st.DataObject) -> None:
    length = data.draw(st.integers(1, 80), label="length")
    run_stream(HypothesisSource(data), length)


def test_long_seeded_futures_streams() -> None:
    """Longer seeded streams with the same checks. Together they must really trade,
    liquidate, deleverage, pay funding and fire triggers, so the checks are not vacuous."""
    seen: dict[str, int] = defaultdict(int)
    for seed in range(8):
        run = run_stream(RandomSource(seed), 400)
        for key, value in run.stats.items():
            seen[key] += value
    for key in ("funding payments", "liquidations", "adl fills", "triggers fired", "refused"):
        assert seen[key] > 0, dict(seen)


def test_the_sweep_shortcuts_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A futures placement that did not trade skips the liquidation sweep when the mark did not
    move, one that traded without moving the mark looks first at its parties' positions
    only, and a move of the mark looks at the positions the risk bands name. The same
    streams, replayed with every command sweeping every position (the shortcuts off), go
    through exactly the same states."""
    sweep = liquidation.sweep
    refresh = futures_prices.refresh
    targeted = []
    banded = []
    candidates = RiskBands.candidates

    def counted(fx: Any, symbols: list[str], ts: int, users: set[int] | None = None) -> int:
        targeted.append(users is not None)
        return sweep(fx, symbols, ts, users)

    def named(self: RiskBands, fx: Any, symbol: str, mark: int) -> Any:
        found = candidates(self, fx, symbol, mark)
        if found is not None:
            banded.append(len(found) < len(fx.by_contract[symbol]))
        return found

    monkeypatch.setattr(liquidation, "sweep", counted)
    monkeypatch.setattr(RiskBands, "candidates", named)
    runs = [run_stream(RandomSource(seed), 300) for seed in range(100, 106)]
    assert any(targeted)  # the streams do take the shortcut
    assert any(banded)  # and the bands do leave positions out
    assert sum(run.stats["liquidations"] for run in runs) > 0

    def every_position(fx: Any, symbols: list[str], ts: int, users: set[int] | None = None) -> int:
        return sweep(fx, symbols, ts, whole=True)

    def always_changed(*args: Any, **kwargs: Any) -> bool:
        refresh(*args, **kwargs)
        return True

    monkeypatch.setattr(liquidation, "sweep", every_position)
    monkeypatch.setattr(futures_prices, "refresh", always_changed)
    for run in runs:
        check_replay(run)
