"""Self-service accounts on the trader page, in a real browser (Debian's chromium, driven by
Playwright) against a real ``tradehall serve`` with ``[sandbox] self_service = true``: "Create
a test account" shows the key and secret once and signs the page in; an order placed from the
form fills; the faucet tops the account up; the reset cancels its orders and restores it."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

import httpx2
import pytest

from support import ServerProcess, start_server
from tradehall.client import AdminClient, Client
from tradehall.web.screenshots import CHROMIUM

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect

TIMEOUT_MS = 15_000
"""For every action and every ``expect`` (whose own default is 5 s): the suite runs beside
another worker, and a page's signed round trips can take seconds on a loaded machine."""
expect.set_options(timeout=TIMEOUT_MS)


@dataclass
class Sandbox:
    server: ServerProcess
    maker: Client
    maker_key: dict[str, str]
    token: str


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A server offering self-service accounts, with a maker selling BTC at 30000."""
    folder = tmp_path_factory.mktemp("selfservice")
    builtin = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    config = folder / "sandbox.toml"
    config.write_text(builtin + "\n[sandbox]\nself_service = true\nfaucet_per_day = 2\n")
    server = start_server(folder / "data", "--no-sim", "--config", str(config))
    try:
        token = (folder / "data" / "admin.token").read_text().strip()
        with AdminClient(server.url, token) as admin:
            user = admin.create_user("maker")["id"]
            key = admin.create_key(user)
            admin.deposit(user, "BTC", "50", tx_id="maker-btc")
        maker = Client(server.url, key["apiKey"], key["secret"])
        maker.create_order("BTCUSDT", "SELL", "LIMIT", volume="5", price="30000")
        yield Sandbox(server, maker, key, token)
        maker.close()
    finally:
        server.stop(signal.SIGTERM)
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


@pytest.fixture
def page(browser: Browser, sandbox: Sandbox) -> Iterator[tuple[Page, list[str]]]:
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    yield opened, errors
    context.close()


def opened(p: Page, url: str) -> None:
    p.goto(url)
    p.wait_for_selector("body[data-ready=true]")


def place(p: Page, side: str, volume: str, price: str) -> str:
    p.check(f"input[name=side][value={side}]")
    p.check("input[name=type][value=LIMIT]")
    p.fill("#order-price", price)
    p.fill("#order-volume", volume)
    message = p.locator("#order-message")
    before = message.inner_text()
    p.click("#order-submit")
    expect(message).not_to_have_text(before)  # this order's message, not the last one's
    expect(message).to_contain_text("placed")
    found = re.search(r"Order (\d+) placed", p.inner_text("#order-message"))
    assert found is not None
    return found.group(1)


def test_create_trade_faucet_and_reset_from_the_page(
    sandbox: Sandbox, page: tuple[Page, list[str]]
) -> None:
    p, errors = page
    opened(p, sandbox.server.url + "/?market=BTCUSDT")
    expect(p.locator("#sandbox-actions")).to_be_hidden()  # nobody signed in yet
    p.click("#create-account")

    # The key and the secret, once, with the warning; the page is signed in with them.
    expect(p.locator("#new-account")).to_be_visible()
    expect(p.locator("#new-account .warning")).to_contain_text("Copy the API key and the secret")
    expect(p.locator("#new-account .warning")).to_contain_text("shown this once")
    expect(p.locator("#signin-message")).to_contain_text("created and signed in")
    api_key = p.input_value("#new-api-key")
    secret = p.input_value("#new-api-secret")
    assert re.fullmatch(r"[0-9a-f]{32}", api_key) and re.fullmatch(r"[0-9a-f]{32}", secret)
    p.click("#copy-api-secret")
    expect(p.locator("#copy-api-secret")).to_have_text("Copied")
    assert p.evaluate("() => navigator.clipboard.readText()") == secret
    expect(p.locator("#account")).to_be_visible()
    expect(p.locator("#signed-in-key")).to_contain_text(api_key[:8])
    expect(p.locator("#spot-balances tbody tr", has_text="10000000.00000000")).to_have_count(1)
    p.click("#new-account-done")
    expect(p.locator("#new-account")).to_be_hidden()
    assert p.input_value("#new-api-secret") == ""
    trader = Client(sandbox.server.url, api_key, secret)  # the shown key and secret work

    # An order from the form: bought from the maker.
    place(p, "BUY", "1", "30000")
    expect(p.locator("#my-trades tbody tr", has_text="30000")).to_have_count(1)
    assert trader.account()["balances"][2] == {
        "asset": "USDT",
        "free": "9970000.00000000",
        "locked": "0.00000000",
    }

    # The faucet tops USDT up to its start (BTC, above its start, is left).
    p.click("#faucet")
    expect(p.locator("#sandbox-message")).to_have_text(
        "Faucet deposited 30000 USDT; 1 top-up(s) left today"
    )
    expect(p.locator("#spot-balances tbody tr", has_text="10000000.00000000")).to_have_count(1)

    # The reset: a resting order cancelled, the balances back to the start.
    oid = place(p, "BUY", "0.5", "20000")
    expect(p.locator(f"#open-orders tr[data-order-id='{oid}']")).to_have_count(1)
    p.click("#reset-account")
    expect(p.locator("#reset-confirm")).to_be_visible()
    p.click("#reset-confirmed")
    expect(p.locator("#sandbox-message")).to_contain_text("Account reset: 1 order(s) cancelled")
    expect(p.locator(f"#open-orders tr[data-order-id='{oid}']")).to_have_count(0)
    expect(p.locator("#spot-balances tbody tr", has_text="100.00000000")).to_have_count(1)
    assert {b["asset"]: b["free"] for b in trader.account()["balances"]} == {
        "BTC": "100.00000000",
        "ETH": "1000.00000000",
        "USDT": "10000000.00000000",
    }
    assert trader.get_order("BTCUSDT", oid)["status"] == "CANCELED"

    # Nothing of the secret kept by the browser.
    stored = p.evaluate("() => JSON.stringify([localStorage, sessionStorage, document.cookie])")
    assert secret not in stored
    trader.close()
    assert errors == []


def test_another_accounts_key_is_told_the_faucet_is_not_for_it(
    sandbox: Sandbox, page: tuple[Page, list[str]]
) -> None:
    p, errors = page
    opened(p, sandbox.server.url + "/")
    p.fill("#api-key", sandbox.maker_key["apiKey"])
    p.fill("#api-secret", sandbox.maker_key["secret"])
    p.click("#signin button[type=submit]")
    expect(p.locator("#sandbox-actions")).to_be_visible()
    p.click("#faucet")
    expect(p.locator("#sandbox-message")).to_contain_text("self-service accounts only")
    expect(p.locator("#sandbox-message")).to_contain_text("code -2015")
    assert len(errors) == 1 and "403" in errors[0]  # the refusal, an answer the page expects


def test_the_operator_view_shows_a_keys_expiry_and_follows_it_in_place(
    sandbox: Sandbox, page: tuple[Page, list[str]]
) -> None:
    """A self-service key's expiry moves with each use: the operator view shows it and updates
    the cell, leaving the row (and the Revoke button under the operator's pointer) as it is."""
    p, errors = page
    made = httpx2.post(sandbox.server.url + "/sandbox/v1/accounts", json={}).json()
    p.goto(sandbox.server.url + "/admin")
    p.fill("#admin-token", sandbox.token)
    p.click("#token-form button[type=submit]")
    cell = p.locator(f"#keys tr[data-api-key='{made['apiKey']}'] td.key-state")
    expect(cell).to_have_text(re.compile(r"^live, expires \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    first = cell.inner_text()
    maker_cell = p.locator(f"#keys tr[data-api-key='{sandbox.maker_key['apiKey']}'] td.key-state")
    expect(maker_cell).to_have_text("live")  # the operator's keys never expire
    button = p.locator(f"#keys tr[data-api-key='{made['apiKey']}'] button")
    button.evaluate("b => { b.dataset.marked = 'yes'; }")
    p.wait_for_timeout(1100)  # the shown time has whole seconds
    with Client(sandbox.server.url, made["apiKey"], made["secret"]) as trader:
        trader.account()  # a use moves the expiry
    expect(cell).not_to_have_text(first)
    assert cell.inner_text() > first
    expect(button).to_have_attribute("data-marked", "yes")  # the same button: not rebuilt
    assert errors == []
