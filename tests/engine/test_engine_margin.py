"""Isolated margin, worked through with exact integers on BTCUSDT.

BTCUSDT: prices in ticks of 0.01 USDT, quantities in lots of 0.000001 BTC (100 BTC units), both
assets with 8 decimals, so one tick x one lot is exactly 1 USDT unit: a fill of ``q`` lots at
``p`` ticks moves ``p * q`` USDT units. Maker fee 0.0008, taker fee 0.001 (floored).

Every test runs the engine in debug mode (``audit.check`` after every command) and checks the
audit and the margin bookkeeping once more at the end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tradehall.codes import Code, Reject
from tradehall.engine import audit
from tradehall.engine.commands import (
    AccrueInterest,
    CancelOrder,
    ChargeInterest,
    Command,
    Deposit,
    MarginRepay,
    MarginTransfer,
    PlaceBatch,
    PlaceOrder,
)
from tradehall.engine.engine import Engine, Result
from tradehall.engine.events import (
    BalanceChanged,
    DebtChanged,
    InterestAccrued,
    Liquidated,
    MarginAccountOpened,
    OrderChanged,
    TradeExecuted,
)
from tradehall.engine.margin import (
    HOUR_MS,
    INSURANCE_ACCOUNT,
    MARGIN_ACCOUNT_BASE,
    POOL_ACCOUNT,
    MarginAccount,
)
from tradehall.engine.markets import MarginSpec, MarketsSpec
from tradehall.engine.orders import (
    BUY,
    CANCELED,
    FILLED,
    GTC,
    IOC,
    LIMIT,
    MARKET,
    NEW,
    POST_ONLY,
    SELL,
)
from tradehall.engine.spot import FEE_ACCOUNT

SYMBOL = "BTCUSDT"
LOT = 100
"""BTC units in one lot."""
USDT = 10**8
BTC = 10**8
P50K = 5_000_000
"""50,000.00 USDT in ticks."""

SPOT_FUNDS = {"BTC": 10 * BTC, "ETH": 100 * 10**8, "USDT": 1_000_000 * USDT}
SPOT_ACCOUNTS = (1, 2, 3, 4)
POOL = {"BTC": 100 * BTC, "USDT": 10_000_000 * USDT}


def margin_problems(engine: Engine) -> list[str]:
    """Margin bookkeeping the ledger audit does not see."""
    margin = engine.margin
    problems = []
    for account_id, account in margin.accounts.items():
        pair = engine.markets.pairs[account.symbol]
        if account.id != account_id or margin.by_user.get((account.user, account.symbol)) is not (
            account
        ):
            problems.append(f"margin account {account_id} is indexed inconsistently")
        for asset, (principal, interest) in account.debts.items():
            if asset not in (pair.base, pair.quote):
                problems.append(f"margin account {account_id} owes {asset}, not of its pair")
            if principal < 0 or interest < 0:
                problems.append(f"margin account {account_id} {asset}: negative debt")
            if principal == interest == 0:
                problems.append(f"margin account {account_id} {asset}: empty debt entry kept")
    for account_id, asset in engine.ledger.balances:
        if account_id >= MARGIN_ACCOUNT_BASE:
            holder = margin.accounts.get(account_id)
            if holder is None:
                problems.append(f"balance of {account_id} that is no margin account")
                continue
            pair = engine.markets.pairs[holder.symbol]
            if asset not in (pair.base, pair.quote) and any(engine.ledger.get(account_id, asset)):
                problems.append(f"margin account {account_id} holds {asset}, not of its pair")
    if any(m.id >= margin.next_account_id for m in margin.accounts.values()):
        problems.append("margin account id counter behind an existing account")
    return problems


def margin_state(engine: Engine) -> dict[str, Any]:
    margin = engine.margin
    return {
        "accounts": {
            account_id: (
                account.user,
                account.symbol,
                {asset: tuple(debt) for asset, debt in account.debts.items()},
            )
            for account_id, account in margin.accounts.items()
        },
        "by_user": {key: account.id for key, account in margin.by_user.items()},
        "next_account_id": margin.next_account_id,
        "accrued_hour": margin.accrued_hour,
        "last_price": dict(engine.spot.last_price),
    }


class Rig:
    """An engine with margin on BTCUSDT, spot accounts 1-4 funded, a lending pool and an
    (optional) insurance fund."""

    def __init__(
        self,
        markets: MarketsSpec,
        state: Callable[[Engine], dict[str, Any]],
        *,
        spec: MarginSpec | None = None,
        pool: dict[str, int] | None = None,
        insurance: dict[str, int] | None = None,
    ) -> None:
        self.spec = spec or MarginSpec(SYMBOL)
        self.engine = Engine(
            dataclasses.replace(markets, margin={SYMBOL: self.spec}), check_invariants=True
        )
        self.pair = markets.pairs[SYMBOL]
        self._state = state
        self._tx = 0
        self.ts = 1_000
        for account in SPOT_ACCOUNTS:
            for asset, amount in SPOT_FUNDS.items():
                self.deposit(account, asset, amount)
        for asset, amount in (POOL if pool is None else pool).items():
            self.deposit(POOL_ACCOUNT, asset, amount)
        for asset, amount in (insurance or {}).items():
            self.deposit(INSURANCE_ACCOUNT, asset, amount)

    # --------------------------------------------------------------- commands

    def apply(self, cmd: Command) -> Result:
        return self.engine.apply(cmd)

    def deposit(self, account: int, asset: str, amount: int) -> None:
        self._tx += 1
        self.apply(Deposit(self.ts, account, asset, amount, f"rig-{self._tx}"))

    def order(
        self,
        account: int,
        side: str,
        price: int = 0,
        qty: int = 0,
        *,
        type: str = LIMIT,
        tif: str = GTC,
        quote_qty: int = 0,
        dry_run: bool = False,
    ) -> Result:
        return self.apply(
            PlaceOrder(
                self.ts, account, SYMBOL, side, type, price, qty, quote_qty, tif, "", dry_run
            )
        )

    def transfer(self, user: int, asset: str, amount: int, into: bool = True) -> Result:
        return self.apply(MarginTransfer(self.ts, user, SYMBOL, asset, amount, into))

    def open_margin(self, user: int, asset: str, amount: int) -> int:
        self.transfer(user, asset, amount)
        return self.margin_account(user).id

    def margin_account(self, user: int) -> MarginAccount:
        """User ``user``'s margin account on SYMBOL, which must exist."""
        account = self.engine.margin.account_of(user, SYMBOL)
        assert account is not None, f"user {user} has no margin account"
        return account

    def set_price(self, price: int, qty: int = 1_000) -> Result:
        """A spot trade between accounts 1 and 2 at ``price`` (account 2 takes a fresh ask)."""
        self.order(1, SELL, price, qty)
        result = self.order(2, BUY, price, qty, tif=IOC)
        trades = [e.trade for e in result.events if type(e) is TradeExecuted]
        assert trades and trades[0].price == price and trades[0].ask_account == 1
        assert self.engine.spot.last_price[SYMBOL] == price
        return result

    def reject(self, cmd: Command, code: Code = Code.INSUFFICIENT_BALANCE) -> Reject:
        """``cmd`` is refused with ``code`` and changes nothing at all."""
        before = self.snapshot()
        with pytest.raises(Reject) as info:
            self.apply(cmd)
        assert info.value.code == code, info.value.msg
        assert self.engine.ledger.events == []
        assert self.snapshot() == before
        return info.value

    # --------------------------------------------------------------- queries

    def snapshot(self) -> tuple[Any, ...]:
        """Everything the engine holds, margin included, deeply copied."""
        return (self._state(self.engine), margin_state(self.engine), self.engine.state_hash())

    def get(self, account: int, asset: str) -> tuple[int, int]:
        return self.engine.ledger.get(account, asset)

    def free(self, account: int, asset: str) -> int:
        return self.engine.ledger.free(account, asset)

    def debt(self, account_id: int, asset: str) -> tuple[int, int]:
        principal, interest = self.engine.margin.accounts[account_id].debts.get(asset, (0, 0))
        return principal, interest

    def debts(self, account_id: int) -> dict[str, tuple[int, int]]:
        account = self.engine.margin.accounts[account_id]
        return {asset: (p, i) for asset, (p, i) in account.debts.items()}


