"""Deposits and withdrawals: idempotency by tx id, limits, the overflow guard, conservation."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any

import pytest

from tradehall.codes import Code, Reject
from tradehall.engine import audit
from tradehall.engine.commands import Command, Deposit, PlaceOrder, Withdraw
from tradehall.engine.engine import Engine, TransferRecord, TransferReply
from tradehall.engine.events import BalanceChanged, TransferDone
from tradehall.engine.ledger import MAX_BALANCE
from tradehall.engine.markets import MarketsSpec
from tradehall.engine.orders import BUY, LIMIT, NEW, SELL
from tradehall.engine.spot import FEE_ACCOUNT

Rejected = Callable[[Engine, Command, Code], Reject]


@pytest.fixture
def bare(markets: MarketsSpec) -> Engine:
    return Engine(markets)


@pytest.fixture
def rejected(state: Callable[[Engine], dict[str, Any]]) -> Rejected:
    def check(engine: Engine, cmd: Command, code: Code) -> Reject:
        before = state(engine)
        with pytest.raises(Reject) as info:
            engine.apply(cmd)
        assert info.value.code == code, info.value.msg
        assert engine.ledger.events == []
        assert state(engine) == before
        assert audit.check(engine) == []
        return info.value

    return check


def test_deposit_credits_free_and_reports(bare: Engine) -> None:
    result = bare.apply(Deposit(1234, 5, "BTC", 150_000_000, "tx-a"))
    assert result.reply == TransferReply(1, False, 150_000_000, 0)
    bc, done = result.events
    assert isinstance(bc, BalanceChanged)
    assert isinstance(done, TransferDone)
    assert (
        bc.account,
        bc.asset,
        bc.d_free,
        bc.d_locked,
        bc.free,
        bc.locked,
        bc.reason,
        bc.ref,
    ) == (5, "BTC", 150_000_000, 0, 150_000_000, 0, "deposit", 1)
    assert (done.id, done.tx_id, done.account, done.asset, done.amount, done.time) == (
        1,
        "tx-a",
        5,
        "BTC",
        150_000_000,
        1234,
    )
    assert bare.balances(5) == {"BTC": (150_000_000, 0), "ETH": (0, 0), "USDT": (0, 0)}
    assert bare.ledger.external == {"BTC": 150_000_000}
    assert bare.transfers["tx-a"] == TransferRecord(1, 5, "BTC", 150_000_000)
    result = bare.apply(Deposit(1235, 5, "BTC", 50_000_000, "tx-b"))
    assert result.reply == TransferReply(2, False, 200_000_000, 0)
    assert audit.check(bare) == []


def test_duplicate_deposit_is_idempotent(bare: Engine, state: Any) -> None:
    first = bare.apply(Deposit(1, 5, "USDT", 10**10, "tx-1")).reply
    before = state(bare)
    for ts in (1, 99):  # the time may differ on a retry
        again = bare.apply(Deposit(ts, 5, "USDT", 10**10, "tx-1"))
        assert again.reply == TransferReply(first.transfer_id, True, 10**10, 0)
        assert again.events == []
        assert state(bare) == before


def test_duplicate_reports_current_balance(bare: Engine) -> None:
    bare.apply(Deposit(1, 5, "USDT", 10**10, "tx-1"))
    bare.apply(Deposit(1, 5, "BTC", 10**8, "tx-2"))
    bare.apply(PlaceOrder(1, 5, "BTCUSDT", BUY, LIMIT, price=5_000_000, qty=1_000))
    again = bare.apply(Deposit(2, 5, "USDT", 10**10, "tx-1")).reply
    assert again == TransferReply(1, True, 10**10 - 5 * 10**9, 5 * 10**9)


@pytest.mark.parametrize(
    "retry",
    [
        Deposit(1, 5, "USDT", 10**10 + 1, "tx-1"),  # other amount
        Deposit(1, 6, "USDT", 10**10, "tx-1"),  # other account
        Deposit(1, 5, "BTC", 10**10, "tx-1"),  # other asset
        Withdraw(1, 5, "USDT", 10**10, "tx-1"),  # a withdrawal reusing a deposit's id
    ],
    ids=["amount", "account", "asset", "kind"],
)
def test_reused_tx_id_with_other_values(bare: Engine, rejected: Rejected, retry: Command) -> None:
    bare.apply(Deposit(1, 5, "USDT", 10**10, "tx-1"))
    bare.apply(Deposit(1, 6, "USDT", 10**10, "tx-2"))
    bare.apply(Deposit(1, 5, "BTC", 10**10, "tx-3"))
    err = rejected(bare, retry, Code.BAD_PARAM)
    assert "tx-1" in err.msg


def test_withdraw_and_its_idempotency(bare: Engine, rejected: Rejected, state: Any) -> None:
    bare.apply(Deposit(1, 5, "ETH", 10**9, "d1"))
    result = bare.apply(Withdraw(7, 5, "ETH", 4 * 10**8, "w1"))
    assert result.reply == TransferReply(2, False, 6 * 10**8, 0)
    bc, done = result.events
    assert isinstance(bc, BalanceChanged) and isinstance(done, TransferDone)
    assert (bc.d_free, bc.d_locked, bc.reason, bc.ref) == (-4 * 10**8, 0, "withdraw", 2)
    assert (done.id, done.tx_id, done.amount, done.time) == (2, "w1", -4 * 10**8, 7)
    assert bare.transfers["w1"] == TransferRecord(2, 5, "ETH", -4 * 10**8)
    assert bare.ledger.external == {"ETH": 6 * 10**8}
    before = state(bare)
    again = bare.apply(Withdraw(8, 5, "ETH", 4 * 10**8, "w1"))
    assert again.reply == TransferReply(2, True, 6 * 10**8, 0)
    assert again.events == []
    assert state(bare) == before
    rejected(bare, Withdraw(8, 5, "ETH", 4 * 10**8 + 1, "w1"), Code.BAD_PARAM)
    rejected(bare, Deposit(8, 5, "ETH", 4 * 10**8, "w1"), Code.BAD_PARAM)
    # the duplicate is recognised even when the balance no longer covers it
    bare.apply(Withdraw(9, 5, "ETH", 6 * 10**8, "w2"))
    assert bare.apply(Withdraw(9, 5, "ETH", 4 * 10**8, "w1")).reply.duplicate is True


def test_withdraw_never_below_zero(bare: Engine, rejected: Rejected) -> None:
    bare.apply(Deposit(1, 5, "USDT", 1_000, "d1"))
    rejected(bare, Withdraw(1, 5, "USDT", 1_001, "w1"), Code.INSUFFICIENT_BALANCE)
    rejected(bare, Withdraw(1, 5, "BTC", 1, "w2"), Code.INSUFFICIENT_BALANCE)
    rejected(bare, Withdraw(1, 77, "USDT", 1, "w3"), Code.INSUFFICIENT_BALANCE)
    # a refused withdrawal does not burn its tx id
    reply = bare.apply(Withdraw(1, 5, "USDT", 1_000, "w1")).reply
    assert reply == TransferReply(2, False, 0, 0)
    rejected(bare, Withdraw(1, 5, "USDT", 1, "w4"), Code.INSUFFICIENT_BALANCE)
    assert bare.ledger.external == {"USDT": 0}


def test_locked_funds_cannot_be_withdrawn(bare: Engine, rejected: Rejected) -> None:
    bare.apply(Deposit(1, 5, "BTC", 1_000_000, "d1"))
    order = bare.apply(PlaceOrder(1, 5, "BTCUSDT", SELL, LIMIT, price=6_000_000, qty=6_000))
    assert order.reply.status == NEW
    assert bare.balances(5)["BTC"] == (400_000, 600_000)
    rejected(bare, Withdraw(1, 5, "BTC", 400_001, "w1"), Code.INSUFFICIENT_BALANCE)
    assert bare.apply(Withdraw(1, 5, "BTC", 400_000, "w1")).reply.free == 0
    assert bare.balances(5)["BTC"] == (0, 600_000)
    assert audit.check(bare) == []


@pytest.mark.parametrize(
    "cmd",
    [
        Deposit(1, 5, "DOGE", 1, "x"),
        Deposit(1, 5, "btc", 1, "x"),
        Deposit(1, 5, "BTC", 0, "x"),
        Deposit(1, 5, "BTC", -5, "x"),
        Deposit(1, 5, "BTC", 1, ""),
        Deposit(1, 5, "BTC", 1, "t" * 129),
        Deposit(1, FEE_ACCOUNT, "BTC", 1, "x"),
        Withdraw(1, 5, "DOGE", 1, "x"),
        Withdraw(1, 5, "BTC", 0, "x"),
        Withdraw(1, 5, "BTC", -1, "x"),
        Withdraw(1, 5, "BTC", 1, ""),
        Withdraw(1, 5, "BTC", 1, "t" * 129),
        Withdraw(1, FEE_ACCOUNT, "BTC", 1, "x"),
    ],
)
def test_invalid_transfers(engine: Engine, rejected: Rejected, cmd: Command) -> None:
    rejected(engine, cmd, Code.BAD_PARAM)


def test_tx_id_length_limit_is_inclusive(bare: Engine) -> None:
    assert bare.apply(Deposit(1, 5, "BTC", 1, "t" * 128)).reply.duplicate is False


def test_invalid_values_are_refused_before_the_duplicate_check(
    bare: Engine, rejected: Rejected
) -> None:
    bare.apply(Deposit(1, 5, "BTC", 10, "tx"))
    rejected(bare, Deposit(1, 5, "BTC", 0, "tx"), Code.BAD_PARAM)
    rejected(bare, Deposit(1, 5, "DOGE", 10, "tx"), Code.BAD_PARAM)


def test_deposit_overflow_guard(bare: Engine, rejected: Rejected) -> None:
    assert MAX_BALANCE == 2**63 - 1
    rejected(bare, Deposit(1, 5, "USDT", MAX_BALANCE + 1, "big"), Code.BAD_PARAM)
    assert bare.apply(Deposit(1, 5, "USDT", MAX_BALANCE - 10, "d1")).reply.free == MAX_BALANCE - 10
    rejected(bare, Deposit(1, 5, "USDT", 11, "d2"), Code.BAD_PARAM)
    assert bare.apply(Deposit(1, 5, "USDT", 10, "d2")).reply.free == MAX_BALANCE  # inclusive
    rejected(bare, Deposit(1, 5, "USDT", 1, "d3"), Code.BAD_PARAM)
    # the bound is on the asset's total supply, so no other account can add to it either,
    # while other assets are independent
    rejected(bare, Deposit(1, 6, "USDT", 1, "d4"), Code.BAD_PARAM)
    assert bare.apply(Deposit(1, 5, "BTC", MAX_BALANCE, "d5")).reply.free == MAX_BALANCE
    # a refused deposit keeps its tx id unused
    bare.apply(Withdraw(1, 5, "USDT", 100, "w1"))
    assert bare.apply(Deposit(1, 5, "USDT", 1, "d3")).reply.duplicate is False
    assert audit.check(bare) == []


def test_deposit_overflow_guard_counts_locked(bare: Engine, rejected: Rejected) -> None:
    bare.apply(Deposit(1, 5, "USDT", MAX_BALANCE - 1_000, "d1"))
    bare.apply(PlaceOrder(1, 5, "BTCUSDT", BUY, LIMIT, price=5_000_000, qty=1_000))
    assert bare.balances(5)["USDT"] == (MAX_BALANCE - 1_000 - 5 * 10**9, 5 * 10**9)
    rejected(bare, Deposit(1, 5, "USDT", 1_001, "d2"), Code.BAD_PARAM)
    assert bare.apply(Deposit(1, 5, "USDT", 1_000, "d2")).reply.locked == 5 * 10**9


def test_trade_proceeds_cannot_push_a_balance_past_max(bare: Engine, rejected: Rejected) -> None:
    # Total supply is bounded, and assets are conserved, so proceeds can never overflow:
    # a seller holding the whole supply of USDT cannot be paid more USDT by anyone.
    bare.apply(Deposit(1, 1, "USDT", MAX_BALANCE - 10**12, "d1"))
    bare.apply(Deposit(1, 1, "BTC", 10**8, "d2"))
    bare.apply(Deposit(1, 2, "USDT", 10**12, "d3"))
    rejected(bare, Deposit(1, 2, "USDT", 1, "d4"), Code.BAD_PARAM)
    bare.apply(PlaceOrder(1, 1, "BTCUSDT", SELL, LIMIT, price=5_000_000, qty=1_000))
    with contextlib.suppress(Reject):
        bare.apply(PlaceOrder(1, 2, "BTCUSDT", BUY, LIMIT, price=5_000_000, qty=1_000))
    for (account, asset), (free, locked) in bare.ledger.balances.items():
        assert free + locked <= MAX_BALANCE, (account, asset)
    assert audit.check(bare) == []


def test_conservation_over_transfers(bare: Engine) -> None:
    rng = random.Random(7)
    expected: dict[str, int] = {}
    for i in range(300):
        account = rng.randint(1, 4)
        asset = rng.choice(["BTC", "ETH", "USDT"])
        amount = rng.randint(1, 10**6)
        tx = f"tx{rng.randint(0, 150)}"
        cmd: Command = (Deposit if rng.random() < 0.6 else Withdraw)(i, account, asset, amount, tx)
        try:
            reply = bare.apply(cmd).reply
        except Reject as err:
            assert err.code in (Code.BAD_PARAM, Code.INSUFFICIENT_BALANCE)
        else:
            if not reply.duplicate:
                sign = 1 if isinstance(cmd, Deposit) else -1
                expected[asset] = expected.get(asset, 0) + sign * amount
            assert (reply.free, reply.locked) == bare.balances(account)[asset]
        assert audit.check(bare) == []
    assert bare.ledger.external == expected
    assert bare.ledger.totals() == expected
