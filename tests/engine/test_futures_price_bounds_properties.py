"""Orders at prices across the whole admissible range (1 tick ..= the contract's
``max_price``), on the inverse E-BTC-USD and the linear E-BTC-USDT, filled in whole and in
part, next to index prices anywhere SetIndexPrice accepts (1 ..= MAX_PRICE), never leave an
unsound state.

The engine runs in debug mode (the full audit after every command; an InvariantViolation
fails the test). Prices are drawn uniformly, log-uniformly (every order of magnitude is as
likely) and at the edges of the range; most placements come as a maker and a smaller taker at
the maker's price, so that partial fills at extreme prices are common. After every command:
a refused command changed nothing (the state hash), a price outside the range is refused
with -1138, and every open position has a positive cost.
"""

from __future__ import annotations

import itertools
from typing import Any

from futures_support import BUY, CLOSE, INSURANCE_ACCOUNT, INVERSE, LINEAR, OPEN, SELL, UNIT
from futures_support import markets as default_markets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tradehall.codes import Code, Reject
from tradehall.engine import audit
from tradehall.engine.commands import (
    Deposit,
    FuturesCancelAll,
    FuturesPlace,
    FuturesTick,
    FuturesTransfer,
    SetIndexPrice,
    SetLeverage,
    SetMarginMode,
)
from tradehall.engine.contracts import MAX_PRICE
from tradehall.engine.engine import Engine
from tradehall.engine.futures_model import CROSS, ISOLATED
from tradehall.engine.orders import GTC, IOC, LIMIT, MARKET

USERS = (1, 2, 3)
CONTRACTS = (INVERSE, LINEAR)
FUNDS = {"BTC": 10**6 * UNIT, "USDT": 10**9 * UNIT}
"""Per user: enough for one inverse contract at 1 tick (100 BTC) or one linear contract near
the top (10**8 USDT) many times over, so that most orders are funded."""
T0 = 1_700_006_400_000
MINUTE = 60_000
INTERVAL = 8 * 3_600_000


def max_price(contract: str) -> int:
    return int(default_markets().contracts[contract].max_price)


def prices(top: int) -> st.SearchStrategy[int]:
    """1 ..= top: uniform, log-uniform, and at or next to both ends."""
    log_uniform = st.integers(0, top.bit_length() - 1).flatmap(
        lambda bits: st.integers(2**bits, min(top, 2 ** (bits + 1) - 1))
    )
    return st.one_of(
        st.sampled_from((1, top)),
        st.sampled_from((1, 2, 3, top - 2, top - 1, top)),
        st.integers(1, top),
        log_uniform,
        st.integers(max(1, top - 10_000), top),
        st.integers(1, 10_000),
    )


contracts = st.sampled_from(CONTRACTS)
users = st.sampled_from(USERS)
sides = st.sampled_from((BUY, SELL))


@st.composite
def trade(draw: st.DrawFn) -> tuple[Any, ...]:
    """A resting maker, then a taker for at most as many contracts at the maker's price (or
    a MARKET taker), both OPEN or CLOSE."""
    contract = draw(contracts)
    price = draw(prices(max_price(contract)))
    maker_volume = draw(st.sampled_from((1, 2, 3, 10, 1000, 60_000)) | st.integers(1, 5000))
    taker_volume = draw(st.integers(1, maker_volume) | st.just(1))
    maker = draw(users)
    taker = draw(st.sampled_from([u for u in USERS if u != maker]))  # no self-trade
    return (
        "trade",
        contract,
        price,
        maker,
        taker,
        draw(sides),
        maker_volume,
        taker_volume,
        draw(st.sampled_from((OPEN, OPEN, OPEN, CLOSE))),
        draw(st.sampled_from((OPEN, OPEN, OPEN, CLOSE))),
        draw(st.sampled_from((LIMIT, LIMIT, LIMIT, MARKET))),
    )