MakeRig = Callable[..., Rig]


@pytest.fixture
def rig_factory(
    markets: MarketsSpec, state: Callable[[Engine], dict[str, Any]]
) -> Iterator[MakeRig]:
    made: list[Rig] = []

    def make(**kwargs: Any) -> Rig:
        rig = Rig(markets, state, **kwargs)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        assert audit.check(rig.engine) == []
        assert margin_problems(rig.engine) == []


@pytest.fixture
def rig(rig_factory: MakeRig) -> Rig:
    return rig_factory()


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if type(e) is kind]


def long_position(rig: Rig, user: int = 3) -> int:
    """User ``user`` puts 1,000 USDT into margin and buys 0.1 BTC at 50,000 (taking account 1's
    ask), borrowing 4,000 USDT: exactly 5x. Leaves 9,990,000 BTC units (taker fee 10,000) and a
    debt of 400,000,000,000 USDT units. Returns the margin account id."""
    if SYMBOL not in rig.engine.spot.last_price:
        rig.set_price(P50K)
    account = rig.open_margin(user, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 100_000)
    result = rig.order(account, BUY, P50K, 100_000)
    assert result.reply.status == FILLED
    assert rig.get(account, "BTC") == (9_990_000, 0)
    assert rig.get(account, "USDT") == (0, 0)
    assert rig.debts(account) == {"USDT": (400_000_000_000, 0)}
    return account


def short_position(rig: Rig, user: int = 3) -> int:
    """User ``user`` puts 1,000 USDT into margin and sells 0.08 BTC at 50,000 (into account 2's
    bid), borrowing all of it: debts 4,000 USDT worth = exactly 5x. Leaves 499,600,000,000 USDT
    units (taker fee 400,000,000) and a debt of 8,000,000 BTC units."""
    if SYMBOL not in rig.engine.spot.last_price:
        rig.set_price(P50K)
    account = rig.open_margin(user, "USDT", 1_000 * USDT)
    rig.order(2, BUY, P50K, 80_000)
    result = rig.order(account, SELL, P50K, 80_000)
    assert result.reply.status == FILLED
    assert rig.get(account, "BTC") == (0, 0)
    assert rig.get(account, "USDT") == (499_600_000_000, 0)
    assert rig.debts(account) == {"BTC": (8_000_000, 0)}
    return account


# =========================================================================== accounts & transfers


def test_transfer_in_opens_one_account_per_user_and_pair(rig: Rig) -> None:
    result = rig.transfer(3, "USDT", 1_000 * USDT)
    account = rig.margin_account(3)
    assert account.id == MARGIN_ACCOUNT_BASE
    assert result.reply is account
    assert result.events == [
        MarginAccountOpened(MARGIN_ACCOUNT_BASE, 3, SYMBOL),
        BalanceChanged(3, "USDT", -1_000 * USDT, 0, 999_000 * USDT, 0, "margin_in", account.id),
        BalanceChanged(
            account.id, "USDT", 1_000 * USDT, 0, 1_000 * USDT, 0, "margin_in", account.id
        ),
    ]
    # A second transfer reuses the account; another user gets the next id.
    result = rig.transfer(3, "BTC", BTC)
    assert not of(result.events, MarginAccountOpened)
    assert rig.engine.margin.account_of(3, SYMBOL) is account
    assert rig.open_margin(4, "BTC", 1) == MARGIN_ACCOUNT_BASE + 1
    assert rig.engine.balances(account.id) == {
        "BTC": (BTC, 0),
        "ETH": (0, 0),
        "USDT": (1_000 * USDT, 0),
    }
    assert rig.free(3, "BTC") == 9 * BTC


def test_transfer_refusals(rig: Rig) -> None:
    rig.reject(MarginTransfer(rig.ts, 3, "ETHUSDT", "USDT", 1, True), Code.BAD_SYMBOL)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "ETH", 1, True), Code.BAD_PARAM)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 0, True), Code.BAD_PARAM)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", -5, True), Code.BAD_PARAM)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 1_000_000 * USDT + 1, True))
    # Out without an account, or more than is free.
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 1, False))
    account = rig.open_margin(3, "USDT", 100 * USDT)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 100 * USDT + 1, False))
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "BTC", 1, False))
    # Locked funds are not free: a resting order holds 60 USDT.
    rig.set_price(P50K)
    rig.order(account, BUY, 4_000_000, 1_500)
    assert rig.get(account, "USDT") == (40 * USDT, 60 * USDT)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 40 * USDT + 1, False))
    # Without debt, all that is free may leave.
    result = rig.transfer(3, "USDT", 40 * USDT, into=False)
    assert result.events == [
        BalanceChanged(account, "USDT", -40 * USDT, 0, 0, 60 * USDT, "margin_out", account),
        BalanceChanged(3, "USDT", 40 * USDT, 0, 999_940 * USDT, 0, "margin_out", account),
    ]


