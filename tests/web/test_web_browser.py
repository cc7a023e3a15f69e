"""The pages in a real browser (Debian's chromium, driven by Playwright) against a real
``tradehall serve --demo`` process: market data shows, a signed order placed from the form
rests on the book and is cancelled from the page, a wrong secret is told clearly, the operator
view opens with the admin token only."""

from __future__ import annotations

import gzip
import json
import re
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from support import (
    Backend,
    ServerProcess,
    nats_unreachable,
    postgres_unreachable,
    start_engine,
    start_gateway,
    start_ha_pair,
    start_server,
)
from tradehall.client import AdminClient, Client
from tradehall.web.screenshots import CHROMIUM

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)",
        allow_module_level=True,
    )

from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    WebSocket,
    expect,
)

TIMEOUT_MS = 15_000
"""For every action and every ``expect`` (whose own default is 5 s): the suite runs beside
another worker, and a page's signed round trips can take seconds on a loaded machine."""
expect.set_options(timeout=TIMEOUT_MS)


@dataclass
class Venue:
    server: ServerProcess
    token: str
    demo: dict[str, Any]
    maker: Client

    @property
    def url(self) -> str:
        return self.server.url

    def admin(self) -> AdminClient:
        return AdminClient(self.url, self.token)

    def trader(self) -> Client:
        return Client(self.url, self.demo["apiKey"], self.demo["secret"])


@pytest.fixture(scope="module")
def venue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venue]:
    """A demo server with a second user who made two trades and left a book on BTCUSDT."""
    data = tmp_path_factory.mktemp("web") / "data"
    server = start_server(data, "--demo", "--no-sim")
    try:
        assert server.demo is not None
        token = (data / "admin.token").read_text().strip()
        with AdminClient(server.url, token) as admin:
            user = admin.create_user("maker")["id"]
            key = admin.create_key(user)
            admin.deposit(user, "BTC", "50", tx_id="maker-btc")
            admin.deposit(user, "USDT", "5000000", tx_id="maker-usdt")
        maker = Client(server.url, key["apiKey"], key["secret"])
        with Client(server.url, server.demo["apiKey"], server.demo["secret"]) as demo:
            for price in ("30000", "30100"):
                maker.create_order("BTCUSDT", "SELL", "LIMIT", volume="0.1", price=price)
                demo.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.1", price=price)
        for i in range(1, 6):
            maker.create_order("BTCUSDT", "SELL", "LIMIT", volume="0.2", price=f"{30100 + i * 10}")
            maker.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.2", price=f"{30000 - i * 10}")
        yield Venue(server, token, server.demo, maker)
        maker.close()
    finally:
        server.stop(signal.SIGTERM)
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


@dataclass
class Watched:
    page: Page
    errors: list[str]
    requests: list[str]


@pytest.fixture
def page(browser: Browser) -> Iterator[Watched]:
    """A fresh page (own storage) recording console errors, uncaught exceptions and every
    request it sends (URL, headers, body)."""
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    watched = Watched(opened, [], [])

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.errors.append(message.text)

    opened.on("console", console)
    opened.on("pageerror", lambda exc: watched.errors.append(f"uncaught: {exc}"))
    opened.on(
        "request",
        lambda r: watched.requests.append(f"{r.url} {r.headers} {r.post_data or ''}"),
    )
    yield watched
    context.close()


def sign_in(page: Page, api_key: str, secret: str) -> None:
    page.fill("#api-key", api_key)
    page.fill("#api-secret", secret)
    page.click("#signin button[type=submit]")


def test_trader_view_loads_cleanly_and_shows_the_market(venue: Venue, page: Watched) -> None:
    p = page.page
    answer = p.goto(venue.url + "/")
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
    p.wait_for_selector("body[data-ready=true]")
    expect(p.locator("#create-account")).to_be_hidden()  # no self-service accounts here
    # Every market, spot and futures, with its last price.
    expect(p.locator("#markets tbody tr")).to_have_count(6)
    expect(p.locator("#markets tr[data-symbol=BTCUSDT] td.num").first).to_have_text("30100.00")
    expect(p.locator("#markets tr[data-symbol='E-BTC-USDT']")).to_have_count(1)
    # The book, top levels each side, with depth bars; the two trades; the chart's bar.
    expect(p.locator("#asks tr.level")).to_have_count(5)
    expect(p.locator("#bids tr.level")).to_have_count(5)
    best_bid = p.locator("#bids tr.level").first
    expect(best_bid.locator("td").first).to_have_text("29990.00")
    depth = p.eval_on_selector(
        "#bids tr.level:last-child", "e => e.style.getPropertyValue('--depth')"
    )
    assert depth == "100.0%"
    expect(p.locator("#trades tbody tr")).to_have_count(2)
    expect(p.locator("#chart")).to_have_attribute("data-bars", re.compile(r"^[1-9]"))
    assert p.locator("#chart canvas").count() > 0
    assert p.eval_on_selector("#depth-chart", "c => c.width") > 0
    p.wait_for_timeout(1500)  # a round of polling more
    assert page.errors == []


