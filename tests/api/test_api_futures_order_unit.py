"""The family's ``orderUnit`` decides what a futures order's ``volume`` counts: 1 an amount of
the contract's ``multiplierCoin``, 2 contracts, 3 the value in the quote currency (a MARKET
OPEN's budget only); absent, the seed's default (the value for a MARKET OPEN, contracts
otherwise). E-BTC-USDT: face value 0.001 BTC, so a contract at 30000 is worth 30 USDT."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from test_api_futures import (
    BTC,
    INVERSE,
    get,
    ok,
    order,
    placed,
    position_of,
    post,
    refused,
    set_index,
    trader,
)

from support import Env
from tradehall.client import Client


def detail(client: Client, order_id: int) -> tuple[Any, ...]:
    found = ok(get(client, "/order", {"contractName": BTC, "orderId": order_id}))
    return found["origQty"], found["executedQty"], found["avgPrice"], found["status"]


def test_a_market_open_in_contracts_opens_exactly_that_many(env: Env) -> None:
    """The finding: 100 contracts asked with orderUnit 2 opened 3 (read as 100 USDT)."""
    set_index(env, "30000")
    maker, taker = trader(env), trader(env, "10000")
    placed(order(maker, "SELL", "OPEN", 60, "30000"))
    placed(order(maker, "SELL", "OPEN", 60, "30010"))
    bought = placed(order(taker, "BUY", "OPEN", 100, kind="MARKET", orderUnit=2))
    assert detail(taker, bought) == (100, 100, Decimal("30004.0"), "FILLED")
    assert position_of(ok(get(taker, "/account")))["volume"] == 100
    # More contracts than the book holds: what it held, the rest canceled.
    short = placed(order(taker, "BUY", "OPEN", "50", kind="MARKET", orderUnit="2"))
    assert detail(taker, short) == (50, 20, Decimal("30010.0"), "CANCELED")
    assert position_of(ok(get(taker, "/account")))["volume"] == 120
    history = {h["orderId"]: h for h in ok(post(taker, "/orderHistorical", {}))}
    assert (history[short]["volume"], history[short]["dealVolume"]) == (50, 20)
    # Whole contracts only, within the contract's market maximum.
    refused(order(taker, "BUY", "OPEN", "1.5", kind="MARKET", orderUnit=2), -1111)
    refused(order(taker, "BUY", "OPEN", 10**9, kind="MARKET", orderUnit=2), -1102)
    env.audit()


def test_a_market_open_by_value_with_or_without_order_unit_3(env: Env) -> None:
    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    placed(order(maker, "SELL", "OPEN", 10, "30000"))
    for unit in (3, "3", None):
        # 100 USDT buys 3 contracts of 30 USDT; the 10 left cannot pay for a fourth.
        bought = placed(order(taker, "BUY", "OPEN", "100", kind="MARKET", orderUnit=unit))
        assert detail(taker, bought) == (100, 3, Decimal("30000.0"), "FILLED")
    assert position_of(ok(get(taker, "/account")))["volume"] == 9
    refused(order(taker, "BUY", "OPEN", "1", kind="MARKET", orderUnit=3), -1136)  # below 5


def test_order_unit_1_counts_the_contracts_coin(env: Env) -> None:
    set_index(env, "30000")
    maker, taker = trader(env), trader(env)
    resting = placed(order(maker, "SELL", "OPEN", "0.008", "30000", orderUnit=1))
    assert detail(maker, resting) == (8, 0, Decimal("0.0"), "NEW")
    bought = placed(order(taker, "BUY", "OPEN", "0.005", kind="MARKET", orderUnit="1"))
    assert detail(taker, bought) == (5, 5, Decimal("30000.0"), "FILLED")
    # Not a whole number of contracts: refused, never rounded.
    msg = refused(order(taker, "BUY", "OPEN", "0.0005", kind="MARKET", orderUnit=1), -1111)
    assert "whole number of contracts of 0.001 BTC" in msg
    msg = refused(order(taker, "BUY", "OPEN", "15", "30000", contract=INVERSE, orderUnit=1), -1111)
    assert "10 USD" in msg
    assert position_of(ok(get(taker, "/account")))["volume"] == 5


def test_the_value_is_refused_where_it_is_not_a_budget(env: Env) -> None:
    set_index(env, "30000")
    client = trader(env)
    before = ok(get(client, "/account"))
    for kind, action, price in (("LIMIT", "OPEN", "30000"), ("MARKET", "CLOSE", None)):
        msg = refused(order(client, "BUY", action, 1, price, kind=kind, orderUnit=3), -1102)
        assert "orderUnit 3 (value) is taken on a MARKET OPEN only" in msg
    assert ok(get(client, "/account")) == before


def test_conditional_market_opens_fire_in_the_unit_they_were_given(env: Env) -> None:
    set_index(env, "30000")
    maker, other, client = trader(env), trader(env), trader(env, "10000")
    placed(order(maker, "SELL", "OPEN", 1, "30000"))
    placed(order(other, "BUY", "OPEN", 1, "30000"))  # a last price to trigger from
    stop: dict[str, Any] = {"contractName": BTC, "side": "BUY", "type": "MARKET", "open": "OPEN"}
    stop |= {"triggerType": 1, "triggerPrice": "30050"}  # a buy stop: fires on a rise
    in_contracts = placed(post(client, "/conditionOrder", {**stop, "volume": 7, "orderUnit": 2}))
    by_value = placed(post(client, "/conditionOrder", {**stop, "volume": "300"}))
    listed = {o["orderId"]: o["origQty"] for o in ok(get(client, "/openOrders"))}
    assert listed == {in_contracts: 7, by_value: 300}
    placed(order(maker, "SELL", "OPEN", 40, "30100"))
    placed(order(maker, "SELL", "OPEN", 1, "30050"))
    placed(order(other, "BUY", "OPEN", 1, "30050"))  # the rise: both fire, in id order
    # 7 contracts at 30100; then 300 USDT buys 9 more (270.9 USDT; 29.1 left < 30.1).
    assert detail(client, in_contracts)[1:] == (7, Decimal("30100.0"), "FILLED")
    assert detail(client, by_value)[1:] == (9, Decimal("30100.0"), "FILLED")
    assert position_of(ok(get(client, "/account")))["volume"] == 16
    env.audit()
