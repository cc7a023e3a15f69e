"""Every refusal: the right code, no events, and a deep snapshot of the engine unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tradehall.codes import Code, Reject
from tradehall.engine import audit
from tradehall.engine.commands import (
    CancelBatch,
    CancelOrder,
    Command,
    PlaceBatch,
    PlaceOrder,
)
from tradehall.engine.engine import Engine
from tradehall.engine.ledger import MAX_BALANCE
from tradehall.engine.orders import BUY, CANCELED, FILLED, GTC, LIMIT, MARKET, NEW, SELL
from tradehall.engine.spot import MAX_OPEN_ORDERS

SYM = "BTCUSDT"
P50000 = 5_000_000
BTC = 10 * 10**8
USDT = 1_000_000 * 10**8


def limit(
    account: int,
    side: str,
    price: int,
    qty: int,
    tif: str = GTC,
    *,
    client_id: str = "",
    symbol: str = SYM,
    dry_run: bool = False,
) -> PlaceOrder:
    return PlaceOrder(
        1,
        account,
        symbol,
        side,
        LIMIT,
        price=price,
        qty=qty,
        tif=tif,
        client_id=client_id,
        dry_run=dry_run,
    )


def ok(engine: Engine, cmd: Command) -> Any:
    reply = engine.apply(cmd).reply
    assert audit.check(engine) == []
    return reply


@pytest.fixture
def rejected(
    state: Callable[[Engine], dict[str, Any]],
) -> Callable[[Engine, Command, Code], Reject]:
    """rejected(engine, cmd, code): apply ``cmd``, expect Reject(code) and no change at all."""

    def check(engine: Engine, cmd: Command, code: Code) -> Reject:
        before = state(engine)
        with pytest.raises(Reject) as info:
            engine.apply(cmd)
        assert info.value.code == code, info.value.msg
        assert int(info.value.code) == int(code)
        assert isinstance(info.value.msg, str) and info.value.msg
        # the event sink the engine handed out for this command stayed empty
        assert engine.ledger.events == []
        assert engine.spot.events == []
        assert state(engine) == before
        assert audit.check(engine) == []
        return info.value

    return check


Rejected = Callable[[Engine, Command, Code], Reject]


@pytest.fixture
def busy(engine: Engine) -> Engine:
    """The funded engine with a few resting orders (ids 1-4) to make "unchanged" meaningful."""
    ok(engine, limit(1, BUY, 4_990_000, 1_000, client_id="bid1"))
    ok(engine, limit(2, SELL, 5_010_000, 2_000, client_id="ask2"))
    ok(engine, limit(3, BUY, 300_000, 100, symbol="ETHUSDT"))
    ok(engine, limit(2, BUY, 4_980_000, 1_000))
    return engine


# --------------------------------------------------------------------------- placement


@pytest.mark.parametrize("symbol", ["XYZUSDT", "btcusdt", "", "BTC"])
def test_unknown_symbol(busy: Engine, rejected: Rejected, symbol: str) -> None:
    rejected(busy, limit(1, BUY, P50000, 1_000, symbol=symbol), Code.BAD_SYMBOL)
    assert int(Code.BAD_SYMBOL) == -1121


def test_unknown_symbol_market_and_batch(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, PlaceOrder(1, 1, "NOPE", BUY, MARKET, quote_qty=10**9), Code.BAD_SYMBOL)
    unknown = PlaceBatch(1, 1, "NOPE", (limit(1, BUY, P50000, 1_000, symbol="NOPE"),))
    rejected(busy, unknown, Code.BAD_SYMBOL)
    mixed = PlaceBatch(1, 1, SYM, (limit(1, BUY, P50000, 1_000), limit(1, BUY, 1, 1, symbol="X")))
    rejected(busy, mixed, Code.BAD_PARAM)


@pytest.mark.parametrize("side", ["buy", "HOLD", "", "SELL "])
def test_bad_side(busy: Engine, rejected: Rejected, side: str) -> None:
    rejected(busy, limit(1, side, P50000, 1_000), Code.BAD_SIDE)
    assert int(Code.BAD_SIDE) == -1117


@pytest.mark.parametrize("type_", ["STOP", "limit", "", "MARKET_MAKER"])
def test_bad_type(busy: Engine, rejected: Rejected, type_: str) -> None:
    cmd = PlaceOrder(1, 1, SYM, BUY, type_, price=P50000, qty=1_000)
    rejected(busy, cmd, Code.BAD_ORDER_TYPE)
    assert int(Code.BAD_ORDER_TYPE) == -1116


@pytest.mark.parametrize("tif", ["GTX", "gtc", "", "DAY"])
def test_bad_tif_on_limit(busy: Engine, rejected: Rejected, tif: str) -> None:
    rejected(busy, limit(1, BUY, P50000, 1_000, tif), Code.BAD_ORDER_TYPE)


@pytest.mark.parametrize("tif", ["IOC", "FOK", "POST_ONLY", "junk"])
def test_tif_on_market_order(busy: Engine, rejected: Rejected, tif: str) -> None:
    rejected(
        busy, PlaceOrder(1, 1, SYM, BUY, MARKET, quote_qty=10**9, tif=tif), Code.BAD_ORDER_TYPE
    )
    rejected(busy, PlaceOrder(1, 1, SYM, SELL, MARKET, qty=1_000, tif=tif), Code.BAD_ORDER_TYPE)


@pytest.mark.parametrize("price", [0, -1, -P50000])
def test_price_not_positive(busy: Engine, rejected: Rejected, price: int) -> None:
    rejected(busy, limit(1, BUY, price, 1_000), Code.PRICE_RANGE)
    rejected(busy, limit(1, SELL, price, 1_000), Code.PRICE_RANGE)
    assert int(Code.PRICE_RANGE) == -1138


def test_order_value_out_of_range(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, limit(1, SELL, MAX_BALANCE, 10), Code.PRICE_RANGE)


@pytest.mark.parametrize(
    "cmd",
    [
        limit(1, BUY, P50000, 9),  # min_quantity is 10 lots (0.00001 BTC)
        limit(1, SELL, 50_000_000_000, 9),
        limit(1, BUY, P50000, 0),
        limit(1, BUY, P50000, -1_000),
        limit(1, BUY, 4_999_999, 100),  # 499_999_900 < 5 USDT
        limit(1, SELL, 1, 10_000_000),  # 0.01 x 10 BTC = 0.1 USDT
        limit(1, BUY, 2, 10, symbol="ETHBTC"),  # below the ETHBTC minimums
        PlaceOrder(1, 1, SYM, SELL, MARKET, qty=9),
        PlaceOrder(1, 1, SYM, SELL, MARKET, qty=0),
        PlaceOrder(1, 1, SYM, BUY, MARKET, quote_qty=499_999_999),
        PlaceOrder(1, 1, SYM, BUY, MARKET, quote_qty=0),
        PlaceOrder(1, 1, SYM, BUY, MARKET, quote_qty=-(10**9)),
    ],
    ids=lambda c: f"{c.type}-{c.side}-{c.symbol}-{c.price}-{c.qty}-{c.quote_qty}",
)
def test_below_minimum(busy: Engine, rejected: Rejected, cmd: PlaceOrder) -> None:
    rejected(busy, cmd, Code.BELOW_MINIMUM)
    assert int(Code.BELOW_MINIMUM) == -1136


def test_minimums_are_inclusive(engine: Engine) -> None:
    assert ok(engine, limit(1, BUY, 50_000_000, 10)).status == NEW  # exactly 10 lots, 5 USDT
    assert ok(engine, limit(1, BUY, P50000, 100)).status == NEW  # exactly 5 USDT
    assert ok(engine, PlaceOrder(1, 2, SYM, SELL, MARKET, qty=10)).status == FILLED
    ok(engine, limit(1, SELL, P50000, 1_000))
    reply = ok(engine, PlaceOrder(1, 2, SYM, BUY, MARKET, quote_qty=500_000_000))
    assert (reply.status, reply.filled) == (FILLED, 100)  # exactly 5 USDT


def test_insufficient_quote_for_buy(engine: Engine, rejected: Rejected, fund: Any) -> None:
    fund(engine, 7, "USDT", 5_000_000_000)
    rejected(engine, limit(7, BUY, P50000, 1_001), Code.INSUFFICIENT_BALANCE)
    assert ok(engine, limit(7, BUY, P50000, 1_000)).status == NEW  # exactly the balance
    # everything is now locked: even the minimum order cannot be funded
    rejected(engine, limit(7, BUY, P50000, 100), Code.INSUFFICIENT_BALANCE)
    rejected(engine, PlaceOrder(1, 7, SYM, BUY, MARKET, quote_qty=10**9), Code.INSUFFICIENT_BALANCE)
    assert int(Code.INSUFFICIENT_BALANCE) == -2017


def test_insufficient_base_for_sell(engine: Engine, rejected: Rejected, fund: Any) -> None:
    fund(engine, 7, "BTC", 100_000)  # 1000 lots
    ok(engine, limit(7, SELL, 6_000_000, 400))
    rejected(engine, limit(7, SELL, 6_000_000, 601), Code.INSUFFICIENT_BALANCE)
    rejected(engine, PlaceOrder(1, 7, SYM, SELL, MARKET, qty=601), Code.INSUFFICIENT_BALANCE)
    # quote holdings do not help a SELL
    fund(engine, 7, "USDT", 10**15)
    rejected(engine, limit(7, SELL, 6_000_000, 601), Code.INSUFFICIENT_BALANCE)
    assert ok(engine, limit(7, SELL, 6_000_000, 600)).status == NEW


def test_insufficient_unfunded_account(engine: Engine, rejected: Rejected) -> None:
    rejected(engine, limit(42, BUY, P50000, 1_000), Code.INSUFFICIENT_BALANCE)
    rejected(engine, limit(42, SELL, P50000, 1_000), Code.INSUFFICIENT_BALANCE)
    rejected(
        engine, PlaceOrder(1, 42, SYM, BUY, MARKET, quote_qty=10**9), Code.INSUFFICIENT_BALANCE
    )


def test_hold_out_of_range(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, PlaceOrder(1, 1, SYM, BUY, MARKET, quote_qty=MAX_BALANCE + 1), Code.BAD_PARAM)
    qty = MAX_BALANCE // 100 + 1
    rejected(busy, PlaceOrder(1, 1, SYM, SELL, MARKET, qty=qty), Code.BAD_PARAM)


def test_market_orders_disabled(make_engine: Callable[..., Engine], rejected: Rejected) -> None:
    engine = make_engine(SYM, market_orders=False)
    ok(engine, limit(1, SELL, P50000, 1_000))
    rejected(engine, PlaceOrder(1, 2, SYM, BUY, MARKET, quote_qty=10**9), Code.MARKET_NOT_SUPPORTED)
    rejected(engine, PlaceOrder(1, 2, SYM, SELL, MARKET, qty=1_000), Code.MARKET_NOT_SUPPORTED)
    assert int(Code.MARKET_NOT_SUPPORTED) == -1139
    # LIMIT orders still trade, and other pairs still take MARKET orders
    assert ok(engine, limit(2, BUY, P50000, 1_000)).status == FILLED
    ok(engine, limit(1, SELL, 300_000, 100, symbol="ETHUSDT"))
    reply = ok(engine, PlaceOrder(1, 2, "ETHUSDT", BUY, MARKET, quote_qty=2_000_000_000))
    assert (reply.status, reply.filled) == (FILLED, 66)


def test_trading_disabled(make_engine: Callable[..., Engine], rejected: Rejected) -> None:
    engine = make_engine(SYM, trading=False)
    for cmd in (
        limit(1, BUY, P50000, 1_000),
        limit(1, SELL, P50000, 1_000, "IOC"),
        PlaceOrder(1, 2, SYM, BUY, MARKET, quote_qty=10**9),
        PlaceOrder(1, 2, SYM, SELL, MARKET, qty=1_000),
        limit(1, BUY, P50000, 1_000, dry_run=True),
        PlaceBatch(1, 1, SYM, (limit(1, BUY, P50000, 1_000),)),
    ):
        rejected(engine, cmd, Code.TRADING_FROZEN)
    assert int(Code.TRADING_FROZEN) == -2016
    assert ok(engine, limit(1, BUY, 300_000, 100, symbol="ETHUSDT")).status == NEW


def test_too_many_open_orders(engine: Engine, rejected: Rejected) -> None:
    assert MAX_OPEN_ORDERS == 1000
    for i in range(MAX_OPEN_ORDERS):
        ok(engine, limit(1, BUY, 1_000_000 + i, 500))
    assert len(engine.open_orders(1, SYM)) == MAX_OPEN_ORDERS
    rejected(engine, limit(1, BUY, 900_000, 600), Code.TOO_MANY_ORDERS)
    rejected(engine, limit(1, SELL, 9_000_000, 100), Code.TOO_MANY_ORDERS)
    rejected(engine, PlaceOrder(1, 1, SYM, SELL, MARKET, qty=100), Code.TOO_MANY_ORDERS)
    rejected(engine, PlaceBatch(1, 1, SYM, (limit(1, BUY, 900_000, 600),)), Code.TOO_MANY_ORDERS)
    assert int(Code.TOO_MANY_ORDERS) == -1015
    # the cap is per account and per pair
    assert ok(engine, limit(2, BUY, 900_000, 600)).status == NEW
    assert ok(engine, limit(1, BUY, 300_000, 100, symbol="ETHUSDT")).status == NEW
    # a cancel makes room again
    ok(engine, CancelOrder(1, 1, SYM, order_id=1))
    assert ok(engine, limit(1, BUY, 900_000, 600)).status == NEW
    rejected(engine, limit(1, BUY, 900_000, 600), Code.TOO_MANY_ORDERS)


def test_open_order_cap_counts_per_pair_when_spread_over_pairs(engine: Engine) -> None:
    for i in range(600):
        ok(engine, limit(1, BUY, 100_000 + i, 2_000, symbol="ETHUSDT"))
    for i in range(400):
        ok(engine, limit(1, BUY, 1_000_000 + i, 500))
    # 1000 open in total, but only 400 on BTCUSDT and 600 on ETHUSDT: both accept more
    assert ok(engine, limit(1, BUY, 900_000, 600)).status == NEW
    assert ok(engine, limit(1, BUY, 90_000, 2_000, symbol="ETHUSDT")).status == NEW


def test_duplicate_client_id(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, limit(1, BUY, 4_000_000, 1_000, client_id="bid1"), Code.BAD_PARAM)
    rejected(busy, limit(1, SELL, 6_000_000, 1_000, client_id="bid1"), Code.BAD_PARAM)
    rejected(busy, limit(1, SELL, 6_000_000, 1_000, client_id="bid1", dry_run=True), Code.BAD_PARAM)
    batch = PlaceBatch(
        1,
        1,
        SYM,
        (
            limit(1, BUY, 4_000_000, 1_000, client_id="new"),
            limit(1, BUY, 4_000_000, 1_000, client_id="bid1"),
        ),
    )
    rejected(busy, batch, Code.BAD_PARAM)
    assert int(Code.BAD_PARAM) == -1102
    # the same client id is fine for another account or another pair
    assert ok(busy, limit(2, BUY, 4_000_000, 1_000, client_id="bid1")).status == NEW
    assert ok(busy, limit(1, BUY, 300_000, 100, client_id="bid1", symbol="ETHUSDT")).status == NEW


def test_batch_with_duplicate_client_ids_is_rejected(busy: Engine, rejected: Rejected) -> None:
    batch = PlaceBatch(
        1,
        1,
        SYM,
        (
            limit(1, BUY, 4_000_000, 1_000, client_id="dup"),
            limit(1, BUY, 3_900_000, 1_000, client_id="dup"),
        ),
    )
    rejected(busy, batch, Code.BAD_PARAM)


def test_batch_cannot_exceed_open_order_cap(engine: Engine, rejected: Rejected) -> None:
    for i in range(MAX_OPEN_ORDERS - 1):
        ok(engine, limit(1, BUY, 1_000_000 + i, 500))
    batch = PlaceBatch(1, 1, SYM, (limit(1, BUY, 900_000, 600), limit(1, BUY, 900_001, 600)))
    rejected(engine, batch, Code.TOO_MANY_ORDERS)


def test_batch_orders_for_another_account_are_refused(
    engine: Engine, rejected: Rejected, fund: Any
) -> None:
    fund(engine, 8, "USDT", 10 * 10**8)  # 10 USDT: not enough for its order
    batch = PlaceBatch(1, 1, SYM, (limit(1, BUY, P50000, 1_000), limit(8, BUY, P50000, 1_000)))
    rejected(engine, batch, Code.BAD_PARAM)


def test_batch_all_or_nothing_on_invalid_order(busy: Engine, rejected: Rejected) -> None:
    good = limit(1, BUY, 4_000_000, 1_000)
    for bad, code in (
        (limit(1, BUY, 4_000_000, 5), Code.BELOW_MINIMUM),
        (limit(1, BUY, 0, 1_000), Code.PRICE_RANGE),
        (limit(1, "X", 4_000_000, 1_000), Code.BAD_SIDE),
        (limit(1, BUY, 4_000_000, 1_000, "NOPE"), Code.BAD_ORDER_TYPE),
    ):
        rejected(busy, PlaceBatch(1, 1, SYM, (good, good, bad)), code)
        rejected(busy, PlaceBatch(1, 1, SYM, (bad, good)), code)


def test_batch_combined_holds_exceed_balance(engine: Engine, rejected: Rejected, fund: Any) -> None:
    fund(engine, 7, "USDT", 9_000_000_000)
    fund(engine, 7, "BTC", 150_000)
    one = limit(7, BUY, P50000, 1_000)  # 5_000_000_000 each: one fits, two do not
    sell = limit(7, SELL, 6_000_000, 1_000)  # 100_000 each
    rejected(engine, PlaceBatch(1, 7, SYM, (one, one)), Code.INSUFFICIENT_BALANCE)
    rejected(engine, PlaceBatch(1, 7, SYM, (sell, one, sell)), Code.INSUFFICIENT_BALANCE)
    # with a MARKET BUY counted at its full quote amount
    mkt = PlaceOrder(1, 7, SYM, BUY, MARKET, quote_qty=4_000_000_001)
    rejected(engine, PlaceBatch(1, 7, SYM, (one, mkt)), Code.INSUFFICIENT_BALANCE)
    # holds in different assets are checked separately: this fits
    reply = ok(engine, PlaceBatch(1, 7, SYM, (one, sell)))
    assert [o.status for o in reply] == [NEW, NEW]


def test_dry_run_rejections_and_success(busy: Engine, rejected: Rejected, state: Any) -> None:
    rejected(busy, limit(1, BUY, P50000, 10**9, dry_run=True), Code.INSUFFICIENT_BALANCE)
    rejected(busy, limit(1, BUY, P50000, 5, dry_run=True), Code.BELOW_MINIMUM)
    rejected(busy, limit(1, BUY, P50000, 1_000, symbol="X", dry_run=True), Code.BAD_SYMBOL)
    before = state(busy)
    result = busy.apply(limit(1, BUY, 5_010_000, 1_000, dry_run=True))  # would trade
    assert (result.reply, result.events) == (None, [])
    result = busy.apply(PlaceOrder(1, 2, SYM, BUY, MARKET, quote_qty=10**10, dry_run=True))
    assert (result.reply, result.events) == (None, [])
    assert state(busy) == before


# --------------------------------------------------------------------------- cancel


def test_cancel_unknown_symbol(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, CancelOrder(1, 1, "NOPE", order_id=1), Code.BAD_SYMBOL)
    rejected(busy, CancelBatch(1, 1, "NOPE", (1,)), Code.BAD_SYMBOL)


def test_cancel_unknown_order(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, CancelOrder(1, 1, SYM, order_id=999), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, SYM, order_id=0), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, SYM, client_id="nope"), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, SYM), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, SYM, client_id=""), Code.NO_SUCH_ORDER)
    assert int(Code.NO_SUCH_ORDER) == -2013


def test_cancel_another_accounts_order(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, CancelOrder(1, 2, SYM, order_id=1), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 2, SYM, client_id="bid1"), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 0, SYM, order_id=1), Code.NO_SUCH_ORDER)


def test_cancel_with_wrong_symbol(busy: Engine, rejected: Rejected) -> None:
    rejected(busy, CancelOrder(1, 1, "ETHUSDT", order_id=1), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, "ETHUSDT", client_id="bid1"), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 3, SYM, order_id=3), Code.NO_SUCH_ORDER)  # it is on ETHUSDT


def test_cancel_of_closed_orders(busy: Engine, rejected: Rejected) -> None:
    assert ok(busy, CancelOrder(1, 1, SYM, order_id=1)).status == CANCELED
    rejected(busy, CancelOrder(1, 1, SYM, order_id=1), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 1, SYM, client_id="bid1"), Code.NO_SUCH_ORDER)
    assert ok(busy, limit(1, BUY, 5_010_000, 2_000)).status == FILLED  # fills order 2
    rejected(busy, CancelOrder(1, 2, SYM, order_id=2), Code.NO_SUCH_ORDER)
    rejected(busy, CancelOrder(1, 2, SYM, client_id="ask2"), Code.NO_SUCH_ORDER)
    # a taker that never rested (IOC) cannot be cancelled either
    reply = ok(busy, limit(1, BUY, 4_000_000, 1_000, "IOC"))
    rejected(busy, CancelOrder(1, 1, SYM, order_id=reply.id), Code.NO_SUCH_ORDER)


def test_cancel_batch_reports_failures_without_rejecting(busy: Engine, state: Any) -> None:
    before = state(busy)
    result = busy.apply(CancelBatch(1, 1, SYM, (2, 3, 999)))  # another's, other pair, unknown
    assert (result.reply.success, result.reply.failed) == ([], [2, 3, 999])
    assert result.events == []
    assert state(busy) == before
