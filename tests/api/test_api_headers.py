"""Every HTTP answer carries the security headers docs/security.md lists, on every class of
route (public, signed, admin, errors of each kind, the OpenAPI listing, pages and files), and
the server answers only the ``Host`` names of ``[server] allowed_hosts``."""

from __future__ import annotations

import hashlib
import hmac
import socket
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from support import ADMIN_TOKEN, Env, make_exchange
from tradehall.api.app import create_app
from tradehall.config import ConfigError, parse_config

SPOT = "/spot/open/sapi/v1"
COMMON = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
DEFAULT_CONFIG = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")


def signed_get(env: Env, path: str, api_key: str, secret: str) -> httpx2.Response:
    ts = str(env.clock.now - 1)
    signed_path = path.removeprefix("/spot/open")
    sign = hmac.new(secret.encode(), f"{ts}GET{signed_path}".encode(), hashlib.sha256).hexdigest()
    headers = {"X-CH-APIKEY": api_key, "X-CH-TS": ts, "X-CH-SIGN": sign}
    return env.http.get(path, headers=headers)


def assert_secured(answer: httpx2.Response, cache: str) -> None:
    for name, value in COMMON.items():
        assert answer.headers.get(name) == value, (answer.url, name, answer.headers)
    assert answer.headers.get("cache-control") == cache, (answer.url, answer.headers)


def test_every_route_class_carries_the_security_headers(env: Env) -> None:
    user = env.admin.create_user()
    key = env.admin.create_key(user["id"])
    admin_auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    admin_http = env.engine or env.http
    json_answers: list[tuple[Callable[[], httpx2.Response], int]] = [
        (lambda: env.http.get(f"{SPOT}/time"), 200),  # public, the fast path
        (lambda: env.http.get(f"{SPOT}/depth?symbol=BTCUSDT"), 200),
        (lambda: env.http.get(f"{SPOT}/depth?symbol=NOPE"), 400),  # public, refused
        (lambda: signed_get(env, f"{SPOT}/account", key["apiKey"], key["secret"]), 200),
        (lambda: env.http.get(f"{SPOT}/account"), 401),  # signed, refused
        (lambda: env.http.get(f"{SPOT}/unknown"), 404),  # Starlette's router
        (lambda: env.http.delete(f"{SPOT}/time"), 405),
        (lambda: env.http.get("/openapi.json"), 200),
        (lambda: admin_http.get("/admin/v1/status", headers=admin_auth), 200),
        (lambda: admin_http.get("/admin/v1/status"), 401),
    ]
    for call, status in json_answers:
        answer = call()
        assert answer.status_code == status, (answer.url, answer.text)
        assert answer.headers["content-type"].startswith("application/json")
        assert_secured(answer, "no-store")
    for path in ("/", "/web/js/api.js", "/web/missing.js"):
        answer = env.http.get(path)
        assert_secured(answer, "no-store" if path.endswith("missing.js") else "no-cache")
    assert_secured(admin_http.get("/admin"), "no-cache")


# ------------------------------------------------------------------------------ allowed hosts


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[TestClient]:
    exchange = make_exchange(tmp_path / "tradehall.db")
    app = create_app(
        exchange,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        allowed_hosts=("testserver", "*.example.com"),
    )
    with TestClient(app, client=("127.0.0.1", 40000)) as http:
        yield http
    exchange.store.close()


ROUTES = [f"{SPOT}/time", f"{SPOT}/nothing", "/", "/admin", "/admin/v1/users"]


@pytest.mark.parametrize("path", ROUTES)
def test_a_host_not_allowed_is_refused_on_every_route(strict: TestClient, path: str) -> None:
    headers = {"host": "evil.example", "authorization": f"Bearer {ADMIN_TOKEN}"}
    answer = strict.get(path, headers=headers)
    assert answer.status_code == 400
    assert answer.json() == {
        "code": -1102,
        "msg": "host evil.example is not served here (see [server] allowed_hosts)",
    }
    assert_secured(answer, "no-store")


def test_allowed_hosts_match_exact_names_and_subdomains_with_any_port(strict: TestClient) -> None:
    for host in ("testserver", "testserver:8080", "api.example.com", "A.B.Example.COM:443"):
        assert strict.get(f"{SPOT}/time", headers={"host": host}).status_code == 200, host
    for host in ("127.0.0.1:8080", "localhost", "[::1]:8080", "127.0.0.2"):  # loopback: always
        assert strict.get(f"{SPOT}/time", headers={"host": host}).status_code == 200, host
    for host in ("example.com", "example.com.evil", "testserver.evil", "", "127.evil.example"):
        assert strict.get(f"{SPOT}/time", headers={"host": host}).status_code == 400, host


def test_the_default_answers_any_host(env: Env) -> None:
    assert env.http.get(f"{SPOT}/time", headers={"host": "evil.example"}).status_code == 200


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[]", "must be a non-empty array"),
        ('"example.com"', "must be a non-empty array"),
        ('["http://example.com"]', "is not a host name"),
        ('["example.com:8080"]', "is not a host name"),
        ('["exa mple.com"]', "is not a host name"),
        ("[1]", "is not a host name"),
    ],
)
def test_a_bad_allowed_hosts_names_the_key(value: str, problem: str) -> None:
    text = DEFAULT_CONFIG.replace('allowed_hosts = ["*"]', f"allowed_hosts = {value}")
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "my.toml")
    assert "server.allowed_hosts" in str(caught.value) and problem in str(caught.value)


def test_a_real_server_refuses_other_hosts(tmp_path: Path, server_factory: Any) -> None:
    config = tmp_path / "my.toml"
    config.write_text(
        DEFAULT_CONFIG.replace('allowed_hosts = ["*"]', 'allowed_hosts = ["exchange.example"]')
    )
    server = server_factory(None, "--config", str(config), "--demo")
    good = httpx2.get(f"{server.url}{SPOT}/time")
    assert good.status_code == 200 and good.headers["cache-control"] == "no-store"
    bad = httpx2.get(f"{server.url}/admin", headers={"host": "evil.example"})
    assert bad.status_code == 400 and bad.json()["code"] == -1102
    ws_url = server.url.replace("http", "ws") + "/kline-api/ws"
    with connect(ws_url, open_timeout=5):
        pass
    port = int(server.url.rsplit(":", 1)[1])
    # A page of evil.example whose name resolves to this server: the socket reaches it, the
    # handshake names evil.example.
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        pytest.raises(InvalidStatus) as refused,
    ):
        connect(f"ws://evil.example:{port}/kline-api/ws", sock=sock, open_timeout=5)
    assert refused.value.response.status_code == 403
