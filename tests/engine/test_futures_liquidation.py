"""Liquidation of futures positions: isolated with a surplus to the insurance fund, with a
deficit the fund covers, auto-deleveraging when nothing can take the position, and cross
liquidation of a whole account.

Numbers are worked by hand in the comments (E-BTC-USDT: 1 contract = 0.001 BTC, fees maker
0.02 % / taker 0.06 %, maintenance 0.5 %; E-BTC-USD: 1 contract = 10 USD, margin in BTC).
The insurance fund is ledger account -1, funded with an ordinary Deposit. After every
scenario: the audit is clean, long and short open interest match, the fund moved by exactly
the expected amount and the liquidated account has no order left where it should not.
"""

from __future__ import annotations

from decimal import Decimal

from futures_support import (
    BUY,
    CLOSE,
    INSURANCE_ACCOUNT,
    INVERSE,
    LINEAR,
    OPEN,
    SELL,
    UNIT,
    Rig,
)

from tradehall.engine import audit
from tradehall.engine.commands import FuturesPlace, SetLeverage, SetMarginMode
from tradehall.engine.engine import Result
from tradehall.engine.futures_model import (
    BY_ADL,
    BY_LIQUIDATION,
    FIRED,
    ISOLATED,
    STOP_LOSS,
    TRIGGER_CANCELED,
    WAITING,
    ContractState,
    FuturesChanged,
    Trigger,
    clearing_account,
)
from tradehall.engine.futures_model import FuturesOrderState as OrderDoc
from tradehall.engine.orders import CANCELED, FILLED

USDT = "USDT"
BTC = "BTC"
ETH_CONTRACT = "E-ETH-USDT"


def usdt(amount: str) -> int:
    return int(Decimal(amount) * UNIT)


def order_docs(result: Result) -> list[OrderDoc]:
    """The final document of every order a command changed, in order of first change."""
    docs: dict[int, OrderDoc] = {}
    for e in result.events:
        if isinstance(e, FuturesChanged) and isinstance(e.doc, OrderDoc):
            docs[e.doc.id] = e.doc
    return list(docs.values())


def sound(r: Rig) -> None:
    assert audit.check(r.engine) == []
    for contract in r.fx.contracts:
        longs, shorts = r.oi(contract)
        assert longs == shorts, contract


def isolated_long_setup(r: Rig, *, fund: int = 0) -> None:
    """User 1: 1,000 USDT, isolated long 10 @ 50,000.0 against user 2's short, plus a resting
    BUY OPEN 1 @ 40,000.0 on the contract and a BUY OPEN 1 @ 1,000.00 on E-ETH-USDT.

    User 1 pays margin 50 + taker fee 0.3; the resting order holds 4 + 0.008 (maker fee
    0.02 % of 40), the ETH order 1 + 0.002."""
    for user in (2, 3):
        r.fund(user, USDT, 100_000 * UNIT)
    r.fund(1, USDT, 1_000 * UNIT)
    if fund:
        r.deposit(INSURANCE_ACCOUNT, USDT, fund)
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)  # 3,000.00
    r.apply(SetMarginMode(r.ts, 1, LINEAR, ISOLATED))
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 1, 400_000)
    r.order(1, ETH_CONTRACT, BUY, OPEN, 1, 100_000)
    assert r.balance(1, USDT) == (
        usdt("1000") - usdt("50.3") - usdt("4.008") - usdt("1.002"),
        usdt("50") + usdt("4.008") + usdt("1.002"),
    )


