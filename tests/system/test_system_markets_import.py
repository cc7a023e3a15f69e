"""`tradehall markets import`: a family venue's saved ``/symbols`` and ``/contracts`` answers
become a configuration that serves the same markets. The venue here is tradehall itself (the
app in-process, built-in configuration): its answers are exported, imported, served again,
and the same answers and market specs come back; what the answers do not carry takes the
documented defaults."""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cli_support import tradehall_inline
from support import TEST_SECRET_BOX, Env, FakeClock, tradehall_command
from tradehall.api.app import create_app
from tradehall.cli import app
from tradehall.config import Config, load_config
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

SYMBOLS = "/spot/open/sapi/v1/symbols"
CONTRACTS = "/futures/open/fapi/v1/contracts"
CARRIED_PAIR = ("symbol", "base", "quote", "price_precision", "quantity_precision")
CARRIED_CONTRACT = (
    "symbol",
    "type",
    "base",
    "quote",
    "inverse",
    "margin_coin",
    "multiplier",
    "multiplier_coin",
    "price_precision",
    "min_volume",
    "max_limit_volume",
    "max_market_volume",
    "min_money",
    "max_limit_money",
    "max_market_money",
    "max_valid_order",
    "trading",
)
DEFAULTED_CONTRACT = (
    "id",  # numbered in the answer's order, as the built-in ids are
    "open_maker_fee",
    "open_taker_fee",
    "close_maker_fee",
    "close_taker_fee",
    "maintenance_rate",
    "max_leverage",
    "default_leverage",
    "funding_interval_ms",
    "interest_rate",
    "funding_cap",
    "index_source",
)


def export(env: Env, tmp_path: Path) -> tuple[Path, Path]:
    symbols, contracts = tmp_path / "symbols.json", tmp_path / "contracts.json"
    symbols.write_text(env.http.get(SYMBOLS).text)
    contracts.write_text(env.http.get(CONTRACTS).text)
    return symbols, contracts


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tradehall_command("markets", "import", *args),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def answers_of(config: Config, tmp_path: Path) -> tuple[Any, Any]:
    """The ``/symbols`` and ``/contracts`` answers of a server running ``config``."""
    store = SQLiteStore(tmp_path / "imported.db", "normal")
    store.migrate()
    exchange = Exchange(config, store, secret_box=TEST_SECRET_BOX)
    exchange.recover()
    try:
        served = create_app(exchange, clock=FakeClock(), run_scheduler=False)
        with TestClient(served) as http:
            return http.get(SYMBOLS).json(), http.get(CONTRACTS).json()
    finally:
        store.close()


