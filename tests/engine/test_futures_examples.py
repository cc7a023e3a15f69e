"""Worked numeric examples of perpetual futures, linear (E-BTC-USDT) and inverse (E-BTC-USD).

Every expected number is worked out by hand in the comments next to it, from the contract
terms of the default configuration:

- E-BTC-USDT: linear, 1 contract = 0.001 BTC, price in 0.1 USDT ticks, margin in USDT
  (1 USDT = 10**8 units). Value = contracts x 0.001 x price (USDT).
- E-BTC-USD: inverse, 1 contract = 10 USD, price in 0.1 USD ticks, margin in BTC
  (1 BTC = 10**8 units). Value = contracts x 10 / price (BTC), rounded down to 1e-8 BTC.
- Fees: open/close maker 0.02 %, taker 0.06 %; maintenance rate 0.5 %; leverage 10;
  funding every 8 h, interest 0.01 % per interval, cap 0.75 %, band +-0.05 %.

Everything goes through ``Engine.apply`` on an engine in debug mode (the audit runs after
every command). With no premium samples taken, the mark price is the index price (the median
of index, index + 0 and the last trade price).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from futures_support import (
    BUY,
    CLOSE,
    INVERSE,
    LINEAR,
    OPEN,
    SELL,
    UNIT,
    Rig,
)

from tradehall.codes import Reject
from tradehall.engine import audit
from tradehall.engine.commands import (
    AdjustPositionMargin,
    FuturesCancel,
    FuturesTick,
    FuturesTransfer,
    SetLeverage,
    SetMarginMode,
)
from tradehall.engine.contracts import ContractSpec
from tradehall.engine.engine import Result
from tradehall.engine.futures_model import ISOLATED, FundingRecord, FuturesChanged, Position
from tradehall.engine.futures_risk import (
    average_price,
    bankruptcy_limit,
    bankruptcy_price,
    group_liquidation_price,
    unrealized,
)
from tradehall.engine.orders import CANCELED, FILLED, MARKET, NEW

USDT = "USDT"
BTC = "BTC"
T0 = 1_700_006_400_000
"""A funding time (a multiple of 8 h since the epoch)."""
MINUTE = 60_000
INTERVAL = 8 * 3_600_000
CENT = UNIT // 100


def usdt(amount: str) -> int:
    """A USDT amount written as a decimal string, in ledger units."""
    return int(Decimal(amount) * UNIT)


def rig(*users: int, usdt_funds: int = 100_000 * UNIT, btc_funds: int = 10 * UNIT) -> Rig:
    r = Rig()
    r.ts = T0 + 1_000
    for user in users:
        r.fund(user, USDT, usdt_funds)
        r.fund(user, BTC, btc_funds)
    return r


def liquidation_price(contract: ContractSpec, pos: Position, margin: int) -> Decimal:
    """Where one position backed by ``margin`` is liquidated (the engine's one formula, for
    an isolated position as for a cross group)."""
    price, _ = group_liquidation_price(contract, [pos], margin)
    return price


def near(value: Decimal, expected: str) -> bool:
    return abs(value - Decimal(expected)) < Decimal("1e-9")


# =============================================================================== linear


def test_linear_open_holds_initial_margin_plus_fee_and_charges_maker_and_taker() -> None:
    r = rig(1, 2)
    start = 100_000 * UNIT
    r.index(LINEAR, 500_000)  # 50,000.0 USDT

    # User 2 rests SELL OPEN 10 @ 50,000.0:
    #   value  = 10 x 0.001 BTC x 50,000 = 500 USDT
    #   margin = 500 / 10                 =  50 USDT
    #   fee    = 500 x 0.02 % (maker)     = 0.1 USDT  -> hold 50.1 USDT
    maker = r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    assert maker.status == NEW
    assert maker.held == usdt("50.1")
    assert r.balance(2, USDT) == (start - usdt("50.1"), usdt("50.1"))

    # User 1 takes 4 of them:
    #   value = 4 x 0.001 x 50,000 = 200 USDT, margin 20, taker fee 200 x 0.06 % = 0.12
    taker = r.order(1, LINEAR, BUY, OPEN, 4, 500_000)
    assert (taker.status, taker.filled, taker.filled_value) == (FILLED, 4, usdt("200"))
    assert taker.held == 0
    long = r.long(1, LINEAR)
    assert (long.volume, long.cost, long.margin) == (4, usdt("200"), usdt("20"))
    assert long.trade_fee == usdt("0.12")
    assert r.balance(1, USDT) == (start - usdt("20.12"), usdt("20"))

    # The maker's side: margin 20, maker fee 200 x 0.02 % = 0.04 taken from its hold,
    # which keeps 50.1 - 20.04 = 30.06 (= 6 contracts x (5 + 0.01)).
    short = r.short(2, LINEAR)
    assert (short.volume, short.cost, short.margin) == (4, usdt("200"), usdt("20"))
    assert short.trade_fee == usdt("0.04")
    [resting] = r.fx.open_orders(2, LINEAR)
    assert (resting.filled, resting.held) == (4, usdt("30.06"))
    assert r.balance(2, USDT) == (start - usdt("50.1"), usdt("30.06") + usdt("20"))

    # The fee account got 0.12 + 0.04.
    assert r.fees(USDT) == usdt("0.16")
    assert r.oi(LINEAR) == (4, 4)

    # Cancelling the rest gives back its hold: user 2 has paid only margin 20 + fee 0.04.
    r.apply(FuturesCancel(r.ts, 2, LINEAR, order_id=maker.id))
    assert r.balance(2, USDT) == (start - usdt("20.04"), usdt("20"))


def test_linear_market_open_is_sized_by_value() -> None:
    r = rig(1, 2)
    start = 100_000 * UNIT
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    # MARKET OPEN of 120 USDT at an ask of 50,000.0: one contract is worth 50 USDT, so
    # 120 USDT buys 2 contracts (100 USDT): margin 10, taker fee 100 x 0.06 % = 0.06.
    state = r.order(1, LINEAR, BUY, OPEN, type=MARKET, money=120 * UNIT)
    assert (state.status, state.qty, state.filled) == (FILLED, 2, 2)
    assert state.filled_value == usdt("100")
    assert r.balance(1, USDT) == (start - usdt("10.06"), usdt("10"))


def test_market_open_the_book_cannot_fill_ends_canceled() -> None:
    """A MARKET OPEN is FILLED when its money is spent (what is left pays for no contract at
    the price it stopped at), CANCELED with its fills when the book runs out first."""
    r = rig(1, 2)
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 2, 500_000)  # 2 contracts of 50 USDT on offer
    # 200 USDT would buy 4: the book has 2.
    state = r.order(1, LINEAR, BUY, OPEN, type=MARKET, money=200 * UNIT)
    assert (state.status, state.qty, state.filled) == (CANCELED, 2, 2)
    assert state.filled_value == usdt("100")
    r.order(2, LINEAR, SELL, OPEN, 2, 500_000)
    # 100 USDT buys exactly the 2 on offer; 90 USDT buys 1 and its 40 USDT buy nothing more.
    state = r.order(1, LINEAR, BUY, OPEN, type=MARKET, money=100 * UNIT)
    assert (state.status, state.filled) == (FILLED, 2)
    r.order(2, LINEAR, SELL, OPEN, 2, 500_000)
    state = r.order(1, LINEAR, BUY, OPEN, type=MARKET, money=90 * UNIT)
    assert (state.status, state.filled) == (FILLED, 1)
    assert audit.check(r.engine) == []


def test_market_sell_open_by_value_goes_on_past_a_bid_level_it_empties_exactly() -> None:
    """A lower bid costs less per contract: money left after emptying a level exactly may buy
    at the next one (the review's case against a first version of the FILLED/CANCELED rule)."""
    r = rig(1, 2)
    r.index(LINEAR, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 2, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 5, 490_000)
    # 149 USDT: the 2 bids at 50,000.0 (100 USDT), then 49 USDT pays for 1 at 49,000.0.
    state = r.order(2, LINEAR, SELL, OPEN, type=MARKET, money=149 * UNIT)
    assert (state.status, state.qty, state.filled) == (FILLED, 3, 3)
    assert state.filled_value == usdt("149")
    assert audit.check(r.engine) == []


def test_market_sell_open_by_value_passes_a_level_of_its_own_bids() -> None:
    """A level holding only the seller's own bids is passed (self-trade prevention cancels
    them), not taken as where the money stops: 49 USDT cannot buy at 50,000.0 but does at
    49,000.0, behind it."""
    r = rig(1, 2)
    r.index(LINEAR, 500_000)
    own = r.order(2, LINEAR, BUY, OPEN, 1, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 5, 490_000)
    state = r.order(2, LINEAR, SELL, OPEN, type=MARKET, money=49 * UNIT)
    assert (state.status, state.qty, state.filled) == (FILLED, 1, 1)
    assert state.filled_value == usdt("49")
    assert r.fx.open_orders(2) == []  # its own bid was cancelled on the way
    assert r.fx.find_open(2, LINEAR, own.id, None) is None
    assert audit.check(r.engine) == []


def test_linear_average_entry_realized_and_unrealized_pnl() -> None:
    r = rig(1, 3)
    start = 100_000 * UNIT
    r.index(LINEAR, 500_000)

    # Two opens at different prices.
    #   2 @ 50,000.0: value 100 USDT, margin 10,   taker fee 0.06
    #   3 @ 51,000.0: value 153 USDT, margin 15.3, taker fee 0.0918
    r.order(3, LINEAR, SELL, OPEN, 2, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 2, 500_000)
    r.order(3, LINEAR, SELL, OPEN, 3, 510_000)
    r.order(1, LINEAR, BUY, OPEN, 3, 510_000)
    pos = r.long(1, LINEAR)
    contract = r.fx.contracts[LINEAR]
    # cost 100 + 153 = 253 USDT for 5 x 0.001 BTC: average 253 / 0.005 = 50,600.0
    assert (pos.volume, pos.cost, pos.margin) == (5, usdt("253"), usdt("25.3"))
    assert pos.trade_fee == usdt("0.1518")
    assert average_price(contract, pos.volume, pos.cost) == 506_000
    assert r.balance(1, USDT) == (start - usdt("25.3") - usdt("0.1518"), usdt("25.3"))

    # Partial close: SELL CLOSE 2 @ 52,000.0 into user 3's bid.
    #   value 2 x 0.001 x 52,000 = 104 USDT; entry cost of 2/5 = 101.2 -> P&L +2.8
    #   close taker fee 104 x 0.06 % = 0.0624; margin released 25.3 x 2/5 = 10.12
    #   free += 10.12 + 2.8 - 0.0624 = 12.8576
    free = r.free(1, USDT)
    r.order(3, LINEAR, BUY, OPEN, 2, 520_000)
    r.order(1, LINEAR, SELL, CLOSE, 2, 520_000)
    assert (pos.volume, pos.cost, pos.margin) == (3, usdt("151.8"), usdt("15.18"))
    assert pos.close_profit == usdt("2.8")
    assert pos.trade_fee == usdt("0.1518") + usdt("0.0624")
    assert r.free(1, USDT) == free + usdt("12.8576")
    assert r.balance(1, USDT)[1] == usdt("15.18")

    # Unrealized P&L at a mark of 51,234.5 (index 512,345 ticks; median(index, index, last
    # 52,000.0) = index): value 3 x 0.001 x 51,234.5 = 153.7035 -> +1.9035 USDT.
    r.index(LINEAR, 512_345)
    assert r.fx.mark(LINEAR) == 512_345
    assert unrealized(contract, pos, r.fx.mark(LINEAR)) == usdt("1.9035")
    # Unrealized profit is not spendable: available is the free cash.
    assert r.fx.available(1, USDT) == r.free(1, USDT)

    # At a mark of 49,500.0: value 148.5 -> -3.3 USDT, which available deducts.
    r.index(LINEAR, 495_000)
    assert unrealized(contract, pos, r.fx.mark(LINEAR)) == -usdt("3.3")
    available = r.free(1, USDT) - usdt("3.3")
    assert r.fx.available(1, USDT) == available
    with pytest.raises(Reject):
        r.apply(FuturesTransfer(r.ts, 1, USDT, available + 1, False))

    # Full close: MARKET SELL CLOSE 3 into a bid of 49,000.0.
    #   value 3 x 0.001 x 49,000 = 147 USDT; entry cost 151.8 -> P&L -4.8
    #   fee 147 x 0.06 % = 0.0882; margin released 15.18
    #   free += 15.18 - 4.8 - 0.0882 = 10.2918
    free = r.free(1, USDT)
    r.order(3, LINEAR, BUY, OPEN, 3, 490_000)
    r.order(1, LINEAR, SELL, CLOSE, 3, type=MARKET)
    assert r.pos(1, LINEAR, BUY) is None
    assert r.free(1, USDT) == free + usdt("10.2918")
    assert r.balance(1, USDT)[1] == 0
    # The closed position's record: realized 2.8 - 4.8 = -2.0, fees 0.1518 + 0.0624 +
    # 0.0882 = 0.3024, closed 5 contracts for 104 + 147 = 251 USDT.
    assert (pos.volume, pos.cost, pos.margin) == (0, 0, 0)
    assert pos.close_profit == -usdt("2")
    assert pos.trade_fee == usdt("0.3024")
    assert (pos.close_volume, pos.close_value) == (5, usdt("251"))
    assert pos.realized == -usdt("2.3024")
    # Round trip: the account is down exactly P&L and fees, and may now move it all out.
    assert r.balance(1, USDT) == (start - usdt("2.3024"), 0)
    r.apply(FuturesTransfer(r.ts, 1, USDT, start - usdt("2.3024"), False))
    assert audit.check(r.engine) == []


def test_linear_short_pnl_is_the_mirror() -> None:
    r = rig(1, 3)
    start = 100_000 * UNIT
    r.index(LINEAR, 500_000)
    # Short 4 @ 50,000.0 (taker): value 200, margin 20, fee 0.12.
    r.order(3, LINEAR, BUY, OPEN, 4, 500_000)
    r.order(1, LINEAR, SELL, OPEN, 4, 500_000)
    pos = r.short(1, LINEAR)
    # Mark 48,000.0: value 192 -> short gains 200 - 192 = 8 USDT.
    r.index(LINEAR, 480_000)
    assert unrealized(r.fx.contracts[LINEAR], pos, r.fx.mark(LINEAR)) == usdt("8")
    # Close 4 @ 48,500.0 (taker): value 194 -> +6; fee 0.1164; release 20.
    r.order(3, LINEAR, SELL, OPEN, 4, 485_000)
    r.order(1, LINEAR, BUY, CLOSE, 4, 485_000)
    assert pos.close_profit == usdt("6")
    # net: +6 - 0.12 - 0.1164 = +5.7636
    assert r.balance(1, USDT) == (start + usdt("5.7636"), 0)


# =============================================================================== inverse


def test_inverse_open_holds_initial_margin_plus_fee_and_charges_maker_and_taker() -> None:
    r = rig(1, 2)
    start = 10 * UNIT
    r.index(INVERSE, 400_000)  # 40,000.0 USD

    # User 2 rests SELL OPEN 100 @ 40,000.0:
    #   value  = 100 x 10 USD / 40,000 = 0.025 BTC = 2,500,000 units
    #   margin = 2,500,000 / 10 = 250,000; maker fee 2,500,000 x 0.02 % = 500
    maker = r.order(2, INVERSE, SELL, OPEN, 100, 400_000)
    assert maker.held == 250_500
    assert r.balance(2, BTC) == (start - 250_500, 250_500)

    # User 1 takes 40: value 400 / 40,000 = 0.01 BTC = 1,000,000; margin 100,000;
    # taker fee 1,000,000 x 0.06 % = 600.
    taker = r.order(1, INVERSE, BUY, OPEN, 40, 400_000)
    assert (taker.status, taker.filled_value) == (FILLED, 1_000_000)
    long = r.long(1, INVERSE)
    assert (long.volume, long.cost, long.margin, long.trade_fee) == (40, 1_000_000, 100_000, 600)
    assert r.balance(1, BTC) == (start - 100_600, 100_000)

    # Maker: margin 100,000 and fee 1,000,000 x 0.02 % = 200 out of its hold, which keeps
    # 250,500 - 100,200 = 150,300 for the 60 contracts left.
    short = r.short(2, INVERSE)
    assert (short.volume, short.cost, short.margin) == (40, 1_000_000, 100_000)
    assert short.trade_fee == 200
    [resting] = r.fx.open_orders(2, INVERSE)
    assert resting.held == 150_300
    assert r.balance(2, BTC) == (start - 250_500, 150_300 + 100_000)
    assert r.fees(BTC) == 800


def test_inverse_average_entry_realized_and_unrealized_pnl() -> None:
    r = rig(1, 3)
    start = 10 * UNIT
    r.index(INVERSE, 400_000)
    contract = r.fx.contracts[INVERSE]

    # 40 @ 40,000.0: value 400 / 40,000 = 0.01 BTC = 1,000,000, margin 100,000, fee 600
    # 60 @ 50,000.0: value 600 / 50,000 = 0.012 BTC = 1,200,000, margin 120,000, fee 720
    r.order(3, INVERSE, SELL, OPEN, 40, 400_000)
    r.order(1, INVERSE, BUY, OPEN, 40, 400_000)
    r.index(INVERSE, 500_000)  # (opening 25 % above the mark at 10x would start bankrupt)
    r.order(3, INVERSE, SELL, OPEN, 60, 500_000)
    r.order(1, INVERSE, BUY, OPEN, 60, 500_000)
    pos = r.long(1, INVERSE)
    assert (pos.volume, pos.cost, pos.margin, pos.trade_fee) == (100, 2_200_000, 220_000, 1_320)
    # Average entry: 1,000 USD / 0.022 BTC = 45,454.5454... USD (the harmonic mean).
    avg = average_price(contract, pos.volume, pos.cost)
    assert near(avg, "454545.4545454545454545454545")
    assert r.balance(1, BTC) == (start - 220_000 - 1_320, 220_000)

    # Partial close: SELL CLOSE 50 @ 44,000.0.
    #   value 500 / 44,000 = 0.0113636363.. BTC -> 1,136,363 (rounded down)
    #   entry cost of 50/100 = 1,100,000; a long's inverse P&L = cost - value
    #   = 50 x 10 x (1/45,454.54.. - 1/44,000) = -36,363
    #   fee 1,136,363 x 0.06 % = 681.8 -> 681; margin released 220,000 x 1/2 = 110,000
    #   free += 110,000 - 36,363 - 681 = 72,956
    free = r.free(1, BTC)
    r.order(3, INVERSE, BUY, OPEN, 50, 440_000)
    r.order(1, INVERSE, SELL, CLOSE, 50, 440_000)
    assert (pos.volume, pos.cost, pos.margin) == (50, 1_100_000, 110_000)
    assert pos.close_profit == -36_363
    assert pos.close_value == 1_136_363
    assert r.free(1, BTC) == free + 72_956

    # Unrealized at a mark of 48,000.0: value 500 / 48,000 = 0.01041666.. -> 1,041,666;
    # P&L = 1,100,000 - 1,041,666 = +58,334 (a long gains as the price rises).
    r.index(INVERSE, 480_000)
    assert r.fx.mark(INVERSE) == 480_000
    assert unrealized(contract, pos, 480_000) == 58_334
    # And at 42,000.0: value 500 / 42,000 = 0.0119047.. -> 1,190,476 -> -90,476.
    assert unrealized(contract, pos, 420_000) == -90_476

    # Full close: MARKET SELL CLOSE 50 into a bid of 50,000.0.
    #   value 500 / 50,000 = 0.01 BTC = 1,000,000 -> P&L 1,100,000 - 1,000,000 = +100,000
    #   fee 600; released 110,000; free += 110,000 + 100,000 - 600 = 209,400
    free = r.free(1, BTC)
    r.order(3, INVERSE, BUY, OPEN, 50, 500_000)
    r.order(1, INVERSE, SELL, CLOSE, 50, type=MARKET)
    assert r.pos(1, INVERSE, BUY) is None
    assert r.free(1, BTC) == free + 209_400
    # Realized: -36,363 + 100,000 = 63,637; fees 600 + 720 + 681 + 600 = 2,601.
    assert pos.close_profit == 63_637
    assert pos.trade_fee == 2_601
    assert pos.realized == 61_036
    assert r.balance(1, BTC) == (start + 61_036, 0)


def test_inverse_short_pnl() -> None:
    r = rig(1, 3)
    start = 10 * UNIT
    r.index(INVERSE, 400_000)
    # Short 80 @ 40,000.0 (taker): value 800 / 40,000 = 0.02 BTC = 2,000,000;
    # margin 200,000; fee 1,200.
    r.order(3, INVERSE, BUY, OPEN, 80, 400_000)
    r.order(1, INVERSE, SELL, OPEN, 80, 400_000)
    pos = r.short(1, INVERSE)
    # A short gains as the price falls: at 32,000.0, value 800 / 32,000 = 0.025 BTC,
    # P&L = value - cost = 2,500,000 - 2,000,000 = +500,000.
    r.index(INVERSE, 320_000)
    assert unrealized(r.fx.contracts[INVERSE], pos, r.fx.mark(INVERSE)) == 500_000
    # Close at 32,000.0 as taker: fee 2,500,000 x 0.06 % = 1,500; net +500,000 - 1,200 - 1,500.
    r.order(3, INVERSE, SELL, OPEN, 80, 320_000)
    r.order(1, INVERSE, BUY, CLOSE, 80, 320_000)
    assert pos.close_profit == 500_000
    assert r.balance(1, BTC) == (start + 500_000 - 2_700, 0)


# ====================================================== liquidation and bankruptcy prices


def _isolated(r: Rig, user: int, contract: str, side: str, volume: int, price: int) -> None:
    """``user`` opens an isolated position of ``volume`` at ``price`` against user 9."""
    r.apply(SetMarginMode(r.ts, user, contract, ISOLATED))
    r.order(9, contract, BUY if side == SELL else SELL, OPEN, volume, price)
    r.order(user, contract, side, OPEN, volume, price)


def test_linear_liquidation_and_bankruptcy_prices() -> None:
    r = rig(1, 2, 3, 9)
    r.index(LINEAR, 500_000)
    contract = r.fx.contracts[LINEAR]
    _isolated(r, 1, LINEAR, BUY, 10, 500_000)
    _isolated(r, 2, LINEAR, SELL, 10, 500_000)
    r.apply(SetLeverage(r.ts, 3, LINEAR, 20))
    _isolated(r, 3, LINEAR, BUY, 10, 500_000)

    # Long 10 @ 50,000, margin 50 (cost 500):
    #   bankruptcy: 50 + (v - 500) = 0         -> v = 450          -> 45,000.0
    #   liquidation: 50 + (v - 500) = 0.005 v  -> v = 450 / 0.995 -> 45,226.1306532...
    long = r.long(1, LINEAR)
    assert long.margin == usdt("50")
    assert bankruptcy_price(contract, long, long.margin) == 450_000
    assert bankruptcy_limit(contract, long, long.margin) == 450_000
    assert near(liquidation_price(contract, long, long.margin), "452261.3065326633165829145729")

    # Short 10 @ 50,000, margin 50:
    #   bankruptcy: 50 + (500 - v) = 0         -> v = 550          -> 55,000.0
    #   liquidation: 50 + (500 - v) = 0.005 v  -> v = 550 / 1.005 -> 54,726.3681592...
    short = r.short(2, LINEAR)
    assert bankruptcy_price(contract, short, short.margin) == 550_000
    assert bankruptcy_limit(contract, short, short.margin) == 550_000
    assert near(liquidation_price(contract, short, short.margin), "547263.6815920398009950248756")

    # Long 10 @ 50,000 at leverage 20, margin 25:
    #   bankruptcy v = 475 -> 47,500.0; liquidation v = 475 / 0.995 -> 47,738.6934673...
    lev20 = r.long(3, LINEAR)
    assert lev20.margin == usdt("25")
    assert bankruptcy_price(contract, lev20, lev20.margin) == 475_000
    assert near(liquidation_price(contract, lev20, lev20.margin), "477386.9346733668341708542714")

    # Adding 5 USDT of margin to the first long moves both prices down by 5 / 0.01 BTC:
    #   bankruptcy v = 445 -> 44,500.0; liquidation 445 / 0.995 -> 44,723.6180904...

    r.apply(AdjustPositionMargin(r.ts, 1, long.id, usdt("5")))
    assert long.margin == usdt("55")
    assert bankruptcy_price(contract, long, long.margin) == 445_000
    assert near(liquidation_price(contract, long, long.margin), "447236.1809045226130653266332")


def test_linear_liquidation_happens_exactly_at_the_liquidation_price() -> None:
    r = rig(2, 9)
    r.fund(1, USDT, 1_000 * UNIT)
    r.index(LINEAR, 500_000)
    _isolated(r, 1, LINEAR, BUY, 10, 500_000)
    long = r.long(1, LINEAR)
    # Liquidation price 45,226.1306..: at 45,226.2 the equity 50 - 47.738 = 2.262 is above
    # the maintenance 452.262 x 0.5 % = 2.26131; at 45,226.1 it is 2.261 <= 2.261305.
    r.index(LINEAR, 452_262)
    assert r.pos(1, LINEAR, BUY) is long and not long.liquidated
    r.index(LINEAR, 452_261)
    assert r.pos(1, LINEAR, BUY) is None
    assert long.liquidated


def test_inverse_liquidation_and_bankruptcy_prices() -> None:
    r = rig(1, 2, 9)
    r.index(INVERSE, 400_000)
    contract = r.fx.contracts[INVERSE]
    _isolated(r, 1, INVERSE, BUY, 100, 400_000)
    _isolated(r, 2, INVERSE, SELL, 100, 400_000)

    # Long 100 @ 40,000: cost 0.025 BTC = 2,500,000, margin 250,000. Its P&L is
    # cost - v (v the value in BTC), so:
    #   bankruptcy: 250,000 + 2,500,000 - v = 0 -> v = 2,750,000
    #               -> price = 1,000 USD / 0.0275 BTC = 36,363.6363..
    #               (= 40,000 / 1.1); the closing SELL limit rounds up to 36,363.7
    #   liquidation: 2,750,000 - v = 0.005 v -> v = 2,750,000 / 1.005
    #               -> price = 40,000 x 1.005 / 1.1 = 36,545.4545..
    long = r.long(1, INVERSE)
    assert (long.cost, long.margin) == (2_500_000, 250_000)
    assert near(bankruptcy_price(contract, long, long.margin), "363636.3636363636363636363636")
    assert bankruptcy_limit(contract, long, long.margin) == 363_637
    assert near(liquidation_price(contract, long, long.margin), "365454.5454545454545454545455")

    # Short 100 @ 40,000: P&L v - cost:
    #   bankruptcy: 250,000 + v - 2,500,000 = 0 -> v = 2,250,000 -> 40,000 / 0.9 = 44,444.44..
    #               the closing BUY limit rounds down to 44,444.4
    #   liquidation: v - 2,250,000 = 0.005 v -> v = 2,250,000 / 0.995
    #               -> 40,000 x 0.995 / 0.9 = 44,222.22..
    short = r.short(2, INVERSE)
    assert near(bankruptcy_price(contract, short, short.margin), "444444.4444444444444444444444")
    assert bankruptcy_limit(contract, short, short.margin) == 444_444
    assert near(liquidation_price(contract, short, short.margin), "442222.2222222222222222222223")


def test_inverse_liquidation_happens_exactly_at_the_liquidation_price() -> None:
    r = rig(9)
    r.fund(1, BTC, UNIT)
    r.index(INVERSE, 400_000)
    _isolated(r, 1, INVERSE, BUY, 100, 400_000)
    long = r.long(1, INVERSE)
    # At 36,545.5: v = 10**12 // 365,455 = 2,736,315; equity 2,750,000 - 2,736,315 = 13,685
    # > maintenance 2,736,315 x 0.5 % = 13,681 (rounded down): safe.
    r.index(INVERSE, 365_455)
    assert r.pos(1, INVERSE, BUY) is long
    # At 36,545.4: v = 2,736,322; equity 13,678 <= 13,681: liquidated.
    r.index(INVERSE, 365_454)
    assert r.pos(1, INVERSE, BUY) is None
    assert long.liquidated


# =============================================================================== funding


def funding_records(result: Result) -> dict[str, FundingRecord]:
    out = {}
    for event in result.events:
        if isinstance(event, FuturesChanged) and isinstance(event.doc, FundingRecord):
            out[event.contract] = event.doc
    return out


def test_linear_funding_rate_from_premium_band_and_payments() -> None:
    r = rig(1, 2, 3, 4)
    r.index(LINEAR, 500_003)  # 50,000.3: values that do not divide evenly
    # User 2 (isolated) short 9 against user 1 (cross) long 7 and user 4 (cross) long 2.
    r.apply(SetMarginMode(r.ts, 2, LINEAR, ISOLATED))
    r.order(2, LINEAR, SELL, OPEN, 9, 500_003)
    r.order(1, LINEAR, BUY, OPEN, 7, 500_003)
    r.order(4, LINEAR, BUY, OPEN, 2, 500_003)
    assert r.oi(LINEAR) == (9, 9)
    # User 3 quotes 200 contracts (10,000 USDT, the impact money) at 50,040.3 / 50,060.3:
    # the impact bid is 40.0 (400 ticks) above the index.
    bid = r.order(3, LINEAR, BUY, OPEN, 200, 500_403)
    r.order(3, LINEAR, SELL, OPEN, 200, 500_603)

    # Ticks one minute apart sample the premium: 400 / 500,003 = 0.00079999.. -> 79,999e-8.
    for minute in (1, 2, 3):
        r.apply(FuturesTick(T0 + minute * MINUTE))
    state = r.fx.states[LINEAR]
    assert (state.premium_samples, state.premium_sum) == (3, 3 * 79_999)
    # A second tick in the same minute takes no sample.
    r.apply(FuturesTick(T0 + 3 * MINUTE + 30_000))
    assert state.premium_samples == 3

    # The bid moves to 50,050.3, 500 ticks above -> 99,999e-8.
    r.ts = T0 + 3 * MINUTE + 40_000
    r.apply(FuturesCancel(r.ts, 3, LINEAR, order_id=bid.id))
    bid = r.order(3, LINEAR, BUY, OPEN, 200, 500_503)
    r.apply(FuturesTick(T0 + 4 * MINUTE))
    assert (state.premium_samples, state.premium_sum) == (4, 3 * 79_999 + 99_999)
    # A side thinner than the impact money gives no premium: the minute counts as 0.
    r.apply(FuturesCancel(r.ts, 3, LINEAR, order_id=bid.id))
    thin = r.order(3, LINEAR, BUY, OPEN, 199, 500_503)
    r.apply(FuturesTick(T0 + 5 * MINUTE))
    assert (state.premium_samples, state.premium_sum) == (5, 3 * 79_999 + 99_999)
    assert r.fx.states[LINEAR].last_funding_rate == 0
    r.apply(FuturesCancel(r.ts, 3, LINEAR, order_id=thin.id))
    r.order(3, LINEAR, BUY, OPEN, 200, 500_503)  # back for the interval's last sample

    free1, free4 = r.free(1, USDT), r.free(4, USDT)
    margin2 = r.short(2, LINEAR).margin
    fees, fund = r.fees(USDT), r.fund_balance(USDT)

    result = r.apply(FuturesTick(T0 + INTERVAL))
    # The tick samples its minute first (99,999), then settles:
    # premium = (3 x 79,999 + 99,999 + 0 + 99,999) / 6 = 73,332 (0.073332 %)
    # rate = premium + clamp(interest - premium, +-50,000)
    #      = 73,332 + clamp(10,000 - 73,332 = -63,332) = 73,332 - 50,000 = 23,332
    # (under the 750,000 cap). The mark is the index: median(50,000.3, 50,000.3 + the
    # basis average, last trade 50,000.3).
    record = funding_records(result)[LINEAR]
    assert (record.rate, record.mark) == (23_332, 500_003)
    assert r.fx.states[LINEAR].last_funding_rate == 23_332
    # Longs pay (rate > 0), each its value at the mark x rate, rounded down:
    #   long 7: 7 x 0.001 x 50,000.3 = 350.0021 USDT = 35,000,210,000 units
    #           x 0.00023332 = 8,166,248.99.. -> 8,166,248
    #   long 2: 10,000,060,000 x 0.00023332 = 2,333,213.99.. -> 2,333,213
    # The short is owed 45,000,270,000 x 0.00023332 = 10,499,462.99 -> 10,499,462, but
    # receives exactly what was collected: 8,166,248 + 2,333,213 = 10,499,461.
    assert r.free(1, USDT) == free1 - 8_166_248
    assert r.free(4, USDT) == free4 - 2_333_213
    assert r.short(2, LINEAR).margin == margin2 + 10_499_461  # isolated: into its margin
    assert record.paid == 10_499_461
    assert r.long(1, LINEAR).capital_fee == -8_166_248
    assert r.long(4, LINEAR).capital_fee == -2_333_213
    assert r.short(2, LINEAR).capital_fee == 10_499_461
    total = sum(p.capital_fee for p in r.fx.by_contract[LINEAR].values())
    assert total == 0
    assert (r.fees(USDT), r.fund_balance(USDT)) == (fees, fund)
    assert state.premium_samples == 0 and state.premium_sum == 0
    # The mark now carries the new rate over the time to the next funding (a whole interval):
    #   index x (1 + 0.00023332 x 8 h / 8 h) = 500,003 + 116.66.. -> 500,119 (rounded down);
    #   the basis average (1e-4 ticks) starts at 0 and moves 2/31 of the way to each sample:
    #   400, 400, 400, 500 ticks, 0 (the thin minute), 500 -> 1,198,676 -> 119 ticks ->
    #   500,122; median(500,119, 500,122, last 500,003) = 500,119.
    assert state.basis_ema == 1_198_676
    assert r.fx.mark(LINEAR) == 500_119

    # Funding is due once per time: another tick in the same interval pays nothing.
    r.apply(FuturesTick(T0 + INTERVAL + 2 * MINUTE))
    assert r.long(1, LINEAR).capital_fee == -8_166_248


def test_inverse_funding_capped_shorts_pay_longs() -> None:
    r = rig(1, 2, 3, 4)
    r.index(INVERSE, 399_997)  # 39,999.7 USD
    # Shorts: user 2 (cross) 60 and user 4 (isolated) 40; long: user 1 (cross) 100.
    r.apply(SetMarginMode(r.ts, 4, INVERSE, ISOLATED))
    r.order(2, INVERSE, SELL, OPEN, 60, 399_997)
    r.order(4, INVERSE, SELL, OPEN, 40, 399_997)
    r.order(1, INVERSE, BUY, OPEN, 100, 399_997)
    # A book far below the index, 1,000 contracts (10,000 USD, the impact money) a side:
    # 39,200.0 / 39,300.0, the impact ask 699.7 below the index.
    r.order(3, INVERSE, BUY, OPEN, 1_000, 392_000)
    r.order(3, INVERSE, SELL, OPEN, 1_000, 393_000)
    for minute in (1, 2, 3):
        r.apply(FuturesTick(T0 + minute * MINUTE))
    # premium sample: -6,997 x 10**8 / 399,997 = -1,749,263.1 -> -1,749,264 (rounded down)
    state = r.fx.states[INVERSE]
    assert (state.premium_samples, state.premium_sum) == (3, 3 * -1_749_264)
    free1, free2 = r.free(1, BTC), r.free(2, BTC)
    margin4 = r.short(4, INVERSE).margin

    result = r.apply(FuturesTick(T0 + INTERVAL))
    # rate = -1,749,264 + clamp(10,000 + 1,749,264, +-50,000) = -1,699,264 -> capped at
    # -750,000. The mark: median(39,999.7, 39,999.7 - 699.7, 39,999.7) = 39,999.7.
    record = funding_records(result)[INVERSE]
    assert (record.rate, record.mark) == (-750_000, 399_997)
    # Negative rate: shorts pay longs, value at the mark x 0.75 %, rounded down:
    #   short 60: 600 USD / 39,999.7 = 0.0150001125 BTC -> 1,500,011 -> 11,250.08 -> 11,250
    #   short 40: 400 / 39,999.7 -> 1,000,007 -> 7,500.05 -> 7,500
    #   long 100: owed 1,000 / 39,999.7 -> 2,500,018 -> 18,750.13 -> 18,750; gets 18,750
    assert r.free(2, BTC) == free2 - 11_250
    assert r.short(4, INVERSE).margin == margin4 - 7_500
    assert r.free(1, BTC) == free1 + 18_750
    assert record.paid == 18_750
    assert sum(p.capital_fee for p in r.fx.by_contract[INVERSE].values()) == 0


def test_funding_without_premium_samples_is_the_interest_rate() -> None:
    r = rig(1, 2)
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 4, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 4, 500_000)
    # No two-sided book: no samples, premium 0, rate = 0 + clamp(0.01 %) = 10,000e-8.
    r.apply(FuturesTick(T0 + MINUTE))
    free1, free2 = r.free(1, USDT), r.free(2, USDT)
    result = r.apply(FuturesTick(T0 + INTERVAL))
    assert funding_records(result)[LINEAR].rate == 10_000
    # 4 x 0.001 x 50,000 = 200 USDT x 0.01 % = 0.02 USDT, long to short.
    assert r.free(1, USDT) == free1 - 2 * CENT
    assert r.free(2, USDT) == free2 + 2 * CENT