def test_isolated_liquidation_with_a_surplus_to_the_fund() -> None:
    r = Rig()
    isolated_long_setup(r)
    long = r.long(1, LINEAR)
    # User 1's waiting stop-loss on the long (fires below 44,000.0), and one on ETH.
    stops = [
        r.apply(
            FuturesPlace(
                r.ts,
                1,
                contract,
                SELL,
                "CLOSE",
                "MARKET",
                0,
                volume,
                trigger_type=STOP_LOSS,
                trigger_price=price,
            )
        ).reply
        for contract, volume, price in ((LINEAR, 10, 440_000), (ETH_CONTRACT, 1, 90_000))
    ]
    assert all(isinstance(stop, Trigger) and stop.status == WAITING for stop in stops)
    # A bid between bankruptcy (45,000.0) and liquidation (45,226.13..) prices.
    r.order(3, LINEAR, BUY, OPEN, 10, 451_000)
    fees = r.fees(USDT)

    # The mark falls to 45,200.0, below the liquidation price.
    result = r.index(LINEAR, 452_000)
    assert long.liquidated and r.pos(1, LINEAR, BUY) is None
    # It sold 10 @ 45,100.0 (value 451): P&L 451 - 500 = -49, taker fee 451 x 0.06 % =
    # 0.2706; what is left of the margin, 50 - 49 - 0.2706 = 0.7294, goes to the fund.
    assert long.close_profit == -usdt("49")
    assert long.close_value == usdt("451")
    assert r.fund_balance(USDT) == usdt("0.7294")
    # Its record says what the account lost: the margin and the open fee (50.3), the
    # surplus the fund took shown beside the close's P&L at its fill price.
    assert long.settled_by_others == -usdt("0.7294")
    assert long.realized == -usdt("50.3")
    # Fees: the liquidation's taker fee 0.2706 and the bidder's maker fee 451 x 0.02 %.
    assert r.fees(USDT) == fees + usdt("0.2706") + usdt("0.0902")
    liquidation = [d for d in order_docs(result) if d.source == BY_LIQUIDATION]
    assert liquidation[-1].status == FILLED
    assert liquidation[-1].price == 450_000  # IOC no worse than the bankruptcy price
    # Its order on the contract was cancelled (hold returned); the ETH order stays.
    assert r.fx.open_orders(1, LINEAR) == []
    [eth] = r.fx.open_orders(1, ETH_CONTRACT)
    assert eth.held == usdt("1.002")
    assert r.balance(1, USDT) == (usdt("1000") - usdt("50.3") - usdt("1.002"), usdt("1.002"))
    # Its waiting stop on the contract was cancelled too (nothing left to close); ETH's waits.
    assert [stop.status for stop in stops] == [TRIGGER_CANCELED, WAITING]
    assert r.fx.waiting_triggers(1, LINEAR) == []
    # The bidder now holds the long.
    assert r.long(3, LINEAR).volume == 10
    assert r.oi(LINEAR) == (10, 10)
    sound(r)


def test_isolated_liquidation_with_a_deficit_covered_by_the_fund() -> None:
    r = Rig()
    isolated_long_setup(r, fund=100 * UNIT)
    long = r.long(1, LINEAR)
    # The only bid is at the bankruptcy price itself.
    r.order(3, LINEAR, BUY, OPEN, 10, 450_000)
    r.index(LINEAR, 452_000)
    assert long.liquidated
    # Sold 10 @ 45,000.0 (value 450): P&L -50 eats the whole margin; the close fee
    # 450 x 0.06 % = 0.27 is the deficit, paid by the fund.
    assert long.close_profit == -usdt("50")
    assert r.fund_balance(USDT) == usdt("100") - usdt("0.27")
    assert long.settled_by_others == usdt("0.27")
    assert long.realized == -usdt("50.3")  # the margin and the open fee: what the account lost
    assert r.ledger.get(INSURANCE_ACCOUNT, USDT) == (usdt("99.73"), 0)
    assert r.balance(1, USDT) == (usdt("1000") - usdt("50.3") - usdt("1.002"), usdt("1.002"))
    assert r.fx.open_orders(1, LINEAR) == []
    sound(r)


def test_price_gap_without_liquidity_fund_pays_the_loss_beyond_bankruptcy() -> None:
    r = Rig()
    isolated_long_setup(r, fund=100 * UNIT)
    long = r.long(1, LINEAR)
    short_before = r.short(2, LINEAR)
    free2 = r.free(2, USDT)

    # The index gaps to 44,000.0, below the bankruptcy price, and nothing bids. The fund
    # (100) can pay the loss beyond bankruptcy, so the rest is deleveraged at the mark:
    #   user 1 closes 10 @ 44,000.0: value 440, P&L -60, margin 50 -> deficit 10 (fund)
    #   user 2's short closes 10 @ 44,000.0: P&L 500 - 440 = +60, no fees.
    result = r.index(LINEAR, 440_000)
    assert long.liquidated and r.pos(1, LINEAR, BUY) is None
    assert long.close_profit == -usdt("60")
    assert r.fund_balance(USDT) == usdt("90")
    assert (long.settled_by_others, long.realized) == (usdt("10"), -usdt("50.3"))
    assert short_before.share_amount == 0  # deleveraged at the mark: nothing lost to it
    assert r.pos(2, LINEAR, SELL) is None
    assert short_before.close_profit == usdt("60")
    assert r.free(2, USDT) == free2 + usdt("50") + usdt("60")
    adl = [d for d in order_docs(result) if d.source == BY_ADL]
    assert [(d.user, d.filled, d.status) for d in adl] == [(2, 10, FILLED)]
    assert r.oi(LINEAR) == (0, 0)
    sound(r)


