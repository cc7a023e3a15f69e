"""Isolated margin with real processes: the operator CLI (`pool`, `insurance`, `system`,
`transfer`, `margin`) first offline on the data folder, then through a running server; a demo
margin order that borrows over HTTP; a clean stop and restart that keep the margin account,
its debt and its open order; the audit passing at the end.

The servers are real processes; the CLI commands run in this process (cli_support: the same
entry point and answers, without a second of imports each), but for one offline and one
through the server, in processes of their own as a script runs them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import tradehall_command
from tradehall.client import Client

CLI_TIMEOUT = 30.0
HOUR_MS = 3_600_000
MARGIN = "/spot/open/sapi/v1/margin"
ZERO = "0.00000000"
LEVELS = {
    "maxLeverage": 5,
    "initialLevel": "1.2500",
    "warningLevel": "1.1500",
    "liquidationLevel": "1.1000",
}


def run(data_dir: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    argv = [*args, "--data-dir", str(data_dir), "--json"]
    if not process:
        return tradehall_inline(*argv)
    return subprocess.run(
        tradehall_command(*argv), capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False
    )


def ok(data_dir: Path, *args: str, process: bool = False) -> Any:
    """A --json command that succeeds: exit 0, exactly one JSON line (in a process of its
    own with ``process``)."""
    proc = run(data_dir, *args, process=process)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def fails(data_dir: Path, *args: str, code: int) -> str:
    """A --json command that fails: exit 1 and one {"code", "msg"} line."""
    proc = run(data_dir, *args)
    assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    error = json.loads(lines[0])
    assert set(error) == {"code", "msg"} and error["code"] == code, error
    assert isinstance(error["msg"], str) and error["msg"]
    return str(error["msg"])


def system_of(result: dict[str, Any]) -> dict[str, dict[str, tuple[str, str]]]:
    assert set(result) == {"accounts", "socialized", "writtenOff"}
    assert [a["account"] for a in result["accounts"]] == ["fees", "pool", "insurance"]
    for account in result["accounts"]:
        assert set(account) == {"account", "userId", "balances"}
    return {
        a["account"]: {b["asset"]: (b["free"], b["locked"]) for b in a["balances"]}
        for a in result["accounts"]
    }


def assets(view: dict[str, Any]) -> dict[str, tuple[str, str, str, str]]:
    return {
        a["asset"]: (a["free"], a["locked"], a["borrowed"], a["interest"]) for a in view["assets"]
    }


def transfer(user: int, amount: str, source: str, target: str) -> list[str]:
    return [
        "transfer",
        "--user",
        str(user),
        "--asset",
        "USDT",
        "--amount",
        amount,
        "--from",
        source,
        "--to",
        target,
        "--symbol",
        "BTCUSDT",
    ]


def signed(client: Client, method: str, path: str, **kw: Any) -> Any:
    response = client.request(method, MARGIN + path, **kw)
    assert response.status_code == 200, response.text
    return response.json()


def without_interest(view: dict[str, Any]) -> dict[str, Any]:
    """The view with interest and ratio left out (for when an hour boundary was crossed)."""
    rows = [{**a, "interest": None} for a in view["assets"]]
    return {**view, "assets": rows, "riskRatio": None}


def test_margin_through_the_cli_offline_then_a_server_and_a_restart(
    server_factory: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"

    # ---------------------------------------------------------------- offline
    deposit = ok(data, "pool", "deposit", "--asset", "USDT", "--amount", "1000000", "--tx-id", "p1")
    assert deposit == {
        "account": "pool",
        "transferId": deposit["transferId"],
        "txId": "p1",
        "asset": "USDT",
        "amount": "1000000",
        "duplicate": False,
        "free": "1000000.00000000",
        "locked": ZERO,
    }
    again = ok(data, "pool", "deposit", "--asset", "USDT", "--amount", "1000000", "--tx-id", "p1")
    assert again == {**deposit, "duplicate": True}
    insured = ok(
        data, "insurance", "deposit", "--asset", "USDT", "--amount", "5000", "--tx-id", "i1"
    )
    assert (insured["account"], insured["free"], insured["duplicate"]) == (
        "insurance",
        "5000.00000000",
        False,
    )
    # The same id with another amount is refused, not applied.
    fails(
        data,
        "insurance",
        "deposit",
        "--asset",
        "USDT",
        "--amount",
        "6000",
        "--tx-id",
        "i1",
        code=-1102,
    )
    balances = system_of(ok(data, "system"))
    assert balances["pool"]["USDT"] == ("1000000.00000000", ZERO)
    assert balances["insurance"]["USDT"] == ("5000.00000000", ZERO)
    assert balances["fees"]["USDT"] == (ZERO, ZERO)
    assert balances["pool"]["BTC"] == (ZERO, ZERO)

    user = ok(data, "user", "create", "--name", "carol")["id"]
    ok(data, "deposit", "--user", str(user), "--asset", "USDT", "--amount", "3000", "--tx-id", "c1")
    view = ok(data, *transfer(user, "1000", "spot", "margin"), process=True)
    assert view == {
        "userId": user,
        "symbol": "BTCUSDT",
        "assets": [
            {"asset": "BTC", "free": ZERO, "locked": ZERO, "borrowed": ZERO, "interest": ZERO},
            {
                "asset": "USDT",
                "free": "1000.00000000",
                "locked": ZERO,
                "borrowed": ZERO,
                "interest": ZERO,
            },
        ],
        "riskRatio": None,
        "riskStatus": "NORMAL",
        "liquidationPrice": None,
        "lastPrice": None,
        **LEVELS,
    }
    msg = fails(data, *transfer(user, "1000.00000001", "margin", "spot"), code=-2017)
    assert "margin" in msg
    fails(data, *transfer(user, "2000.00000001", "spot", "margin"), code=-2017)
    fails(data, *transfer(user, "1", "spot", "spot"), code=-1102)
    back = ok(data, *transfer(user, "400", "margin", "spot"))
    assert assets(back)["USDT"] == ("600.00000000", ZERO, ZERO, ZERO)
    assert ok(data, "margin", "--user", str(user), "--symbol", "btcusdt") == back
    fails(data, "margin", "--user", str(user), "--symbol", "ETHBTC", code=-1121)
    spot = ok(data, "balances", "--user", str(user))
    assert {b["asset"]: b["free"] for b in spot["balances"]}["USDT"] == "2400.00000000"

    # ---------------------------------------------------------------- a running server
    server = server_factory(data, "--demo", "--no-sim")
    demo = server.demo
    assert demo is not None
    # --demo funded the pool and the fund once, on top of the operator's deposits.
    balances = system_of(ok(data, "system"))
    assert balances["pool"]["USDT"] == ("11000000.00000000", ZERO)
    assert balances["pool"]["BTC"] == ("100.00000000", ZERO)
    assert balances["insurance"]["USDT"] == ("105000.00000000", ZERO)
    assert balances["insurance"]["BTC"] == ("1.00000000", ZERO)
    # Idempotent across offline and online.
    assert (
        ok(data, "pool", "deposit", "--asset", "USDT", "--amount", "1000000", "--tx-id", "p1")
        == {**again, "free": "11000000.00000000"}  # the duplicate shows the balance now
    )
    assert ok(data, "margin", "--user", str(user), "--symbol", "BTCUSDT") == back
    fails(data, *transfer(user, "600.00000001", "margin", "spot"), code=-2017)

    demo_user = demo["userId"]
    moved = ok(data, *transfer(demo_user, "10000", "spot", "margin"), process=True)
    assert assets(moved)["USDT"] == ("10000.00000000", ZERO, ZERO, ZERO)
    carol_key = ok(data, "key", "create", "--user", str(user))
    with (
        Client(server.url, demo["apiKey"], demo["secret"]) as trader,
        Client(server.url, carol_key["apiKey"], carol_key["secret"]) as carol,
    ):
        # A price: the demo account sells 0.001 BTC at 50000 from spot, carol buys it.
        trader.create_order("BTCUSDT", "SELL", "LIMIT", "0.001", price="50000")
        carol.create_order("BTCUSDT", "BUY", "LIMIT", "0.001", price="50000", time_in_force="IOC")
        # 0.5 x 49000 = 24500 held against 10000 free: 14500 borrowed (24500 / 14500 > 1.25).
        body = {
            "symbol": "BTCUSDT",
            "side": "BUY",
            "type": "LIMIT",
            "volume": "0.5",
            "price": "49000",
            "newClientOrderId": "demo-margin-1",
            "recvWindow": 10000,
        }
        placed = signed(trader, "POST", "/order", body=body)
        assert (placed["status"], placed["executedQty"], placed["clientOrderId"]) == (
            "NEW",
            "0.000000",
            "demo-margin-1",
        )
        q = {"symbol": "BTCUSDT"}
        view = signed(trader, "GET", "/tradehall/account", params=q)
        assert assets(view)["USDT"][:3] == (ZERO, "24500.00000000", "14500.00000000")
        assert view["lastPrice"] == "50000.00"
        assert ok(data, "margin", "--user", str(demo_user), "--symbol", "BTCUSDT") == view
        assert system_of(ok(data, "system"))["pool"]["USDT"] == ("10985500.00000000", ZERO)
        open_before = signed(trader, "GET", "/openOrders", params=q)
        assert [o["orderId"] for o in open_before] == [placed["orderId"]]
        order_before = signed(trader, "GET", "/order", params={**q, "orderId": placed["orderId"]})
        # The demo's spot side shows none of it.
        assert trader.open_orders("BTCUSDT") == []
    system_before = system_of(ok(data, "system"))
    hour_before = time.time_ns() // 1_000_000 // HOUR_MS
    assert server.stop(signal.SIGTERM) == 0

    # ---------------------------------------------------------------- restart
    restarted = server_factory(data, "--demo", "--no-sim")
    assert restarted.demo == demo
    with Client(restarted.url, demo["apiKey"], demo["secret"]) as trader:
        view_after = signed(trader, "GET", "/tradehall/account", params=q)
        same_hour = time.time_ns() // 1_000_000 // HOUR_MS == hour_before
        if same_hour:
            assert view_after == view
        else:  # an hour boundary passed: interest may have been charged meanwhile
            assert without_interest(view_after) == without_interest(view)
        assert signed(trader, "GET", "/openOrders", params=q) == open_before
        assert signed(trader, "GET", "/order", params={**q, "orderId": placed["orderId"]}) == (
            order_before
        )
    after = system_of(ok(data, "system"))
    assert after == system_before  # --demo did not fund the pool or the fund again
    carol_view = ok(data, "margin", "--user", str(user), "--symbol", "BTCUSDT")
    assert carol_view == {**back, "lastPrice": "50000.00"}
    report = ok(data, "audit")
    assert report["ok"] is True and report["problems"] == [], report
    assert restarted.stop(signal.SIGTERM) == 0
    # Offline once more: the CLI reads the same state from the store.
    assert assets(ok(data, "margin", "--user", str(demo_user), "--symbol", "BTCUSDT"))["USDT"][
        :3
    ] == (ZERO, "24500.00000000", "14500.00000000")
    assert ok(data, "audit")["ok"] is True
