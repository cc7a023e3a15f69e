"""The shared fixtures themselves work: in-process app and a real server process."""

from __future__ import annotations

from typing import Any

from support import Env
from tradehall.client import Client


def test_in_process_trader_can_trade(env: Env) -> None:
    alice = env.trader({"USDT": "10000"})
    order = alice.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    assert order["status"] == "NEW"
    assert env.exchange.engine.open_orders(alice.user_id)  # type: ignore[attr-defined]
    env.audit()


def test_real_server_process_serves_the_demo_account(server_factory: Any) -> None:
    server = server_factory(None, "--demo", "--no-sim")
    assert server.demo is not None
    client = Client(server.url, server.demo["apiKey"], server.demo["secret"])
    balances = {b["asset"]: b["free"] for b in client.account()["balances"]}
    assert balances["USDT"] == "10000000.00000000"
    assert server.stop() == 0