def test_auto_deleveraging_at_the_bankruptcy_price_ranked_by_profit_and_leverage() -> None:
    r = Rig()
    for user in (2, 3, 4):
        r.fund(user, USDT, 10_000 * UNIT)
    r.fund(1, USDT, 1_000 * UNIT)
    r.index(LINEAR, 500_000)
    r.apply(SetMarginMode(r.ts, 1, LINEAR, ISOLATED))
    r.apply(SetLeverage(r.ts, 4, LINEAR, 20))
    # Shorts: user 2 (leverage 10) 5 and user 4 (leverage 20) 5, all @ 50,000.0.
    # Longs: user 1 (isolated, leverage 10) 6 and user 3 4.
    r.order(2, LINEAR, SELL, OPEN, 5, 500_000)
    r.order(4, LINEAR, SELL, OPEN, 5, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 6, 500_000)
    r.order(3, LINEAR, BUY, OPEN, 4, 500_000)
    long = r.long(1, LINEAR)
    short2, short4 = r.short(2, LINEAR), r.short(4, LINEAR)
    assert short2.id < short4.id
    assert (short2.margin, short4.margin) == (usdt("25"), usdt("12.5"))
    # User 4 also has a resting CLOSE for its whole short, which ADL must cancel.
    close4 = r.order(4, LINEAR, BUY, CLOSE, 5, 300_000)
    free2, free4 = r.free(2, USDT), r.free(4, USDT)
    assert r.fund_balance(USDT) == 0

    # The index gaps to 44,000.0; no bids, empty fund: user 1's 6 contracts (bankruptcy
    # 45,000.0: margin 30 = 6 x 0.001 x 5,000) are closed against the shorts at 45,000.0.
    # Ranking at the mark 44,000.0 (profit / margin x value / equity):
    #   user 2: P&L 250 - 220 = 30, margin 25,   equity 55   -> 1.2 x 220 / 55   = 4.8
    #   user 4: P&L 30,             margin 12.5, equity 42.5 -> 2.4 x 220 / 42.5 = 12.4
    # so user 4 goes first (5 contracts), then 1 of user 2's.
    result = r.index(LINEAR, 440_000)
    assert long.liquidated and r.pos(1, LINEAR, BUY) is None
    # user 1: value 6 x 0.001 x 45,000 = 270, P&L -30 = its margin: nothing left, no deficit
    assert long.close_profit == -usdt("30")
    assert r.fund_balance(USDT) == 0
    # user 4: closed 5 at 45,000.0: P&L 250 - 225 = +25, margin 12.5 back, no fee
    assert r.pos(4, LINEAR, SELL) is None
    assert short4.close_profit == usdt("25")
    # At the mark it would have made 30: the 5 it did not is its share of the loss.
    assert short4.share_amount == usdt("5")
    assert r.free(4, USDT) == free4 + usdt("12.5") + usdt("25")
    assert close4.id not in {o.id for o in r.fx.open_orders(4, LINEAR)}
    # user 2: 1 of 5 at 45,000.0: P&L 50 - 45 = +5, margin 25 / 5 = 5 back
    assert short2.volume == 4
    assert short2.close_profit == usdt("5")
    assert short2.share_amount == usdt("1")  # 6 at the mark
    assert r.free(2, USDT) == free2 + usdt("5") + usdt("5")
    adl = [(d.user, d.filled, d.status) for d in order_docs(result) if d.source == BY_ADL]
    assert adl == [(4, 5, FILLED), (2, 1, FILLED)]
    cancelled = [d.id for d in order_docs(result) if d.status == CANCELED and d.user == 4]
    assert cancelled == [close4.id]
    assert r.oi(LINEAR) == (4, 4)
    sound(r)


