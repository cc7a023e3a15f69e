"""`tradehall serve --demo` as a real process gives a living market: deep books on every
pair and contract, trades every second, candles; a bot (the bundled client) fills against
it; `sim status|stop|start`, `funding now` and `account reset` work through the admin API;
after kill -9 the restart resumes without doubling any order and the audit passes."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import ServerProcess, tradehall_command
from tradehall.client import Client

SPOT = ("BTCUSDT", "ETHUSDT", "ETHBTC")
CONTRACTS = ("E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD")
LEVELS = 20


def cli(data: Path, *args: str, process: bool = False) -> Any:
    """A --json command that succeeds: in this process (cli_support: the same entry point
    and answers, without a second of imports), or with ``process`` in a process of its own."""
    argv = [*args, "--data-dir", str(data), "--json"]
    if process:
        done = subprocess.run(tradehall_command(*argv), capture_output=True, text=True, timeout=60)
    else:
        done = tradehall_inline(*argv)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the simulated market did not come alive in time"
        time.sleep(0.2)


def deep(c: Client) -> bool:
    books = [c.depth(s, 100) for s in SPOT] + [c.futures_depth(s, 100) for s in CONTRACTS]
    return all(len(b["bids"]) >= LEVELS and len(b["asks"]) >= LEVELS for b in books)


def open_order_levels(data: Path) -> list[tuple[Any, ...]]:
    """Open spot orders of one account at one price and side, more than one: a doubled
    ladder level."""
    db = sqlite3.connect(data / "tradehall.db")
    try:
        return db.execute(
            "SELECT account, symbol, side, price, COUNT(*) FROM orders"
            " WHERE status IN ('NEW', 'PARTIALLY_FILLED')"
            " GROUP BY account, symbol, side, price HAVING COUNT(*) > 1"
        ).fetchall()
    finally:
        db.close()


def test_serve_demo_is_a_living_market_that_survives_kill_9(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    server = server_factory(data, "--demo")
    assert server.demo is not None
    public = Client(server.url)
    wait_for(lambda: deep(public))
    wait_for(lambda: all(public.trades(s)["list"] for s in SPOT))
    # Trades every second, and the candles form from them.
    newest = public.trades("BTCUSDT")["list"][0]["time"]
    wait_for(lambda: public.trades("BTCUSDT")["list"][0]["time"] > newest, timeout=5)
    assert public.klines("BTCUSDT", "1min")
    assert public.futures_klines("E-BTC-USDT", "1min")
    # A year of candles behind the first trade: a bot's indicators have a history to read.
    assert len(public.klines("BTCUSDT", "60min", 300)) == 300
    assert len(public.futures_klines("E-BTC-USDT", "1day", 300)) == 300

    # A bot's market order fills against the simulated liquidity.
    bot = Client(server.url, server.demo["apiKey"], server.demo["secret"])
    sold = bot.create_order("BTCUSDT", "SELL", "MARKET", "0.002")
    order = bot.get_order("BTCUSDT", sold["orderId"])
    assert order["status"] == "FILLED" and order["executedQty"] == "0.002000"
    bought = bot.futures_create_order("E-BTC-USDT", "BUY", "MARKET", "OPEN", "100")
    assert bought["orderId"]

    status = cli(data, "sim", "status", process=True)
    assert status["running"] is True and status["seed"] == 1 and status["server"] is True
    names = {p["name"] for p in status["participants"]}
    assert {f"sim-maker-{s}" for s in (*SPOT, *CONTRACTS)} <= names
    assert status["faults"] == {"enabled": False}

    settled = cli(data, "funding", "now")
    assert {s["contract"] for s in settled["settled"]} == set(CONTRACTS)
    reset = cli(data, "account", "reset", "--user", str(server.demo["userId"]))
    assert reset["spot"]["BTC"] == "100.00000000" and reset["closedPositions"] == 1

    # kill -9 mid-simulation; the restart resumes without doubled orders, audit clean.
    server.stop(signal.SIGKILL)
    restarted = server_factory(data, "--demo")
    users_before = {p["userId"] for p in status["participants"]}
    wait_for(lambda: deep(Client(restarted.url)))
    after = cli(data, "sim", "status")
    assert {p["userId"] for p in after["participants"]} == users_before
    assert open_order_levels(data) == []
    assert cli(data, "audit")["ok"] is True

    stopped = cli(data, "sim", "stop")
    assert stopped["stopped"] is True and stopped["running"] is False
    assert Client(restarted.url).depth("BTCUSDT", 100)["bids"] == []  # quotes withdrawn
    assert cli(data, "sim", "start")["started"] is True
    wait_for(lambda: deep(Client(restarted.url)))
    assert cli(data, "audit")["ok"] is True


def test_no_sim_keeps_the_demo_market_quiet(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = server_factory(tmp_path / "data", "--demo", "--no-sim")
    time.sleep(1.0)
    assert Client(server.url).depth("BTCUSDT")["bids"] == []
    status = cli(tmp_path / "data", "sim", "status", process=True)
    assert status["running"] is False and status["participants"] == []


def test_bad_simulation_configuration_stops_serve_with_one_line(tmp_path: Path) -> None:
    base = (Path(__file__).resolve().parents[2] / "src/tradehall/default_config.toml").read_text()
    (tmp_path / "history.csv").write_text("time,open,high,close\n1,2,3,4\n")
    cases = {
        "\n[simulation.path]\nvolatility = -1\n": "simulation.path.volatility: must be between",
        '\n[simulation]\nmarkets = ["NOPE"]\n': "simulation.markets: unknown market 'NOPE'",
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\nreplay = "history.csv"\n': (
            f"{tmp_path / 'history.csv'}:1: low: missing column"
        ),
    }
    for extra, expected in cases.items():
        config = tmp_path / "bad.toml"
        config.write_text(base + extra)
        done = subprocess.run(
            tradehall_command(
                "serve",
                "--demo",
                "--port",
                "0",
                "--config",
                str(config),
                "--data-dir",
                str(tmp_path / "data"),
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], done.stderr
        if "history.csv" not in expected:
            assert f"{config}:" in lines[0]


def test_sandbox_controls_work_offline_on_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    user = cli(data, "user", "create", "--name", "bot")["id"]
    cli(data, "deposit", "--user", str(user), "--asset", "BTC", "--amount", "3")
    assert cli(data, "funding", "now") == {"settled": []}  # no contract has a mark yet
    assert cli(data, "interest", "now", "--hours", "2") == {"hours": 2, "charged": []}  # no debt
    assert cli(data, "admin-log", "--limit", "1")["entries"][0]["action"] == "interest.now"
    reset = cli(data, "account", "reset", "--user", str(user))
    assert reset["spot"] == {
        "BTC": "100.00000000",
        "ETH": "1000.00000000",
        "USDT": "10000000.00000000",
    }
    assert reset["futures"] == {"USDT": "1000000.00000000", "BTC": "10.00000000"}
    balances = {
        b["asset"]: b["free"] for b in cli(data, "balances", "--user", str(user))["balances"]
    }
    assert balances["BTC"] == "100.00000000"
    assert cli(data, "audit")["ok"] is True
    assert cli(data, "sim", "status") == {"running": False, "server": False}
    refused = tradehall_inline("sim", "start", "--data-dir", str(data), "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["code"] == -1020  # the simulation runs in the server
