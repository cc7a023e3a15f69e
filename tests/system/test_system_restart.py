"""Durability across restarts of a real server process on the same data folder: after a clean
stop (SIGTERM) everything a client can observe is identical, queue priority survives, ids never
repeat; after a crash (SIGKILL) every acknowledged write is there."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cli_support import tradehall_inline
from support import ServerProcess, tradehall_command
from tradehall.client import AdminClient, ApiError, Client

SYMBOLS = ("BTCUSDT", "ETHUSDT", "ETHBTC")
INTERVALS = ("1min", "5min", "60min", "1day", "1week", "1month")
MAKER = Decimal("0.0008")
TAKER = Decimal("0.001")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """The built-in configuration, with rate limits off (this test is about durability, and
    fires requests as fast as it can)."""
    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    assert "rate_limits = true" in text
    path = tmp_path / "exchange.toml"
    path.write_text(text.replace("rate_limits = true", "rate_limits = false"))
    return path


def audit_passes(data_dir: Path, config: Path, process: bool = False) -> dict[str, Any]:
    """`tradehall audit --json` on the folder (through the server when one runs): exit 0, ok.
    Run in this process (cli_support: the same entry point and answer, without a second of
    imports), or with ``process`` in a process of its own."""
    argv = ("audit", "--json", "--data-dir", str(data_dir), "--config", str(config))
    if process:
        proc = subprocess.run(
            tradehall_command(*argv), capture_output=True, text=True, timeout=30, check=False
        )
    else:
        proc = tradehall_inline(*argv)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    report: dict[str, Any] = json.loads(proc.stdout)
    assert report["ok"] is True and report["problems"] == [], report
    return report


def admin_of(server: ServerProcess) -> AdminClient:
    token = (server.data_dir / "admin.token").read_text().strip()
    return AdminClient(server.url, token)


def make_trader(admin: AdminClient, name: str, funds: dict[str, str]) -> tuple[int, str, str]:
    user = admin.create_user(name)
    key = admin.create_key(user["id"])
    for asset, amount in funds.items():
        admin.deposit(user["id"], asset, amount, f"{name}-{asset}")
    return user["id"], key["apiKey"], key["secret"]


def trimmed_klines(bars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Klines without the flat volume-0 bars at the end: those only depend on the clock (a
    minute boundary passing between two observations adds one), not on the stored state."""
    out = list(bars)
    while out and Decimal(out[-1]["vol"]) == 0:
        out.pop()
    return out


def without_time(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "time"}


def observe(
    url: str,
    keys: dict[str, tuple[str, str]],
    orders: list[tuple[str, str, str]],
    client_ids: list[tuple[str, str, str]],
    admin: AdminClient,
) -> dict[str, Any]:
    """Everything a client (and the operator) can see, without the clock-dependent fields."""
    seen: dict[str, Any] = {}
    public = Client(url)
    clients = {name: Client(url, k, s) for name, (k, s) in keys.items()}
    try:
        for name, c in clients.items():
            seen[f"account/{name}"] = c.account()
            for symbol in SYMBOLS:
                seen[f"openOrders/{name}/{symbol}"] = c.open_orders(symbol, limit=1000)
                seen[f"myTrades/{name}/{symbol}"] = c.my_trades(symbol, limit=1000)
        for name, symbol, order_id in orders:
            seen[f"order/{name}/{symbol}/{order_id}"] = clients[name].get_order(symbol, order_id)
        for name, symbol, client_id in client_ids:
            seen[f"order/{name}/{symbol}/{client_id}"] = clients[name].get_order(
                symbol, client_order_id=client_id
            )
        for symbol in SYMBOLS:
            seen[f"depth/{symbol}"] = without_time(public.depth(symbol, 100))
            seen[f"trades/{symbol}"] = public.trades(symbol, 1000)
            seen[f"ticker/{symbol}"] = without_time(public.ticker(symbol))
            for interval in INTERVALS:
                bars = public.klines(symbol, interval, 300)
                seen[f"klines/{symbol}/{interval}"] = trimmed_klines(bars)
        seen["fees"] = admin.balances(0)
        seen["users"] = admin.list_users()
        seen["audit"] = admin.audit()
        status = admin.status()
        seen["status"] = {k: status[k] for k in ("users", "openOrders", "writable")}
    finally:
        public.close()
        for c in clients.values():
            c.close()
    return seen


