"""Attacks on prices, each a test: what one account (or two of one owner) can do to the
index, the mark, the price bands and the insurance fund with little money.

E-BTC-USDT takes its index from BTCUSDT: the mid at 10,000 USDT of depth (weight 2) and the
last trade (weight 1), smoothed over 60 s (time-weighted median), sources further than 5 %
from their weighted median left out, moving at most 0.5 % a second; orders trade at most
5 % from the mark (futures) or from the last minute's median trade price (spot). Prices:
BTCUSDT in 0.01 USDT ticks, BTC in 1e-6 lots; E-BTC-USDT in 0.1 USDT ticks, 0.001 BTC a
contract.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tradehall.codes import Reject
from tradehall.config import load_config
from tradehall.engine import audit
from tradehall.engine.commands import (
    AdjustPositionMargin,
    CancelOrder,
    Deposit,
    FuturesCancel,
    FuturesPlace,
    FuturesTick,
    FuturesTransfer,
    PlaceOrder,
    SetIndexPrice,
    SetLeverage,
    SettleFunding,
)
from tradehall.engine.contracts import IndexSpec
from tradehall.engine.engine import Engine
from tradehall.engine.futures import INSURANCE_ACCOUNT
from tradehall.engine.futures_model import (
    BY_LIQUIDATION,
    FundingRecord,
    FuturesOrderState,
    futures_account,
)
from tradehall.engine.orders import BUY, LIMIT, MARKET, SELL

BTC_F = "E-BTC-USDT"
PAIR = "BTCUSDT"
UNIT = 10**8
SPOT = 30_000_00  # 30000.00 in BTCUSDT ticks
FUT = 300_000  # 30000.0 in E-BTC-USDT ticks
HONEST_MAKER, VICTIM, VICTIM_MAKER, ALICE, BOB = 1, 2, 3, 4, 5


class Venue:
    """An engine with every price guard on, a clock, and the usual moves."""

    def __init__(self, index: IndexSpec | None = None) -> None:
        markets = load_config().markets
        if index is not None:
            contracts = {s: replace(c, index=index) for s, c in markets.contracts.items()}
            markets = replace(markets, contracts=contracts)
        self.engine = Engine(markets, check_invariants=True)
        self.fx = self.engine.futures
        self.ts = 1_000_000
        self._tx = itertools.count(1)

    def apply(self, cmd: Any) -> Any:
        return self.engine.apply(cmd)

    def fund(self, user: int, usdt: int, btc: int = 0, futures_usdt: int = 0) -> None:
        """``usdt`` and ``btc`` in spot, ``futures_usdt`` more in futures."""
        for asset, amount in (("USDT", usdt + futures_usdt), ("BTC", btc)):
            if amount:
                self.apply(Deposit(self.ts, user, asset, amount * UNIT, f"tx-{next(self._tx)}"))
        if futures_usdt:
            self.apply(FuturesTransfer(self.ts, user, "USDT", futures_usdt * UNIT, True))

    def spot(self, user: int, side: str, price: int, lots: int, kind: str = LIMIT) -> Any:
        return self.apply(PlaceOrder(self.ts, user, PAIR, side, kind, price, lots)).reply

    def futures(self, user: int, side: str, action: str, volume: int, price: int = 0) -> Any:
        kind = LIMIT if price else MARKET
        cmd = FuturesPlace(self.ts, user, BTC_F, side, action, kind, price, volume)
        return self.apply(cmd)

    def tick(self, seconds: int = 1) -> list[Any]:
        """One price tick a second, as the scheduler applies them; the liquidations seen."""
        liquidated = []
        for _ in range(seconds):
            self.ts += 1_000
            for event in self.apply(FuturesTick(self.ts)).events:
                doc = getattr(event, "doc", None)
                if isinstance(doc, FuturesOrderState) and doc.source == BY_LIQUIDATION:
                    liquidated.append(doc)
        return liquidated

    def index(self) -> int:
        return self.fx.states[BTC_F].index

    def mark(self) -> int:
        return self.fx.states[BTC_F].mark

    def fund_balance(self) -> int:
        return self.engine.ledger.free(INSURANCE_ACCOUNT, "USDT")

    def audit_ok(self) -> None:
        assert audit.check(self.engine) == [], audit.check(self.engine)


def honest_book(venue: Venue, depth_btc: int = 2) -> None:
    """A maker quoting BTCUSDT 0.05 % either side of 30000 with ``depth_btc`` a side, a
    trade at 30000, a minute of ticks: the index and the spot reference are 30000."""
    venue.fund(HONEST_MAKER, 10_000_000, 1_000)
    venue.fund(VICTIM_MAKER, 10_000_000, 1_000)
    venue.spot(HONEST_MAKER, SELL, SPOT, 1_000)
    venue.spot(VICTIM_MAKER, BUY, SPOT, 1_000)
    for step in range(depth_btc * 4):
        lots = 250_000  # 0.25 BTC a level
        venue.spot(HONEST_MAKER, BUY, SPOT - 15_00 - step * 100, lots)
        venue.spot(HONEST_MAKER, SELL, SPOT + 15_00 + step * 100, lots)
    venue.tick(61)
    assert venue.index() == FUT


def victims(venue: Venue, leverage: int = 10) -> None:
    """A long and a short of 100 contracts each at 30000, ``leverage``x cross."""
    venue.fund(VICTIM, 1_000_000, 0, 100_000)
    venue.fund(VICTIM_MAKER, 0, 0, 100_000)
    for user in (VICTIM, VICTIM_MAKER):
        venue.apply(SetLeverage(venue.ts, user, BTC_F, leverage))
    venue.futures(VICTIM_MAKER, SELL, "OPEN", 100, FUT)
    venue.futures(VICTIM, BUY, "OPEN", 100, FUT)


def attackers(venue: Venue, usdt: int = 10_000, btc: int = 1) -> None:
    venue.fund(ALICE, usdt, btc, usdt)
    venue.fund(BOB, usdt, btc, usdt)


# --------------------------------------------------------------------------- the audit's case


def test_a_tiny_trade_far_from_the_market_cannot_print_and_the_index_does_not_follow() -> None:
    """The audit's case: 5 USDT traded 33 % below the market moved the index and put other
    traders' positions under water. The spot band refuses the far price; and where no band
    stood in the way (a thin book, the band off), the smoothed sources keep the index."""
    venue = Venue()
    honest_book(venue)
    victims(venue)
    attackers(venue)
    with pytest.raises(Reject) as refused:
        venue.spot(ALICE, SELL, 20_000_00, 250)  # 0.00025 BTC, 5 USDT at 20000
    assert refused.value.code == -1138 and "below the price band" in refused.value.msg
    venue.audit_ok()


def test_a_tiny_print_on_a_thin_book_moves_the_index_at_most_the_bound() -> None:
    """No depth for the mid, no spot band: the attacker's 5 USDT print at 20000 is the last
    price. The index holds until that price has held half the smoothing window, and then
    moves at most 0.5 % a second: nobody at 10x is liquidated in the next minute."""
    markets = load_config().markets
    venue = Venue()
    venue.engine.spot.pairs[PAIR] = replace(markets.pairs[PAIR], price_band=0)
    venue.fund(HONEST_MAKER, 10_000_000, 1_000)
    venue.spot(HONEST_MAKER, SELL, SPOT, 1_000)
    attackers(venue)
    venue.spot(ALICE, BUY, SPOT, 1_000)
    venue.tick(61)
    assert venue.index() == FUT
    victims(venue)
    venue.spot(ALICE, BUY, 20_000_00, 250)
    venue.spot(BOB, SELL, 20_000_00, 250)  # 5 USDT printed at 20000 (the only bid)
    marks = []
    for _ in range(29):
        assert venue.tick() == []
        marks.append(venue.mark())
    assert venue.index() == FUT and set(marks) == {FUT}  # the median has not turned
    liquidated = venue.tick(31)
    moved = FUT - venue.index()
    assert 0 < moved <= FUT * 5 // 1_000 * 31  # turned, then at most 0.5 % a second
    assert liquidated == []  # 10x longs are liquidated about 9.5 % down: not in a minute
    venue.audit_ok()


# --------------------------------------------------------------------------- wash trading


def test_a_wash_trade_pump_moves_the_index_a_third_of_its_distance_at_most() -> None:
    """Two accounts of one owner trade 0.01 BTC (1 % of the book's 2 BTC a side) with each
    other every second for a minute at the band's edge, 5 % up. The last price is one of
    three weights against the mid at depth: the index moves under 2 %, nobody at 10x is
    liquidated, and the pump cannot walk the band (its reference is the median)."""
    venue = Venue()
    honest_book(venue)
    victims(venue)
    attackers(venue, 100_000, 10)
    start = venue.index()
    for second in range(60):
        price = SPOT * 1049 // 1000
        venue.spot(BOB, SELL, price, 10_000)
        venue.spot(ALICE, BUY, price, 10_000)
        assert venue.tick() == [], second
    assert venue.index() - start < start * 2 // 100
    with pytest.raises(Reject):  # the band did not move with the pump
        venue.spot(ALICE, BUY, SPOT * 1060 // 1000, 10_000)
    venue.audit_ok()


# --------------------------------------------------------------------------- sweeping


def test_a_market_order_on_a_thin_book_stops_at_the_band() -> None:
    venue = Venue()
    honest_book(venue)
    attackers(venue, 1_000_000, 100)
    # Spot: bids down to 29940 (2 BTC), then one at 25000 that the band keeps out of reach.
    venue.fund(VICTIM, 1_000_000)
    venue.spot(VICTIM, BUY, 25_000_00, 1_000_000)
    sold = venue.spot(ALICE, SELL, 0, 5_000_000, MARKET)
    assert sold.status == "CANCELED" and sold.filled == 2_000_000
    best = venue.engine.spot.books[PAIR].bids.best()
    assert best is not None and best.price == 25_000_00  # untouched
    # Futures: asks 0.5 % and 9 % above the mark; a MARKET BUY stops at the band's edge.
    venue.fund(VICTIM_MAKER, 0, 0, 100_000)
    venue.futures(VICTIM_MAKER, SELL, "OPEN", 10, FUT + 150)
    venue.futures(VICTIM_MAKER, SELL, "OPEN", 50, FUT * 109 // 100)
    bought = venue.futures(BOB, BUY, "OPEN", 30).reply
    assert (bought.filled, bought.status) == (10, "CANCELED")
    venue.audit_ok()


# --------------------------------------------------------------------------- spoofing


def test_spoofed_quotes_do_not_move_the_depth_mid() -> None:
    """One-lot quotes inside the spread and large quotes 10 % away leave the mid at 10,000
    USDT of depth where it was; a one-lot bid above the band is refused."""
    venue = Venue()
    honest_book(venue)
    attackers(venue, 1_000_000, 100)
    before = venue.fx.states[BTC_F].sources["mid"].samples[-1][1]
    for step in range(1, 10):
        venue.spot(ALICE, BUY, SPOT - 15_00 + step * 100, 200)  # 6 USDT each, in the spread
    venue.spot(ALICE, BUY, SPOT * 90 // 100, 3_000_000)  # 3 BTC 10 % below
    venue.spot(BOB, SELL, SPOT * 110 // 100, 3_000_000)  # 3 BTC 10 % above
    with pytest.raises(Reject):
        venue.spot(BOB, BUY, SPOT * 110 // 100, 10)
    venue.tick(5)
    mid = venue.fx.states[BTC_F].sources["mid"]
    assert mid.samples[-1][1] == before and mid.status == "used"
    assert venue.index() == FUT
    venue.audit_ok()


# --------------------------------------------------------------------------- operator feeds


def test_a_crazy_or_stale_feed_is_left_out() -> None:
    """Three feeds and no spot source: one pushing 10x is an outlier, one that stops is
    stale after 30 s; a price of 0 is refused at the door."""
    venue = Venue(IndexSpec(weights=(("a", 1), ("b", 1), ("c", 1))))

    def push(feed: str, price: int) -> None:
        venue.apply(SetIndexPrice(venue.ts, BTC_F, price, feed))

    for _ in range(5):
        push("a", FUT)
        push("b", FUT + 10)
        push("c", FUT * 10)
        venue.tick()
    sources = venue.fx.states[BTC_F].sources
    assert (sources["a"].status, sources["b"].status, sources["c"].status) == (
        "used", "used", "outlier",
    )  # fmt: skip
    assert venue.index() == FUT + 5
    for _ in range(31):  # b stops
        push("a", FUT)
        push("c", FUT * 10)
        venue.tick()
    assert sources["b"].status == "stale"
    with pytest.raises(Reject):
        push("a", 0)
    venue.audit_ok()


# --------------------------------------------------------------------------- the fund


@settings(
    max_examples=40,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_two_colluding_accounts_cannot_drain_the_insurance_fund(data: st.DataObject) -> None:
    """Alice and Bob (one owner) send any orders they like, spot and futures, at any price
    and leverage, cross or isolated, adding and taking out isolated margin, while an honest
    feed moves the index by small steps (at most 0.2 % a second: liquidations come before
    bankruptcy). The fund never pays out."""
    venue = Venue(IndexSpec(weights=(("honest", 3), ("mid", 2), ("last", 1))))
    honest_book(venue)
    victims(venue, 20)
    attackers(venue, 20_000, 2)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    honest = FUT
    fund = venue.fund_balance()
    for step in range(data.draw(st.integers(5, 40), label="steps")):
        user = data.draw(st.sampled_from((ALICE, BOB)))
        kind = data.draw(st.sampled_from(("spot", "futures", "leverage", "margin", "wait")))
        try:
            if kind == "spot":
                side = data.draw(st.sampled_from((BUY, SELL)))
                price = SPOT * data.draw(st.integers(50, 150)) // 100
                venue.spot(user, side, price, data.draw(st.integers(1, 50_000)))
            elif kind == "futures":
                side = data.draw(st.sampled_from((BUY, SELL)))
                action = data.draw(st.sampled_from(("OPEN", "CLOSE")))
                price = FUT * data.draw(st.integers(50, 150)) // 100
                price = data.draw(st.sampled_from((0, price)))
                mode = data.draw(st.sampled_from((0, 1, 2)), label="cross 1, isolated 2")
                volume = data.draw(st.integers(1, 200))
                kind_ = LIMIT if price else MARKET
                venue.apply(
                    FuturesPlace(venue.ts, user, BTC_F, side, action, kind_, price, volume, 0, mode)
                )
            elif kind == "leverage":
                lever = data.draw(st.sampled_from((1, 10, 50, 100)))
                venue.apply(SetLeverage(venue.ts, user, BTC_F, lever))
            elif kind == "margin":  # an isolated position's margin added or taken out
                for pos in venue.fx.user_positions(user):
                    amount = data.draw(st.integers(-5_000, 5_000)) * UNIT
                    venue.apply(AdjustPositionMargin(venue.ts, user, pos.id, amount))
        except Reject:
            pass
        honest += honest * data.draw(st.integers(-2, 2)) // 1_000
        venue.apply(SetIndexPrice(venue.ts, BTC_F, honest, "honest"))
        venue.tick()
        assert venue.fund_balance() >= fund, step
        fund = venue.fund_balance()
    venue.audit_ok()


def test_a_spoofed_book_cannot_drag_the_mark() -> None:
    """The price audit's case: on a thin futures book, one contract offered at ten times the
    index and one bid at it made the book's mid 5.5x the index; the minute's premium sample
    took it whole into the basis average, the mark became the last trade price, and wash
    trades at +4.9 % walked it (and the band with it) up to the spoofed mid, liquidating a
    victim's short. The premium is now sampled at impact depth (a side thinner than the
    index's depth money gives no sample) and the basis stays within 2.5 % of the index."""
    venue = Venue()
    honest_book(venue)
    victims(venue, 20)
    attackers(venue, 2_000_000, 2)
    venue.futures(ALICE, SELL, "OPEN", 1, FUT * 10)  # the favourable side: not limited
    venue.futures(BOB, BUY, "OPEN", 1, FUT)
    venue.tick(61)  # a premium sample, at least
    assert venue.fx.states[BTC_F].basis_ema == 0  # one-contract quotes: no sample
    liquidated = []
    for _ in range(20):
        price = venue.mark() * 1049 // 1000
        venue.futures(ALICE, SELL, "OPEN", 1, price)
        venue.futures(BOB, BUY, "OPEN", 1, price)
        liquidated += venue.tick()
    assert venue.index() == FUT
    assert venue.mark() == FUT  # median(index, index + basis, last): the index
    assert liquidated == []
    venue.audit_ok()


def test_a_minute_of_deep_spoofing_moves_the_mark_by_a_minutes_share() -> None:
    """The re-audit's case: 400 contracts bid at +2.4 % and 400 offered at +2.6 % (12,000 USDT
    a side, past the impact money) on an otherwise empty futures book, and one contract traded
    at the bid. The first premium sample used to become the basis average whole: the mark
    jumped 2.4 % in one step and stayed after the spoof left (the empty book gave no more
    samples), liquidating 50x and 100x traders. The average now starts from none and a minute
    without a sample counts as none: the mark moves by 2/31 of the basis, then decays."""
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    bid = venue.futures(ALICE, BUY, "OPEN", 400, FUT * 1024 // 1000).reply  # 30,720.0
    ask = venue.futures(BOB, SELL, "OPEN", 400, FUT * 1026 // 1000).reply  # 30,780.0
    venue.futures(BOB, SELL, "OPEN", 1, FUT * 1024 // 1000)  # the last price: 30,720.0
    venue.tick(61)
    # basis 720.0 (7,200 ticks) x 2/31 -> 464 ticks: the mark 30,046.4, not 30,720.0.
    assert venue.mark() == FUT + 7_200 * 2 // 31
    for order in (bid, ask):
        venue.apply(FuturesCancel(venue.ts, order.user, BTC_F, order_id=order.id))
    venue.tick(60 * 30)
    assert venue.mark() < FUT + 7_200 * 2 // 31 // 5  # half an hour of empty minutes: (29/31)^30
    venue.audit_ok()


def test_a_basis_average_from_before_is_held_within_the_limit() -> None:
    """A data folder whose basis average a spoofed book had already pulled far off (5.5x
    the index) shows a mark within 2.5 % of the index from the first tick on."""
    venue = Venue()
    honest_book(venue)
    state = venue.fx.states[BTC_F]
    state.basis_ema = 4_500 * FUT * 10_000  # 1e-4 ticks
    venue.tick()
    assert venue.mark() == FUT  # median(index, index + 2.5 %, last (none: the index))


def isolated_long_at_100x(venue: Venue, contracts: int) -> None:
    """Bob quotes the short side at the mark (cross, 10x); Alice buys it at 100x, isolated:
    a position backed by 1 % of its value, while the band lets prices go 5 % from the mark."""
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    venue.apply(SetLeverage(venue.ts, BOB, BTC_F, 10))
    venue.apply(SetLeverage(venue.ts, ALICE, BTC_F, 100))
    venue.futures(BOB, SELL, "OPEN", contracts, FUT)
    venue.apply(FuturesPlace(venue.ts, ALICE, BTC_F, BUY, "OPEN", MARKET, 0, contracts, 0, 2))


def test_a_close_past_bankruptcy_cannot_make_the_fund_pay() -> None:
    """The futures audit's case: Alice's 100x isolated long (margin 1 %) sold CLOSE at the
    band's edge, 5 % below the mark, to Bob's CLOSE bid there: the loss beyond her margin came
    from the insurance fund, and Bob's gain with it (10,000 contracts: ~11,700 USDT a round
    trip). Such a CLOSE is refused; a MARKET CLOSE stops before the prices it cannot pay."""
    venue = Venue()
    isolated_long_at_100x(venue, 1_000)
    fund = venue.fund_balance()
    far = FUT * 95 // 100  # 28500.0, the band's edge
    venue.futures(BOB, BUY, "CLOSE", 1_000, far)  # rests: nobody else bids there
    with pytest.raises(Reject) as refused:
        venue.futures(ALICE, SELL, "CLOSE", 1_000, far)
    assert refused.value.code == -1138
    assert refused.value.msg == (
        "SELL CLOSE at 28500.0 would lose more than the position's margin: close nearer the"
        " mark price 30000.0, or add margin"
    )
    # A MARKET CLOSE sweeps down to Bob's far bid no more: nothing between pays, so nothing trades.
    done = venue.futures(ALICE, SELL, "CLOSE", 1_000).reply
    assert (done.status, done.filled) == ("CANCELED", 0)
    assert venue.fund_balance() == fund
    # Near the mark it closes as ever (within 1 % the margin pays the loss).
    venue.futures(BOB, BUY, "OPEN", 1_000, FUT - 1_000)  # 29900.0
    venue.futures(ALICE, SELL, "CLOSE", 1_000, FUT - 1_000)
    assert not venue.fx.user_positions(ALICE)
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_a_cross_close_may_not_spend_the_cash_behind_other_losing_positions() -> None:
    """The re-audit's case: Alice, cross at 100x, long ETH that has lost 600 of her 1,000, then
    long BTC; a BTC CLOSE at the band's edge lost 758 to Bob, under its margin and the free
    cash (629) but spending the cash that stood behind the ETH loss: the ETH position was then
    bankrupt, and the fund paid Bob the gap by auto-deleveraging (-374 USDT). Such a CLOSE is
    refused: after it the account's cross equity at the marks must not be below zero."""
    eth, eth_price = "E-ETH-USDT", 200_000  # 2,000.00
    venue = Venue()
    honest_book(venue)
    venue.fund(ALICE, 0, 0, 1_000)
    venue.fund(BOB, 0, 0, 1_000_000)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    for user in (ALICE, BOB):
        for contract in (BTC_F, eth):
            venue.apply(SetLeverage(venue.ts, user, contract, 100))
    venue.apply(SetIndexPrice(venue.ts, eth, eth_price))
    venue.apply(FuturesPlace(venue.ts, BOB, eth, SELL, "OPEN", LIMIT, eth_price, 1_000))
    venue.apply(FuturesPlace(venue.ts, ALICE, eth, BUY, "OPEN", LIMIT, eth_price, 1_000))
    venue.apply(SetIndexPrice(venue.ts, eth, eth_price * 97 // 100))  # ETH -3 %: -600 USDT
    assert venue.fx.user_positions(ALICE)  # not liquidated
    venue.futures(BOB, SELL, "OPEN", 500, FUT)
    venue.futures(ALICE, BUY, "OPEN", 500, FUT)
    fund = venue.fund_balance()
    far = FUT * 95 // 100
    venue.futures(BOB, BUY, "CLOSE", 500, far)
    with pytest.raises(Reject) as refused:
        venue.futures(ALICE, SELL, "CLOSE", 500, far)
    assert refused.value.code == -1138
    assert "margin and free cash" in refused.value.msg
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_a_partial_close_may_not_leave_the_rest_bankrupt() -> None:
    """The third re-audit's case: an isolated 100x long opened 0.45 % over the mark (an
    unrealized loss from the start), then a partial CLOSE at the band's edge whose loss just
    fits the whole position's margin: the rest was left with no margin and its own loss, was
    liquidated and deleveraged at the mark against the colluder, and the fund paid the gap
    (-1,102 USDT; ~2 % of the position a round at 20x). The part left open must still be
    worth something at the mark after a close."""
    eth, index = "E-ETH-USDT", 200_000  # 2,000.00
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    venue.apply(SetIndexPrice(venue.ts, eth, index))
    for user in (ALICE, BOB):
        venue.apply(SetLeverage(venue.ts, user, eth, 100))
    entry = 200_900  # 2,009.00: as far over the mark as a 100x OPEN may go
    venue.apply(FuturesPlace(venue.ts, BOB, eth, SELL, "OPEN", LIMIT, entry, 15_000, 0, 2))
    venue.apply(FuturesPlace(venue.ts, ALICE, eth, BUY, "OPEN", LIMIT, entry, 15_000, 0, 2))
    fund = venue.fund_balance()
    edge = index * 95 // 100
    venue.apply(FuturesPlace(venue.ts, BOB, eth, BUY, "CLOSE", LIMIT, edge, 2_735, 0, 2))
    with pytest.raises(Reject) as refused:
        venue.apply(FuturesPlace(venue.ts, ALICE, eth, SELL, "CLOSE", LIMIT, edge, 2_735, 0, 2))
    assert refused.value.code == -1138
    # A small close near the mark still goes through.
    venue.apply(FuturesPlace(venue.ts, BOB, eth, BUY, "OPEN", LIMIT, index, 100, 0, 2))
    venue.apply(FuturesPlace(venue.ts, ALICE, eth, SELL, "CLOSE", LIMIT, index, 100, 0, 2))
    assert venue.fx.user_positions(ALICE)[0].volume == 14_900
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_a_limit_close_with_a_slippage_cap_past_bankruptcy_takes_what_it_can_pay() -> None:
    """The fifth audit's case: a 50x long's SELL LIMIT CLOSE at 29,100 (a bot's slippage cap,
    past the position's bankruptcy) was refused outright although the book bid 29,900, and a
    stop-limit priced so ended REJECTED, the position left unprotected. It now trades what
    the position can pay, like a MARKET CLOSE; what it cannot pay at its limit is cancelled
    rather than rested."""
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.apply(SetLeverage(venue.ts, ALICE, BTC_F, 50))
    venue.futures(BOB, SELL, "OPEN", 200, FUT)
    venue.apply(FuturesPlace(venue.ts, ALICE, BTC_F, BUY, "OPEN", MARKET, 0, 200, 0, 2))
    venue.futures(BOB, BUY, "OPEN", 150, FUT - 1_000)  # 29,900.0
    cap = FUT - 9_000  # 29,100.0: past bankruptcy (~29,400) for the whole 200
    first = venue.futures(ALICE, SELL, "CLOSE", 100, cap).reply
    assert (first.status, first.filled) == ("FILLED", 100)
    second = venue.futures(ALICE, SELL, "CLOSE", 100, cap).reply  # 50 left at 29,900.0
    assert (second.status, second.filled) == ("CANCELED", 50)  # the rest does not rest
    assert venue.fx.open_orders(ALICE, BTC_F) == []
    assert venue.fx.user_positions(ALICE)[0].volume == 50
    venue.audit_ok()


def test_a_cross_partial_close_at_a_loss_is_paid_from_the_positions_margin() -> None:
    """The third re-audit's N1: a cross account with all its cash in its position's margin
    (equity ~1,700) could not close 100 contracts at a loss of ~110: only the closed part's
    margin and the free cash counted. The rest of the position's margin pays now, as for an
    isolated one, while the account's cross equity stays >= 0."""
    eth, index = "E-ETH-USDT", 200_000
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.fund(VICTIM, 0, 0, 3_195)  # margin 3,013.5 and the taker fee 180.81: ~0.7 left free
    venue.apply(SetIndexPrice(venue.ts, eth, index))
    for user in (VICTIM, BOB):
        venue.apply(SetLeverage(venue.ts, user, eth, 100))
    venue.apply(FuturesPlace(venue.ts, BOB, eth, SELL, "OPEN", LIMIT, 200_900, 15_000))
    venue.apply(FuturesPlace(venue.ts, VICTIM, eth, BUY, "OPEN", LIMIT, 200_900, 15_000))
    assert venue.engine.ledger.free(futures_account(VICTIM), "USDT") < UNIT
    edge = index * 95 // 100
    venue.apply(FuturesPlace(venue.ts, BOB, eth, BUY, "CLOSE", LIMIT, edge, 100))
    closed = venue.apply(FuturesPlace(venue.ts, VICTIM, eth, SELL, "CLOSE", LIMIT, edge, 100))
    assert closed.reply.filled == 100
    assert venue.fx.user_positions(VICTIM)[0].volume == 14_900
    venue.audit_ok()


def test_a_resting_open_the_mark_left_behind_is_cancelled_not_filled() -> None:
    """The fourth re-audit's case: a 100x BUY OPEN resting at the mark, the mark then 3.3 %
    lower (an honest move), a colluder's SELL filling it: the long was bankrupt on arrival,
    liquidated and deleveraged at the mark against the colluder, the fund paying the gap
    (-700 USDT on 1,000 contracts; -93,500 in one trade sized to the fund). The far-from-the-
    mark rule now holds when a resting OPEN fills, not only when it is placed."""
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    venue.apply(SetLeverage(venue.ts, ALICE, BTC_F, 100))
    bid = venue.apply(FuturesPlace(venue.ts, ALICE, BTC_F, BUY, "OPEN", LIMIT, FUT, 1_000, 0, 2))
    assert bid.reply.status == "NEW"
    venue.apply(SetIndexPrice(venue.ts, BTC_F, FUT * 967 // 1000))  # the mark 3.3 % lower
    fund = venue.fund_balance()
    sold = venue.futures(BOB, SELL, "OPEN", 1_000, FUT)
    orders = [d for e in sold.events if isinstance(d := getattr(e, "doc", None), FuturesOrderState)]
    assert any(d.id == bid.reply.id and d.status == "CANCELED" for d in orders)
    assert venue.fx.user_positions(ALICE) == []
    assert sold.reply.filled == 0  # it rests instead
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_a_resting_close_whose_backing_shrank_is_cancelled_not_filled() -> None:
    """A CLOSE placed while the position's margin paid for its price, the margin then taken
    out: when a taker reaches it, it is cancelled rather than filled at the fund's cost."""
    venue = Venue()
    isolated_long_at_100x(venue, 1_000)
    pos = venue.fx.user_positions(ALICE)[0]
    venue.apply(AdjustPositionMargin(venue.ts, ALICE, pos.id, 2_000 * UNIT))  # 7.7 % now
    resting = venue.futures(ALICE, SELL, "CLOSE", 1_000, FUT * 95 // 100).reply
    assert resting.status == "NEW"
    venue.apply(AdjustPositionMargin(venue.ts, ALICE, pos.id, -2_000 * UNIT))
    fund = venue.fund_balance()
    taker = venue.futures(BOB, BUY, "CLOSE", 1_000, FUT * 95 // 100)
    orders = [
        d for e in taker.events if isinstance(d := getattr(e, "doc", None), FuturesOrderState)
    ]
    assert any(d.id == resting.id and d.status == "CANCELED" for d in orders)
    assert venue.fx.open_orders(ALICE, BTC_F) == []
    assert venue.fx.user_positions(ALICE)[0].volume == 1_000
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_a_close_that_rests_is_judged_with_the_maker_fee_it_fills_with() -> None:
    """The fourth audit's case: a SELL CLOSE that would only rest, at 28600.0, was refused
    when the margin paid its loss and the maker fee it would fill with but not the taker fee
    (1,400 + 5.72 against 17.16). Judged at the maker fee it rests; one tick of margin short
    of that, it is refused; filled, the fund pays nothing."""
    venue = Venue()
    isolated_long_at_100x(venue, 1_000)
    pos = venue.fx.user_positions(ALICE)[0]
    price = 286_000  # 28600.0: a loss of 1,400, the maker fee 5.72, the taker fee 17.16
    needed = 1_405_72 * UNIT // 100
    venue.apply(AdjustPositionMargin(venue.ts, ALICE, pos.id, needed - 1 - pos.margin))
    with pytest.raises(Reject) as refused:
        venue.futures(ALICE, SELL, "CLOSE", 1_000, price)
    assert refused.value.code == -1138
    venue.apply(AdjustPositionMargin(venue.ts, ALICE, pos.id, 1))
    resting = venue.futures(ALICE, SELL, "CLOSE", 1_000, price).reply
    assert resting.status == "NEW"
    fund = venue.fund_balance()
    venue.futures(BOB, BUY, "CLOSE", 1_000, price)
    assert not venue.fx.user_positions(ALICE)
    assert venue.fund_balance() == fund
    venue.audit_ok()


def test_funding_a_payer_cannot_pay_is_not_paid_by_the_fund() -> None:
    """The second re-audit's cases: funding was taken from a cross payer's free cash only (or
    an isolated position's margin) and the fund paid the rest to the receivers; a cross
    account that parked its cash in a far order's hold, or an isolated position left with
    little margin, had the fund pay its colluding counterparty, up to 0.75 % of the position
    a funding time. Now a cross payer pays from its free cash and then the position's margin,
    an isolated one from its margin up to what it is worth at the mark; the receivers share
    what was paid; the fund pays nothing."""
    venue = Venue()
    honest_book(venue)
    attackers(venue, 2_000_000, 2)
    venue.apply(Deposit(venue.ts, INSURANCE_ACCOUNT, "USDT", 100_000 * UNIT, "fund"))
    venue.fund(VICTIM, 0, 0, 619)  # the cross payer
    for user in (VICTIM, ALICE):
        venue.apply(SetLeverage(venue.ts, user, BTC_F, 100))
    venue.futures(BOB, SELL, "OPEN", 2_000, FUT)
    venue.futures(VICTIM, BUY, "OPEN", 1_000, FUT)  # cross: margin 300, fee 18
    # ... which parks its cash in a far bid's hold (1,960 x 0.153): ~1.12 USDT left free.
    venue.futures(VICTIM, BUY, "OPEN", 1_960, FUT // 2)
    assert venue.engine.ledger.free(futures_account(VICTIM), "USDT") < 2 * UNIT
    venue.apply(FuturesPlace(venue.ts, ALICE, BTC_F, BUY, "OPEN", MARKET, 0, 1_000, 0, 2))
    # A deep book 1 % over the index for five minutes.
    venue.futures(BOB, BUY, "OPEN", 400, FUT * 101 // 100)
    venue.futures(BOB, SELL, "OPEN", 400, FUT * 102 // 100)
    venue.tick(300)
    # Alice's isolated long under water: margin 300, worth ~175 at the mark.
    venue.apply(SetIndexPrice(venue.ts, BTC_F, FUT * 993 // 1000))
    alice = venue.fx.user_positions(ALICE)[0]
    margin, cost = alice.margin, alice.cost
    fund = venue.fund_balance()
    cross_before = sum(venue.engine.ledger.get(futures_account(VICTIM), "USDT"))
    settled = venue.apply(SettleFunding(venue.ts, BTC_F))
    (record,) = [
        d for e in settled.events if isinstance(d := getattr(e, "doc", None), FundingRecord)
    ]
    contract = venue.fx.contracts[BTC_F]
    owed = contract.value(1_000, record.mark) * record.rate // 10**8  # rate ~0.66 %
    worth = margin + contract.pnl(True, cost, contract.value(1_000, record.mark))
    assert 0 < worth < owed
    # The cross payer paid it all (its free cash, the rest from its position's margin).
    assert -venue.fx.user_positions(VICTIM)[0].capital_fee == owed
    assert sum(venue.engine.ledger.get(futures_account(VICTIM), "USDT")) == cross_before - owed
    # The isolated payer paid what its position was worth, and Bob got what was paid.
    assert -alice.capital_fee == worth
    (bob,) = [p for p in venue.fx.user_positions(BOB) if not p.is_long]
    assert bob.capital_fee == owed + worth
    assert venue.fund_balance() >= fund  # Alice's liquidation, if any, left a surplus
    venue.tick()
    assert venue.fund_balance() >= fund
    venue.audit_ok()


def test_a_source_that_goes_quiet_is_left_out_not_frozen() -> None:
    """The audit's finding: the book behind the mid emptied and the mid kept its old value
    (weight 2) for minutes, holding the index 11 % above a market the other sources showed.
    A source with no price now is left out at once and comes back on fresh prices only."""
    venue = Venue(IndexSpec(weights=(("mid", 2), ("last", 1), ("feed", 2))))
    honest_book(venue)
    for order_id in list(venue.engine.spot.books[PAIR].orders):
        order = venue.engine.spot.books[PAIR].orders[order_id]
        venue.apply(CancelOrder(venue.ts, order.account, PAIR, order_id))
    for _ in range(90):  # the market moves 10 % down; the feed shows it, no trade prints
        venue.apply(SetIndexPrice(venue.ts, BTC_F, FUT * 90 // 100, "feed"))
        venue.tick()
    sources = venue.fx.states[BTC_F].sources
    assert sources["mid"].status == "thin" and sources["mid"].samples == []
    assert sources["feed"].status == "used"
    assert venue.index() < FUT * 95 // 100  # followed the live sources down