def test_margin_account_trades_only_its_own_pair(rig: Rig) -> None:
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.reject(PlaceOrder(rig.ts, account, "ETHUSDT", BUY, LIMIT, 300_000, 1_000), Code.BAD_SYMBOL)
    # An id in the margin range that no account has.
    rig.reject(PlaceOrder(rig.ts, account + 7, SYMBOL, BUY, LIMIT, P50K, 1_000), Code.BAD_SYMBOL)


def test_margin_account_cannot_batch_on_another_pair(rig: Rig) -> None:
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    order = PlaceOrder(rig.ts, account, "ETHUSDT", BUY, LIMIT, 300_000, 1_000)
    rig.reject(PlaceBatch(rig.ts, account, "ETHUSDT", (order,)), Code.BAD_SYMBOL)


def test_transfer_out_keeps_the_initial_level(rig: Rig) -> None:
    account = long_position(rig)
    # At 50,000 the account holds 99,900 lots = 499,500,000,000 and owes 400,000,000,000:
    # below 1.25 already (the fee), so nothing may leave.
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "BTC", 1, False))
    rig.transfer(3, "USDT", 100 * USDT)  # assets 509,500,000,000
    # 1.25 x 400,000,000,000 = 500,000,000,000: 9,500,000,000 USDT units may leave, no more.
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 9_500_000_001, False))
    rig.transfer(3, "USDT", 9_500_000_000, into=False)
    assert rig.get(account, "USDT") == (500_000_000, 0)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "USDT", 1, False))
    # Base is valued at the last price: 190,000 BTC units are worth 9,500,000,000.
    rig.transfer(3, "USDT", 9_500_000_000)
    rig.reject(MarginTransfer(rig.ts, 3, SYMBOL, "BTC", 190_001, False))
    result = rig.transfer(3, "BTC", 190_000, into=False)
    assert not of(result.events, DebtChanged)
    assert rig.get(account, "BTC") == (9_800_000, 0)
    assert rig.free(3, "BTC") == 10 * BTC + 190_000
    assert rig.debts(account) == {"USDT": (400_000_000_000, 0)}


# =========================================================================== auto-borrow


def test_borrow_on_order_exactly_at_max_leverage(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 100_000)
    result = rig.order(account, BUY, P50K, 100_000)
    order_id = result.reply.id
    loan = 400_000_000_000
    assert result.events[:4] == [
        BalanceChanged(POOL_ACCOUNT, "USDT", -loan, 0, POOL["USDT"] - loan, 0, "loan", order_id),
        BalanceChanged(account, "USDT", loan, 0, 500_000_000_000, 0, "loan", order_id),
        DebtChanged(account, "USDT", loan, 0, "borrow", order_id),
        BalanceChanged(
            account, "USDT", -500_000_000_000, 500_000_000_000, 0, 500_000_000_000, "hold", order_id
        ),
    ]
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", loan, 0, "borrow", order_id)
    ]
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - loan, 0)
    assert rig.get(POOL_ACCOUNT, "BTC") == (POOL["BTC"], 0)
    assert rig.engine.balances(account) == {"BTC": (9_990_000, 0), "ETH": (0, 0), "USDT": (0, 0)}
    assert rig.debts(account) == {"USDT": (loan, 0)}
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert (trade.bid_account, trade.ask_account, trade.quote, trade.bid_fee) == (
        account,
        1,
        500_000_000_000,
        10_000,
    )


def test_short_borrows_base(rig: Rig) -> None:
    account = short_position(rig)
    assert rig.engine.margin.accounts[account].user == 3
    assert rig.get(POOL_ACCOUNT, "BTC") == (POOL["BTC"] - 8_000_000, 0)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"], 0)
    # Maker fee of account 1's ask in the price-setting trade, taker fee of the short sale.
    assert rig.get(FEE_ACCOUNT, "USDT") == (4_000_000 + 400_000_000, 0)


def test_borrow_only_the_shortfall(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.transfer(3, "BTC", 1_000_000)  # 0.01 BTC, worth 500 USDT
    # A resting sell of 0.03 BTC at 60,000: 2,000,000 BTC units short -> borrow them.
    result = rig.order(account, SELL, 6_000_000, 30_000)
    assert result.reply.status == NEW
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "BTC", 2_000_000, 0, "borrow", result.reply.id)
    ]
    assert rig.get(account, "BTC") == (0, 3_000_000)
    # An order covered by the free balance borrows nothing.
    result = rig.order(account, BUY, 4_000_000, 1_000)
    assert not of(result.events, DebtChanged)
    assert rig.debts(account) == {"BTC": (2_000_000, 0)}


def test_leverage_limit_rejects_and_changes_nothing(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 200_000)
    # One lot more than 5x: borrowing 400,005,000,000 against 1,000 USDT.
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 100_001))
    # A MARKET BUY one unit over the limit, a sell borrowing one lot too many.
    rig.reject(
        PlaceOrder(rig.ts, account, SYMBOL, BUY, MARKET, quote_qty=500_000_000_001),
    )
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, SELL, LIMIT, P50K, 80_001))
    # Exactly at the limit both work (dry run).
    assert rig.order(account, SELL, P50K, 80_000, dry_run=True).reply is None
    assert (
        rig.order(account, BUY, quote_qty=500_000_000_000, type=MARKET, dry_run=True).reply is None
    )
    # After borrowing to the limit, any further borrowing is refused.
    rig.order(account, BUY, P50K, 100_000)
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 1_000))
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, SELL, LIMIT, P50K, 100_000))
    # ... but an order within the free balance needs no loan.
    result = rig.order(account, SELL, 6_000_000, 99_900)
    assert result.reply.status == NEW
    assert rig.debts(account) == {"USDT": (400_000_000_000, 0)}


def test_other_leverage_setting(rig_factory: MakeRig) -> None:
    # 3x binds before the initial level (1.25 allows debts up to 4x the equity).
    rig = rig_factory(spec=MarginSpec(SYMBOL, max_leverage=3))
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    # 3x: at most 2,000 USDT of debt.
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 60_001))
    rig.order(account, BUY, P50K, 60_000)
    assert rig.debts(account) == {"USDT": (200_000_000_000, 0)}


