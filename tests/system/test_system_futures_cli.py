"""The operator's futures tools: `transfer --from spot --to futures` (and back),
`index-price`, `markets` listing the contracts and `serve --demo` funding futures (real server
processes); first offline on the data folder, then through a running server (the admin API).

The commands run in this process (cli_support: the same entry point, the same answers, without
a second of imports each), but for one transfer offline and one through a server, which run in
processes of their own as a script runs them (tests/system/test_system_cli.py has the rest of
what only a process shows).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import tradehall_command
from tradehall.client import Client

CLI_TIMEOUT = 30.0
ZERO = "0.00000000"
CONTRACTS = ["E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"]


def run(
    data_dir: Path, *args: str, as_json: bool = True, process: bool = False
) -> subprocess.CompletedProcess[str]:
    argv = [*args, "--data-dir", str(data_dir), *(["--json"] if as_json else [])]
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


def move(user: int, asset: str, amount: str, source: str, target: str, *extra: str) -> list[str]:
    return [
        "transfer",
        "--user",
        str(user),
        "--asset",
        asset,
        "--amount",
        amount,
        "--from",
        source,
        "--to",
        target,
        *extra,
    ]


def futures_view(user: int, asset: str, free: str, locked: str = ZERO) -> dict[str, Any]:
    return {"userId": user, "account": "futures", "asset": asset, "free": free, "locked": locked}


def spot_of(data_dir: Path, user: int) -> dict[str, str]:
    return {
        b["asset"]: b["free"] for b in ok(data_dir, "balances", "--user", str(user))["balances"]
    }


def refusals(data: Path, user: int) -> None:
    """Every refusal of the futures tools (none reaches the engine): the same offline and
    through a server. (Malformed numbers and account names are usage errors, exit status 2:
    tests/system/test_system_cli.py.)"""
    fails(data, *move(user, "USDT", "1", "spot", "futures", "--symbol", "BTCUSDT"), code=-1102)
    msg = fails(data, *move(user, "USDT", "1", "spot", "margin"), code=-1102)
    assert "--symbol" in msg
    for source, target in (("spot", "spot"), ("futures", "margin"), ("futures", "futures")):
        fails(data, *move(user, "USDT", "1", source, target), code=-1102)
    msg = fails(data, *move(user, "ETH", "1", "spot", "futures"), code=-1102)
    assert "margin coin" in msg and "USDT" in msg and "BTC" in msg
    fails(data, *move(user, "NOPE", "1", "spot", "futures"), code=-1102)
    fails(data, *move(user, "USDT", "0.000000001", "spot", "futures"), code=-1111)
    fails(data, *move(user, "USDT", "0", "spot", "futures"), code=-1102)
    fails(data, *move(999, "USDT", "1", "spot", "futures"), code=-1102)

    index = ["index-price", "--contract"]
    fails(data, *index, "E-DOGE-USDT", "--price", "1", code=-1121)
    fails(data, *index, "BTCUSDT", "--price", "1", code=-1121)  # a spot pair, not a contract
    msg = fails(data, *index, "E-BTC-USDT", "--price", "30000.05", code=-1111)
    assert "1 decimal place" in msg
    fails(data, *index, "E-BTC-USDT", "--price", "0", code=-1102)
    fails(data, *index, "E-BTC-USDT", "--price", "-1", code=-1102)


def check_markets(data: Path) -> None:
    markets = ok(data, "markets")
    contracts = {c["symbol"]: c for c in markets["contracts"]}
    assert list(contracts) == CONTRACTS
    assert contracts["E-BTC-USDT"] == {
        "symbol": "E-BTC-USDT",
        "id": 1,
        "type": "E",
        "side": "linear",
        "baseAsset": "BTC",
        "quoteAsset": "USDT",
        "marginCoin": "USDT",
        "multiplier": "0.001",
        "multiplierCoin": "BTC",
        "pricePrecision": 1,
        "minVolume": 1,
        "maxLimitVolume": 1000000,
        "maxMarketVolume": 500000,
        "minMoney": "5",
        "maxLimitMoney": "100000000",
        "maxMarketMoney": "50000000",
        "maxValidOrder": 200,
        "openMakerFee": "0.0002",
        "openTakerFee": "0.0006",
        "closeMakerFee": "0.0002",
        "closeTakerFee": "0.0006",
        "maintenanceRate": "0.005",
        "defaultLeverage": 10,
        "maxLeverage": 100,
        "fundingIntervalHours": 8,
        "interestRate": "0.0001",
        "fundingCap": "0.0075",
        "indexSource": "BTCUSDT",
        "trading": True,
    }
    inverse = contracts["E-BTC-USD"]
    assert (inverse["side"], inverse["marginCoin"], inverse["multiplier"]) == (
        "inverse",
        "BTC",
        "10",
    )
    assert (inverse["multiplierCoin"], inverse["minMoney"]) == ("USD", "10")
    human = run(data, "markets", as_json=False)
    assert human.returncode == 0, human.stderr
    for word in ("BTCUSDT", *CONTRACTS, "linear", "inverse", "0.005"):
        assert word in human.stdout


def test_futures_tools_refuse_bad_requests_offline_and_online(
    server_factory: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    user = ok(data, "user", "create", "--name", "dora")["id"]
    ok(data, "deposit", "--user", str(user), "--asset", "USDT", "--amount", "100", "--tx-id", "d1")
    refusals(data, user)
    check_markets(data)
    # Margin transfers still work, with --symbol.
    view = ok(data, *move(user, "USDT", "10", "spot", "margin", "--symbol", "btcusdt"))
    assert view["symbol"] == "BTCUSDT"
    assert spot_of(data, user)["USDT"] == "90.00000000"

    server = server_factory(data)
    refusals(data, user)
    check_markets(data)
    view = ok(data, *move(user, "USDT", "10", "margin", "spot", "--symbol", "BTCUSDT"))
    assert spot_of(data, user)["USDT"] == "100.00000000"
    assert ok(data, "audit")["ok"] is True
    assert server.stop(signal.SIGTERM) == 0


def test_no_contracts_configured(tmp_path: Path) -> None:
    """Without [[contracts]], nothing is a margin coin and no contract exists."""
    from importlib import resources

    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    config = tmp_path / "spot.toml"
    config.write_text(text[: text.index("\n[[contracts]]")] + "\n", encoding="utf-8")
    data = tmp_path / "data"
    cfg = ("--config", str(config))
    user = ok(data, "user", "create", *cfg)["id"]
    ok(data, "deposit", "--user", str(user), "--asset", "USDT", "--amount", "5", *cfg)
    msg = fails(data, *move(user, "USDT", "1", "spot", "futures"), *cfg, code=-1102)
    assert "no contracts" in msg
    fails(data, "index-price", "--contract", "E-BTC-USDT", "--price", "1", *cfg, code=-1121)
    assert ok(data, "markets", *cfg)["contracts"] == []


def test_futures_transfers_and_index_price_offline_then_through_a_server(
    server_factory: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    user = ok(data, "user", "create", "--name", "erin")["id"]
    ok(data, "deposit", "--user", str(user), "--asset", "USDT", "--amount", "3000", "--tx-id", "e1")
    ok(data, "deposit", "--user", str(user), "--asset", "BTC", "--amount", "1", "--tx-id", "e2")

    # ---------------------------------------------------------------- offline
    moved = ok(data, *move(user, "usdt", "1000", "spot", "futures"), process=True)
    assert moved == futures_view(user, "USDT", "1000.00000000")
    assert ok(data, *move(user, "BTC", "0.5", "SPOT", "Futures")) == futures_view(
        user, "BTC", "0.50000000"
    )
    fails(data, *move(user, "USDT", "1000.00000001", "futures", "spot"), code=-2017)
    fails(data, *move(user, "USDT", "2000.00000001", "spot", "futures"), code=-2017)
    back = ok(data, *move(user, "USDT", "400", "futures", "spot"))
    assert back == futures_view(user, "USDT", "600.00000000")
    spot = spot_of(data, user)
    assert (spot["USDT"], spot["BTC"]) == ("2400.00000000", "0.50000000")
    set_index = ok(data, "index-price", "--contract", "e-btc-usd", "--price", "30000.5")
    assert set_index == {
        "contract": "E-BTC-USD",
        "indexPrice": "30000.5",
        "indexSource": "BTCUSDT",
    }
    human = run(data, "index-price", "--contract", "E-ETH-USDT", "--price", "2000", as_json=False)
    assert human.returncode == 0, human.stderr
    assert "E-ETH-USDT" in human.stdout and "2000.00" in human.stdout
    assert ok(data, "audit")["ok"] is True

    # ---------------------------------------------------------------- a running server
    server = server_factory(data)
    again = ok(data, *move(user, "USDT", "100", "spot", "futures"), process=True)
    assert again == futures_view(user, "USDT", "700.00000000")
    fails(data, *move(user, "USDT", "700.00000001", "futures", "spot"), code=-2017)
    assert ok(data, *move(user, "BTC", "0.5", "futures", "spot")) == futures_view(user, "BTC", ZERO)
    assert ok(data, "index-price", "--contract", "E-BTC-USDT", "--price", "30000") == {
        "contract": "E-BTC-USDT",
        "indexPrice": "30000.0",
        "indexSource": "BTCUSDT",
    }
    spot = spot_of(data, user)
    assert (spot["USDT"], spot["BTC"]) == ("2300.00000000", "1.00000000")
    assert ok(data, "audit")["ok"] is True
    assert server.stop(signal.SIGTERM) == 0
    # Offline once more: the same state from the store.
    assert ok(data, *move(user, "USDT", "700", "futures", "spot")) == futures_view(
        user, "USDT", ZERO
    )
    assert ok(data, "audit")["ok"] is True


def test_demo_funds_futures_and_the_insurance_fund_once(
    server_factory: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--no-sim")
    demo = server.demo
    assert demo is not None
    user = demo["userId"]
    # A further tenth of the demo's USDT and BTC funding is in its futures account, its spot
    # balances are the README's; ETH (no contract margins in ETH) has no futures share.
    spot = spot_of(data, user)
    assert spot == {"BTC": "100.00000000", "ETH": "1000.00000000", "USDT": "10000000.00000000"}
    assert ok(data, *move(user, "USDT", "1", "futures", "spot")) == futures_view(
        user, "USDT", "999999.00000000"
    )
    assert ok(data, *move(user, "BTC", "1", "futures", "spot")) == futures_view(
        user, "BTC", "9.00000000"
    )
    accounts = {a["account"]: a for a in ok(data, "system")["accounts"]}
    insurance = {b["asset"]: b["free"] for b in accounts["insurance"]["balances"]}
    assert (insurance["USDT"], insurance["BTC"]) == ("100000.00000000", "1.00000000")
    # Quiet books give no index, and a contract takes no orders without one: the quiet demo
    # sets each at the demo prices, as the operator's index-price would.
    with Client(server.url, demo["apiKey"], demo["secret"]) as client:
        indexes = {c: client.futures_index(c)["indexPrice"] for c in CONTRACTS}
        assert indexes == {"E-BTC-USDT": 30000.0, "E-ETH-USDT": 2000.0, "E-BTC-USD": 30000.0}
        order = client.futures_create_order("E-ETH-USDT", "BUY", "LIMIT", "OPEN", 1, "1900")
        client.futures_cancel_order("E-ETH-USDT", order["orderId"])
    assert ok(data, "audit")["ok"] is True
    assert server.stop(signal.SIGTERM) == 0

    # A restart with --demo funds nothing again.
    restarted = server_factory(data, "--demo", "--no-sim")
    assert restarted.demo == demo
    assert ok(data, *move(user, "USDT", "1", "futures", "spot")) == futures_view(
        user, "USDT", "999998.00000000"
    )
    accounts = {a["account"]: a for a in ok(data, "system")["accounts"]}
    insurance = {b["asset"]: b["free"] for b in accounts["insurance"]["balances"]}
    assert (insurance["USDT"], insurance["BTC"]) == ("100000.00000000", "1.00000000")
    assert ok(data, "audit")["ok"] is True
    assert restarted.stop(signal.SIGTERM) == 0


def test_a_demo_account_funded_by_an_older_version_is_topped_up_once(
    server_factory: Any, tmp_path: Path
) -> None:
    """A data folder from before the demo's balances were scaled to the deeper books (10 BTC,
    100 ETH, 1,000,000 USDT, a tenth more of BTC and USDT in futures, under the same fixed tx
    ids): `serve --demo` tops it up once, under new fixed ids, to the README's balances."""
    data = tmp_path / "data"
    user = ok(data, "user", "create", "--name", "demo")["id"]
    old = {"BTC": "10", "ETH": "100", "USDT": "1000000"}
    for asset, amount in old.items():
        deposit = ["--asset", asset, "--amount", amount, "--tx-id", f"demo-funding-{asset}"]
        ok(data, "deposit", "--user", str(user), *deposit)
    for asset, amount in (("BTC", "1"), ("USDT", "100000")):
        deposit = ["--asset", asset, "--amount", amount, "--tx-id", f"demo-futures-{asset}"]
        ok(data, "deposit", "--user", str(user), *deposit)
        ok(data, *move(user, asset, amount, "spot", "futures"))
    for _ in range(2):  # the second start funds nothing again
        server = server_factory(data, "--demo", "--no-sim")
        assert server.demo is not None and server.demo["userId"] == user
        assert server.stop(signal.SIGTERM) == 0
        spot = spot_of(data, user)
        assert spot == {"BTC": "100.00000000", "ETH": "1000.00000000", "USDT": "10000000.00000000"}
        for asset, futures in (("BTC", "10"), ("USDT", "1000000")):
            back = ok(data, *move(user, asset, futures, "futures", "spot"))
            assert back == futures_view(user, asset, ZERO)  # exactly a tenth more in futures
            ok(data, *move(user, asset, futures, "spot", "futures"))
    assert ok(data, "audit")["ok"] is True
