"""Tests for tradehall.config: the built-in default, custom files, validation and line lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from tradehall.config import (
    Config,
    ConfigError,
    ServerConfig,
    load_config,
    locate_line,
    parse_config,
)
from tradehall.engine.markets import PairSpec

# Line numbers of CUSTOM matter: the validation cases below refer to them.
CUSTOM = """\
[server]
host = "0.0.0.0"
port = 9000
data_dir = "/var/lib/tradehall"
sqlite_synchronous = "normal"
rate_limits = false

[[assets]]
name = "btc"
decimals = 8

[[assets]]
name = "ETH"
decimals = 18

[[assets]]
name = "USDC"
decimals = 6

[[pairs]]
symbol = "btcusdc"
base = "BTC"
quote = "usdc"
price_precision = 2
quantity_precision = 4
min_quantity = "0.0001"
min_notional = "10"
maker_fee = "0"
taker_fee = "0.0025"

[[pairs]]
symbol = "ETHBTC"
base = "eth"
quote = "BTC"
price_precision = 5
quantity_precision = 3
min_quantity = 0.001
min_notional = 0.00001
maker_fee = 0.0008
taker_fee = 0.001
market_orders = false
trading = false
"""


def replace_line(text: str, number: int, new: str) -> str:
    """``text`` with its 1-based line ``number`` replaced by ``new``."""
    lines = text.splitlines()
    lines[number - 1] = new
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "my.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    return path, message


# --- the built-in default ---------------------------------------------------------------------


def test_builtin_config_loads() -> None:
    config = load_config()
    assert isinstance(config, Config)
    assert config.source == "<built-in>"
    assert config.server == ServerConfig()
    assert {name: a.decimals for name, a in config.markets.assets.items()} == {
        "BTC": 8,
        "ETH": 8,
        "USDT": 8,
    }
    assert list(config.markets.pairs) == ["BTCUSDT", "ETHUSDT", "ETHBTC"]


def test_builtin_pairs_have_exact_integer_values() -> None:
    pairs = load_config().markets.pairs
    assert pairs["BTCUSDT"] == PairSpec(
        symbol="BTCUSDT",
        base="BTC",
        quote="USDT",
        price_precision=2,
        quantity_precision=6,
        min_quantity=10,  # 0.00001 in lots of 1e-6
        min_notional=500_000_000,  # 5 USDT in units of 1e-8
        base_decimals=8,
        quote_decimals=8,
        maker_fee=80_000,  # 0.0008 in units of 1e-8
        taker_fee=100_000,  # 0.001
        market_orders=True,
        trading=True,
    )
    assert pairs["ETHUSDT"] == PairSpec(
        symbol="ETHUSDT",
        base="ETH",
        quote="USDT",
        price_precision=2,
        quantity_precision=4,
        min_quantity=1,  # 0.0001 in lots of 1e-4
        min_notional=500_000_000,
        base_decimals=8,
        quote_decimals=8,
        maker_fee=80_000,  # 0.0008 in units of 1e-8
        taker_fee=100_000,  # 0.001
        market_orders=True,
        trading=True,
    )
    assert pairs["ETHBTC"] == PairSpec(
        symbol="ETHBTC",
        base="ETH",
        quote="BTC",
        price_precision=5,
        quantity_precision=3,
        min_quantity=1,  # 0.001 in lots of 1e-3
        min_notional=10_000,  # 0.0001 BTC in units of 1e-8
        base_decimals=8,
        quote_decimals=8,
        maker_fee=80_000,  # 0.0008 in units of 1e-8
        taker_fee=100_000,  # 0.001
        market_orders=True,
        trading=True,
    )


def test_builtin_file_is_what_parse_config_sees() -> None:
    from importlib import resources

    text = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    assert parse_config(text, "<built-in>") == load_config()


# --- a custom file ----------------------------------------------------------------------------


def test_custom_file_loads(tmp_path: Path) -> None:
    path = write(tmp_path, CUSTOM)
    config = load_config(path)
    assert config.source == str(path)
    assert config.server == ServerConfig(
        host="0.0.0.0",
        port=9000,
        data_dir="/var/lib/tradehall",
        sqlite_synchronous="normal",
        rate_limits=False,
    )
    assert list(config.markets.assets) == ["BTC", "ETH", "USDC"]
    assert config.markets.assets["ETH"].decimals == 18
    assert list(config.markets.pairs) == ["BTCUSDC", "ETHBTC"]
    btcusdc = config.markets.pairs["BTCUSDC"]
    assert (btcusdc.base, btcusdc.quote) == ("BTC", "USDC")
    assert btcusdc.min_quantity == 1
    assert btcusdc.min_notional == 10_000_000  # 10 USDC in units of 1e-6
    assert (btcusdc.maker_fee, btcusdc.taker_fee) == (0, 250_000)
    assert btcusdc.market_orders and btcusdc.trading  # defaults
    assert (btcusdc.base_decimals, btcusdc.quote_decimals) == (8, 6)
    assert btcusdc.quote_per_tick_lot == 1
    ethbtc = config.markets.pairs["ETHBTC"]
    assert (ethbtc.base, ethbtc.quote) == ("ETH", "BTC")
    assert (ethbtc.base_decimals, ethbtc.quote_decimals) == (18, 8)
    assert not ethbtc.market_orders and not ethbtc.trading


def test_float_values_convert_exactly(tmp_path: Path) -> None:
    ethbtc = load_config(write(tmp_path, CUSTOM)).markets.pairs["ETHBTC"]
    assert ethbtc.min_quantity == 1  # min_quantity = 0.001
    assert ethbtc.min_notional == 1000  # min_notional = 0.00001 BTC
    assert ethbtc.maker_fee == 80_000  # maker_fee = 0.0008
    assert ethbtc.taker_fee == 100_000  # taker_fee = 0.001


def test_float_fee_that_float_arithmetic_gets_wrong(tmp_path: Path) -> None:
    assert int(0.00000029 * 10**8) == 28  # why floats must not be multiplied
    text = replace_line(CUSTOM, 39, "maker_fee = 0.00000029")
    text = replace_line(text, 37, "min_quantity = 0.003")
    ethbtc = load_config(write(tmp_path, text)).markets.pairs["ETHBTC"]
    assert ethbtc.maker_fee == 29
    assert ethbtc.min_quantity == 3


def test_numbers_as_strings_ints_and_exponents(tmp_path: Path) -> None:
    text = replace_line(CUSTOM, 27, "min_notional = 0")
    text = replace_line(text, 26, 'min_quantity = "1e-4"')
    text = replace_line(text, 29, 'taker_fee = "0.00250000"')  # trailing zeros are fine
    pair = load_config(write(tmp_path, text)).markets.pairs["BTCUSDC"]
    assert (pair.min_notional, pair.min_quantity, pair.taker_fee) == (0, 1, 250_000)


def test_server_table_is_optional(tmp_path: Path) -> None:
    text = "\n".join(CUSTOM.splitlines()[7:]) + "\n"
    assert load_config(write(tmp_path, text)).server == ServerConfig()


def test_server_keys_are_each_optional(tmp_path: Path) -> None:
    text = "[server]\nport = 81\n" + "\n".join(CUSTOM.splitlines()[7:]) + "\n"
    assert load_config(write(tmp_path, text)).server == ServerConfig(port=81)


def test_inline_arrays_of_tables_are_accepted(tmp_path: Path) -> None:
    text = (
        'assets = [{ name = "A", decimals = 2 }, { name = "B", decimals = 4 }]\n'
        "pairs = [\n"
        '  { symbol = "AB", base = "A", quote = "B", price_precision = 2, quantity_precision = 2,'
        ' min_quantity = "0.01", min_notional = "1", maker_fee = "0", taker_fee = "0" },\n'
        "]\n"
    )
    config = load_config(write(tmp_path, text))
    assert config.markets.pairs["AB"].min_notional == 10_000


def test_path_may_be_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, CUSTOM)
    assert load_config(str(path)).source == str(path)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + CUSTOM.encode())
    assert len(load_config(path).markets.pairs) == 2


def test_parse_config_names_the_source() -> None:
    assert parse_config(CUSTOM, "inline").source == "inline"
    with pytest.raises(ConfigError, match=r"^inline:3: server\.port: "):
        parse_config(replace_line(CUSTOM, 3, "port = 0"), "inline")


# --- validation -------------------------------------------------------------------------------

# (line to replace, its new text, line reported, field, part of the problem)
CASES = [
    # unknown keys
    (7, "extra = 1", 7, "server.extra", "unknown key"),
    (11, "precision = 2", 11, "assets[0].precision", "unknown key"),
    (30, "min_qty = 1", 30, "pairs[0].min_qty", "did you mean 'min_quantity'"),
    (42, "tradingg = true", 42, "pairs[1].tradingg", "did you mean 'trading'"),
    # missing required keys: reported at the table's header
    (9, "", 8, "assets[0].name", "missing required key"),
    (14, "", 12, "assets[1].decimals", "missing required key"),
    (21, "", 20, "pairs[0].symbol", "missing required key"),
    (38, "", 31, "pairs[1].min_notional", "missing required key"),
    (40, "", 31, "pairs[1].taker_fee", "missing required key"),
    # wrong types (a boolean is not an integer)
    (2, "host = 1", 2, "server.host", "must be a string, not an integer"),
    (3, 'port = "80"', 3, "server.port", "must be an integer, not a string"),
    (3, "port = true", 3, "server.port", "must be an integer, not a boolean"),
    (4, "data_dir = []", 4, "server.data_dir", "must be a string, not an array"),
    (6, 'rate_limits = "yes"', 6, "server.rate_limits", "must be true or false"),
    (10, "decimals = true", 10, "assets[0].decimals", "must be an integer, not a boolean"),
    (13, "name = 7", 13, "assets[1].name", "must be a string"),
    (22, "base = 1", 22, "pairs[0].base", "must be a string"),
    (24, "price_precision = 2.0", 24, "pairs[0].price_precision", "not a float"),
    (25, "quantity_precision = false", 25, "pairs[0].quantity_precision", "not a boolean"),
    (28, "maker_fee = true", 28, "pairs[0].maker_fee", "not a boolean"),
    (27, "min_notional = [1]", 27, "pairs[0].min_notional", "not an array"),
    (41, "market_orders = 1", 41, "pairs[1].market_orders", "must be true or false"),
    # names and symbols
    (9, 'name = "BT-C"', 9, "assets[0].name", "A-Z and 0-9"),
    (9, 'name = ""', 9, "assets[0].name", "1 to 20 characters"),
    (9, 'name = " BTC"', 9, "assets[0].name", "A-Z and 0-9"),
    (21, f'symbol = "{"A" * 21}"', 21, "pairs[0].symbol", "1 to 20 characters"),
    (32, 'symbol = "ETH/BTC"', 32, "pairs[1].symbol", "A-Z and 0-9"),
    (13, 'name = "Btc"', 13, "assets[1].name", "duplicate asset 'BTC'"),
    (32, 'symbol = "BtcUsdc"', 32, "pairs[1].symbol", "duplicate symbol 'BTCUSDC'"),
    # asset decimals
    (14, "decimals = 19", 14, "assets[1].decimals", "between 0 and 18, got 19"),
    (10, "decimals = -1", 10, "assets[0].decimals", "between 0 and 18, got -1"),
    # base and quote
    (23, 'quote = "EUR"', 23, "pairs[0].quote", "unknown asset 'EUR'"),
    (33, 'base = "USDT"', 33, "pairs[1].base", "unknown asset 'USDT'"),
    (34, 'quote = "eth"', 34, "pairs[1].quote", "must differ from base"),
    # precisions
    (35, "price_precision = 19", 35, "pairs[1].price_precision", "between 0 and 18"),
    (25, "quantity_precision = -1", 25, "pairs[0].quantity_precision", "between 0 and 18"),
    # every price x quantity exact in integer units
    (24, "price_precision = 3", 24, "pairs[0].price_precision", "must be exact"),
    (24, "price_precision = 3", 24, "pairs[0].price_precision", "6 decimals of quote asset USDC"),
    (14, "decimals = 2", 36, "pairs[1].quantity_precision", "must be exact in integer ETH"),
    # min_quantity
    (26, 'min_quantity = "0"', 26, "pairs[0].min_quantity", "greater than 0"),
    (26, "min_quantity = -1", 26, "pairs[0].min_quantity", "greater than 0, got -1"),
    (26, 'min_quantity = "0.00001"', 26, "pairs[0].min_quantity", "more than 4 decimal places"),
    (37, "min_quantity = 0.0001", 37, "pairs[1].min_quantity", "0.0001 has more than 3"),
    (26, 'min_quantity = "abc"', 26, "pairs[0].min_quantity", "not a decimal number: 'abc'"),
    (26, 'min_quantity = ""', 26, "pairs[0].min_quantity", "not a decimal number"),
    (26, "min_quantity = nan", 26, "pairs[0].min_quantity", "finite"),
    (26, 'min_quantity = "Infinity"', 26, "pairs[0].min_quantity", "finite"),
    # min_notional
    (27, 'min_notional = "-1"', 27, "pairs[0].min_notional", "must not be negative"),
    (27, 'min_notional = "1e-7"', 27, "pairs[0].min_notional", "0.0000001 has more than 6"),
    (38, "min_notional = 1e-9", 38, "pairs[1].min_notional", "more than 8 decimal places"),
    (27, 'min_notional = "1e50"', 27, "pairs[0].min_notional", "too large"),
    # fee rates
    (28, 'maker_fee = "-0.0001"', 28, "pairs[0].maker_fee", "at least 0 and less than 0.1"),
    (29, 'taker_fee = "0.1"', 29, "pairs[0].taker_fee", "less than 0.1, got 0.1"),
    (40, "taker_fee = 0.5", 40, "pairs[1].taker_fee", "less than 0.1"),
    (39, "maker_fee = 0.000000001", 39, "pairs[1].maker_fee", "more than 8 decimal places"),
    (39, "maker_fee = inf", 39, "pairs[1].maker_fee", "finite"),
    # server
    (3, "port = 0", 3, "server.port", "between 1 and 65535, got 0"),
    (3, "port = 65536", 3, "server.port", "between 1 and 65535"),
    (5, 'sqlite_synchronous = "off"', 5, "server.sqlite_synchronous", "'full' or 'normal'"),
    (5, 'sqlite_synchronous = "FULL"', 5, "server.sqlite_synchronous", "got 'FULL'"),
    (2, 'host = ""', 2, "server.host", "must not be empty"),
    (2, 'host = "   "', 2, "server.host", "must not be empty"),
    (4, 'data_dir = ""', 4, "server.data_dir", "must not be empty"),
]


@pytest.mark.parametrize(("number", "new", "line", "field", "problem"), CASES)
def test_validation_error_names_file_line_and_field(
    tmp_path: Path, number: int, new: str, line: int, field: str, problem: str
) -> None:
    path, message = load_error(tmp_path, replace_line(CUSTOM, number, new))
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert problem in message


def test_spec_example_message(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, replace_line(CUSTOM, 34, 'quote = "usdt"'))
    assert message == f"{path}:34: pairs[1].quote: unknown asset 'USDT'"


def test_error_attributes() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(replace_line(CUSTOM, 3, "port = 0"), "x.toml")
    err = info.value
    assert (err.source, err.line, err.field) == ("x.toml", 3, "server.port")
    assert err.problem == "must be between 1 and 65535, got 0"


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, "version = 1\n" + CUSTOM)
    assert message.startswith(f"{path}:1: version: unknown key")


def test_unknown_top_level_table(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, CUSTOM + "\n[[pair]]\nsymbol = 'X'\n")
    assert message.startswith(f"{path}:44: pair: unknown key (did you mean 'pairs'?)")


def test_odd_unknown_key_stays_one_line(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, replace_line(CUSTOM, 7, '"a\\nb" = 1'))
    assert message.startswith(f'{path}:7: server."a\\nb": unknown key')


def test_server_must_be_a_table(tmp_path: Path) -> None:
    text = "server = 5\n" + "\n".join(CUSTOM.splitlines()[7:]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message == f"{path}:1: server: must be a table, not an integer"


def test_no_assets(tmp_path: Path) -> None:
    text = "\n".join(CUSTOM.splitlines()[19:]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}: assets: missing")  # nowhere to point at


def test_empty_assets(tmp_path: Path) -> None:
    text = "assets = []\n" + "\n".join(CUSTOM.splitlines()[19:]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:1: assets: must not be empty")


def test_no_pairs(tmp_path: Path) -> None:
    text = "\n".join(CUSTOM.splitlines()[:19]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}: pairs: missing")


def test_empty_pairs(tmp_path: Path) -> None:
    text = "pairs = []\n" + "\n".join(CUSTOM.splitlines()[:19]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:1: pairs: must not be empty")


def test_assets_must_be_tables(tmp_path: Path) -> None:
    text = 'assets = ["BTC"]\n' + "\n".join(CUSTOM.splitlines()[19:]) + "\n"
    path, message = load_error(tmp_path, text)
    assert message == f"{path}:1: assets[0]: must be a table, not a string"


def test_error_in_inline_table_points_at_the_array(tmp_path: Path) -> None:
    text = (
        'assets = [{ name = "A", decimals = 2 }]\n'
        "\n"
        'pairs = [{ symbol = "AB", base = "A", quote = "B" }]\n'
    )
    path, message = load_error(tmp_path, text)
    assert message == f"{path}:3: pairs[0].quote: unknown asset 'B'"


# --- TOML syntax and file errors --------------------------------------------------------------


def test_toml_syntax_error_reports_its_line(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, replace_line(CUSTOM, 27, "min_notional = "))
    assert message.startswith(f"{path}:27: TOML syntax: Invalid value (column ")


def test_toml_duplicate_key_is_a_syntax_error(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, replace_line(CUSTOM, 30, "symbol = 'X'"))
    assert message.startswith(f"{path}:30: TOML syntax: ")


def test_toml_error_at_end_of_document(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, CUSTOM + 'x = "unterminated')
    assert message.startswith(f"{path}:43: TOML syntax: Unterminated string (at end of file)")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: cannot read file: ")


def test_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(b"# \xff\n")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(path)


# --- locate_line ------------------------------------------------------------------------------

LOCATOR_TEXT = """\
top = 1
pairs_note = "x"
[server]
port = 1