def test_the_initial_level_refusal_names_the_level(rig_factory: MakeRig) -> None:
    """10x with an initial level of 1.12: a loan within 10x (debts up to 9x the equity) can
    still take the ratio below 1.12, and the refusal says which rule it broke (it said
    "would exceed 10x leverage": the margin audit)."""
    rig = rig_factory(spec=MarginSpec(SYMBOL, max_leverage=10, initial_level=11_200))
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 1_000_000)
    # 0.192 BTC for 9,600 USDT, 8,600 of it borrowed (checked as held: assets 9,600, debts
    # 8,600, equity 1,000): under 10x (debts up to 9x the equity), ratio 1.1163.
    refused = rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 192_000))
    assert refused.msg == (
        "insufficient margin: borrowing would take the account's risk ratio below its initial"
        " level 1.12"
    )
    # 0.202 BTC, 9,100 borrowed: past 10x (9 x 1,000), and that is what is named.
    refused = rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 202_000))
    assert refused.msg == "insufficient margin: borrowing would exceed 10x leverage"


def test_pool_too_small_rejects(rig_factory: MakeRig) -> None:
    rig = rig_factory(pool={"USDT": 399_999_999_999, "BTC": 7_999_999})
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 100_000))
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, SELL, LIMIT, P50K, 80_000))
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, SELL, LIMIT, P50K, 80_000, dry_run=True))
    # What the pool holds can be lent: all of it.
    rig.order(account, BUY, P50K, 99_999)
    assert rig.debts(account) == {"USDT": (399_995_000_000, 0)}
    rig.deposit(POOL_ACCOUNT, "USDT", 1)
    assert rig.get(POOL_ACCOUNT, "USDT") == (4_999_999 + 1, 0)


def test_empty_pool_rejects(rig_factory: MakeRig) -> None:
    rig = rig_factory(pool={})
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 20_001))
    rig.order(account, BUY, P50K, 20_000)  # exactly the free balance: no loan
    assert rig.debts(account) == {}


def test_no_price_no_loan(rig: Rig) -> None:
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 20_001))
    rig.order(account, BUY, P50K, 20_000)


def test_dry_run_borrows_nothing(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 100_000)
    before = rig.snapshot()
    result = rig.order(account, BUY, P50K, 100_000, dry_run=True)
    assert result.reply is None and result.events == []
    assert rig.snapshot() == before
    rig.reject(PlaceOrder(rig.ts, account, SYMBOL, BUY, LIMIT, P50K, 100_001, dry_run=True))


def test_loan_is_returned_when_a_post_only_order_is_rejected(rig: Rig) -> None:
    """The loan is taken when the order is accepted; a POST_ONLY that would take is then
    rejected by the book, and the loan goes straight back: nothing is left behind."""
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    rig.order(1, SELL, P50K, 100_000)
    result = rig.order(account, BUY, P50K, 40_000, tif=POST_ONLY)
    assert result.reply.status == "REJECTED"
    assert of(result.events, DebtChanged)[-1].reason == "loan_return"
    assert rig.debts(account) == {}
    assert rig.get(account, "USDT") == (100_000_000_000, 0)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"], 0)


# =========================================================================== interest


def test_interest_accrues_hourly_with_ceiling(rig: Rig) -> None:
    first = rig.apply(AccrueInterest(0))
    assert first.reply == 0 and first.events == [InterestAccrued(0)]
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT + 1)
    rig.order(1, SELL, P50K, 100_000)
    rig.order(account, BUY, P50K, 100_000)
    principal = 399_999_999_999
    assert rig.debts(account) == {"USDT": (principal, 0)}
    hourly = 4_000_000  # ceil(399,999,999,999 x 1,000 / 1e8) = ceil(3,999,999.99999)
    assert -(-principal * 1_000 // 10**8) == hourly

    result = rig.apply(AccrueInterest(HOUR_MS))
    assert result.reply == 1
    assert result.events == [
        DebtChanged(account, "USDT", principal, hourly, "interest", 1),
        InterestAccrued(1),
    ]
    # Same hour again: nothing.
    for ts in (HOUR_MS, HOUR_MS + 1, 2 * HOUR_MS - 1):
        again = rig.apply(AccrueInterest(ts))
        assert again.reply == 0 and again.events == []
    assert rig.debts(account) == {"USDT": (principal, hourly)}
    # An earlier time changes nothing either.
    assert rig.apply(AccrueInterest(0)).events == []
    # Three hours missed: charged together, each on the principal (no compounding).
    result = rig.apply(AccrueInterest(4 * HOUR_MS + 123))
    assert result.reply == 3
    assert result.events == [
        DebtChanged(account, "USDT", principal, 4 * hourly, "interest", 4),
        InterestAccrued(4),
    ]
    assert rig.engine.margin.accrued_hour == 4
    # Interest moves no money: the pool is paid when it is repaid.
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - principal, 0)
    assert rig.get(account, "USDT") == (0, 0)


def test_interest_per_asset_rates(rig_factory: MakeRig) -> None:
    rig = rig_factory(spec=MarginSpec(SYMBOL, base_hourly_rate=3, quote_hourly_rate=0))
    rig.apply(AccrueInterest(0))
    account = short_position(rig)
    long = long_position(rig, user=4)
    result = rig.apply(AccrueInterest(2 * HOUR_MS))
    # Base: ceil(8,000,000 x 3 / 1e8) = 1 per hour. Quote: rate 0, nothing (and no event).
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "BTC", 8_000_000, 2, "interest", 2)
    ]
    assert rig.debts(account) == {"BTC": (8_000_000, 2)}
    assert rig.debts(long) == {"USDT": (400_000_000_000, 0)}


def test_interest_can_trigger_liquidation(rig_factory: MakeRig) -> None:
    # 1 % an hour on quote.
    rig = rig_factory(spec=MarginSpec(SYMBOL, quote_hourly_rate=1_000_000))
    rig.apply(AccrueInterest(0))
    account = long_position(rig)
    rig.order(2, BUY, P50K, 200_000)  # a bid to liquidate into
    # Assets 499,500,000,000; liquidation once debts >= 454,090,909,091, i.e. after 14 hours
    # of 4,000,000,000 (456,000,000,000); after 13 (452,000,000,000) it still stands.
    result = rig.apply(AccrueInterest(13 * HOUR_MS))
    assert not of(result.events, Liquidated)
    assert rig.debts(account) == {"USDT": (400_000_000_000, 52_000_000_000)}
    result = rig.apply(AccrueInterest(14 * HOUR_MS))
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated == Liquidated(account, SYMBOL, 0, 0, 14 * HOUR_MS)
    assert rig.debts(account) == {}
    # Sold 99,900 lots at 50,000: 499,500,000,000 - taker fee 499,500,000; repaid
    # 456,000,000,000 (interest first), the rest stays.
    assert rig.get(account, "USDT") == (499_500_000_000 - 499_500_000 - 456_000_000_000, 0)
    assert rig.get(account, "BTC") == (0, 0)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] + 56_000_000_000, 0)