def test_cross_liquidation_takes_the_whole_account() -> None:
    r = Rig()
    for user in (2, 3):
        r.fund(user, USDT, 100_000 * UNIT)
    r.fund(1, USDT, 60 * UNIT)
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)
    # User 1 (cross): long 10 @ 50,000.0 (margin 50, fee 0.3) and a resting ETH order
    # holding 1 + 0.002. Its equity is 60 - 0.3 = 59.7 + P&L (order holds count).
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(1, ETH_CONTRACT, BUY, OPEN, 1, 100_000)
    assert r.balance(1, USDT) == (usdt("8.698"), usdt("51.002"))
    long = r.long(1, LINEAR)
    # Liquidation: 59.7 + 0.01 P - 500 <= 0.005 x 0.01 P  ->  P <= 440.3 / 0.00995
    #   = 44,251.256..; bankruptcy: 59.7 + 0.01 P - 500 = 0 -> P = 44,030.0.
    r.order(3, LINEAR, BUY, OPEN, 10, 441_000)
    # At 44,251.3: equity 2.213 > maintenance 2.212565: safe.
    r.index(LINEAR, 442_513)
    assert r.pos(1, LINEAR, BUY) is long
    # At 44,251.2: equity 2.212 <= 2.21256: the whole cross account is liquidated.
    result = r.index(LINEAR, 442_512)
    assert long.liquidated and r.pos(1, LINEAR, BUY) is None
    liquidation = [d for d in order_docs(result) if d.source == BY_LIQUIDATION]
    assert liquidation[-1].price == 440_300
    # Every order of the margin coin is cancelled, the ETH one too.
    assert r.fx.open_orders(1) == []
    # Sold 10 @ 44,100.0 (value 441): P&L -59, fee 0.2646, margin 50 released:
    #   -9.2646 paid from the cash (8.698 + the ETH hold 1.002 = 9.7) leaves 0.4354,
    #   the surplus over bankruptcy, which goes to the fund.
    assert long.close_profit == -usdt("59")
    assert r.fund_balance(USDT) == usdt("0.4354")
    assert r.balance(1, USDT) == (0, 0)
    assert r.oi(LINEAR) == (10, 10)
    sound(r)


def test_cross_liquidation_closes_every_cross_position_of_the_coin() -> None:
    r = Rig()
    for user in (2, 3):
        r.fund(user, USDT, 100_000 * UNIT)
    r.fund(1, USDT, 100 * UNIT)
    r.deposit(INSURANCE_ACCOUNT, USDT, 1_000 * UNIT)
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)
    # User 1 cross: long 10 E-BTC-USDT @ 50,000 (margin 50) and short 2 E-ETH-USDT @
    # 3,000.00 (value 60, margin 6).
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(2, ETH_CONTRACT, BUY, OPEN, 2, 300_000)
    r.order(1, ETH_CONTRACT, SELL, OPEN, 2, 300_000)
    eth = r.short(1, ETH_CONTRACT)
    # Cash: 100 - (50 + 0.3) - (6 + 0.036) = 43.664 free; equity 99.664 + P&L.
    assert r.balance(1, USDT) == (usdt("43.664"), usdt("56"))
    # BTC falls to 40,000.0: the BTC loss (100) exceeds the whole account (99.664).
    r.index(LINEAR, 400_000)
    assert r.fx.user_positions(1) == []
    assert eth.liquidated
    assert r.balance(1, USDT) == (0, 0)
    # No liquidity anywhere: both positions were deleveraged at the marks (the fund can
    # pay): BTC at 40,000.0 against user 2's short (+100 for user 2), ETH at 3,000.00
    # against user 2's long (no P&L). The account's 99.664 of equity paid 99.664 of the
    # 100 loss; the fund paid the 0.336 left.
    assert r.pos(2, LINEAR, SELL) is None
    assert r.pos(2, ETH_CONTRACT, BUY) is None
    assert r.fund_balance(USDT) == usdt("1000") - usdt("0.336")
    sound(r)