@st.composite
def order(draw: st.DrawFn) -> tuple[Any, ...]:
    contract = draw(contracts)
    return (
        "order",
        contract,
        draw(prices(max_price(contract))),
        draw(users),
        draw(sides),
        draw(st.integers(1, 5000)),
        draw(st.sampled_from((OPEN, OPEN, CLOSE))),
        draw(st.sampled_from((GTC, GTC, IOC))),
    )


@st.composite
def outside(draw: st.DrawFn) -> tuple[Any, ...]:
    """A price above the contract's range (or 0), as a LIMIT price or a trigger price."""
    contract = draw(contracts)
    top = max_price(contract)
    price = draw(
        st.sampled_from((0, top + 1, MAX_PRICE + 1)) | st.integers(top + 1, MAX_PRICE + 10**6)
    )
    return ("outside", contract, price, draw(users), draw(sides), draw(st.booleans()))


@st.composite
def index(draw: st.DrawFn) -> tuple[Any, ...]:
    return ("index", draw(contracts), draw(prices(MAX_PRICE)))


@st.composite
def trigger(draw: st.DrawFn) -> tuple[Any, ...]:
    contract = draw(contracts)
    top = max_price(contract)
    return (
        "trigger",
        contract,
        draw(prices(top)),
        draw(prices(top)),
        draw(users),
        draw(sides),
        draw(st.integers(1, 4)),
    )


operations = st.one_of(
    trade(),
    trade(),
    trade(),
    order(),
    outside(),
    index(),
    trigger(),
    st.tuples(st.just("tick"), st.sampled_from((MINUTE, INTERVAL))),
    st.tuples(st.just("leverage"), users, contracts, st.sampled_from((1, 10, 100))),
    st.tuples(st.just("cancel"), users),
)