def test_interest_charged_now_is_that_many_hourly_accruals_and_leaves_the_schedule(
    rig: Rig,
) -> None:
    rig.apply(AccrueInterest(0))
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT + 1)
    rig.order(1, SELL, P50K, 100_000)
    rig.order(account, BUY, P50K, 100_000)
    principal, hourly = 399_999_999_999, 4_000_000
    result = rig.apply(ChargeInterest(HOUR_MS // 2, 24))
    assert result.reply == [(account, SYMBOL, "USDT", 24 * hourly)]
    assert result.events == [DebtChanged(account, "USDT", principal, 24 * hourly, "interest", 0)]
    assert rig.engine.margin.accrued_hour == 0  # the hourly accrual goes on as before
    assert rig.apply(AccrueInterest(HOUR_MS)).reply == 1
    assert rig.debts(account) == {"USDT": (principal, 25 * hourly)}
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - principal, 0)  # no money moved


@pytest.mark.parametrize("hours", [0, -1, 8_761])
def test_interest_charged_now_refuses_hours_out_of_range_and_changes_nothing(
    rig: Rig, hours: int
) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT + 1)
    rig.order(1, SELL, P50K, 100_000)
    rig.order(account, BUY, P50K, 100_000)
    before = rig.debts(account)
    with pytest.raises(Reject) as refused:
        rig.apply(ChargeInterest(0, hours))
    assert refused.value.code == Code.BAD_PARAM
    assert rig.debts(account) == before


def test_interest_charged_now_can_trigger_liquidation(rig_factory: MakeRig) -> None:
    rig = rig_factory(spec=MarginSpec(SYMBOL, quote_hourly_rate=1_000_000))  # 1 % an hour
    rig.apply(AccrueInterest(0))
    account = long_position(rig)
    rig.order(2, BUY, P50K, 200_000)
    assert not of(rig.apply(ChargeInterest(1, 13)).events, Liquidated)
    (liquidated,) = of(rig.apply(ChargeInterest(2, 1)).events, Liquidated)
    assert liquidated.account == account
    assert rig.debts(account) == {}


# =========================================================================== repayment


def test_margin_repay_interest_first(rig_factory: MakeRig) -> None:
    rig = rig_factory(spec=MarginSpec(SYMBOL, quote_hourly_rate=1_000))
    rig.apply(AccrueInterest(0))
    account = long_position(rig)
    rig.apply(AccrueInterest(3 * HOUR_MS))
    assert rig.debts(account) == {"USDT": (400_000_000_000, 12_000_000)}
    rig.transfer(3, "USDT", 10 * USDT)
    # More than is free: refused.
    rig.reject(MarginRepay(rig.ts, 3, SYMBOL, "USDT", 10 * USDT + 1))
    rig.reject(MarginRepay(rig.ts, 3, SYMBOL, "USDT", 0), Code.BAD_PARAM)
    rig.reject(MarginRepay(rig.ts, 4, SYMBOL, "USDT", 1), Code.BAD_PARAM)  # no account
    # Part of the interest only.
    result = rig.apply(MarginRepay(rig.ts, 3, SYMBOL, "USDT", 5_000_000))
    assert result.reply == 5_000_000
    assert result.events == [
        BalanceChanged(account, "USDT", -5_000_000, 0, 995_000_000, 0, "repay", account),
        BalanceChanged(
            POOL_ACCOUNT,
            "USDT",
            5_000_000,
            0,
            POOL["USDT"] - 400_000_000_000 + 5_000_000,
            0,
            "repay",
            account,
        ),
        DebtChanged(account, "USDT", 400_000_000_000, 7_000_000, "repay", account),
    ]
    # The rest of the interest, then principal.
    result = rig.apply(MarginRepay(rig.ts, 3, SYMBOL, "USDT", 107_000_000))
    assert result.reply == 107_000_000
    assert rig.debts(account) == {"USDT": (399_900_000_000, 0)}
    assert rig.get(account, "USDT") == (888_000_000, 0)
    # Nothing owed in BTC: repays nothing.
    assert rig.apply(MarginRepay(rig.ts, 3, SYMBOL, "BTC", 1_000)).reply == 0
    assert rig.get(account, "BTC") == (9_990_000, 0)
    # More than owed: only the debt is taken, the entry disappears.
    rig.transfer(3, "USDT", 400_000 * USDT)
    result = rig.apply(MarginRepay(rig.ts, 3, SYMBOL, "USDT", 400_000 * USDT))
    assert result.reply == 399_900_000_000
    assert of(result.events, DebtChanged) == [DebtChanged(account, "USDT", 0, 0, "repay", account)]
    assert rig.debts(account) == {}
    assert rig.get(account, "USDT") == (888_000_000 + 400_000 * USDT - 399_900_000_000, 0)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] + 12_000_000, 0)
    # Without debt, everything may leave.
    rig.transfer(3, "BTC", 9_990_000, into=False)


def test_fill_repays_interest_first_then_principal(rig_factory: MakeRig) -> None:
    rig = rig_factory()
    rig.apply(AccrueInterest(0))
    account = long_position(rig)
    rig.apply(AccrueInterest(3 * HOUR_MS))
    assert rig.debts(account) == {"USDT": (400_000_000_000, 12_000_000)}
    pool_before = rig.free(POOL_ACCOUNT, "USDT")
    rig.order(2, BUY, P50K, 50_000)
    # Sell 0.01 BTC into the bid: 50,000,000,000 - taker fee 50,000,000.
    result = rig.order(account, SELL, P50K, 10_000)
    brought = 49_950_000_000
    repay = [e for e in result.events if type(e) is BalanceChanged and e.reason == "repay"]
    assert repay == [
        BalanceChanged(account, "USDT", -brought, 0, 0, 0, "repay", account),
        BalanceChanged(
            POOL_ACCOUNT, "USDT", brought, 0, pool_before + brought, 0, "repay", account
        ),
    ]
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", 400_000_000_000 - (brought - 12_000_000), 0, "repay", account)
    ]
    assert rig.debts(account) == {"USDT": (350_062_000_000, 0)}
    assert rig.get(account, "USDT") == (0, 0)
    assert rig.get(account, "BTC") == (8_990_000, 0)