def status_of(client: Client, symbol: str, order_id: str) -> tuple[str, str]:
    o = client.get_order(symbol, order_id)
    return o["status"], o["executedQty"]


def test_clean_restart_preserves_everything_observable(
    server_factory: Any, tmp_path: Path, config_file: Path
) -> None:
    data = tmp_path / "data"
    cfg = ("--config", str(config_file))
    first = server_factory(data, "--demo", "--no-sim", *cfg)
    assert first.demo is not None
    demo = first.demo

    admin = admin_of(first)
    b_id, b_key, b_secret = make_trader(admin, "bob", {"BTC": "5", "ETH": "50", "USDT": "200000"})
    _, c_key, c_secret = make_trader(admin, "carol", {"BTC": "5", "USDT": "300000"})
    admin.withdraw(b_id, "ETH", "10", "bob-out-1")
    # A restart must not top the demo account up again.
    last_transfer = admin.withdraw(demo["userId"], "USDT", "250000", "demo-out-1")
    keys = {
        "A": (demo["apiKey"], demo["secret"]),
        "B": (b_key, b_secret),
        "C": (c_key, c_secret),
    }
    A = Client(first.url, *keys["A"])
    B = Client(first.url, *keys["B"])
    C = Client(first.url, *keys["C"])
    placed: list[tuple[str, str, str]] = []

    def order(who: str, client: Client, symbol: str, *args: Any, **kw: Any) -> dict[str, Any]:
        reply: dict[str, Any] = client.create_order(symbol, *args, **kw)
        placed.append((who, symbol, reply["orderId"]))
        return reply

    # Resting orders on both sides at several levels; same price from two accounts, in both
    # arrival orders.
    a1 = order("A", A, "BTCUSDT", "SELL", "LIMIT", "0.5", price="30100", client_order_id="a-ask-1")
    b1 = order("B", B, "BTCUSDT", "SELL", "LIMIT", "0.3", price="30100")
    b2 = order("B", B, "BTCUSDT", "SELL", "LIMIT", "0.2", price="30200")
    a2 = order("A", A, "BTCUSDT", "SELL", "LIMIT", "0.4", price="30200")
    a3 = order("A", A, "BTCUSDT", "SELL", "LIMIT", "0.1", price="30300", client_order_id="a-ask-3")
    b3 = order("B", B, "BTCUSDT", "BUY", "LIMIT", "0.2", price="29900", client_order_id="b-bid-3")
    a4 = order("A", A, "BTCUSDT", "BUY", "LIMIT", "0.3", price="29900")
    a5 = order("A", A, "BTCUSDT", "BUY", "LIMIT", "0.1", price="29800")
    b4 = order("B", B, "BTCUSDT", "BUY", "LIMIT", "0.5", price="29700")
    # Fills: the earlier of two same-price orders goes first (A's a1, then B's b1).
    c1 = order("C", C, "BTCUSDT", "BUY", "LIMIT", "0.6", price="30100")
    assert (c1["status"], c1["executedQty"]) == ("FILLED", "0.600000")
    assert status_of(A, "BTCUSDT", a1["orderId"]) == ("FILLED", "0.500000")
    assert status_of(B, "BTCUSDT", b1["orderId"]) == ("PARTIALLY_FILLED", "0.100000")
    c2 = order("C", C, "BTCUSDT", "SELL", "LIMIT", "0.1", price="29900")
    assert c2["status"] == "FILLED"
    assert status_of(B, "BTCUSDT", b3["orderId"]) == ("PARTIALLY_FILLED", "0.100000")
    c3 = order("C", C, "BTCUSDT", "BUY", "LIMIT", "0.05", price="30000")
    assert c3["status"] == "NEW"
    assert A.cancel_order("BTCUSDT", client_order_id="a-ask-3")["status"] == "CANCELED"
    assert B.cancel_order("BTCUSDT", b4["orderId"])["status"] == "CANCELED"
    # Another pair: a partial fill by a MARKET order, then the rest cancelled; an IOC that
    # finds nothing; a POST_ONLY that would take.
    e1 = order("A", A, "ETHUSDT", "SELL", "LIMIT", "2", price="2000")
    e2 = order("C", C, "ETHUSDT", "BUY", "MARKET", "1000")
    assert e2["status"] == "FILLED"
    assert A.cancel_order("ETHUSDT", e1["orderId"])["status"] == "CANCELED"
    e3 = order("C", C, "ETHUSDT", "BUY", "LIMIT", "1", price="2000", time_in_force="IOC")
    assert e3["status"] == "CANCELED"
    e4 = order("B", B, "ETHUSDT", "SELL", "LIMIT", "1", price="2100")
    e5 = order("C", C, "ETHUSDT", "BUY", "LIMIT", "1", price="2100", time_in_force="POST_ONLY")
    assert e5["status"] == "REJECTED"
    del a3, a5, c2, e3, e4, e5  # observed through `placed`
    for c in (A, B, C):
        c.close()

    client_ids = [
        ("A", "BTCUSDT", "a-ask-1"),
        ("A", "BTCUSDT", "a-ask-3"),
        ("B", "BTCUSDT", "b-bid-3"),
    ]
    before = observe(first.url, keys, placed, client_ids, admin)
    admin.close()
    assert len(before["trades/BTCUSDT"]["list"]) == 3
    assert len(before["trades/ETHUSDT"]["list"]) == 1
    assert before["klines/BTCUSDT/1min"], "trades make klines"
    audit_passes(data, config_file, process=True)

    assert first.stop() == 0
    assert not (data / "server.json").exists()
    offline = audit_passes(data, config_file, process=True)
    assert offline["assets"] == before["audit"]["assets"]

    second = server_factory(data, "--demo", "--no-sim", *cfg)
    # --demo on restart: the same account and key, not funded a second time.
    assert second.demo == demo
    admin = admin_of(second)
    try:
        after = observe(second.url, keys, placed, client_ids, admin)
        for name in before:
            assert after[name] == before[name], name
        held = {a["asset"]: a for a in after["audit"]["assets"]}
        # --demo also funds the margin lending pool and the insurance fund, once:
        # BTC 100 + 1, ETH 1,000 + 10, USDT 10,000,000 + 100,000; and the demo's futures
        # account with a further tenth of its BTC and USDT (10 and 1,000,000).
        # BTC: + 100 demo + 10 futures + 5 + 5
        assert held["BTC"]["depositsMinusWithdrawals"] == "221.00000000"
        assert held["ETH"]["depositsMinusWithdrawals"] == "2050.00000000"  # + 1,000 + 50 - 10
        # + 10,000,000 demo + 1,000,000 futures - 250,000 + 200,000 + 300,000
        assert held["USDT"]["depositsMinusWithdrawals"] == "21350000.00000000"
        audit_passes(data, config_file)

        # Transfers stay idempotent across the restart; their ids continue too.
        again = admin.withdraw(demo["userId"], "USDT", "250000", "demo-out-1")
        assert again["duplicate"] is True
        assert again["transferId"] == last_transfer["transferId"]
        fresh_transfer = admin.deposit(demo["userId"], "ETH", "1", "demo-in-after-restart")
        assert fresh_transfer["transferId"] > last_transfer["transferId"]

        old_orders = max(int(oid) for _, _, oid in placed)
        old_trades = max(
            t["id"] for n in "ABC" for s in SYMBOLS for t in before[f"myTrades/{n}/{s}"]
        )
        with (
            Client(second.url, *keys["A"]) as A,
            Client(second.url, *keys["B"]) as B,
            Client(second.url, *keys["C"]) as C,
        ):
            # Client order ids of restored open orders are still taken; ended ones are free.
            with pytest.raises(ApiError) as taken:
                B.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="20000",
                               client_order_id="b-bid-3")  # fmt: skip
            assert taken.value.code == -1102
            # A restored order can be cancelled (its hold is released).
            assert C.cancel_order("BTCUSDT", c3["orderId"])["status"] == "CANCELED"
            # Queue priority survives: b1's rest (at a better price) first, then at 30200 B's
            # b2, which arrived before A's a2.
            c5 = C.create_order("BTCUSDT", "BUY", "LIMIT", "0.35", price="30200")
            assert (c5["status"], c5["executedQty"]) == ("FILLED", "0.350000")
            assert status_of(B, "BTCUSDT", b1["orderId"]) == ("FILLED", "0.300000")
            assert status_of(B, "BTCUSDT", b2["orderId"]) == ("PARTIALLY_FILLED", "0.150000")
            assert status_of(A, "BTCUSDT", a2["orderId"]) == ("NEW", "0.000000")
            # On the bid side at 29900, B's b3 (earlier, half filled) before A's a4.
            c6 = C.create_order("BTCUSDT", "SELL", "LIMIT", "0.15", price="29900")
            assert (c6["status"], c6["executedQty"]) == ("FILLED", "0.150000")
            assert status_of(B, "BTCUSDT", b3["orderId"]) == ("FILLED", "0.200000")
            assert status_of(A, "BTCUSDT", a4["orderId"]) == ("PARTIALLY_FILLED", "0.050000")

            # Ids continue where they stopped: no reuse.
            assert int(c5["orderId"]) > old_orders and int(c6["orderId"]) > int(c5["orderId"])
            new_trades = C.my_trades("BTCUSDT", limit=1000)[::-1]  # oldest first
            fresh = [t for t in new_trades if t["id"] > old_trades]
            assert [(t["bidId"], t["askId"], t["price"], t["qty"]) for t in fresh] == [
                (int(c5["orderId"]), int(b1["orderId"]), "30100.00", "0.200000"),
                (int(c5["orderId"]), int(b2["orderId"]), "30200.00", "0.150000"),
                (int(b3["orderId"]), int(c6["orderId"]), "29900.00", "0.100000"),
                (int(a4["orderId"]), int(c6["orderId"]), "29900.00", "0.050000"),
            ]
            ids = [t["id"] for t in new_trades]
            assert ids == sorted(set(ids))
            assert len(new_trades) == len(before["myTrades/C/BTCUSDT"]) + 4

            # Market data carries on from the restored state: the bars and the 24h ticker
            # cover the trades before and after the restart together.
            with Client(second.url) as public:
                times = [t["time"] for t in public.trades("BTCUSDT", 1000)["list"]]
                assert len(times) == 7
                ticker = public.ticker("BTCUSDT")
                assert (ticker["high"], ticker["low"], ticker["last"]) == (
                    "30200.00",
                    "29900.00",
                    "29900.00",
                )
                assert ticker["vol"] == "1.200000"  # 0.6 + 0.1 before, 0.35 + 0.15 after
                day = 86_400_000
                if min(times) // day == max(times) // day:  # not across midnight UTC
                    bar = trimmed_klines(public.klines("BTCUSDT", "1day"))[-1]
                    assert bar == {
                        "idx": min(times) // day * day,
                        "open": "30100.00",
                        "close": "29900.00",
                        "high": "30200.00",
                        "low": "29900.00",
                        "vol": "1.200000",
                    }

            reused = A.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="40000",
                                    client_order_id="a-ask-1")  # fmt: skip
            assert int(reused["orderId"]) > int(c6["orderId"])
            latest = A.get_order("BTCUSDT", client_order_id="a-ask-1")
            assert (latest["orderId"], latest["status"]) == (reused["orderId"], "NEW")
            assert A.get_order("BTCUSDT", a1["orderId"])["status"] == "FILLED"
        audit_passes(data, config_file)
    finally:
        admin.close()
    assert second.stop() == 0
    audit_passes(data, config_file)