[[pairs]]  # first
symbol = "A"
  base = "B"

[[ pairs ]]
"symbol" = "C"
[pairs.extra]
quote = "D"
[[pairs]]
quote = "E"
"""


@pytest.mark.parametrize(
    ("table", "index", "key", "line"),
    [
        ("server", None, "port", 4),
        ("server", None, "host", 3),  # missing key: the header
        ("server", None, None, 3),
        ("pairs", 0, "symbol", 7),
        ("pairs", 0, "base", 8),  # indented
        ("pairs", 0, None, 6),  # header with a comment
        ("pairs", 1, "symbol", 11),  # quoted key, spaced header
        ("pairs", 1, "quote", 10),  # stops at the next header: falls back
        ("pairs", 2, "quote", 15),
        ("pairs", 2, "symbol", 14),
        ("pairs", 3, "symbol", None),  # no such element
        ("top", None, None, 1),  # a top-level key
        ("pairs", 0, "nope", 6),
        ("assets", 0, "name", None),
    ],
)
def test_locate_line(table: str, index: int | None, key: str | None, line: int | None) -> None:
    assert locate_line(LOCATOR_TEXT, table, index, key) == line


def test_locate_line_finds_top_level_array_without_headers() -> None:
    text = 'assets = []\n\npairs = [\n  { symbol = "X" },\n]\n'
    assert locate_line(text, "pairs", 0, "symbol") == 3
    assert locate_line(text, "assets") == 1


def test_locate_line_does_not_match_key_prefixes() -> None:
    text = "[server]\nportal = 1\nport = 2\n"
    assert locate_line(text, "server", None, "port") == 3


def test_max_clock_ahead_is_the_seed_rule_unless_configured(tmp_path: Path) -> None:
    assert ServerConfig().max_clock_ahead_ms == 1000
    assert load_config(write(tmp_path, CUSTOM)).server.max_clock_ahead_ms == 1000
    wider = CUSTOM.replace("rate_limits = false", "rate_limits = false\nmax_clock_ahead_ms = 5000")
    assert load_config(write(tmp_path, wider)).server.max_clock_ahead_ms == 5000
    for value, problem in (
        ("0", "between 1 and 60000, got 0"),
        ("60001", "between 1 and 60000, got 60001"),
        ('"5000"', "must be an integer, not a string"),
    ):
        text = CUSTOM.replace(
            "rate_limits = false", f"rate_limits = false\nmax_clock_ahead_ms = {value}"
        )
        with pytest.raises(ConfigError) as info:
            load_config(write(tmp_path, text))
        assert "server.max_clock_ahead_ms" in str(info.value) and problem in str(info.value)