def test_fill_smaller_than_interest_repays_interest_only(rig_factory: MakeRig) -> None:
    rig = rig_factory(spec=MarginSpec(SYMBOL, quote_hourly_rate=1_000_000))  # 1 % an hour
    rig.apply(AccrueInterest(0))
    account = long_position(rig)
    rig.apply(AccrueInterest(2 * HOUR_MS))
    assert rig.debts(account) == {"USDT": (400_000_000_000, 8_000_000_000)}
    rig.order(2, BUY, P50K, 2_000)
    result = rig.order(account, SELL, P50K, 1_000)  # brings 5,000,000,000 - 5,000,000
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", 400_000_000_000, 3_005_000_000, "repay", account)
    ]
    assert rig.get(account, "USDT") == (0, 0)
    result = rig.order(account, SELL, P50K, 1_000)
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", 398_010_000_000, 0, "repay", account)
    ]
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - 400_000_000_000 + 9_990_000_000, 0)


def test_maker_fill_repays_and_repays_only_its_asset(rig: Rig) -> None:
    account = short_position(rig)
    # The short rests a bid for 0.05 BTC at 49,000; account 1 sells into it.
    bid = rig.order(account, BUY, 4_900_000, 50_000).reply
    assert rig.get(account, "USDT") == (499_600_000_000 - 245_000_000_000, 245_000_000_000)
    assert rig.debts(account) == {"BTC": (8_000_000, 0)}
    result = rig.order(1, SELL, 4_900_000, 50_000)
    # The maker receives 5,000,000 - maker fee 4,000 BTC units: all of it repays.
    (debt,) = of(result.events, DebtChanged)
    assert debt == DebtChanged(account, "BTC", 3_004_000, 0, "repay", account)
    assert rig.get(account, "BTC") == (0, 0)
    assert rig.get(account, "USDT") == (254_600_000_000, 0)
    assert rig.get(POOL_ACCOUNT, "BTC") == (POOL["BTC"] - 3_004_000, 0)
    order_states = [e.order for e in of(result.events, OrderChanged) if e.order.id == bid.id]
    assert order_states[-1].status == FILLED


# =========================================================================== matching


def test_margin_and_spot_orders_match_each_other(rig: Rig) -> None:
    rig.set_price(P50K)
    m3 = rig.open_margin(3, "USDT", 1_000 * USDT)
    m4 = rig.open_margin(4, "BTC", 10_000_000)
    # A margin ask (no loan needed) taken by a spot buyer; the margin account is the maker.
    rig.order(m4, SELL, 5_100_000, 20_000)
    result = rig.order(1, BUY, 5_100_000, 20_000)
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert (trade.bid_account, trade.ask_account, trade.quote) == (1, m4, 102_000_000_000)
    assert rig.get(m4, "USDT") == (102_000_000_000 - 81_600_000, 0)
    assert rig.get(m4, "BTC") == (8_000_000, 0)
    # A spot ask taken by a margin buyer that borrows.
    rig.order(2, SELL, 5_100_000, 50_000)
    result = rig.order(m3, BUY, 5_100_000, 50_000)
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert (trade.bid_account, trade.ask_account) == (m3, 2)
    assert rig.debts(m3) == {"USDT": (155_000_000_000, 0)}
    assert rig.get(m3, "BTC") == (4_995_000, 0)
    # Margin against margin, both borrowing: m4 sells 9,000,000 BTC units holding 8,000,000.
    result = rig.order(m4, SELL, 5_100_000, 90_000)
    assert result.reply.status == NEW
    assert rig.debts(m4) == {"BTC": (1_000_000, 0)}
    result = rig.order(m3, BUY, 5_100_000, 10_000)
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert (trade.bid_account, trade.ask_account, trade.qty) == (m3, m4, 10_000)
    assert rig.debts(m3) == {"USDT": (155_000_000_000 + 51_000_000_000, 0)}
    # m4 received quote and owes base: nothing to repay.
    assert rig.debts(m4) == {"BTC": (1_000_000, 0)}
    assert rig.get(m4, "USDT") == (
        102_000_000_000 - 81_600_000 + 51_000_000_000 - 40_800_000,
        0,
    )


def test_self_trade_prevention_is_per_account(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    # User 3's spot ask and user 3's margin bid are different accounts: they trade.
    ask = rig.order(3, SELL, P50K, 10_000).reply
    result = rig.order(account, BUY, P50K, 10_000)
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert (trade.bid_account, trade.ask_account, trade.ask_order) == (account, 3, ask.id)
    assert rig.get(account, "BTC") == (999_000, 0)
    # The margin account's own resting ask is expired by its own taker bid.
    own = rig.order(account, SELL, 5_010_000, 1_000).reply
    rig.order(2, SELL, 5_020_000, 1_000)
    result = rig.order(account, BUY, 5_020_000, 1_000)
    states = {e.order.id: e.order.status for e in of(result.events, OrderChanged)}
    assert states[own.id] == CANCELED
    (trade,) = [e.trade for e in result.events if type(e) is TradeExecuted]
    assert trade.ask_account == 2 and trade.price == 5_020_000


def test_cancel_margin_order_keeps_the_loan(rig: Rig) -> None:
    rig.set_price(P50K)
    account = rig.open_margin(3, "USDT", 1_000 * USDT)
    order = rig.order(account, BUY, 4_000_000, 100_000).reply  # 4,000 USDT, borrows 3,000
    assert rig.debts(account) == {"USDT": (300_000_000_000, 0)}
    rig.apply(CancelOrder(rig.ts, account, SYMBOL, order.id))
    assert rig.get(account, "USDT") == (400_000_000_000, 0)
    assert rig.debts(account) == {"USDT": (300_000_000_000, 0)}


# =========================================================================== liquidation


def test_liquidation_of_a_long_after_a_fall(rig: Rig) -> None:
    account = long_position(rig)
    # A resting ask of the account's (cancelled by the liquidation).
    ask = rig.order(account, SELL, 6_000_000, 10_000).reply
    rig.order(2, BUY, 4_400_000, 300_000)  # the bid that will absorb the liquidation
    fees_before = rig.free(FEE_ACCOUNT, "USDT")
    # At 44,000: assets 99,900 x 4,400,000 = 439,560,000,000 < 1.1 x 400,000,000,000.
    rig.ts = 5_000
    result = rig.order(1, SELL, 4_400_000, 1_000, tif=IOC)
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated == Liquidated(account, SYMBOL, 0, 0, 5_000)
    cancelled = [e.order for e in of(result.events, OrderChanged) if e.order.id == ask.id]
    assert [o.status for o in cancelled] == [CANCELED]
    sold = [e.trade for e in of(result.events, TradeExecuted) if e.trade.ask_account == account]
    assert [(t.price, t.qty, t.bid_account, t.ask_fee) for t in sold] == [
        (4_400_000, 99_900, 2, 439_560_000)
    ]
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", 0, 0, "liquidation", account)
    ]
    assert rig.debts(account) == {}
    assert rig.engine.open_orders(account) == []
    # 439,560,000,000 - fee 439,560,000 - 400,000,000,000 stays with the account.
    assert rig.engine.balances(account) == {
        "BTC": (0, 0),
        "ETH": (0, 0),
        "USDT": (39_120_440_000, 0),
    }
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"], 0)
    # Taker fees: the liquidation's sale, and account 1's sale that moved the price.
    assert rig.free(FEE_ACCOUNT, "USDT") - fees_before == 439_560_000 + 4_400_000
    # What is left may leave; nothing is owed.
    rig.transfer(3, "USDT", 39_120_440_000, into=False)