class Run:
    def __init__(self) -> None:
        self.engine = Engine(default_markets(), check_invariants=True)
        self.fx = self.engine.futures
        self.ts = T0 + 1_000
        self.tx = itertools.count(1)
        self.refused: dict[Code, int] = {}
        for user in USERS:
            for coin, amount in FUNDS.items():
                self.step(Deposit(self.ts, user, coin, amount, f"p-{next(self.tx)}"))
                self.step(FuturesTransfer(self.ts, user, coin, amount, True))
        for coin, amount in FUNDS.items():
            self.step(Deposit(self.ts, INSURANCE_ACCOUNT, coin, amount // 10, f"p-{next(self.tx)}"))

    def step(self, cmd: Any) -> Code | None:
        """Apply ``cmd``; an InvariantViolation (debug mode) propagates and fails the test."""
        before = self.engine.state_hash()
        try:
            self.engine.apply(cmd)
        except Reject as exc:
            assert self.engine.state_hash() == before, f"refused {cmd!r} changed state"
            self.refused[exc.code] = self.refused.get(exc.code, 0) + 1
            return exc.code
        for pos in self.fx.all_positions():
            assert pos.cost > 0 and pos.margin >= 0 and pos.volume > 0, (cmd, pos)
        return None

    def volume(self, contract: str, price: int, volume: int) -> int:
        """``volume`` brought within the contract's LIMIT order value at ``price`` (on the
        linear contract a high price allows few contracts, a low one needs many), where the
        limits allow it at all."""
        spec = self.fx.contracts[contract]
        one = spec.money(1, price)
        least = -(-spec.min_money // one)
        most = min(spec.max_limit_money // one, spec.max_limit_volume)
        return max(1, min(max(volume, least), most))

    def place(self, user: int, contract: str, side: str, action: str, **kw: Any) -> Code | None:
        self.ts += 1
        if action == CLOSE and not kw.get("trigger_type"):
            pos = self.fx.positions.get((user, contract, SELL if side == BUY else BUY))
            if pos is not None and pos.volume > pos.pending_close:
                kw["volume"] = min(kw["volume"], pos.volume - pos.pending_close)
        position_type = kw.pop("position_type", 0)
        return self.step(
            FuturesPlace(self.ts, user, contract, side, action, position_type=position_type, **kw)
        )

    def apply(self, op: tuple[Any, ...]) -> None:
        what = op[0]
        if what == "trade":
            _, contract, price, maker, taker, side, maker_vol, taker_vol, m_act, t_act, kind = op
            maker_vol = self.volume(contract, price, maker_vol)
            taker_vol = min(taker_vol, maker_vol)
            self.place(maker, contract, side, m_act, type=LIMIT, price=price, volume=maker_vol)
            other = SELL if side == BUY else BUY
            if kind == MARKET and t_act == OPEN:
                money = self.fx.contracts[contract].money(taker_vol, price)
                self.place(taker, contract, other, OPEN, type=MARKET, money=money)
            elif kind == MARKET:
                self.place(taker, contract, other, CLOSE, type=MARKET, volume=taker_vol)
            else:
                # The taker's own limit may be further than the maker's price; it fills at
                # the maker's. Its own value must reach the minimum at its limit.
                self.place(
                    taker,
                    contract,
                    other,
                    t_act,
                    type=LIMIT,
                    price=price,
                    volume=taker_vol,
                    tif=IOC,
                )
        elif what == "order":
            _, contract, price, user, side, volume, action, tif = op
            volume = self.volume(contract, price, volume)
            self.place(
                user, contract, side, action, type=LIMIT, price=price, volume=volume, tif=tif
            )
        elif what == "outside":
            _, contract, price, user, side, as_trigger = op
            if as_trigger:
                code = self.place(
                    user,
                    contract,
                    side,
                    OPEN,
                    type=MARKET,
                    money=10**12,
                    trigger_type=1 if side == BUY else 2,
                    trigger_price=price,
                )
            else:
                code = self.place(user, contract, side, OPEN, type=LIMIT, price=price, volume=1)
            assert code == Code.PRICE_RANGE, (op, code)
        elif what == "index":
            _, contract, price = op
            self.ts += 1
            self.step(SetIndexPrice(self.ts, contract, price))
        elif what == "trigger":
            _, contract, trigger_price, price, user, side, trigger_type = op
            side = {3: BUY, 4: SELL}.get(trigger_type, side)
            volume = self.volume(contract, price, 1)
            self.place(
                user,
                contract,
                side,
                OPEN,
                type=LIMIT,
                price=price,
                volume=volume,
                trigger_type=trigger_type,
                trigger_price=trigger_price,
            )
        elif what == "tick":
            self.ts += op[1]
            self.step(FuturesTick(self.ts))
        elif what == "leverage":
            self.ts += 1
            self.step(SetLeverage(self.ts, op[1], op[2], op[3]))
        else:
            self.ts += 1
            self.step(FuturesCancelAll(self.ts, op[1], ""))


@settings(
    max_examples=200,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=st.lists(operations, min_size=1, max_size=25),
    modes=st.lists(st.sampled_from((CROSS, ISOLATED)), min_size=len(USERS), max_size=len(USERS)),
    leverage=st.sampled_from((1, 10, 100)),
    first_index=st.tuples(prices(max_price(INVERSE)), prices(max_price(LINEAR))),
)
def test_orders_at_any_admissible_price_keep_the_state_sound(
    ops: list[tuple[Any, ...]], modes: list[int], leverage: int, first_index: tuple[int, int]
) -> None:
    run = Run()
    # A contract takes orders once it has an index (then anywhere in its range, as the marks).
    for contract, price in zip(CONTRACTS, first_index, strict=True):
        run.step(SetIndexPrice(run.ts, contract, price))
    for user, mode in zip(USERS, modes, strict=True):
        for contract in CONTRACTS:
            run.step(SetMarginMode(run.ts, user, contract, mode))
            run.step(SetLeverage(run.ts, user, contract, leverage))
    for op in ops:
        run.apply(op)
    assert audit.check(run.engine) == []