def test_inverse_isolated_liquidation_with_a_surplus() -> None:
    r = Rig()
    for user in (2, 3):
        r.fund(user, BTC, 10 * UNIT)
    r.fund(1, BTC, UNIT)
    r.index(INVERSE, 400_000)
    r.apply(SetMarginMode(r.ts, 1, INVERSE, ISOLATED))
    r.order(2, INVERSE, SELL, OPEN, 100, 400_000)
    r.order(1, INVERSE, BUY, OPEN, 100, 400_000)
    long = r.long(1, INVERSE)
    # Cost 0.025 BTC, margin 250,000; liquidation 36,545.45.., bankruptcy 36,363.63...
    r.order(3, INVERSE, BUY, OPEN, 100, 364_000)
    r.index(INVERSE, 365_000)
    assert long.liquidated
    # Sold 100 @ 36,400.0: value 1,000 / 36,400 = 0.0274725274.. -> 2,747,252
    #   P&L (long, inverse) = cost - value = 2,500,000 - 2,747,252 = -247,252
    #   fee 2,747,252 x 0.06 % = 1,648.35 -> 1,648
    #   left: 250,000 - 247,252 - 1,648 = 1,100 -> the BTC fund
    assert long.close_profit == -247_252
    assert r.fund_balance(BTC) == 1_100
    # User 1 lost margin + open fee (2,500,000 x 0.06 % = 1,500).
    assert r.balance(1, BTC) == (UNIT - 250_000 - 1_500, 0)
    assert r.oi(INVERSE) == (100, 100)
    sound(r)


# =============================================================================== engine bugs


def test_cross_liquidation_nets_the_accounts_positions_before_socialising() -> None:
    r = Rig()
    r.fund(2, USDT, 100_000 * UNIT)
    r.fund(1, USDT, 100 * UNIT)
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)
    # User 1 (cross, 100 USDT): long 10 E-BTC-USDT @ 50,000.0 (margin 50, fee 0.3), then
    # short 10 E-ETH-USDT @ 3,000.00 (value 300, margin 30, fee 0.18); user 2 opposite.
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(2, ETH_CONTRACT, BUY, OPEN, 10, 300_000)
    r.order(1, ETH_CONTRACT, SELL, OPEN, 10, 300_000)
    assert r.balance(1, USDT) == (usdt("19.52"), usdt("80"))
    # ETH falls to 2,500.00: the short gains 300 - 250 = 50.
    r.index(ETH_CONTRACT, 250_000)
    # BTC falls to 35,200.0: the long loses 500 - 352 = 148. Equity 99.52 + 50 - 148 = 1.52
    # is below the maintenance 352 x 0.5 % + 250 x 0.5 % = 3.01, but above zero: the
    # account is liquidated, not bankrupt. Nothing bids or offers: both positions are
    # deleveraged at the marks against user 2 (the fund, empty, has nothing to pay since
    # there is no deficit): the account keeps exactly its equity, 1.52, which is the
    # surplus for the fund, and no loss is left to socialise.
    assert r.fund_balance(USDT) == 0
    r.index(LINEAR, 352_000)
    assert r.fx.user_positions(1) == [] and r.fx.user_positions(2) == []
    assert r.balance(1, USDT) == (0, 0)
    assert r.fx.states[LINEAR].socialized == 0  # engine: 78.48 USDT
    assert r.ledger.get(clearing_account(1), USDT) == (0, 0)  # engine: -78.48 USDT
    assert r.fund_balance(USDT) == usdt("1.52")  # engine: 80 USDT
    sound(r)


BTC_DROP = 404_000