def liquidation_ratio_rig(rig: Rig, price: int) -> tuple[int, Result]:
    account = long_position(rig)
    rig.order(2, BUY, 4_000_000, 300_000)
    rig.order(2, BUY, price, 1_000)
    return account, rig.order(1, SELL, price, 1_000)


def test_liquidated_at_or_below_the_level(rig: Rig) -> None:
    # At 44,044.04 the risk ratio is 439,999,959,600 / 400,000,000,000 < 1.10.
    account, result = liquidation_ratio_rig(rig, 4_404_404)
    assert len(of(result.events, Liquidated)) == 1
    assert rig.debts(account) == {}


def test_not_liquidated_well_above_the_level(rig: Rig) -> None:
    # At 44,050.00: 440,059,500,000 / 400,000,000,000 = 1.10014875.
    account, result = liquidation_ratio_rig(rig, 4_405_000)
    assert not of(result.events, Liquidated)
    assert rig.debts(account) == {"USDT": (400_000_000_000, 0)}


def test_not_liquidated_just_above_the_level(rig: Rig) -> None:
    # At 44,044.05: 99,900 x 4,404,405 = 440,000,059,500 > 1.1 x 400,000,000,000.
    account, result = liquidation_ratio_rig(rig, 4_404_405)
    assert not of(result.events, Liquidated)
    assert rig.debts(account) == {"USDT": (400_000_000_000, 0)}


def test_liquidation_of_a_short_after_a_rise(rig: Rig) -> None:
    account = short_position(rig)
    bid = rig.order(account, BUY, 4_000_000, 1_000).reply  # cancelled by the liquidation
    rig.order(1, SELL, 5_700_000, 1_000_000)  # the ask that will absorb the liquidation
    # At 57,000: debts 8,000,000 x 57,000 = 456,000,000,000; assets 499,600,000,000: 1.0956.
    rig.ts = 7_000
    result = rig.order(2, BUY, 5_700_000, 1_000, tif=IOC)
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated == Liquidated(account, SYMBOL, 0, 0, 7_000)
    cancelled = [e.order for e in of(result.events, OrderChanged) if e.order.id == bid.id]
    assert [o.status for o in cancelled] == [CANCELED]
    bought = [e.trade for e in of(result.events, TradeExecuted) if e.trade.bid_account == account]
    assert bought and all(t.price == 5_700_000 and t.ask_account == 1 for t in bought)
    assert of(result.events, DebtChanged)[-1] == DebtChanged(
        account, "BTC", 0, 0, "liquidation", account
    )
    assert rig.debts(account) == {}
    assert rig.engine.open_orders(account) == []
    assert rig.get(POOL_ACCOUNT, "BTC") == (POOL["BTC"], 0)
    assert rig.get(INSURANCE_ACCOUNT, "BTC") == (0, 0)
    # Something is left (the position was profitable enough to close), and it is free.
    base, quote = rig.free(account, "BTC"), rig.free(account, "USDT")
    assert base * 5_700_000 // LOT + quote > 0
    assert rig.get(account, "BTC")[1] == rig.get(account, "USDT")[1] == 0


def test_liquidating_a_short_buys_only_what_repays_the_debt(rig: Rig) -> None:
    account = short_position(rig)
    rig.order(1, SELL, 5_700_000, 1_000_000)
    rig.order(2, BUY, 5_700_000, 1_000, tif=IOC)
    assert rig.debts(account) == {}
    # 8,000,000 BTC units + taker fee need 80,081 lots (456,461,700,000 USDT units): the rest
    # of the 499,600,000,000 stays in USDT; at most dust of BTC is left over.
    assert rig.free(account, "BTC") < LOT
    assert rig.free(account, "USDT") >= 499_600_000_000 - 80_082 * 5_700_000


def test_liquidation_deficit_paid_by_the_insurance_fund(rig_factory: MakeRig) -> None:
    rig = rig_factory(insurance={"USDT": 1_000 * USDT})
    account = long_position(rig)
    rig.order(2, BUY, 3_800_000, 200_000)
    rig.ts = 9_000
    result = rig.order(1, SELL, qty=1_000, type=MARKET)  # the price falls to 38,000
    # Sold 99,900 lots at 38,000: 379,620,000,000 - fee 379,620,000 = 379,240,380,000.
    deficit = 400_000_000_000 - 379_240_380_000
    assert deficit == 20_759_620_000
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated == Liquidated(account, SYMBOL, deficit, 0, 9_000)
    assert of(result.events, DebtChanged) == [
        DebtChanged(account, "USDT", 20_759_620_000, 0, "liquidation", account),
        DebtChanged(account, "USDT", 0, 0, "insured", account),
    ]
    assert rig.get(INSURANCE_ACCOUNT, "USDT") == (1_000 * USDT - deficit, 0)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"], 0)  # made whole
    assert rig.engine.balances(account) == {"BTC": (0, 0), "ETH": (0, 0), "USDT": (0, 0)}
    assert rig.debts(account) == {}