def test_a_venue_exported_and_imported_serves_the_same_markets(env: Env, tmp_path: Path) -> None:
    symbols, contracts = export(env, tmp_path)
    out = tmp_path / "venue.toml"
    given = ("--symbols", str(symbols), "--contracts", str(contracts))
    proc = cli(*given, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    summary = json.loads(line)
    assert summary["file"] == str(out) and "config" not in summary
    assert summary["pairs"] == ["BTCUSDT", "ETHUSDT", "ETHBTC"]
    assert summary["contracts"] == ["E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"]
    assert summary["assets"] == {"BTC": 8, "USDT": 8, "ETH": 8}
    assert set(summary["defaults"]["pairs"]) == {
        "min_quantity",
        "min_notional",
        "maker_fee",
        "taker_fee",
    }

    imported, builtin = load_config(out).markets, load_config().markets
    assert {n: a.decimals for n, a in imported.assets.items()} == {
        n: a.decimals for n, a in builtin.assets.items()
    }
    assert list(imported.pairs) == list(builtin.pairs)
    for symbol, pair in imported.pairs.items():
        original = builtin.pairs[symbol]
        for name in (*CARRIED_PAIR, "maker_fee", "taker_fee", "market_orders", "trading"):
            assert getattr(pair, name) == getattr(original, name), (symbol, name)
        # Not carried by /symbols: the smallest order is one step, no minimum value.
        assert (pair.min_quantity, pair.min_notional) == (1, 0)
    assert list(imported.contracts) == list(builtin.contracts)
    for symbol, contract in imported.contracts.items():
        spec = builtin.contracts[symbol]
        for name in CARRIED_CONTRACT + DEFAULTED_CONTRACT:
            assert getattr(contract, name) == getattr(spec, name), (symbol, name)
    assert not imported.margin  # /symbols does not say which pairs offer margin

    # Served again, the imported configuration answers exactly as the venue did.
    assert answers_of(load_config(out), tmp_path) == (
        json.loads(symbols.read_text()),
        json.loads(contracts.read_text()),
    )


def test_stdout_and_json_without_out(env: Env, tmp_path: Path) -> None:
    symbols, _ = export(env, tmp_path)
    proc = cli("--symbols", str(symbols))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# tradehall configuration") and "[[pairs]]" in proc.stdout
    assert "[[contracts]]" not in proc.stdout
    result = CliRunner().invoke(app, ["markets", "import", "--symbols", str(symbols), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["file"] is None and summary["config"] == proc.stdout


def refused(tmp_path: Path, symbols: Any, contracts: Any = None) -> dict[str, Any]:
    """An import that must fail: exit 1, one ``{code, msg}`` line, nothing written."""
    args = ["markets", "import", "--json", "--out", str(tmp_path / "never.toml")]
    for flag, answer in (("--symbols", symbols), ("--contracts", contracts)):
        if answer is not None:
            path = tmp_path / flag.strip("-")
            path.write_text(answer if isinstance(answer, str) else json.dumps(answer))
            args += [flag, str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    (line,) = result.output.splitlines()
    error: dict[str, Any] = json.loads(line)
    assert set(error) == {"code", "msg"} and error["code"] == -1102, error
    assert not (tmp_path / "never.toml").exists()
    return error


def test_without_files_it_says_what_to_give(tmp_path: Path) -> None:
    """``--symbols`` is required (a configuration needs a spot pair): without it, a usage
    error, exit status 2 as for any missing option, and under --json one ``{code, msg}``."""
    for given in ((), ("--contracts", str(tmp_path / "contracts.json"))):
        out = tmp_path / "never.toml"
        proc = tradehall_inline("markets", "import", "--json", "--out", str(out), *given)
        assert proc.returncode == 2, proc
        assert json.loads(proc.stdout) == {"code": -1102, "msg": "Missing option '--symbols'."}
        assert not out.exists()
    missing = tmp_path / "nowhere.json"
    result = CliRunner().invoke(app, ["markets", "import", "--json", "--symbols", str(missing)])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output) == {
        "code": -1102,
        "msg": f"cannot read {missing}: No such file or directory",
    }


PAIR = {
    "symbol": "btcusdt",
    "baseAsset": "BTC",
    "quoteAsset": "USDT",
    "pricePrecision": 2,
    "quantityPrecision": 6,
}
CONTRACT = {
    "symbol": "E-BTC-USDT",
    "status": 1,
    "type": "E",
    "side": 1,
    "multiplier": Decimal("0.001"),
    "multiplierCoin": "BTC",
    "pricePrecision": 1,
    "minOrderVolume": 1,
    "minOrderMoney": 5,
    "maxMarketVolume": 500000,
    "maxMarketMoney": 50000000,
    "maxLimitVolume": 1000000,
    "maxLimitMoney": 100000000,
    "maxValidOrder": 200,
}


def as_json(value: Any) -> str:
    return json.dumps(value, default=str)


@pytest.mark.parametrize(
    ("symbols", "contracts", "named"),
    [
        ("not json", None, "not JSON"),
        ({"symbols": []}, None, "symbols: lists no pair"),
        ({"data": []}, None, "symbols: must be the /sapi/v1/symbols answer"),
        ([{**PAIR, "symbol": "BTC/USDT"}], None, "symbols[0].symbol"),
        ([PAIR, PAIR], None, "symbols[1].symbol: duplicate pair 'BTCUSDT'"),
        ([{**PAIR, "quoteAsset": "btc"}], None, "symbols[0].quoteAsset"),
        ([{**PAIR, "pricePrecision": 19}], None, "symbols[0].pricePrecision"),
        ([{**PAIR, "pricePrecision": 12, "quantityPrecision": 8}], None, "needs 20 decimals"),
        ([{**PAIR, "quantityPrecision": "six"}], None, "symbols[0].quantityPrecision"),
        ([{k: v for k, v in PAIR.items() if k != "baseAsset"}], None, "baseAsset: missing"),
        ([PAIR], {"contracts": 1}, "contracts: must be the /fapi/v1/contracts answer"),
        ([PAIR], [{**CONTRACT, "type": "S"}], "contracts[0].type: only perpetual"),
        ([PAIR], [{**CONTRACT, "symbol": "X-BTC-USDT"}], "contracts[0].symbol: only perpetual"),
        ([PAIR], [{**CONTRACT, "side": 2}], "contracts[0].side"),
        ([PAIR], [{**CONTRACT, "status": 3}], "contracts[0].status"),
        ([PAIR], [{**CONTRACT, "multiplierCoin": "USDT"}], "contracts[0].multiplierCoin"),
        ([PAIR], [{**CONTRACT, "multiplier": 0}], "contracts[0].multiplier"),
        ([PAIR], [{**CONTRACT, "multiplier": "1e-12"}], "contracts[0].multiplier"),
        ([PAIR], [{**CONTRACT, "multiplier": "1e99999"}], "contracts[0].multiplier: is too large"),
        ([PAIR], [{**CONTRACT, "multiplier": "NaN"}], "contracts[0].multiplier"),
        ([PAIR], [{**CONTRACT, "minOrderVolume": 0}], "contracts[0].minOrderVolume"),
        ([PAIR], [{**CONTRACT, "maxLimitVolume": Decimal("1.5")}], "contracts[0].maxLimitVolume"),
        ([PAIR], [{**CONTRACT, "minOrderMoney": "0.000000001"}], "contracts[0].minOrderMoney"),
        ([PAIR], [{**CONTRACT, "maxMarketMoney": 1}], "contracts[0].maxMarketMoney"),
        ([PAIR], [{**CONTRACT, "maxValidOrder": 5000}], "contracts[0].maxValidOrder"),
        ([PAIR], [CONTRACT, CONTRACT], "contracts[1].symbol: duplicate contract"),
    ],
)
def test_refuses_what_it_cannot_map(
    tmp_path: Path, symbols: Any, contracts: Any, named: str
) -> None:
    given = [None if a is None or isinstance(a, str) else as_json(a) for a in (symbols, contracts)]
    error = refused(
        tmp_path,
        symbols if isinstance(symbols, str) else given[0],
        contracts if isinstance(contracts, str) else given[1],
    )
    assert named in error["msg"], error


def test_maps_inverse_contracts_and_contracts_without_their_spot_pair(tmp_path: Path) -> None:
    """An inverse contract margins in its base and is quoted in a coin that need not be an
    asset; a contract whose coins have no imported pair takes its index from the operator;
    assets get the decimals the markets need, at least 8."""
    fine = {**PAIR, "symbol": "DOGEUSDT", "baseAsset": "DOGE", "pricePrecision": 6}
    inverse = {
        **CONTRACT,
        "symbol": "E-DOGE-USD",
        "side": 0,
        "multiplier": 10,
        "multiplierCoin": "USD",
        "pricePrecision": 5,
    }
    lonely = {**CONTRACT, "symbol": "e-sol-usdt", "multiplierCoin": "SOL", "status": 0}
    paths = []
    for name, answer in (("symbols", {"symbols": [fine]}), ("contracts", [inverse, lonely])):
        path = tmp_path / f"{name}.json"
        path.write_text(as_json(answer))
        paths += [f"--{name}", str(path)]
    out = tmp_path / "out.toml"
    result = CliRunner().invoke(app, ["markets", "import", *paths, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["assets"] == {"DOGE": 8, "USDT": 12, "SOL": 8}
    markets = load_config(out).markets
    doge, sol = markets.contracts["E-DOGE-USD"], markets.contracts["E-SOL-USDT"]
    assert (doge.inverse, doge.margin_coin, doge.index_source, doge.id) == (
        True,
        "DOGE",
        "DOGEUSDT",
        1,
    )
    assert (sol.inverse, sol.index_source, sol.trading, sol.id) == (False, "operator", False, 2)
    assert markets.pairs["DOGEUSDT"].min_quantity == 1
