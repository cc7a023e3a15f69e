"""Tests for the [[contracts]] tables of tradehall.config: the built-in contracts and their
integer units, defaults, and every validation error with its file, line and field."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from tradehall.config import ConfigError, load_config, parse_config
from tradehall.engine.contracts import HOUR_MS, ContractSpec, IndexSpec

BASE = """\
[[assets]]
name = "BTC"
decimals = 8

[[assets]]
name = "ETH"
decimals = 8

[[assets]]
name = "USDT"
decimals = 8

[[pairs]]
symbol = "BTCUSDT"
base = "BTC"
quote = "USDT"
price_precision = 2
quantity_precision = 6
min_quantity = "0.00001"
min_notional = "5"
maker_fee = "0.001"
taker_fee = "0.001"

[[pairs]]
symbol = "ETHBTC"
base = "ETH"
quote = "BTC"
price_precision = 5
quantity_precision = 3
min_quantity = "0.001"
min_notional = "0.0001"
maker_fee = "0.001"
taker_fee = "0.001"
"""

# Contract 0 leaves every optional key out; contract 1 gives them all.
CONTRACTS = """
[[contracts]]
symbol = "e-btc-usdt"
id = 1
base = "btc"
quote = "USDT"
side = "linear"
multiplier = "0.001"
price_precision = 1
min_volume = 1
max_limit_volume = 1000
max_market_volume = 500
min_money = "5"
max_limit_money = "1000000"
max_market_money = "500000"
open_maker_fee = "0.0002"
open_taker_fee = "0.0006"
close_maker_fee = "0.0001"
close_taker_fee = "0.0005"
maintenance_rate = "0.005"
max_leverage = 100

