"""GET /metrics: the Prometheus text format, read with the library's own parser before and
after a scripted session (orders, a cancel, a refused signature, a 429, a WebSocket
subscription, a liquidation): each counter moves by exactly what the session did."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, ClientClock, FakeClock, Samples, make_exchange, scrape
from tradehall.api.app import create_app
from tradehall.client import AdminClient, ApiError, Client
from tradehall.config import LimitSettings

SPOT = "BTCUSDT"
BTC = "E-BTC-USDT"
PUBLIC_LIMIT = 40
"""Public requests per IP in the window: the session's last ping goes one over."""


def moved(before: Samples, after: Samples) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        key: value - before.get(key, 0.0)
        for key, value in after.items()
        if value != before.get(key, 0.0)
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def venue(tmp_path: Path) -> Iterator[tuple[TestClient, FakeClock]]:
    exchange = make_exchange(tmp_path / "db")
    clock = FakeClock()
    limits = LimitSettings(enabled=True, storage="memory://", public_per_ip=(PUBLIC_LIMIT, 60))
    app = create_app(
        exchange, clock=clock, admin_token=ADMIN_TOKEN, limits=limits, run_scheduler=False
    )
    with TestClient(app) as http:
        yield http, clock
    exchange.store.close()


def futures_post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.request("POST", "/futures/open/fapi/v1" + path, body=body)


def test_metrics_need_the_admin_token(venue: tuple[TestClient, FakeClock]) -> None:
    http, _ = venue
    errors = value(scrape(http), "tradehall_http_errors_total")
    assert http.get("/metrics").status_code == 401
    assert http.get("/metrics", headers={"authorization": "Bearer nope"}).json()["code"] == -2015
    paths = http.get("/openapi.json").json()["paths"]
    assert "/metrics" not in paths
    # The refusals leave a trace (served scrapes are not counted).
    after = scrape(http)
    refused = {"endpoint": "/metrics", "method": "GET", "code": "401"}
    assert value(after, "tradehall_http_requests_total", **refused) == 2
    assert value(after, "tradehall_http_errors_total") == errors + 2
    served = {"endpoint": "/metrics", "method": "GET", "code": "200"}
    assert value(after, "tradehall_http_requests_total", **served) == 0