def test_acknowledged_writes_survive_kill_9(
    server_factory: Any, tmp_path: Path, config_file: Path
) -> None:
    data = tmp_path / "data"
    cfg = ("--config", str(config_file))
    first = server_factory(data, "--demo", "--no-sim", *cfg)
    assert first.demo is not None
    a_keys = (first.demo["apiKey"], first.demo["secret"])
    with admin_of(first) as admin:
        _, *b = make_trader(admin, "bob", {"USDT": "100000", "ETH": "10"})
    b_keys = (b[0], b[1])

    # Many writes at once from several connections (they share group commits).
    def place(keys: tuple[str, str], symbol: str, side: str, prices: list[int]) -> list[Any]:
        with Client(first.url, *keys) as c:
            return [c.create_order(symbol, side, "LIMIT", "0.01", price=str(p)) for p in prices]

    jobs = [
        (a_keys, "BTCUSDT", "SELL", [31000 + i for i in range(10)]),
        (b_keys, "BTCUSDT", "BUY", [29000 - i for i in range(10)]),
        (a_keys, "ETHUSDT", "SELL", [2100 + i for i in range(10)]),
        (b_keys, "ETHUSDT", "BUY", [1900 - i for i in range(10)]),
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        replies = [f.result() for f in [pool.submit(place, *job) for job in jobs]]
    expected: dict[tuple[str, str], tuple[str, str]] = {}  # (symbol, id) -> (status, executed)
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    resting: dict[tuple[str, str], tuple[str, str, str]] = {}  # -> (side, price, remaining)
    for (keys, symbol, side, prices), orders in zip(jobs, replies, strict=True):
        for price, o in zip(prices, orders, strict=True):
            assert o["status"] == "NEW"
            expected[(symbol, o["orderId"])] = ("NEW", "0")
            owner[(symbol, o["orderId"])] = keys
            resting[(symbol, o["orderId"])] = (side, str(price), "0.01")

    # Cancel every second order, concurrently too.
    def cancel(keys: tuple[str, str], symbol: str, ids: list[str]) -> list[Any]:
        with Client(first.url, *keys) as c:
            return [c.cancel_order(symbol, i) for i in ids]

    cancels = [
        (keys, symbol, [o["orderId"] for o in orders[1::2]])
        for (keys, symbol, _, _), orders in zip(jobs, replies, strict=True)
    ]
    with ThreadPoolExecutor(len(cancels)) as pool:
        for f in [pool.submit(cancel, *job) for job in cancels]:
            for reply in f.result():
                assert reply["status"] == "CANCELED"
                key = (reply["symbol"], reply["orderId"])
                expected[key] = ("CANCELED", "0")
                del resting[key]

    # A crossing order: B buys 0.015 BTC up to 31002, taking A's 31000 (whole) and 31002 (half).
    sells = replies[0]
    with Client(first.url, *b_keys) as B:
        taker = B.create_order("BTCUSDT", "BUY", "LIMIT", "0.015", price="31002")
        # Its answer is the last write: kill the server the moment it arrives.
        first.proc.send_signal(signal.SIGKILL)
    assert (taker["status"], taker["executedQty"]) == ("FILLED", "0.015000")
    assert first.proc.wait(15) == -signal.SIGKILL
    expected[("BTCUSDT", taker["orderId"])] = ("FILLED", "0.015")
    owner[("BTCUSDT", taker["orderId"])] = b_keys
    expected[("BTCUSDT", sells[0]["orderId"])] = ("FILLED", "0.01")
    del resting[("BTCUSDT", sells[0]["orderId"])]
    expected[("BTCUSDT", sells[2]["orderId"])] = ("PARTIALLY_FILLED", "0.005")
    resting[("BTCUSDT", sells[2]["orderId"])] = ("SELL", "31002", "0.005")

    # The folder still names the dead server; the CLI falls back to the store itself.
    audit_passes(data, config_file)
    second = server_factory(data, "--demo", "--no-sim", *cfg)
    assert second.demo == first.demo
    with Client(second.url, *a_keys) as A, Client(second.url, *b_keys) as B:
        clients = {a_keys: A, b_keys: B}
        for (symbol, order_id), (status, executed) in expected.items():
            got = clients[owner[(symbol, order_id)]].get_order(symbol, order_id)
            assert (got["status"], Decimal(got["executedQty"])) == (status, Decimal(executed)), (
                symbol,
                order_id,
            )
        for client, keys in ((A, a_keys), (B, b_keys)):
            for symbol in ("BTCUSDT", "ETHUSDT"):
                listed = {o["orderId"] for o in client.open_orders(symbol, limit=1000)}
                assert listed == {
                    oid
                    for (s, oid), _ in resting.items()
                    if s == symbol and owner[(s, oid)] == keys
                }

        trades = B.my_trades("BTCUSDT")[::-1]
        assert [(t["askId"], t["price"], t["qty"], t["isBuyer"]) for t in trades] == [
            (int(sells[0]["orderId"]), "31000.00", "0.010000", True),
            (int(sells[2]["orderId"]), "31002.00", "0.005000", True),
        ]
        with Client(second.url) as public:
            public_trades = public.trades("BTCUSDT")["list"]
        assert [t["price"] for t in public_trades] == ["31002.00", "31000.00"]

        # Balances follow from the acknowledged writes alone.
        def locked(side: str, symbol: str, keys: tuple[str, str]) -> Decimal:
            total = Decimal(0)
            for (s, oid), (sd, price, remaining) in resting.items():
                if s == symbol and sd == side and owner[(s, oid)] == keys:
                    total += Decimal(remaining) * (Decimal(price) if side == "BUY" else 1)
            return total

        bought = Decimal("31000") * Decimal("0.01") + Decimal("31002") * Decimal("0.005")
        want_a = {
            "BTC": (Decimal(100) - Decimal("0.015"), locked("SELL", "BTCUSDT", a_keys)),
            "ETH": (Decimal(1000), locked("SELL", "ETHUSDT", a_keys)),
            "USDT": (Decimal(10_000_000) + bought * (1 - MAKER), Decimal(0)),
        }
        want_b = {
            "BTC": (Decimal("0.015") * (1 - TAKER), Decimal(0)),
            "ETH": (Decimal(10), Decimal(0)),
            "USDT": (
                Decimal(100000) - bought,
                locked("BUY", "BTCUSDT", b_keys) + locked("BUY", "ETHUSDT", b_keys),
            ),
        }
        for client, want in ((A, want_a), (B, want_b)):
            got = {
                b["asset"]: (Decimal(b["free"]) + Decimal(b["locked"]), Decimal(b["locked"]))
                for b in client.account()["balances"]
            }
            assert got == want

        # New ids after the crash do not reuse acknowledged ones.
        new = A.create_order("BTCUSDT", "SELL", "LIMIT", "0.01", price="35000")
        assert int(new["orderId"]) > max(int(oid) for _, oid in expected)
    audit_passes(data, config_file)
    assert second.stop() == 0
    audit_passes(data, config_file)


def test_audit_while_trading_reports_no_false_violations(
    server_factory: Any, tmp_path: Path, config_file: Path
) -> None:
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--no-sim", "--config", str(config_file))
    assert server.demo is not None
    with admin_of(server) as admin:
        _, *seller = make_trader(admin, "seller", {"BTC": "10"})
    buyer = (server.demo["apiKey"], server.demo["secret"])
    stop = threading.Event()

    def trade(keys: tuple[str, str], side: str, tag: str) -> None:
        with Client(server.url, *keys) as c:
            n = 0
            while not stop.is_set():
                n += 1
                price = 30000 + n % 4 if side == "BUY" else 29999 + n % 4
                with contextlib.suppress(ApiError):
                    c.create_order("BTCUSDT", side, "LIMIT", "0.001", price=str(price),
                                   client_order_id=f"{tag}-{n}")  # fmt: skip

    threads = [
        threading.Thread(target=trade, args=(keys, side, f"{side}{i}"), daemon=True)
        for i in range(2)
        for keys, side in ((buyer, "BUY"), ((seller[0], seller[1]), "SELL"))
    ]
    for t in threads:
        t.start()
    reports = []
    try:
        # Audits through the server, one after the other for 3 s of trading (in this process:
        # many more of them than the few a process each made in 8 s).
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            proc = tradehall_inline("audit", "--json", "--data-dir", str(data))
            reports.append((proc.returncode, proc.stdout))
            if proc.returncode != 0:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    # The exchange itself is fine: once trading stops the audit passes ...
    audit_passes(data, config_file, process=True)
    # ... and it should pass while trading, too.
    assert [rc for rc, _ in reports] == [0] * len(reports), reports[-1][1]
    assert len(reports) >= 3
    assert server.stop() == 0


def test_a_restart_after_a_crash_answers_once_the_tables_hold_the_journal(
    server_factory: Any, tmp_path: Path, config_file: Path
) -> None:
    """Writes the tables never got (the projector frozen, then the server killed) are
    projected by the next start's projector before that server answers: its first status
    shows no lag, and history reads find the writes at once."""
    data = tmp_path / "data"
    cfg = ("--config", str(config_file))
    first = server_factory(data, "--demo", "--no-sim", *cfg)
    assert first.demo is not None
    keys = (first.demo["apiKey"], first.demo["secret"])
    children = Path(f"/proc/{first.proc.pid}/task/{first.proc.pid}/children").read_text()
    (projector,) = [int(pid) for pid in children.split()]
    os.kill(projector, signal.SIGSTOP)
    try:
        with Client(first.url, *keys) as c:
            placed = [
                c.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price=str(20000 + i))
                for i in range(5)
            ]
            c.cancel_order("BTCUSDT", placed[0]["orderId"])
        with admin_of(first) as admin:
            assert admin.status()["journal"]["lag"] > 0
        first.proc.send_signal(signal.SIGKILL)
        assert first.proc.wait(15) == -signal.SIGKILL
    finally:
        os.kill(projector, signal.SIGKILL)
    second = server_factory(data, "--demo", "--no-sim", *cfg)
    with admin_of(second) as admin:
        journal = admin.status()["journal"]
    assert journal["lag"] == 0 and journal["projected"] == journal["head"], journal
    with Client(second.url, *keys) as c:
        ended = c.history_orders(symbol="BTCUSDT", limit=50)
    ids = {o["orderId"] for o in ended}  # the cancelled order is history now
    assert placed[0]["orderId"] in ids