def test_liquidation_deficit_larger_than_the_fund_is_written_off(rig_factory: MakeRig) -> None:
    rig = rig_factory(insurance={"USDT": 100 * USDT, "BTC": BTC})
    account = long_position(rig)
    rig.order(2, BUY, 3_800_000, 200_000)
    rig.ts = 9_000
    result = rig.order(1, SELL, qty=1_000, type=MARKET)
    deficit = 20_759_620_000
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated == Liquidated(account, SYMBOL, 100 * USDT, deficit - 100 * USDT, 9_000)
    assert of(result.events, DebtChanged)[-1] == DebtChanged(
        account, "USDT", 0, 0, "written_off", account
    )
    assert rig.get(INSURANCE_ACCOUNT, "USDT") == (0, 0)
    assert rig.get(INSURANCE_ACCOUNT, "BTC") == (BTC, 0)  # the fund pays in the asset owed
    # The pool lost what nobody paid.
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - (deficit - 100 * USDT), 0)
    assert rig.debts(account) == {}
    assert rig.engine.balances(account) == {"BTC": (0, 0), "ETH": (0, 0), "USDT": (0, 0)}


def test_deficit_with_an_empty_fund_is_all_written_off(rig: Rig) -> None:
    account = long_position(rig)
    rig.order(2, BUY, 3_800_000, 200_000)
    result = rig.order(1, SELL, qty=1_000, type=MARKET)
    (liquidated,) = of(result.events, Liquidated)
    assert (liquidated.deficit_covered, liquidated.written_off) == (0, 20_759_620_000)
    assert rig.get(POOL_ACCOUNT, "USDT") == (POOL["USDT"] - 20_759_620_000, 0)
    assert rig.debts(account) == {}
    assert rig.engine.balances(account) == {"BTC": (0, 0), "ETH": (0, 0), "USDT": (0, 0)}


def test_fund_pays_no_debt_while_the_account_keeps_assets(rig_factory: MakeRig) -> None:
    rig = rig_factory(insurance={"USDT": 10_000 * USDT})
    account = long_position(rig)
    rig.order(2, BUY, 4_400_000, 11_000)  # too little depth: 10,000 lots after the trigger
    result = rig.order(1, SELL, 4_400_000, 1_000)
    # The forced sale takes what the book offers; the account still holds BTC, so nothing is
    # covered and nothing is written off yet: the debt stays and no Liquidated is reported.
    assert of(result.events, Liquidated) == []
    assert rig.free(account, "BTC") >= LOT
    assert rig.get(INSURANCE_ACCOUNT, "USDT") == (10_000 * USDT, 0)
    assert rig.debts(account)
    # Liquidity arrives; the next trade on the pair resumes the liquidation.
    rig.order(2, BUY, 4_300_000, 200_000)
    result = rig.order(3, SELL, 4_300_000, 1_000)
    (liquidated,) = of(result.events, Liquidated)
    assert liquidated.account == account
    assert rig.free(account, "BTC") < LOT


def test_liquidation_by_interest_fills_repay_the_counterparty(rig_factory: MakeRig) -> None:
    rig = rig_factory(spec=MarginSpec(SYMBOL, quote_hourly_rate=1_000_000, base_hourly_rate=0))
    rig.apply(AccrueInterest(0))
    long = long_position(rig, user=3)
    short = short_position(rig, user=4)
    # The short rests a bid at 50,000 for 0.1 BTC (holds 500,000,000,000 of its USDT).
    rig.transfer(4, "USDT", 100 * USDT)
    rig.order(short, BUY, P50K, 100_000)
    result = rig.apply(AccrueInterest(14 * HOUR_MS))
    assert len(of(result.events, Liquidated)) == 1
    # The short bought the long's 99,900 lots; 9,982,008 BTC units came in (maker fee 7,992).
    trades = [e.trade for e in of(result.events, TradeExecuted)]
    assert [(t.bid_account, t.ask_account, t.qty) for t in trades] == [(short, long, 99_900)]
    assert "BTC" not in rig.debts(short)  # repaid by the fill, as after any other fill


def test_liquidation_triggered_by_a_liquidation(rig: Rig) -> None:
    """Two longs; the first one's forced sale pushes the price down onto the second."""
    first = long_position(rig, user=3)
    second = rig.open_margin(4, "USDT", 2_000 * USDT)
    rig.order(1, SELL, P50K, 100_000)
    rig.order(second, BUY, P50K, 100_000)  # 3,000 USDT debt: liquidated below 33,033
    assert rig.debts(second) == {"USDT": (300_000_000_000, 0)}
    rig.order(2, BUY, 4_400_000, 1_000)
    rig.order(2, BUY, 3_000_000, 300_000)
    result = rig.order(1, SELL, 4_400_000, 1_000)
    assert [e.account for e in of(result.events, Liquidated)] == [first, second]
    assert rig.debts(first) == rig.debts(second) == {}


def test_a_waiting_liquidation_ends_when_a_transfer_in_rescues_the_account(rig: Rig) -> None:
    """The margin audit's case: an account lifted back above its liquidation level while its
    liquidation waited for liquidity (a transfer in, as margin.md invites) stayed frozen, and
    a replay of the journal disagreed with the engine about it. It trades again at once."""
    account = long_position(rig)
    rig.set_price(4_400_000)  # ratio 439,560,000,000 / 400,000,000,000 < 1.10; no bids
    assert account in rig.engine.margin.waiting
    refused = rig.reject(
        PlaceOrder(rig.ts, account, SYMBOL, SELL, LIMIT, 6_000_000, 1_000), Code.TRADING_FROZEN
    )
    assert "waiting for liquidity" in refused.msg
    rig.transfer(3, "USDT", 2 * USDT)  # 1.0994: still due, still waiting
    assert account in rig.engine.margin.waiting
    rig.transfer(3, "USDT", 100 * USDT)  # 1.1239: rescued
    assert account not in rig.engine.margin.waiting
    assert rig.order(account, SELL, 6_000_000, 1_000).reply.status == NEW
    assert audit.check(rig.engine) == []


def test_no_liquidation_without_debt(rig: Rig) -> None:
    account = rig.open_margin(3, "BTC", 10_000_000)
    rig.set_price(P50K)
    rig.order(2, BUY, 100_000, 100_000)
    result = rig.order(1, SELL, 100_000, 100_000)
    assert not of(result.events, Liquidated)
    assert rig.get(account, "BTC") == (10_000_000, 0)


def test_liquidation_price(rig: Rig) -> None:
    account = long_position(rig)
    margin = rig.engine.margin
    price = margin.liquidation_price(margin.accounts[account])
    # 1.1 x 400,000,000,000 / 99,900 lots.
    assert price is not None and price * 99_900 == 440_000_000_000
    other = rig.open_margin(4, "USDT", 1)
    assert margin.liquidation_price(margin.accounts[other]) is None