def test_each_counter_moves_by_what_the_session_did(venue: tuple[TestClient, FakeClock]) -> None:
    http, clock = venue
    admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)

    def trader(usdt: str, futures: str = "0") -> Client:
        user = admin.create_user()
        key = admin.create_key(user["id"])
        admin.deposit(user["id"], "USDT", usdt)
        client = Client(BASE_URL, key["apiKey"], key["secret"], http=http, clock=ClientClock(clock))
        client.key = key["apiKey"]  # type: ignore[attr-defined]
        if futures != "0":
            body = {"asset": "USDT", "amount": futures, "from": "spot", "to": "futures"}
            assert futures_post(client, "/tradehall/transfer", body).status_code == 200
        return client

    admin.set_index_price(BTC, "30000")
    admin.fund("insurance", "USDT", "100000", "fund-1")
    alice, bob = trader("100000", "50000"), trader("1000", "40")
    before = scrape(http)

    with http.websocket_connect("/kline-api/ws") as ws:
        channel = "market_btcusdt_depth_step0"
        ws.send_text(json.dumps({"event": "sub", "params": {"channel": channel, "cb_id": "1"}}))
        assert json.loads(gzip.decompress(ws.receive_bytes()))["channel"] == channel  # subed
        snapshot = json.loads(gzip.decompress(ws.receive_bytes()))  # no push: the sub's own
        assert snapshot["tick"]["buys"] == []
        first = alice.create_order(SPOT, "BUY", "LIMIT", "0.01", "20000")
        alice.create_order(SPOT, "BUY", "LIMIT", "0.01", "20001")
        pushed = 0
        while True:  # the pushes up to the one showing both orders
            frame = json.loads(gzip.decompress(ws.receive_bytes()))
            pushed += 1
            if len(frame["tick"]["buys"]) == 2:
                break
        streaming = scrape(http)
    alice.cancel_order(SPOT, first["orderId"])
    forged = Client(BASE_URL, alice.key, "0" * 32, http=http, clock=ClientClock(clock))  # type: ignore[attr-defined]
    with pytest.raises(ApiError) as bad:
        forged.account()
    assert (bad.value.status, bad.value.code) == (401, -1022)
    # Futures: bob's isolated long of 10 contracts at 10x against alice's short, then the
    # index falls through his liquidation price; the book has no bid: the rest is ADL.
    for who, side in ((alice, "SELL"), (bob, "BUY")):
        body = {"contractName": BTC, "side": side, "type": "LIMIT", "open": "OPEN",
                "volume": 10, "price": "30000", "positionType": 2, "leverage": 10}  # fmt: skip
        answer = futures_post(who, "/order", body)
        assert answer.status_code == 200, answer.text
    opened = scrape(http)
    admin.set_index_price(BTC, "26000")
    pings = 0
    while http.get("/spot/open/sapi/v1/ping").status_code != 429:
        pings += 1
        assert pings <= PUBLIC_LIMIT
    after = scrape(http)

    def delta(name: str, samples: Samples = after, **labels: str) -> float:
        return value(samples, name, **labels) - value(before, name, **labels)

    def answered(endpoint: str, method: str, code: int) -> float:
        return delta("tradehall_http_requests_total", endpoint=endpoint, method=method,
                     code=str(code))  # fmt: skip

    spot, futures = "/spot/open/sapi/v1", "/futures/open/fapi/v1"
    assert answered(spot + "/order", "POST", 200) == 2
    assert answered(spot + "/cancel", "POST", 200) == 1
    assert answered(spot + "/account", "GET", 401) == 1
    assert answered(futures + "/order", "POST", 200) == 2
    assert answered(spot + "/ping", "GET", 200) == pings
    assert answered(spot + "/ping", "GET", 429) == 1
    assert answered("/admin/v1/futures/index-price", "POST", 200) == 1
    assert (
        delta(
            "tradehall_http_request_duration_seconds_count", endpoint=spot + "/order", method="POST"
        )
        == 2
    )
    assert delta("tradehall_http_errors_total") == 2
    assert delta("tradehall_rate_limit_refusals_total", reason="limit") == 1
    assert delta("tradehall_rate_limit_refusals_total", reason="banned") == 0
    assert delta("tradehall_auth_refusals_total", reason="signature") == 1
    assert delta("tradehall_replay_refusals_total") == 0

    def commands(kind: str, outcome: str = "applied") -> float:
        return delta("tradehall_engine_commands_total", kind=kind, outcome=outcome)

    assert [commands(k) for k in ("PlaceOrder", "CancelOrder", "FuturesPlace")] == [2, 1, 2]
    assert commands("SetIndexPrice") == 1
    assert commands("PlaceOrder", "rejected") == 0
    assert delta("tradehall_commits_total") == delta("tradehall_commit_batch_rows_count") > 0
    assert value(after, "tradehall_open_orders", market=SPOT, kind="spot") == 1
    assert value(after, "tradehall_book_levels", market=SPOT, side="bid") == 1
    assert value(after, "tradehall_store_writable") == 1

    assert delta("tradehall_websocket_connections", streaming) == 1
    assert delta("tradehall_websocket_subscriptions", streaming) == 1
    assert delta("tradehall_websocket_pushes_total", streaming) == pushed
    assert delta("tradehall_websocket_connections") == 0
    assert delta("tradehall_websocket_drops_total") == 0

    # One trade opened the positions; the liquidation closed one side by ADL (no bid).
    assert value(opened, "tradehall_futures_open_interest_contracts", contract=BTC) == 10
    assert value(after, "tradehall_futures_open_interest_contracts", contract=BTC) == 0
    assert delta("tradehall_trades_total", opened, market=BTC) == 1
    assert delta("tradehall_traded_volume_total", opened, market=BTC) == 10
    assert delta("tradehall_trades_total", market=BTC) == 2
    assert delta("tradehall_futures_liquidations_total", contract=BTC) == 1
    assert delta("tradehall_futures_adl_total", contract=BTC) == 1
    fund = value(after, "tradehall_insurance_fund_balance", asset="USDT")
    (insurance,) = [a for a in admin.system()["accounts"] if a["account"] == "insurance"]
    (usdt,) = [b for b in insurance["balances"] if b["asset"] == "USDT"]
    assert fund == float(usdt["free"]) < 100000  # the liquidation's deficit came out of it
    assert value(after, "tradehall_simulation_running") == 0


def test_the_insurance_gauge_shows_every_asset_the_fund_backs(
    venue: tuple[TestClient, FakeClock],
) -> None:
    """The fund pays futures deficits (in margin coins) and the lending pool's (in either
    asset of a margin pair): each has a sample, the assets it holds at their balance."""
    http, _ = venue
    admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)
    admin.fund("insurance", "ETH", "10", "fund-eth")
    samples = scrape(http)
    shown = {
        dict(labels)["asset"]: amount
        for (name, labels), amount in samples.items()
        if name == "tradehall_insurance_fund_balance"
    }
    assert shown["ETH"] == 10.0  # backs ETHUSDT margin; not a futures margin coin
    assert {"BTC", "USDT"} <= shown.keys()
    assert shown["USDT"] == 0.0