def test_cross_liquidation_trades_on_another_contract_settle_that_contract() -> None:
    r = Rig()
    for user in (2, 3, 4):
        r.fund(user, USDT, 100_000 * UNIT)
    r.fund(1, USDT, 100 * UNIT)
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)
    # User 1 (cross): long 10 E-BTC-USDT @ 50,000.0 and long 10 E-ETH-USDT @ 3,000.00.
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.order(2, ETH_CONTRACT, SELL, OPEN, 10, 300_000)
    r.order(1, ETH_CONTRACT, BUY, OPEN, 10, 300_000)
    assert r.fx.states[ETH_CONTRACT].last == 300_000
    # User 3 bids 2,999.00 on ETH; user 4 waits to sell when ETH trades at <= 2,999.50.
    r.order(3, ETH_CONTRACT, BUY, OPEN, 10, 299_900)
    trigger = r.apply(
        FuturesPlace(
            r.ts,
            4,
            ETH_CONTRACT,
            SELL,
            OPEN,
            "LIMIT",
            400_000,
            1,
            trigger_type=STOP_LOSS,
            trigger_price=299_950,
        )
    ).reply
    assert isinstance(trigger, Trigger)
    # BTC falls to 40,400.0: equity near the maintenance margin; the cross account is
    # liquidated, its ETH long (bankruptcy price about 2,996) is sold into user 3's bid first
    # (gains first): ETH trades at 2,999.00 on a contract whose price did not move.
    result = r.index(LINEAR, BTC_DROP)
    assert r.fx.user_positions(1) == []
    assert r.fx.states[ETH_CONTRACT].last == 299_900
    reported = [
        e.doc
        for e in result.events
        if isinstance(e, FuturesChanged)
        and isinstance(e.doc, ContractState)
        and e.contract == ETH_CONTRACT
    ]
    assert reported and reported[-1] == r.fx.states[ETH_CONTRACT]
    assert trigger.status == FIRED


def test_cross_liquidation_of_a_hedged_account_reports_no_empty_order() -> None:
    r = Rig()
    for user in (2, 3):
        r.fund(user, BTC, 10 * UNIT)
    # User 1 (cross, leverage 100) holds long 100 and short 100 E-BTC-USD @ 40,000.0:
    # margin 25,000 and fee 1,500 each; 53,000 in, equity 50,000.
    r.fund(1, BTC, 53_000)
    r.index(INVERSE, 400_000)
    r.apply(SetLeverage(r.ts, 1, INVERSE, 100))
    r.order(2, INVERSE, SELL, OPEN, 100, 400_000)
    r.order(1, INVERSE, BUY, OPEN, 100, 400_000)
    r.order(3, INVERSE, BUY, OPEN, 100, 400_000)
    r.order(1, INVERSE, SELL, OPEN, 100, 400_000)
    assert r.balance(1, BTC) == (0, 50_000)
    # Hedged, the equity stays 50,000 while the maintenance (0.5 % of 2 x 1,000 USD) grows
    # as the price falls: at 19,000.0 it is 2 x 26,315 > 50,000.
    result = r.index(INVERSE, 190_000)
    assert r.fx.user_positions(1) == []
    docs = order_docs(result)
    assert all(d.qty > 0 for d in docs), [d for d in docs if d.qty == 0]


def test_a_close_far_below_the_mark_liquidates_cross_positions_on_other_contracts() -> None:
    """User 1 closes its whole BTC position into a thin bid far below the mark: the realized
    loss is cash that stood behind its cross ETH position, which is now below maintenance.
    It is liquidated by that command, although nothing of user 1 is left on BTC and ETH's
    mark did not move (commands look at where they changed something: here, at user 1)."""
    r = Rig()
    for user in (2, 3):
        r.fund(user, USDT, 100_000 * UNIT)
    r.fund(1, USDT, usdt("432.5"))
    r.index(LINEAR, 500_000)
    r.index(ETH_CONTRACT, 300_000)
    r.apply(SetLeverage(r.ts, 1, ETH_CONTRACT, 100))
    r.order(2, ETH_CONTRACT, SELL, OPEN, 100, 300_000)
    r.order(1, ETH_CONTRACT, BUY, OPEN, 100, 300_000)
    r.order(2, LINEAR, SELL, OPEN, 10, 500_000)
    r.order(1, LINEAR, BUY, OPEN, 10, 500_000)
    r.index(ETH_CONTRACT, 298_400)
    eth = r.long(1, ETH_CONTRACT)
    assert r.long(1, LINEAR) is not None and not eth.liquidated
    r.order(3, LINEAR, BUY, OPEN, 10, 100_000)  # a thin bid at 10,000.0
    r.place(1, LINEAR, SELL, CLOSE, 10)  # MARKET: closes the BTC long there
    assert r.pos(1, LINEAR, BUY) is None
    assert eth.liquidated and r.pos(1, ETH_CONTRACT, BUY) is None
    sound(r)
