"""Rate limits through HTTP: the seed's per-key table, per-IP public limits, 429 with -1003 and
Retry-After, and the 418 ban for an IP that keeps sending after its 429s; in memory and in
Redis (several processes share the counts)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, ClientClock, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client
from tradehall.config import LimitSettings


def redis_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


STORAGES = [
    pytest.param("memory://", id="memory"),
    pytest.param(
        "redis://127.0.0.1:6379",
        id="redis",
        marks=pytest.mark.skipif(
            not redis_available(), reason="no Redis on 127.0.0.1:6379: Redis-backed limits untested"
        ),
    ),
]


class Limited:
    def __init__(self, http: TestClient, clock: FakeClock) -> None:
        self.http = http
        self.clock = clock
        self.admin = AdminClient(BASE_URL, ADMIN_TOKEN, http=http)

    def trader(self) -> Client:
        user = self.admin.create_user()
        key = self.admin.create_key(user["id"])
        self.admin.deposit(user["id"], "USDT", "100000")
        return Client(
            BASE_URL, key["apiKey"], key["secret"], http=self.http, clock=ClientClock(self.clock)
        )


@pytest.fixture(params=STORAGES)
def limited(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Limited]:
    storage = request.param
    # A fresh namespace per test in a shared Redis: the limits library keys by identifiers, so
    # unique ban/strike settings keep tests apart.
    settings = LimitSettings(
        enabled=True,
        storage=storage,
        public_per_ip=(5, 2),
        global_per_ip=(1000, 10),
        ban_after=3,
        ban_seconds=2 + int(uuid.uuid4().int % 50),
    )
    exchange = make_exchange(tmp_path / "db")
    clock = FakeClock()
    app = create_app(
        exchange, clock=clock, admin_token=ADMIN_TOKEN, limits=settings, run_scheduler=False
    )
    with TestClient(
        app, client=(f"127.0.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}", 5000)
    ) as http:
        yield Limited(http, clock)
    exchange.store.close()


def test_seed_limit_per_key_on_get_order_is_20_per_2s(limited: Limited) -> None:
    trader = limited.trader()
    order = trader.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="30000")
    statuses = [
        trader.request(
            "GET",
            "/spot/open/sapi/v1/order",
            params={"symbol": "BTCUSDT", "orderId": order["orderId"]},
        )
        for _ in range(21)
    ]
    assert [r.status_code for r in statuses[:20]] == [200] * 20
    refused = statuses[20]
    assert refused.status_code == 429
    assert refused.json()["code"] == -1003
    assert 1 <= int(refused.headers["Retry-After"]) <= 2
    # Another key has its own budget.
    other = limited.trader()
    assert other.request("GET", "/spot/open/sapi/v1/account").status_code == 200


def test_public_limit_per_ip_then_ban_with_418(limited: Limited) -> None:
    public = Client(BASE_URL, http=limited.http)
    answers = [public.request("GET", "/spot/open/sapi/v1/time", signed=False) for _ in range(5)]
    assert all(a.status_code == 200 for a in answers)
    refusals: list[Any] = []
    for _ in range(4):  # keeps sending after the 429s: the 4th refusal triggers the ban
        refusals.append(public.request("GET", "/spot/open/sapi/v1/time", signed=False))
    assert [r.status_code for r in refusals[:3]] == [429, 429, 429]
    banned = public.request("GET", "/spot/open/sapi/v1/ping", signed=False)
    assert banned.status_code == 418
    assert banned.json()["code"] == -1003
    assert int(banned.headers["Retry-After"]) >= 1


def test_admin_api_is_never_rate_limited(limited: Limited) -> None:
    for _ in range(30):
        assert limited.admin.status()["writable"] is True
