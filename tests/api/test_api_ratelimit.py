"""Rate limits through HTTP: the seed's per-key table, per-IP public limits, 429 with -1003 and
Retry-After, and the 418 ban for an IP that keeps sending after its 429s; in memory and in
Redis (several processes share the counts)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import coredis
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, ClientClock, FakeClock, make_exchange
from tradehall.api.app import create_app
from tradehall.api.replay import make_guard
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


# --- venues sharing one Redis -----------------------------------------------------------------

REDIS = "redis://127.0.0.1:6379"
needs_redis = pytest.mark.skipif(
    not redis_available(), reason="no Redis on 127.0.0.1:6379: venue namespaces untested"
)


def shared_redis_settings(namespace: str = "") -> LimitSettings:
    return LimitSettings(
        enabled=True,
        storage=REDIS,
        namespace=namespace,
        public_per_ip=(5, 2),
        global_per_ip=(1000, 10),
        ban_after=3,
        ban_seconds=2 + int(uuid.uuid4().int % 50),
    )


@contextmanager
def venue(data: Path, settings: LimitSettings, ip: str) -> Iterator[Client]:
    """A venue of its own (its own store) on ``settings``, seen from ``ip``."""
    exchange = make_exchange(data)
    app = create_app(exchange, admin_token=ADMIN_TOKEN, limits=settings, run_scheduler=False)
    try:
        with TestClient(app, client=(ip, 5000)) as http:
            yield Client(BASE_URL, http=http)
    finally:
        exchange.store.close()


def earn_ban(public: Client) -> None:
    for _ in range(5 + 4):  # the budget, then the refusals that end in a ban
        public.request("GET", "/spot/open/sapi/v1/time", signed=False)
    assert public.request("GET", "/spot/open/sapi/v1/ping", signed=False).status_code == 418


def random_ip() -> str:
    return f"127.1.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"


@needs_redis
def test_venues_on_one_redis_keep_their_limits_and_bans_apart(tmp_path: Path) -> None:
    settings, ip = shared_redis_settings(), random_ip()
    with venue(tmp_path / "a", settings, ip) as a, venue(tmp_path / "b", settings, ip) as b:
        earn_ban(a)
        answers = [b.request("GET", "/spot/open/sapi/v1/time", signed=False) for _ in range(5)]
        assert [r.status_code for r in answers] == [200] * 5  # its own budget, untouched
        assert b.request("GET", "/spot/open/sapi/v1/ping", signed=False).status_code == 429


@needs_redis
def test_one_configured_namespace_is_one_venue(tmp_path: Path) -> None:
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    settings, ip = shared_redis_settings(namespace), random_ip()
    with venue(tmp_path / "a", settings, ip) as a, venue(tmp_path / "b", settings, ip) as b:
        earn_ban(a)
        assert b.request("GET", "/spot/open/sapi/v1/ping", signed=False).status_code == 418
    keys = asyncio.run(redis_keys(f"tradehall:{namespace}:*"))
    assert f"tradehall:{namespace}:TH-BAN/{ip}/1/{settings.ban_seconds}/second" in keys


async def redis_keys(pattern: str) -> set[str]:
    client = coredis.Redis.from_url(REDIS, decode_responses=True)
    return set(await client.keys(pattern))


@needs_redis
def test_replay_guards_of_two_venues_do_not_share_signatures() -> None:
    async def uses() -> list[bool]:
        a, b = f"test-a-{uuid.uuid4().hex[:8]}", f"test-b-{uuid.uuid4().hex[:8]}"
        signature, now = uuid.uuid4().hex, int(time.time() * 1000)
        guards = [make_guard(REDIS, a), make_guard(REDIS, b), make_guard(REDIS, a)]
        return [await guard.first_use(signature, now + 5000, now) for guard in guards]

    assert asyncio.run(uses()) == [True, True, False]  # the third is venue a's again


def test_an_unreachable_redis_is_a_503_and_not_ready(tmp_path: Path) -> None:
    """Nothing listens on the configured Redis: every limited request is refused with 503
    (-1001, nothing done), never a 500, and /readyz says why, so a load balancer stops
    sending traffic here; the admin API still answers."""
    settings = replace(shared_redis_settings(), storage="redis://127.0.0.1:1")
    with venue(tmp_path / "a", settings, random_ip()) as client:
        for path in ("/spot/open/sapi/v1/ping", "/spot/open/sapi/v1/depth?symbol=BTCUSDT"):
            answer = client.request("GET", path, signed=False)
            assert answer.status_code == 503, answer.text
            assert answer.json()["code"] == -1001 and "Redis" in answer.json()["msg"]
        ready = client.request("GET", "/readyz", signed=False)
        assert ready.status_code == 503
        assert ready.json() == {
            "status": "not ready",
            "reason": "the rate-limit store (Redis) is unreachable",
        }
        assert client.request("GET", "/healthz", signed=False).status_code == 200