[[contracts]]
symbol = "E-BTC-USD"
id = 2
base = "BTC"
quote = "usd"
side = "INVERSE"
multiplier = 10
price_precision = 1
min_volume = 2
max_limit_volume = 1000
max_market_volume = 2
min_money = 0
max_limit_money = "1000000.5"
max_market_money = 0.00000001
max_valid_order = 50
open_maker_fee = 0
open_taker_fee = "0.0006"
close_maker_fee = "0.0002"
close_taker_fee = "0.0006"
maintenance_rate = "0.01"
default_leverage = 20
max_leverage = 50
funding_interval_hours = 4
interest_rate = "0"
funding_cap = "0.003"
index_source = "Operator"
trading = false
"""

TEXT = BASE + CONTRACTS


def header_line(text: str, index: int) -> int:
    """1-based line of the ``index``-th [[contracts]] header."""
    headers = [n for n, line in enumerate(text.splitlines(), 1) if line == "[[contracts]]"]
    return headers[index]


def key_line(text: str, index: int, key: str) -> int:
    """1-based line assigning ``key`` in contract ``index`` (its header when absent)."""
    lines = text.splitlines()
    start = header_line(text, index)
    for number in range(start, len(lines)):
        line = lines[number]
        if line.startswith("["):
            break
        if re.match(rf"{key}\s*=", line):
            return number + 1
    return start


def set_key(text: str, index: int, key: str, value: str | None) -> str:
    """``text`` with ``key`` of contract ``index`` set to the TOML ``value`` (added at the end
    of the table when absent), or removed when ``value`` is None."""
    lines = text.splitlines()
    line = key_line(text, index, key)
    start = header_line(text, index)
    if line != start:
        if value is None:
            del lines[line - 1]
        else:
            lines[line - 1] = f"{key} = {value}"
    elif value is not None:
        end = start
        while end < len(lines) and lines[end].strip() and not lines[end].startswith("["):
            end += 1
        lines.insert(end, f"{key} = {value}")
    return "\n".join(lines) + "\n"


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "c.toml")
    assert "\n" not in str(info.value)
    return info.value


# --- the built-in contracts -------------------------------------------------------------------


def _builtin(**kw: object) -> ContractSpec:
    fields: dict[str, object] = {
        "type": "E",
        "margin_decimals": 8,
        "min_volume": 1,
        "max_limit_volume": 1_000_000,
        "max_market_volume": 500_000,
        "min_money": 500_000_000,  # 5 quote in units of 1e-8
        "max_limit_money": 100_000_000 * 10**8,
        "max_market_money": 50_000_000 * 10**8,
        "max_valid_order": 200,
        "open_maker_fee": 20_000,  # 0.0002 in units of 1e-8
        "open_taker_fee": 60_000,  # 0.0006
        "close_maker_fee": 20_000,
        "close_taker_fee": 60_000,
        "maintenance_rate": 500_000,  # 0.005
        "default_leverage": 10,
        "max_leverage": 100,
        "funding_interval_ms": 8 * HOUR_MS,
        "interest_rate": 10_000,  # 0.0001
        "funding_cap": 750_000,  # 0.0075
        "trading": True,
        # A spot-sourced index: its mid at depth (weight 2) and last trade (weight 1).
        "index": IndexSpec(weights=(("mid", 2), ("last", 1))),
        "price_band": 5_000_000,  # 0.05
        **kw,
    }
    return ContractSpec(**fields)  # type: ignore[arg-type]


def test_builtin_contracts_have_exact_integer_values() -> None:
    contracts = load_config().markets.contracts
    assert list(contracts) == ["E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"]
    assert contracts["E-BTC-USDT"] == _builtin(
        id=1,
        symbol="E-BTC-USDT",
        base="BTC",
        quote="USDT",
        inverse=False,
        margin_coin="USDT",
        multiplier=Decimal("0.001"),
        multiplier_coin="BTC",
        price_precision=1,
        index_source="BTCUSDT",
    )
    assert contracts["E-ETH-USDT"] == _builtin(
        id=2,
        symbol="E-ETH-USDT",
        base="ETH",
        quote="USDT",
        inverse=False,
        margin_coin="USDT",
        multiplier=Decimal("0.01"),
        multiplier_coin="ETH",
        price_precision=2,
        index_source="ETHUSDT",
    )
    assert contracts["E-BTC-USD"] == _builtin(
        id=3,
        symbol="E-BTC-USD",
        base="BTC",
        quote="USD",
        inverse=True,
        margin_coin="BTC",
        multiplier=Decimal("10"),
        multiplier_coin="USD",
        price_precision=1,
        min_money=1_000_000_000,  # 10 USD
        index_source="BTCUSDT",
    )


def test_builtin_contracts_derived_units() -> None:
    contracts = load_config().markets.contracts
    btc, eth, inverse = (contracts[s] for s in ("E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD"))
    # 0.001 BTC x 0.1 USDT tick = 0.0001 USDT = 10_000 units of 1e-8, in value and money.
    assert (btc.value_unit, btc.money_unit) == (10_000, 10_000)
    # 0.01 ETH x 0.01 USDT tick = 0.0001 USDT.
    assert (eth.value_unit, eth.money_unit) == (10_000, 10_000)
    # 10 USD / 0.1 USD tick = 100 BTC units of value x ticks; 10 USD of money per contract.
    assert (inverse.value_unit, inverse.money_unit) == (10**10, 10**9)
    # 2 contracts at 30000.0 (300_000 ticks): 0.06 BTC notional = 60 USDT; 20 USD = 0.000666 BTC.
    assert btc.value(2, 300_000) == 60 * 10**8
    assert inverse.value(2, 300_000) == 66_666
    # A fully levered position starts above maintenance.
    for spec in contracts.values():
        assert spec.maintenance_rate * spec.max_leverage < 10**8


def test_builtin_contracts_are_in_the_default_file() -> None:
    from importlib import resources

    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    assert text.splitlines().count("[[contracts]]") == 3
    assert parse_config(text, "<built-in>").markets.contracts == load_config().markets.contracts


# --- custom contracts -------------------------------------------------------------------------


def test_no_contracts_means_no_futures() -> None:
    assert parse_config(BASE, "c.toml").markets.contracts == {}
    assert parse_config("contracts = []\n" + BASE, "c.toml").markets.contracts == {}


def test_defaults_of_optional_keys() -> None:
    spec = parse_config(TEXT, "c.toml").markets.contracts["E-BTC-USDT"]
    assert (spec.symbol, spec.base, spec.quote) == ("E-BTC-USDT", "BTC", "USDT")
    assert spec.max_valid_order == 200
    assert spec.default_leverage == 10
    assert spec.funding_interval_ms == 8 * HOUR_MS
    assert (spec.interest_rate, spec.funding_cap) == (10_000, 750_000)
    assert spec.index_source == "BTCUSDT"  # the spot pair of the same coins
    assert spec.trading is True
    assert (spec.close_maker_fee, spec.close_taker_fee) == (10_000, 50_000)
    assert (spec.min_money, spec.max_limit_money, spec.max_market_money) == (
        5 * 10**8,
        10**6 * 10**8,
        5 * 10**5 * 10**8,
    )


def test_default_leverage_defaults_to_at_most_max_leverage() -> None:
    text = set_key(TEXT, 0, "max_leverage", "5")
    spec = parse_config(text, "c.toml").markets.contracts["E-BTC-USDT"]
    assert (spec.default_leverage, spec.max_leverage) == (5, 5)


def test_every_key_given() -> None:
    spec = parse_config(TEXT, "c.toml").markets.contracts["E-BTC-USD"]
    assert spec == ContractSpec(
        id=2,
        symbol="E-BTC-USD",
        type="E",
        base="BTC",
        quote="USD",
        inverse=True,
        margin_coin="BTC",
        margin_decimals=8,
        multiplier=Decimal(10),
        multiplier_coin="USD",
        price_precision=1,
        min_volume=2,
        max_limit_volume=1000,
        max_market_volume=2,
        min_money=0,
        max_limit_money=100_000_050_000_000,
        max_market_money=1,
        max_valid_order=50,
        open_maker_fee=0,
        open_taker_fee=60_000,
        close_maker_fee=20_000,
        close_taker_fee=60_000,
        maintenance_rate=1_000_000,
        default_leverage=20,
        max_leverage=50,
        funding_interval_ms=4 * HOUR_MS,
        interest_rate=0,
        funding_cap=300_000,
        index_source="operator",
        trading=False,
    )


def test_inverse_usd_contract_takes_the_usdt_pair_by_default() -> None:
    text = set_key(TEXT, 1, "index_source", None)
    assert parse_config(text, "c.toml").markets.contracts["E-BTC-USD"].index_source == "BTCUSDT"
    text = set_key(TEXT, 1, "index_source", '"btcusdt"')
    assert parse_config(text, "c.toml").markets.contracts["E-BTC-USD"].index_source == "BTCUSDT"


def test_inverse_quote_may_be_an_asset() -> None:
    text = set_key(set_key(TEXT, 1, "quote", '"USDT"'), 1, "symbol", '"E-BTC-USDT2"')
    error = error_of(text)
    assert error.field == "contracts[1].symbol"
    text = set_key(set_key(TEXT, 1, "quote", '"ETH"'), 1, "symbol", '"E-BTC-ETH"')
    spec = parse_config(text, "c.toml").markets.contracts["E-BTC-ETH"]
    assert (spec.margin_coin, spec.multiplier_coin, spec.inverse) == ("BTC", "ETH", True)


def test_contracts_in_an_inline_array() -> None:
    text = (
        'contracts = [{ symbol = "E-BTC-USDT", id = 7, base = "BTC", quote = "USDT",'
        ' side = "linear", multiplier = "0.001", price_precision = 1, min_volume = 1,'
        ' max_limit_volume = 10, max_market_volume = 10, min_money = "1",'
        ' max_limit_money = "100", max_market_money = "100", open_maker_fee = "0",'
        ' open_taker_fee = "0", close_maker_fee = "0", close_taker_fee = "0",'
        ' maintenance_rate = "0.01", max_leverage = 20 }]\n'
    ) + BASE
    assert parse_config(text, "c.toml").markets.contracts["E-BTC-USDT"].id == 7


# --- validation -------------------------------------------------------------------------------

# (contract, key, new TOML value or None to remove it, key reported, part of the problem)
CASES: list[tuple[int, str, str | None, str, str]] = [
    # unknown keys, with a suggestion
    (0, "leverage", "10", "leverage", "did you mean 'max_leverage'"),
    (0, "maker_fee", '"0.001"', "maker_fee", "unknown key"),
    (1, "tradingg", "true", "tradingg", "did you mean 'trading'"),
    # missing required keys (reported at the table's header)
    (0, "id", None, "id", "missing required key"),
    (0, "side", None, "side", "missing required key"),
    (0, "multiplier", None, "multiplier", "missing required key"),
    (0, "max_market_money", None, "max_market_money", "missing required key"),
    (0, "close_taker_fee", None, "close_taker_fee", "missing required key"),
    (0, "maintenance_rate", None, "maintenance_rate", "missing required key"),
    (1, "max_leverage", None, "max_leverage", "missing required key"),
    # symbol
    (0, "symbol", '"BTCUSDT"', "symbol", "must be <TYPE>-<BASE>-<QUOTE>"),
    (0, "symbol", '"E-BTC"', "symbol", "must be <TYPE>-<BASE>-<QUOTE>"),
    (0, "symbol", '"E-BTC-USDT-1"', "symbol", "must be <TYPE>-<BASE>-<QUOTE>"),
    (0, "symbol", '"E_BTC_USDT"', "symbol", "must be <TYPE>-<BASE>-<QUOTE>"),
    (0, "symbol", '"F-BTC-USDT"', "symbol", "contract type 'F' is not supported"),
    (0, "symbol", '"E-ETH-USDT"', "symbol", "must be 'E-BTC-USDT'"),
    (1, "symbol", '"E-BTC-USDT"', "symbol", "must be 'E-BTC-USD' (<TYPE>-<BASE>-<QUOTE>)"),
    (0, "symbol", "1", "symbol", "must be a string, not an integer"),
    # id
    (0, "id", "0", "id", "between 1 and 10000, got 0"),
    (0, "id", "10001", "id", "between 1 and 10000"),
    (0, "id", '"1"', "id", "must be an integer, not a string"),
    (1, "id", "1", "id", "duplicate contract id 1 (also E-BTC-USDT)"),
    # side
    (0, "side", '"both"', "side", "must be 'linear' or 'inverse', got 'both'"),
    (0, "side", "1", "side", "must be a string"),
    # base and quote
    (0, "base", '"DOGE"', "base", "unknown asset 'DOGE'"),
    (0, "quote", '"USD"', "quote", "unknown asset 'USD'"),  # linear: an asset
    (1, "quote", '"US-D"', "quote", "A-Z and 0-9"),
    (1, "quote", '"btc"', "quote", "must differ from base"),
    (1, "base", '"SOL"', "base", "unknown asset 'SOL'"),  # inverse: the margin coin
    # multiplier
    (0, "multiplier", '"0"', "multiplier", "must be greater than 0, got 0"),
    (0, "multiplier", "-1", "multiplier", "greater than 0"),
    (0, "multiplier", '"abc"', "multiplier", "not a decimal number"),
    (0, "multiplier", "true", "multiplier", "not a boolean"),
    # multiplier x tick not exact (ContractSpec's ValueError)
    (0, "multiplier", '"0.00000001"', "multiplier", "not a whole number of USDT units"),
    (1, "multiplier", '"0.000000001"', "multiplier", "has more than 8 decimals"),
    # price_precision
    (0, "price_precision", "19", "price_precision", "between 0 and 18"),
    (0, "price_precision", "-1", "price_precision", "between 0 and 18"),
    (0, "price_precision", "8", "multiplier", "not a whole number of USDT units"),
    # volumes
    (0, "min_volume", "0", "min_volume", "between 1 and"),
    (0, "min_volume", "1.5", "min_volume", "must be an integer, not a float"),
    (0, "max_limit_volume", "0", "max_limit_volume", "between 1 and"),
    (1, "max_market_volume", "1", "max_market_volume", "at least min_volume (2), got 1"),
    (1, "max_limit_volume", "1", "max_limit_volume", "at least min_volume (2)"),
    # money
    (0, "min_money", '"-1"', "min_money", "must not be negative"),
    (0, "min_money", '"0.000000001"', "min_money", "more than 8 decimal places"),
    (0, "max_limit_money", '"0"', "max_limit_money", "greater than 0"),
    (0, "max_market_money", '"4.99"', "max_market_money", "at least min_money (5), got 4.99"),
    (0, "max_limit_money", '"1e-9"', "max_limit_money", "at least min_money"),
    (1, "max_limit_money", '"1.000000001"', "max_limit_money", "more than 8 decimal places"),
    # max_valid_order
    (1, "max_valid_order", "0", "max_valid_order", "between 1 and 1000, got 0"),
    (1, "max_valid_order", "1001", "max_valid_order", "between 1 and 1000"),
    # fees
    (0, "open_maker_fee", '"0.1"', "open_maker_fee", "less than 0.1, got 0.1"),
    (0, "open_taker_fee", '"-0.0001"', "open_taker_fee", "at least 0"),
    (0, "close_maker_fee", "0.000000001", "close_maker_fee", "more than 8 decimal places"),
    (1, "close_taker_fee", "[1]", "close_taker_fee", "not an array"),
    # maintenance rate and leverage
    (0, "maintenance_rate", '"0"', "maintenance_rate", "above 0 and below 0.5, got 0"),
    (0, "maintenance_rate", '"0.5"', "maintenance_rate", "below 0.5"),
    (0, "maintenance_rate", '"0.000000001"', "maintenance_rate", "more than 8 decimal"),
    (0, "maintenance_rate", '"0.01"', "max_leverage", "below 1/max_leverage (1/100)"),
    (1, "maintenance_rate", '"0.02"', "max_leverage", "would start at or below maintenance"),
    (0, "max_leverage", "0", "max_leverage", "between 1 and 125, got 0"),
    (0, "max_leverage", "126", "max_leverage", "between 1 and 125"),
    (1, "default_leverage", "51", "default_leverage", "at most max_leverage (50), got 51"),
    (1, "default_leverage", "0", "default_leverage", "between 1 and 125"),
    # funding
    (1, "funding_interval_hours", "5", "funding_interval_hours", "must divide 24"),
    (1, "funding_interval_hours", "0", "funding_interval_hours", "between 1 and 24"),
    (1, "funding_interval_hours", "48", "funding_interval_hours", "between 1 and 24"),
    (1, "interest_rate", '"0.01"', "interest_rate", "less than 0.01, got 0.01"),
    (1, "interest_rate", '"-0.0001"', "interest_rate", "at least 0"),
    (1, "interest_rate", '"0.000000001"', "interest_rate", "more than 8 decimal places"),
    (1, "funding_cap", '"0"', "funding_cap", "above 0 and below 0.1"),
    (1, "funding_cap", '"0.1"', "funding_cap", "below 0.1, got 0.1"),
    # index source
    (1, "index_source", '"NOPE"', "index_source", "'operator' or a spot pair, got 'NOPE'"),
    (0, "index_source", '"ETHBTC"', "index_source", "ETHBTC is ETH/BTC, not BTC/USDT"),
    (1, "index_source", '"ETHBTC"', "index_source", "not BTC/USD (or quote USDT)"),
    (1, "index_source", "1", "index_source", "must be a string"),
    # trading
    (1, "trading", '"yes"', "trading", "must be true or false"),
]


@pytest.mark.parametrize(("index", "key", "value", "reported", "problem"), CASES)
def test_validation_error_names_line_and_field(
    index: int, key: str, value: str | None, reported: str, problem: str
) -> None:
    text = set_key(TEXT, index, key, value)
    error = error_of(text)
    line = key_line(text, index, reported)
    assert str(error).startswith(f"c.toml:{line}: contracts[{index}].{reported}: "), str(error)
    assert problem in error.problem, error.problem


def test_validation_error_through_load_config(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text(set_key(TEXT, 1, "side", '"sideways"'), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    line = key_line(TEXT, 1, "side")
    assert str(info.value) == (
        f"{path}:{line}: contracts[1].side: must be 'linear' or 'inverse', got 'sideways'"
    )


def test_duplicate_symbol() -> None:
    text = set_key(TEXT, 1, "symbol", '"E-BTC-USDT"')
    text = set_key(set_key(text, 1, "quote", '"USDT"'), 1, "side", '"linear"')
    error = error_of(text)
    assert error.field == "contracts[1].symbol"
    assert error.problem == "duplicate contract 'E-BTC-USDT'"


def test_no_spot_pair_for_the_default_index() -> None:
    text = set_key(set_key(TEXT, 0, "base", '"ETH"'), 0, "symbol", '"E-ETH-USDT"')
    error = error_of(text)
    assert error.field == "contracts[0].index_source"
    assert error.line == header_line(text, 0)
    assert "no spot pair of ETH/USDT" in error.problem and "'operator'" in error.problem
    fixed = set_key(text, 0, "index_source", '"operator"')
    assert parse_config(fixed, "c.toml").markets.contracts["E-ETH-USDT"].index_source == (
        "operator"
    )


def test_contracts_must_be_an_array_of_tables() -> None:
    error = error_of("contracts = 5\n" + BASE)
    assert (error.line, error.field) == (1, "contracts")
    assert "must be an array of tables" in error.problem
    error = error_of('contracts = ["E-BTC-USDT"]\n' + BASE)
    assert (error.line, error.field) == (1, "contracts[0]")


def test_unknown_top_level_table_suggests_contracts() -> None:
    error = error_of(BASE + "\n[[contract]]\nid = 1\n")
    assert error.field == "contract"
    assert "did you mean 'contracts'" in error.problem