def test_signed_order_from_the_form_rests_and_is_cancelled(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/?market=BTCUSDT")
    p.wait_for_selector("body[data-ready=true]")
    sign_in(p, venue.demo["apiKey"], venue.demo["secret"])
    expect(p.locator("#account")).to_be_visible()
    expect(p.locator("#spot-balances tbody tr")).to_have_count(3)

    p.check("input[name=side][value=BUY]")
    p.check("input[name=type][value=LIMIT]")
    p.fill("#order-price", "12345.67")
    p.fill("#order-volume", "0.01")
    p.click("#order-submit")
    expect(p.locator("#order-message")).to_contain_text("placed")
    order_id = re.search(r"Order (\d+) placed", p.inner_text("#order-message"))
    assert order_id is not None
    oid = order_id.group(1)
    # On the book (a level of its own) and among the open orders, on the page and on the API.
    expect(p.locator("#bids tr.level td:first-child", has_text="12345.67")).to_have_count(1)
    row = p.locator(f"#open-orders tr[data-order-id='{oid}']")
    expect(row).to_have_count(1)
    with venue.trader() as trader:
        assert [o["orderId"] for o in trader.open_orders("BTCUSDT")] == [oid]

    row.locator("button").click()
    expect(p.locator("#order-message")).to_contain_text(f"Order {oid} cancelled")
    expect(row).to_have_count(0)
    expect(p.locator("#bids tr.level td:first-child", has_text="12345.67")).to_have_count(0)
    expect(p.locator("#order-history tbody tr", has_text="CANCELED")).to_have_count(1)
    with venue.trader() as trader:
        assert trader.get_order("BTCUSDT", oid)["status"] == "CANCELED"

    # The secret went nowhere: not in any request, not in the browser's storage.
    secret = venue.demo["secret"]
    assert page.requests and not any(secret in r for r in page.requests)
    assert any("x-ch-sign" in r.lower() for r in page.requests)
    stored = p.evaluate("() => JSON.stringify([localStorage, sessionStorage, document.cookie])")
    assert secret not in stored and venue.demo["apiKey"] not in stored
    assert p.input_value("#api-secret") == ""
    assert page.errors == []


def test_a_refused_order_and_a_futures_market_show_without_errors(
    venue: Venue, page: Watched
) -> None:
    p = page.page
    p.goto(venue.url + "/?market=E-BTC-USDT")
    p.wait_for_selector("body[data-ready=true]")
    sign_in(p, venue.demo["apiKey"], venue.demo["secret"])
    expect(p.locator("#futures-balances tbody tr")).to_have_count(2)
    expect(p.locator("#leverage-form")).to_be_visible()
    p.fill("#leverage", "7")
    p.click("#leverage-form button")
    expect(p.locator("#order-message")).to_contain_text("Leverage on E-BTC-USDT is 7x")
    p.fill("#order-price", "100.05")  # more decimals than the contract's one
    p.fill("#order-volume", "1")
    p.click("#order-submit")
    expect(p.locator("#order-message")).to_contain_text("Order refused")
    expect(p.locator("#order-message")).to_contain_text("code -1111")
    # The refusal is an error answer the page expected: only that one resource error.
    assert all("400" in e for e in page.errors) and len(page.errors) == 1


def test_a_wrong_secret_is_told_clearly(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/")
    p.wait_for_selector("body[data-ready=true]")
    sign_in(p, venue.demo["apiKey"], "0" * 32)
    message = p.locator("#signin-message")
    expect(message).to_contain_text("Sign-in failed: the API key or secret is wrong")
    expect(message).to_contain_text("code -")
    expect(p.locator("#account")).to_be_hidden()
    expect(p.locator("#order-submit")).to_be_disabled()


def test_operator_view_with_the_token(venue: Venue, page: Watched) -> None:
    p = page.page
    with Client(venue.url) as public:
        unknown = public.request(
            "GET", "/spot/open/sapi/v1/ticker", params={"symbol": "NO"}, signed=False
        )
    assert unknown.status_code == 400
    p.goto(venue.url + "/admin")
    p.fill("#admin-token", venue.token)
    p.click("#token-form button[type=submit]")
    expect(p.locator("#admin")).to_be_visible()
    expect(p.locator("#users tbody tr")).to_have_count(2)
    expect(p.locator("#audit-result")).to_have_text("OK: every invariant holds")
    expect(p.locator("#assets tbody tr", has_text="USDT")).to_have_count(1)
    expect(p.locator("#system tbody tr", has_text="fee account")).to_have_count(3)
    book = p.locator("#markets-activity tbody tr", has_text="BTCUSDT")
    expect(book.locator("td").nth(2)).to_have_text("10")
    expect(p.locator("#rates")).to_contain_text("Requests since start")
    expect(p.locator("#gateways-panel")).to_be_hidden()  # one process: no gateways
    expect(p.locator("#status")).to_contain_text("Journal")
    expect(p.locator("#engines-panel")).to_be_hidden()  # not an HA engine
    # The simulation's panel (this server runs --no-sim): off, no participants, no faults.
    expect(p.locator("#sim")).to_contain_text("Faults injected")
    expect(p.locator("#sim dd").first).to_have_text("no")
    expect(p.locator("#sim-participants tbody")).to_contain_text("has not run")
    refused = p.locator("#errors tbody tr", has_text="GET /spot/open/sapi/v1/ticker").first
    expect(refused).to_contain_text(str(unknown.json()["code"]))

    # Deposit, an explicit action through the admin API, in two steps.
    with venue.admin() as admin:
        before = {b["asset"]: b["free"] for b in admin.balances(1)["balances"]}
    p.fill("#deposit-user", "1")
    p.fill("#deposit-asset", "usdt")
    p.fill("#deposit-amount", "90000000000")
    p.click("#deposit-form button")
    expect(p.locator("#deposit-summary")).to_contain_text("Deposit 90000000000 USDT to user 1 (")
    p.click("#deposit-no")
    expect(p.locator("#deposit-message")).to_have_text("Deposit cancelled: nothing was deposited")
    expect(p.locator("#deposit-confirm")).to_be_hidden()
    p.fill("#deposit-asset", "eth")
    p.fill("#deposit-amount", "2.5")
    p.click("#deposit-form button")
    expect(p.locator("#deposit-summary")).to_contain_text("Deposit 2.5 ETH to user 1 (")
    with venue.admin() as admin:  # asked, not done
        assert {b["asset"]: b["free"] for b in admin.balances(1)["balances"]} == before
    p.click("#deposit-yes")
    expect(p.locator("#deposit-message")).to_contain_text("Deposited 2.5 ETH to user 1")
    # The result is beside the form, and the amount is cleared: no second deposit by a
    # repeated click of an operator who did not see the first one's answer.
    assert p.locator("#deposit-message").is_visible() and p.input_value("#deposit-amount") == ""
    with venue.admin() as admin:
        after = {b["asset"]: b["free"] for b in admin.balances(1)["balances"]}
    assert float(after["ETH"]) == float(before["ETH"]) + 2.5
    assert after["USDT"] == before["USDT"]
    expect(p.locator("#user-balances tbody tr", has_text="ETH")).to_have_count(1)

    assert page.errors == []


def key_list_loads(page: Watched) -> list[str]:
    return [r for r in page.requests if "/admin/v1/keys {" in r]


def open_operator_view(venue: Venue, page: Watched) -> str:
    """The operator view, opened with the token; the API key of a fresh key of user 1."""
    with venue.admin() as admin:
        spare: str = admin.create_key(1)["apiKey"]
    page.page.goto(venue.url + "/admin")
    page.page.fill("#admin-token", venue.token)
    page.page.click("#token-form button[type=submit]")
    return spare


def test_a_slow_revoke_confirmation_still_revokes(venue: Venue, page: Watched) -> None:
    """Two clicks, and the question outlives the key list's reloads (every 3 s): a slow
    operator's "Confirm revoke" once asked again and left a stolen key live."""
    p = page.page
    spare = open_operator_view(venue, page)
    button = p.locator(f"#keys tr[data-api-key='{spare}'] button")
    button.click()
    expect(button).to_have_text("Confirm revoke")
    expect(p.locator("#keys-message")).to_contain_text('Click "Confirm revoke" within 30 s')
    reloads = len(key_list_loads(page))
    while len(key_list_loads(page)) < reloads + 2:
        p.wait_for_timeout(200)
    expect(button).to_have_text("Confirm revoke")
    button.click()
    expect(p.locator("#keys-message")).to_contain_text("revoked")
    with venue.admin() as admin:
        keys = admin.request("GET", "/admin/v1/keys").json()["keys"]
    assert next(k for k in keys if k["apiKey"] == spare)["revoked"] is not None
    expect(p.locator(f"#keys tr[data-api-key='{spare}']")).to_contain_text("revoked")
    assert page.errors == []


def test_an_unconfirmed_revoke_expires_and_says_so(venue: Venue, page: Watched) -> None:
    p = page.page
    p.clock.install()
    spare = open_operator_view(venue, page)
    button = p.locator(f"#keys tr[data-api-key='{spare}'] button")
    button.click()
    expect(button).to_have_text("Confirm revoke")
    p.clock.fast_forward(31_000)
    expect(p.locator("#keys-message")).to_contain_text(
        "not confirmed within 30 s: the key is still live"
    )
    expect(button).to_have_text("Revoke")
    button.click()  # asks again, revokes nothing
    expect(button).to_have_text("Confirm revoke")
    with venue.admin() as admin:
        keys = admin.request("GET", "/admin/v1/keys").json()["keys"]
    assert next(k for k in keys if k["apiKey"] == spare)["revoked"] is None
    assert page.errors == []


def test_operator_view_of_an_engine_lists_its_gateways(tmp_path: Path, page: Watched) -> None:
    """Behind gateways the engine sees no client request's front half: the operator's page
    on the engine lists each gateway worker and adds its requests to the totals."""
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    data = tmp_path / "data"
    engine = start_engine(data, subject, "--demo")
    try:
        gateway = start_gateway(subject)
        try:
            with Client(gateway.url) as public:
                for _ in range(5):
                    public.depth("BTCUSDT")
            token = (data / "admin.token").read_text().strip()
            p = page.page
            p.goto(engine.url + "/admin")
            p.fill("#admin-token", token)
            p.click("#token-form button[type=submit]")
            expect(p.locator("#gateways-panel")).to_be_visible()
            listed = p.locator("#gateways tbody tr")
            expect(listed).to_have_count(1)
            expect(listed.locator("td").nth(1)).to_have_text(str(gateway.proc.pid))
            with AdminClient(engine.url, token) as admin:
                deadline = time.monotonic() + 15
                while admin.request("GET", "/admin/v1/activity").json()["requestsTotal"] < 5:
                    assert time.monotonic() < deadline, "the gateway's requests never showed"
                    time.sleep(0.2)
            assert page.errors == []
        finally:
            gateway.stop()
    finally:
        engine.stop()


def test_operator_view_shows_the_leader_and_its_standby(tmp_path: Path, page: Watched) -> None:
    """An HA venue (`engine --standby` twice, PostgreSQL): the engine that leads shows
    itself, its epoch and the standby following it."""
    for reason in (nats_unreachable(), postgres_unreachable()):
        if reason:
            pytest.skip(reason)
    backend = Backend("postgresql")
    subject = f"test-{uuid.uuid4().hex}"
    first, second = tmp_path / "a", tmp_path / "b"
    database = backend.database(first)
    engines: list[ServerProcess] = []
    try:
        engines = start_ha_pair(first, second, subject, database)
        token = (first / "admin.token").read_text().strip()
        with AdminClient(engines[0].url, token) as admin:
            deadline = time.monotonic() + 15
            while admin.request("GET", "/admin/v1/status").json()["ha"]["standbys"] < 1:
                assert time.monotonic() < deadline, "the standby never reported"
                time.sleep(0.2)
        p = page.page
        p.goto(engines[0].url + "/admin")
        p.fill("#admin-token", token)
        p.click("#token-form button[type=submit]")
        expect(p.locator("#engines-panel")).to_be_visible()
        expect(p.locator("#status")).to_contain_text("engine-a · epoch 1")
        leader = p.locator("#engines tbody tr", has_text="engine-a")
        expect(leader.locator("td").nth(1)).to_have_text("leader")
        standby = p.locator("#engines tbody tr", has_text="engine-b")
        expect(standby.locator("td").nth(1)).to_have_text("standby")
        assert page.errors == []
    finally:
        for engine in reversed(engines):
            engine.stop()
        backend.drop()


def test_operator_view_refuses_a_wrong_token(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/admin")
    p.fill("#admin-token", "not-the-token")
    p.click("#token-form button[type=submit]")
    expect(p.locator("#token-message")).to_contain_text("the admin token is wrong")
    expect(p.locator("#admin")).to_be_hidden()


# --------------------------------------------------------------------------- live by stream


def record_frames(page: Page, sent: list[str]) -> list[dict[str, Any]]:
    """Every message the page receives on its WebSockets, gunzipped; what it sends goes to
    ``sent``."""
    frames: list[dict[str, Any]] = []

    def on_frame(payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            frames.append(json.loads(gzip.decompress(payload)))

    def on_socket(ws: WebSocket) -> None:
        ws.on("framereceived", on_frame)
        ws.on("framesent", lambda payload: sent.append(str(payload)))

    page.on("websocket", on_socket)
    return frames


def depth_requests(watched: Watched) -> int:
    return sum("/depth?" in r for r in watched.requests)


def test_book_trades_ticker_and_account_are_live_by_stream(venue: Venue, page: Watched) -> None:
    p = page.page
    sent: list[str] = []
    frames = record_frames(p, sent)
    answer = p.goto(venue.url + "/?market=BTCUSDT")
    # The policy is unchanged: 'self' covers the same-origin ws: URLs.
    assert answer is not None and "connect-src 'self';" in answer.headers["content-security-policy"]
    p.wait_for_selector("body[data-spot-stream=live]")
    expect(p.locator("#feed")).to_have_text("live")
    sign_in(p, venue.demo["apiKey"], venue.demo["secret"])
    p.wait_for_selector("body[data-account-stream=live]")
    expect(p.locator("#bids tr.level")).to_have_count(5)
    # The REST book was asked for at most once, before the stream was up.
    depth_before = depth_requests(page)
    assert depth_before <= 1

    with venue.trader() as trader:
        oid = trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.01", price="23456.78")[
            "orderId"
        ]
        # Pushed: the account's safety poll is 10 s, the push refreshes the panel at once.
        row = p.locator(f"#open-orders tr[data-order-id='{oid}']")
        expect(row).to_have_count(1, timeout=5000)
        expect(p.locator("#bids tr.level td:first-child", has_text="23456.78")).to_have_count(1)
        assert any(
            f.get("channel") == "user_order" and str(f["tick"]["orderId"]) == str(oid)
            for f in frames
        )
        # A trade: the demo user sells into the maker's best bid (29990.00, 0.2).
        trader.create_order("BTCUSDT", "SELL", "LIMIT", volume="0.05", price="29990")
        expect(p.locator("#trades tbody tr").first.locator("td").first).to_have_text("29990.00")
        expect(p.locator("#bids tr.level", has_text="29990.00").locator("td").nth(1)).to_have_text(
            "0.150000"
        )
        expect(p.locator("#markets tr[data-symbol=BTCUSDT] td.num").first).to_have_text("29990.00")
        expect(p.locator("#chart")).to_have_attribute("data-close", "29990.00")
        trader.cancel_order("BTCUSDT", oid)
        expect(row).to_have_count(0, timeout=5000)
        expect(p.locator("#bids tr.level td:first-child", has_text="23456.78")).to_have_count(0)
    assert depth_requests(page) == depth_before
    # The private streams were opened with a signature, never with the secret.
    hellos = [json.loads(m)["params"] for m in sent if venue.demo["apiKey"] in m]
    assert len(hellos) == 2 and all(re.fullmatch("[0-9a-f]{64}", h["sign"]) for h in hellos)
    assert not any(venue.demo["secret"] in m for m in sent)
    # No REST polling of the market while the stream is live: no ticker list either.
    assert not any("/ticker?" in r for r in page.requests[-20:])
    assert page.errors == []


def test_a_futures_book_and_orders_are_live_by_stream(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/?market=E-BTC-USDT")
    p.wait_for_selector("body[data-futures-stream=live]")
    sign_in(p, venue.demo["apiKey"], venue.demo["secret"])
    p.wait_for_selector("body[data-account-stream=live]")
    depth_before = depth_requests(page)
    with venue.trader() as trader:
        placed = trader.futures_create_order(
            "E-BTC-USDT", "BUY", "LIMIT", "OPEN", volume="2", price="20000.5"
        )
        oid = placed["orderId"]
        expect(p.locator(f"#open-orders tr[data-order-id='{oid}']")).to_have_count(1, timeout=5000)
        expect(p.locator("#bids tr.level td:first-child", has_text="20000.5")).to_have_count(1)
        trader.futures_cancel_order("E-BTC-USDT", oid)
        expect(p.locator("#bids tr.level td:first-child", has_text="20000.5")).to_have_count(0)
    assert depth_requests(page) == depth_before
    assert page.errors == []


def test_the_page_reconnects_after_the_server_closes_its_sockets(
    tmp_path: Path, browser: Browser
) -> None:
    """The server restarts on the same port: its sockets close, the page polls meanwhile,
    then connects again and is live as before."""
    data = tmp_path / "data"
    server = start_server(data, "--demo", "--no-sim")
    port = str(urlsplit(server.url).port)
    context = browser.new_context()
    try:
        assert server.demo is not None
        demo = server.demo
        p = context.new_page()
        p.set_default_timeout(TIMEOUT_MS)
        uncaught: list[str] = []
        errors: list[str] = []
        p.on("pageerror", lambda exc: uncaught.append(str(exc)))
        p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        requests: list[str] = []
        p.on("request", lambda r: requests.append(r.url))
        p.goto(server.url + "/?market=BTCUSDT")
        p.wait_for_selector("body[data-spot-stream=live]")
        sign_in(p, demo["apiKey"], demo["secret"])
        p.wait_for_selector("body[data-account-stream=live]")

        server.stop(signal.SIGTERM)
        p.wait_for_selector("body[data-spot-stream=polling]")
        expect(p.locator("#feed")).to_have_text("polling")
        # Polling again while the stream is down (the requests fail: no server).
        polled = len(requests)
        p.wait_for_timeout(2500)
        assert sum("/depth?" in r for r in requests[polled:]) >= 1
        server = start_server(data, "--port", port)
        p.wait_for_selector("body[data-spot-stream=live]", timeout=20_000)
        p.wait_for_selector("body[data-account-stream=live]", timeout=20_000)
        errors.clear()  # refused connections while the server was down are expected

        with Client(server.url, demo["apiKey"], demo["secret"]) as trader:
            oid = trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.01", price="11111.11")[
                "orderId"
            ]
            expect(p.locator("#bids tr.level td:first-child", has_text="11111.11")).to_have_count(1)
            expect(p.locator(f"#open-orders tr[data-order-id='{oid}']")).to_have_count(
                1, timeout=5000
            )
        assert uncaught == [] and errors == []
    finally:
        context.close()
        server.stop(signal.SIGTERM)
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


def test_operator_view_lists_the_admin_actions(venue: Venue, page: Watched) -> None:
    """The "Admin actions" table: what the CLI or a script did with the token, and what was
    done from this page, named as such."""
    with venue.admin() as admin:
        user = admin.create_user("audited")
    p = page.page
    p.goto(venue.url + "/admin")
    p.fill("#admin-token", venue.token)
    p.click("#token-form button[type=submit]")
    expect(p.locator("#admin-log tbody tr", has_text="user.create").first).to_contain_text(
        f'{{"id":{user["id"]}}}'
    )
    p.fill("#deposit-user", str(user["id"]))
    p.fill("#deposit-asset", "usdt")
    p.fill("#deposit-amount", "7")
    p.click("#deposit-form button")
    p.click("#deposit-yes")  # a deposit is confirmed in a second step
    expect(p.locator("#deposit-message")).to_contain_text("Deposited 7 USDT")
    latest = p.locator("#admin-log tbody tr").first
    expect(latest).to_contain_text("operator-page")
    expect(latest).to_contain_text("deposit")
    expect(latest).to_contain_text("ok")
    assert page.errors == []


def test_operator_view_shows_each_index_source(venue: Venue, page: Watched) -> None:
    """The "Futures index sources" table: every source of every contract's index, its
    weight and whether the last index tick used it (a feed pushed by name shows up)."""
    with venue.admin() as admin:
        admin.set_index_price("E-ETH-USDT", "2000", feed="pagefeed")
    p = page.page
    p.goto(venue.url + "/admin")
    p.fill("#admin-token", venue.token)
    p.click("#token-form button[type=submit]")
    rows = p.locator("#index-sources tbody tr")
    expect(rows.filter(has_text="E-BTC-USDT").filter(has_text="mid")).to_have_count(1)
    feed = rows.filter(has_text="E-ETH-USDT").filter(has_text="pagefeed")
    expect(feed).to_have_count(1, timeout=10_000)
    expect(feed).to_contain_text("2000.00")  # sampled at the next second's index tick
    assert page.errors == []


def trader_of_their_own(venue: Venue, name: str) -> dict[str, Any]:
    """A new user with USDT to spend and a key (its ``apiKey`` and ``secret``)."""
    with venue.admin() as admin:
        user = admin.create_user(name)["id"]
        admin.deposit(user, "USDT", "100000", tx_id=f"{name}-usdt")
        key: dict[str, Any] = admin.create_key(user)
    return key


def signed_in(tab: Page, venue: Venue, key: dict[str, Any]) -> None:
    tab.goto(venue.url + "/?market=BTCUSDT")
    tab.wait_for_selector("body[data-ready=true]")
    sign_in(tab, key["apiKey"], key["secret"])
    tab.wait_for_selector("body[data-account-stream=live]")


def test_many_open_orders_and_quick_orders_stay_within_the_rate_limits(
    venue: Venue, page: Watched
) -> None:
    """The spot order history is one read (`GET /sapi/v3/historyOrders`), not a `GET /order`
    per order (20 per 2 s a key): with 25 open orders, three orders placed in a row from the
    form drew 429s and then got the trader's address banned (418)."""
    key = trader_of_their_own(venue, "busy")
    p = page.page
    with Client(venue.url, key["apiKey"], key["secret"]) as bot:
        resting = [
            bot.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.01", price=f"{20000 + i}")[
                "orderId"
            ]
            for i in range(25)
        ]
        try:
            signed_in(p, venue, key)
            for price in ("19000", "19001", "19002"):
                p.check("input[name=side][value=BUY]")
                p.check("input[name=type][value=LIMIT]")
                p.fill("#order-price", price)
                p.fill("#order-volume", "0.01")
                p.click("#order-submit")
                expect(p.locator("#order-message")).to_contain_text("placed")
            expect(p.locator("#open-orders tbody tr")).to_have_count(28)
            # The bot's orders too: the history is the account's, not this page's.
            history = p.locator("#order-history tbody tr")
            expect(history).to_have_count(28)
            expect(history.first).to_contain_text("19002.00")
            p.wait_for_timeout(2500)
        finally:
            ids = [o["orderId"] for o in bot.open_orders("BTCUSDT")]
            for start in range(0, len(ids), 10):
                bot.batch_cancel("BTCUSDT", ids[start : start + 10])
    assert len(ids) == 28 and set(resting) <= set(ids)
    assert not [r for r in page.requests if "/sapi/v1/order?" in r]  # no GET /order
    assert page.errors == []


def test_a_revoked_key_signs_the_page_out(venue: Venue, page: Watched) -> None:
    """It kept polling with the refused key, filling the operator's error list (~3 refusals
    a second)."""
    key = trader_of_their_own(venue, "revoked")
    p = page.page
    signed_in(p, venue, key)
    with venue.admin() as admin:
        admin.revoke_key(key["apiKey"])
    expect(p.locator("#signin-message")).to_contain_text(
        "Signed out: the server no longer accepts this API key", timeout=20_000
    )
    expect(p.locator("#signin-message")).to_contain_text("code -2015")
    expect(p.locator("#account")).to_be_hidden()
    signed = sum(key["apiKey"] in r for r in page.requests)
    p.wait_for_timeout(3000)
    assert sum(key["apiKey"] in r for r in page.requests) == signed


def test_two_tabs_with_one_key_never_sign_with_one_timestamp(venue: Venue, page: Watched) -> None:
    """Tabs take their timestamps from one shared worker: two tabs signed in with the same key
    answered the same push with the same requests in the same millisecond, and the server
    refused the second as a replay (-1022)."""
    key = trader_of_their_own(venue, "two-tabs")
    first = page.page
    second = first.context.new_page()
    stamps: list[str] = []
    errors: list[str] = []
    for tab in (first, second):
        tab.on(
            "request", lambda r: stamps.extend(v for k, v in r.headers.items() if k == "x-ch-ts")
        )
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        signed_in(tab, venue, key)
    with Client(venue.url, key["apiKey"], key["secret"]) as bot:
        for i in range(8):
            oid = bot.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.01", price=f"{21000 + i}")[
                "orderId"
            ]
            time.sleep(0.3)
            bot.cancel_order("BTCUSDT", oid)
            time.sleep(0.9)
    first.wait_for_timeout(1500)
    assert len(stamps) > 30, stamps
    assert len(set(stamps)) == len(stamps), sorted(stamps)
    assert errors == [] and page.errors == []


def test_far_orders_do_not_squeeze_the_depth_chart(venue: Venue, page: Watched) -> None:
    """The chart is centred on the mid, as wide as the nearer side reaches and at most 2 % of
    the price each way: one bid at a thirtieth of the price drew every visitor's book as a
    sliver at one edge, and then one far order on each side, or on a one-sided book, did."""
    p = page.page
    p.goto(venue.url + "/?market=BTCUSDT")
    p.wait_for_selector("body[data-ready=true]")

    def drawn() -> tuple[float, float]:
        low, high = map(float, str(p.get_attribute("#depth-chart", "data-range")).split())
        return low, high

    with venue.trader() as trader:
        far = [
            trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.02", price="1001")["orderId"]
        ]
        try:
            expect(p.locator("#bids tr.level td:first-child", has_text="1001.00")).to_have_count(1)
            low, high = drawn()
            assert 29_000 < low < high < 31_000, (low, high)
            far.append(
                trader.create_order("BTCUSDT", "SELL", "LIMIT", volume="0.001", price="300000")[
                    "orderId"
                ]
            )
            expect(p.locator("#asks tr.level td:first-child", has_text="300000.00")).to_have_count(
                1
            )
            low, high = drawn()  # at most 2 % of the mid (~30,050) each way
            assert 29_440 < low < high < 30_660, (low, high)
        finally:
            for oid in far:
                trader.cancel_order("BTCUSDT", oid)
    # A one-sided book (ETHUSDT has only asks here) with one far ask.
    with venue.trader() as trader:
        p.click("#markets tr[data-symbol=ETHUSDT]")
        asks = [
            trader.create_order("ETHUSDT", "SELL", "LIMIT", volume="0.01", price=price)["orderId"]
            for price in ("2000", "2001", "50000")
        ]
        try:
            expect(p.locator("#asks tr.level td:first-child", has_text="50000.00")).to_have_count(1)
            low, high = drawn()
            assert low == 2000 and high < 2041, (low, high)
        finally:
            for oid in asks:
                trader.cancel_order("ETHUSDT", oid)
    assert page.errors == []


def test_the_address_names_the_market_shown(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/?market=e-btc-usdt")  # any case
    p.wait_for_selector("body[data-ready=true]")
    expect(p.locator("#market-title")).to_have_text("E-BTC-USDT perpetual")
    p.click("#markets tr[data-symbol=BTCUSDT]")
    expect(p).to_have_url(re.compile(r"/\?market=BTCUSDT$"))
    p.reload()
    p.wait_for_selector("body[data-ready=true]")
    expect(p.locator("#market-title")).to_have_text("BTC/USDT")
    assert page.errors == []


def test_an_unknown_market_in_the_address_is_told(venue: Venue, page: Watched) -> None:
    p = page.page
    p.goto(venue.url + "/?market=DOGEUSDT")
    p.wait_for_selector("body[data-ready=true]")
    first = p.locator("#markets tbody tr").first.get_attribute("data-symbol")
    message = p.locator("#page-message")
    expect(message).to_have_text(f"There is no market DOGEUSDT here: showing {first}")
    p.wait_for_timeout(1500)  # the book's polls and pushes do not wipe it
    expect(message).to_be_visible()
    p.click("#markets tr[data-symbol='E-BTC-USDT']")
    expect(message).to_be_hidden()
    assert page.errors == []


def test_a_pair_without_margin_says_so(venue: Venue, page: Watched) -> None:
    """ETHBTC offers no margin trading: "Show ETHBTC" says so instead of an error (-1121)."""
    p = page.page
    p.goto(venue.url + "/?market=ETHBTC")
    p.wait_for_selector("body[data-ready=true]")
    sign_in(p, venue.demo["apiKey"], venue.demo["secret"])
    p.click("#margin-load")
    expect(p.locator("#margin-balances tbody")).to_contain_text("no margin trading on ETHBTC")
    expect(p.locator("#account-message")).to_be_hidden()
    assert all("400" in e for e in page.errors) and len(page.errors) == 1  # the refusal itself


def test_orders_placed_in_a_row_reload_the_account_once(venue: Venue, page: Watched) -> None:
    """Each order or cancel from the page reloaded the account panels at once (five signed
    reads): at several orders a second one tab used up the key's limits beside a bot. Reloads
    asked for within a second of each other are one reload (the page's clock is held still,
    so only the orders can ask for one)."""
    key = trader_of_their_own(venue, "quick")
    p = page.page
    p.clock.install(time=time.time())
    signed_in(p, venue, key)
    p.clock.pause_at(time.time() + 0.5)

    def accounts() -> int:
        return sum("/sapi/v1/account " in r for r in page.requests)

    before = accounts()
    for price in ("19100", "19101", "19102"):
        p.fill("#order-price", price)
        p.fill("#order-volume", "0.01")
        p.click("#order-submit")
        expect(p.locator("#order-message")).to_contain_text("placed")
        p.locator("#order-message").evaluate("m => { m.textContent = '' }")
    p.clock.run_for(100)
    p.wait_for_timeout(1000)
    assert accounts() == before + 1
    with Client(venue.url, key["apiKey"], key["secret"]) as owner:
        ids = [o["orderId"] for o in owner.open_orders("BTCUSDT")]
        owner.batch_cancel("BTCUSDT", ids)
    assert len(ids) == 3


def test_futures_trades_show_the_fee_in_the_margin_coin(venue: Venue, page: Watched) -> None:
    """Futures ``myTrades`` carries no fee coin (the seed's shape): the page names the
    contract's margin coin, as spot's trades show theirs."""
    buyer, seller = (
        trader_of_their_own(venue, "fut-buyer"),
        trader_of_their_own(venue, "fut-seller"),
    )
    with (
        Client(venue.url, buyer["apiKey"], buyer["secret"]) as b,
        Client(venue.url, seller["apiKey"], seller["secret"]) as s,
    ):
        for client in (b, s):
            client.futures_transfer("USDT", "50000", "spot", "futures")
        s.futures_create_order("E-BTC-USDT", "SELL", "LIMIT", "OPEN", volume="1", price="30000")
        b.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", volume="1", price="30000")
    p = page.page
    p.goto(venue.url + "/?market=E-BTC-USDT")
    p.wait_for_selector("body[data-ready=true]")
    sign_in(p, buyer["apiKey"], buyer["secret"])
    expect(p.locator("#my-trades tbody tr")).to_have_count(1)
    expect(p.locator("#my-trades tbody tr td").nth(4)).to_have_text(re.compile(r"^[0-9.]+ USDT$"))
    assert page.errors == []