def test_a_small_premium_leaves_the_interest_rate() -> None:
    r = rig(1, 2, 3)
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 4, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 4, 500_000)
    # Quotes of 200 contracts at 50,001.0 / 50,003.0: the impact bid 10 ticks above the
    # index: premium 10 x 10**8 / 500,000 = 2,000e-8 (0.002 %).
    r.order(3, LINEAR, BUY, OPEN, 200, 500_010)
    r.order(3, LINEAR, SELL, OPEN, 200, 500_030)
    r.apply(FuturesTick(T0 + MINUTE))
    state = r.fx.states[LINEAR]
    assert state.premium_sum == 2_000
    result = r.apply(FuturesTick(T0 + INTERVAL))
    # rate = 2,000 + clamp(10,000 - 2,000 = 8,000, +-50,000) = 10,000: the interest rate.
    assert funding_records(result)[LINEAR].rate == 10_000


def test_funding_settles_once_after_a_long_gap() -> None:
    r = rig(1, 2)
    r.index(LINEAR, 500_000)
    r.order(2, LINEAR, SELL, OPEN, 4, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 4, 500_000)
    r.apply(FuturesTick(T0 + MINUTE))
    free1 = r.free(1, USDT)
    # Five funding times missed: funding is paid once (0.02 USDT, as above).
    result = r.apply(FuturesTick(T0 + 5 * INTERVAL + 7 * MINUTE))
    assert list(funding_records(result)) == [LINEAR, "E-ETH-USDT", INVERSE]
    assert r.free(1, USDT) == free1 - 2 * CENT
    assert r.fx.states[LINEAR].funding_time == T0 + 5 * INTERVAL


# =============================================================================== engine bugs


def test_market_sell_open_by_value_over_two_bid_levels() -> None:
    r = rig(1, 2)
    start = 100_000 * UNIT
    r.index(LINEAR, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 5, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 5, 490_000)
    # MARKET SELL OPEN worth 149 USDT. The best bid (50,000.0, 50 USDT a contract) has 5
    # contracts: 149 USDT sells 2 there (100 USDT); the 49 USDT left cannot pay for a third
    # at that bid, and a SELL cannot skip the best bid for the 49,000.0 one.
    state = r.order(2, LINEAR, SELL, OPEN, type=MARKET, money=149 * UNIT)
    assert state.filled == 2
    assert state.filled_value == usdt("100")
    # Margin 10, taker fee 100 x 0.06 % = 0.06.
    assert r.balance(2, USDT) == (start - usdt("10.06"), usdt("10"))
    assert audit.check(r.engine) == []
