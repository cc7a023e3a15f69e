"""Screenshots of the web pages for the docs: ``python -m tradehall.web.screenshots [--out docs]``.

Runs a demo exchange in this process on a temporary data folder, trades two hours of market
history into it (the server's clock starts two hours back and catches up with the wall clock
as the history is written, so the charts have bars to show), then opens the trader view and the
operator view in Debian's chromium (``apt-get install chromium``) driven by Playwright (the
``test`` extra) and writes ``trader.png``, ``trader-futures.png`` and ``admin.png``.

The browser launch (``launch_chromium``) and the market seeding (``seed_book``) are shared with
the browser tests."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tradehall import operations as ops
from tradehall.api.app import create_app
from tradehall.client import AdminClient, Client
from tradehall.config import load_config
from tradehall.datadir import DataDir
from tradehall.projector import open_exchange
from tradehall.server import GracefulServer, listen, url_for, uvicorn_config
from tradehall.store.factory import open_store

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HISTORY_MINUTES = 120


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's chromium, never a downloaded one."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


class ShiftedClock:
    """Wall-clock milliseconds plus an offset that the seeding moves forward to zero."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


@dataclass
class Venue:
    url: str
    admin_token: str
    demo: dict[str, Any]
    clock: ShiftedClock


@contextmanager
def serve_demo(data_dir: Path, clock: ShiftedClock) -> Iterator[Venue]:
    """``tradehall serve --demo`` in a thread of this process, with ``clock`` as its clock."""
    datadir = DataDir(data_dir)
    datadir.ensure()
    cfg = load_config()
    store = open_store("", datadir.path, synchronous="normal")
    exchange = open_exchange(cfg, store, datadir.secret_box(), inline=True)
    demo = ops.ensure_demo(exchange, clock(), index=True)  # no simulation: a quiet demo
    exchange.commit_now()
    token = datadir.admin_token()
    sock = listen("127.0.0.1", 0)
    server = GracefulServer(uvicorn_config(create_app(exchange, clock=clock, admin_token=token)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        yield Venue(url_for("127.0.0.1", sock.getsockname()[1]), token, demo, clock)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        store.close()


def market_maker(venue: Venue, clock: ShiftedClock | None = None) -> Client:
    """A second, well-funded user (with futures funds) whose orders the demo account trades
    against: an account never trades with itself."""
    with AdminClient(venue.url, venue.admin_token) as admin:
        user = admin.create_user("maker")["id"]
        key = admin.create_key(user)
        for asset, amount in (("BTC", "1000"), ("ETH", "10000"), ("USDT", "100000000")):
            admin.deposit(user, asset, amount, tx_id=f"maker-{asset}")
        admin.futures_transfer(user, "USDT", "10000000", "spot", "futures")
    return Client(venue.url, key["apiKey"], key["secret"], clock=clock)


def seed_book(maker: Client, symbol: str, mid: float, step: float, levels: int = 12) -> None:
    """Resting bids and asks around ``mid``, larger further out."""
    for i in range(1, levels + 1):
        volume = f"{0.05 * i + 0.01 * (i % 3):.3f}"
        maker.create_order(symbol, "SELL", "LIMIT", volume=volume, price=f"{mid + i * step:.2f}")
        maker.create_order(symbol, "BUY", "LIMIT", volume=volume, price=f"{mid - i * step:.2f}")


def seed_history(venue: Venue, minutes: int = HISTORY_MINUTES) -> None:
    """``minutes`` of trades on BTCUSDT, ETHUSDT and E-BTC-USDT, one bar a minute, then a
    resting book on each and a few open orders and a position of the demo account."""
    clock = venue.clock
    rng = random.Random(17)
    maker = market_maker(venue, clock)
    demo = Client(venue.url, venue.demo["apiKey"], venue.demo["secret"], clock=clock)
    prices = {"BTCUSDT": 30000.0, "ETHUSDT": 2000.0}
    future = 30000.0
    with maker, demo:
        # Settings change only while nothing is open on the contract. An isolated position
        # has a liquidation price to show.
        demo.futures_edit_lever("E-BTC-USDT", 20)
        demo.futures_edit_margin_model("E-BTC-USDT", 2)
        for minute in range(minutes):
            clock.offset_ms = -(minutes - minute) * 60_000
            for symbol, price in prices.items():
                for _ in range(3):
                    price *= 1 + rng.gauss(0, 0.002)
                    text = f"{price:.2f}"
                    volume = f"{rng.uniform(0.01, 0.3):.3f}"
                    taker_side = rng.choice(("BUY", "SELL"))
                    maker_side = "SELL" if taker_side == "BUY" else "BUY"
                    maker.create_order(symbol, maker_side, "LIMIT", volume=volume, price=text)
                    demo.create_order(symbol, taker_side, "LIMIT", volume=volume, price=text)
                prices[symbol] = price
            for _ in range(3):
                future = prices["BTCUSDT"] * (1 + rng.gauss(0, 0.001))
                text = f"{future:.1f}"
                lots = rng.randint(1, 3)
                maker.futures_create_order("E-BTC-USDT", "SELL", "LIMIT", "OPEN", lots, text)
                demo.futures_create_order("E-BTC-USDT", "BUY", "LIMIT", "OPEN", lots, text)
        clock.offset_ms = 0
        for symbol, price in prices.items():
            seed_book(maker, symbol, price, price * 0.0005)
        btc = prices["BTCUSDT"]
        demo.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.25", price=f"{btc * 0.98:.2f}")
        demo.create_order("BTCUSDT", "SELL", "LIMIT", volume="0.1", price=f"{btc * 1.03:.2f}")
        for i in range(1, 13):
            lots = 5 * i
            maker.futures_create_order(
                "E-BTC-USDT", "SELL", "LIMIT", "OPEN", lots, f"{future + 5 * i:.1f}"
            )
            maker.futures_create_order(
                "E-BTC-USDT", "BUY", "LIMIT", "OPEN", lots, f"{future - 5 * i:.1f}"
            )
        demo.futures_create_order("E-BTC-USDT", "BUY", "MARKET", "OPEN", "300")


def report_console_error(message: ConsoleMessage) -> None:
    if message.type == "error":
        print("console error:", message.text, file=sys.stderr)


def sign_in(page: Any, venue: Venue) -> None:
    page.fill("#api-key", venue.demo["apiKey"])
    page.fill("#api-secret", venue.demo["secret"])
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#open-orders tbody tr[data-order-id]")


def take(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp, serve_demo(Path(tmp), ShiftedClock()) as venue:
        seed_history(venue)
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1500})
                page.on("console", report_console_error)
                page.goto(venue.url + "/?market=BTCUSDT")
                sign_in(page, venue)
                page.wait_for_timeout(2500)  # every panel has polled at least once
                written.append(out / "trader.png")
                page.screenshot(path=str(written[-1]), full_page=True)
                page.click("#markets tr[data-symbol='E-BTC-USDT']")
                page.wait_for_selector("#positions tbody tr td.num")
                page.wait_for_timeout(2500)
                written.append(out / "trader-futures.png")
                page.screenshot(path=str(written[-1]), full_page=True)
                admin = browser.new_page(viewport={"width": 1440, "height": 1300})
                admin.on("console", report_console_error)
                admin.goto(venue.url + "/admin")
                admin.fill("#admin-token", venue.admin_token)
                admin.click("#token-form button[type=submit]")
                admin.wait_for_selector("#assets tbody tr td.num")
                admin.click("#users tbody tr:first-child button")
                admin.wait_for_timeout(2500)
                written.append(out / "admin.png")
                admin.screenshot(path=str(written[-1]), full_page=True)
            finally:
                browser.close()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNGs")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    for path in take(args.out):
        print(path)


if __name__ == "__main__":
    main()
