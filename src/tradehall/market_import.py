"""Mirror a family venue's markets: its ``GET /sapi/v1/symbols`` and ``GET /fapi/v1/contracts``
answers (JSON, as saved from the venue) mapped to tradehall's configuration keys and written
as TOML (``tradehall markets import``).

What the answers carry is kept exactly (symbols, precisions, contract minimums and maximums,
multipliers, status); what they do not carry takes the documented defaults of ``DEFAULTS``.
Assets get the decimals the markets need (at least 8). Anything that cannot be mapped is
refused with the field named; nothing is guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

MIN_ASSET_DECIMALS = 8
MAX_DECIMALS = 18
MONEY_DECIMALS = 8
"""Contract money (``...Money``) and ``multiplier x tick`` of a linear contract: 1e-8 quote."""
MAX_VOLUME = 10**12
MAX_VALID_ORDER = 1_000
MAX_MAGNITUDE = 18
"""Decimal values (multipliers, money) are below 10**19: nothing a venue lists is larger."""

_NAME = re.compile(r"[A-Z0-9]{1,20}")
_CONTRACT = re.compile(r"([A-Z0-9]+)-([A-Z0-9]{1,20})-([A-Z0-9]{1,20})")

PAIR_DEFAULTS: dict[str, Any] = {
    "min_notional": "0",
    "maker_fee": "0.0008",
    "taker_fee": "0.001",
}
"""Pair keys ``/symbols`` does not carry (``min_quantity`` too: one step of the pair's
``quantity_precision``, the smallest order it can express)."""
CONTRACT_DEFAULTS: dict[str, Any] = {
    "open_maker_fee": "0.0002",
    "open_taker_fee": "0.0006",
    "close_maker_fee": "0.0002",
    "close_taker_fee": "0.0006",
    "maintenance_rate": "0.005",
    "max_leverage": 100,
}
"""Contract keys ``/contracts`` does not carry and tradehall requires (the built-in
configuration's values). ``id`` is numbered 1, 2... in the answer's order; ``index_source``
is the spot pair of the contract's coins when one is imported, ``operator`` otherwise; the
optional keys (funding, leverage default, index tuning, price band) keep tradehall's
defaults."""
DEFAULTS: dict[str, Any] = {
    "pairs": {"min_quantity": "one step of quantity_precision", **PAIR_DEFAULTS},
    "contracts": {
        "id": "1, 2, ... in the answer's order",
        "index_source": "the imported spot pair of the contract's coins, else operator",
        **CONTRACT_DEFAULTS,
    },
}


class ImportRefused(ValueError):
    """An answer that cannot be mapped: ``field`` names where (``contracts[2].side``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@dataclass
class Imported:
    assets: dict[str, int] = field(default_factory=dict)
    """Asset name -> decimals, in order of first use."""
    pairs: list[dict[str, Any]] = field(default_factory=list)
    contracts: list[dict[str, Any]] = field(default_factory=list)

    def need(self, asset: str, places: int, where: str) -> None:
        """``asset`` must hold ``places`` decimals (for the market at ``where``)."""
        if places > MAX_DECIMALS:
            problem = f"needs {places} decimals of {asset}, more than the {MAX_DECIMALS} allowed"
            raise ImportRefused(where, problem)
        self.assets[asset] = max(self.assets.get(asset, MIN_ASSET_DECIMALS), places)


# ------------------------------------------------------------------------- reading the answers


def parse_answer(text: str, name: str) -> Any:
    """A saved answer's JSON, numbers as exact decimals."""
    try:
        return json.loads(text, parse_float=Decimal)
    except (ValueError, RecursionError) as exc:
        raise ImportRefused(name, f"not JSON: {exc}") from None


def symbol_list(answer: Any) -> list[Any]:
    """The pairs of a ``/symbols`` answer: ``{"symbols": [...]}`` (or the bare list)."""
    listed = answer.get("symbols") if isinstance(answer, dict) else answer
    if not isinstance(listed, list):
        raise ImportRefused("symbols", "must be the /sapi/v1/symbols answer: {symbols: [...]}")
    return listed


def contract_list(answer: Any) -> list[Any]:
    """The contracts of a ``/contracts`` answer: a list (or the family's ``{"data": [...]}``)."""
    listed = answer.get("data") if isinstance(answer, dict) else answer
    if not isinstance(listed, list):
        raise ImportRefused("contracts", "must be the /fapi/v1/contracts answer: [...]")
    return listed


class _Record:
    """One element of an answer, read field by field; errors name ``path.field``."""

    def __init__(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise ImportRefused(path, "must be an object")
        self.values: dict[str, Any] = value
        self.path = path

    def refuse(self, name: str, problem: str) -> ImportRefused:
        return ImportRefused(f"{self.path}.{name}", problem)

    def get(self, name: str) -> Any:
        value = self.values.get(name)
        if value is None:
            raise self.refuse(name, "missing")
        return value

    def name(self, name: str) -> str:
        value = self.get(name)
        text = value.upper() if isinstance(value, str) else ""
        if not _NAME.fullmatch(text):
            raise self.refuse(name, f"must be 1 to 20 letters and digits, got {value!r}")
        return text

    def integer(self, name: str, low: int, high: int) -> int:
        value = self.get(name)
        whole_text = isinstance(value, str) and value.isascii() and value.isdigit()
        whole_number = isinstance(value, Decimal) and value == value.to_integral_value()
        if whole_text or whole_number:
            value = int(value)
        if type(value) is not int or not low <= value <= high:
            raise self.refuse(name, f"must be a whole number {low}..{high}, got {value!r}")
        return value

    def decimal(self, name: str, places: int) -> Decimal:
        """A non-negative decimal with at most ``places`` decimals (a number or a string)."""
        value = self.get(name)
        try:
            number = Decimal(value) if isinstance(value, int | str | Decimal) else None
        except InvalidOperation:
            number = None
        if isinstance(value, bool) or number is None or not number.is_finite() or number < 0:
            raise self.refuse(name, f"must be a non-negative decimal number, got {value!r}")
        if number.adjusted() > MAX_MAGNITUDE:
            raise self.refuse(name, f"is too large: {value!r}")
        if _places(number) > places:
            raise self.refuse(name, f"has more than {places} decimals: {_plain(number)}")
        return number


def _places(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _plain(value: Decimal) -> str:
    return f"{value.normalize():f}"


# ------------------------------------------------------------------------- mapping


def import_markets(symbols: list[Any] | None, contracts: list[Any] | None) -> Imported:
    """The configuration's assets, pairs and contracts from the answers' lists."""
    if symbols is None:
        raise ImportRefused(
            "symbols",
            "a tradehall configuration needs at least one spot pair: give the /sapi/v1/symbols"
            " answer (--symbols) as well",
        )
    if not symbols:
        raise ImportRefused("symbols", "lists no pair; a configuration needs at least one")
    out = Imported()
    for i, value in enumerate(symbols):
        _pair(out, _Record(value, f"symbols[{i}]"))
    for i, value in enumerate(contracts or ()):
        _contract(out, _Record(value, f"contracts[{i}]"), i + 1)
    return out


def _pair(out: Imported, record: _Record) -> None:
    symbol = record.name("symbol")
    if any(p["symbol"] == symbol for p in out.pairs):
        raise record.refuse("symbol", f"duplicate pair {symbol!r}")
    base, quote = record.name("baseAsset"), record.name("quoteAsset")
    if base == quote:
        raise record.refuse("quoteAsset", f"must differ from baseAsset (both are {base!r})")
    price_precision = record.integer("pricePrecision", 0, MAX_DECIMALS)
    quantity_precision = record.integer("quantityPrecision", 0, MAX_DECIMALS)
    out.need(base, quantity_precision, f"{record.path}.quantityPrecision")
    out.need(quote, price_precision + quantity_precision, f"{record.path}.pricePrecision")
    step = Decimal(1).scaleb(-quantity_precision)
    out.pairs.append(
        {
            "symbol": symbol,
            "base": base,
            "quote": quote,
            "price_precision": price_precision,
            "quantity_precision": quantity_precision,
            "min_quantity": _plain(step),
            **PAIR_DEFAULTS,
        }
    )


def _contract(out: Imported, record: _Record, contract_id: int) -> None:
    raw = record.get("symbol")
    symbol = raw.upper() if isinstance(raw, str) else ""
    match = _CONTRACT.fullmatch(symbol)
    if match is None:
        raise record.refuse("symbol", f"must be <TYPE>-<BASE>-<QUOTE>, got {raw!r}")
    kind, base, quote = match.groups()
    for name, letter in (("type", record.values.get("type", "E")), ("symbol", kind)):
        if letter != "E":
            problem = f"only perpetual contracts (E) can be served, got {letter!r}"
            raise record.refuse(name, problem)
    if any(c["symbol"] == symbol for c in out.contracts):
        raise record.refuse("symbol", f"duplicate contract {symbol!r}")
    side = record.integer("side", 0, 1)
    inverse = side == 0
    trading = record.integer("status", 0, 1) == 1
    multiplier = record.decimal("multiplier", MAX_DECIMALS)
    if multiplier <= 0:
        raise record.refuse("multiplier", "must be greater than 0")
    face_coin = record.name("multiplierCoin")
    expected = quote if inverse else base
    if face_coin != expected:
        kind_name = "an inverse" if inverse else "a linear"
        problem = f"must be {expected!r} for {kind_name} contract (side {side}), got {face_coin!r}"
        raise record.refuse("multiplierCoin", problem)
    price_precision = record.integer("pricePrecision", 0, MAX_DECIMALS)
    _contract_units(out, record, base, quote, inverse, multiplier, price_precision)
    min_volume = record.integer("minOrderVolume", 1, MAX_VOLUME)
    volumes = {
        key: record.integer(name, min_volume, MAX_VOLUME)
        for key, name in (
            ("max_limit_volume", "maxLimitVolume"),
            ("max_market_volume", "maxMarketVolume"),
        )
    }
    min_money = record.decimal("minOrderMoney", MONEY_DECIMALS)
    money = {}
    for key, name in (("max_limit_money", "maxLimitMoney"), ("max_market_money", "maxMarketMoney")):
        value = record.decimal(name, MONEY_DECIMALS)
        if value <= 0 or value < min_money:
            raise record.refuse(name, f"must be above 0 and at least minOrderMoney ({min_money})")
        money[key] = _plain(value)
    contract: dict[str, Any] = {
        "symbol": symbol,
        "id": contract_id,
        "base": base,
        "quote": quote,
        "side": "inverse" if inverse else "linear",
        "multiplier": _plain(multiplier),
        "price_precision": price_precision,
        "min_volume": min_volume,
        **volumes,
        "min_money": _plain(min_money),
        **money,
        "max_valid_order": record.integer("maxValidOrder", 1, MAX_VALID_ORDER),
        **CONTRACT_DEFAULTS,
        "trading": trading,
    }
    if _index_pair(out, base, quote, inverse) is None:
        contract["index_source"] = "operator"
    out.contracts.append(contract)


def _contract_units(
    out: Imported,
    record: _Record,
    base: str,
    quote: str,
    inverse: bool,
    multiplier: Decimal,
    price_precision: int,
) -> None:
    """The margin coin's decimals for ``multiplier x tick`` to be exact in its units (and in
    1e-8 quote, tradehall's money)."""
    where = f"{record.path}.multiplier"
    tick = Decimal(1).scaleb(-price_precision)
    if inverse:
        money_places, margin_places, margin = _places(multiplier), _places(multiplier / tick), base
    else:
        money_places = margin_places = _places(multiplier * tick)
        margin = quote
        out.need(base, 0, where)
    if money_places > MONEY_DECIMALS:
        problem = f"multiplier x tick has more than {MONEY_DECIMALS} decimals"
        raise ImportRefused(where, f"{problem} (pricePrecision {price_precision})")
    out.need(margin, margin_places, where)


def _index_pair(out: Imported, base: str, quote: str, inverse: bool) -> str | None:
    """The imported pair tradehall takes the contract's index from by default."""
    for pair in out.pairs:
        usd = inverse and quote == "USD" and pair["quote"] == "USDT"
        if pair["base"] == base and (pair["quote"] == quote or usd):
            return str(pair["symbol"])
    return None


# ------------------------------------------------------------------------- writing


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string (the values are ASCII)


def _table(header: str, values: dict[str, Any]) -> list[str]:
    return ["", f"[[{header}]]", *(f"{key} = {_toml_value(v)}" for key, v in values.items())]


def to_toml(imported: Imported, sources: list[str]) -> str:
    """The configuration text: the markets, with every other section at its default."""
    lines = [
        "# tradehall configuration: markets imported by `tradehall markets import` from",
        *(f"#   {source}" for source in sources),
        "# Not in the venue's answers, so tradehall's defaults: pair min_quantity (one step),",
        "# min_notional and fees; contract ids (in the answer's order), fees, maintenance_rate,",
        "# max_leverage and funding. Every other section is at its default (see",
        "# default_config.toml for every key).",
    ]
    for name, decimals in imported.assets.items():
        lines += _table("assets", {"name": name, "decimals": decimals})
    for pair in imported.pairs:
        lines += _table("pairs", pair)
    for contract in imported.contracts:
        lines += _table("contracts", contract)
    return "\n".join(lines) + "\n"


__all__ = [
    "DEFAULTS",
    "ImportRefused",
    "Imported",
    "contract_list",
    "import_markets",
    "parse_answer",
    "symbol_list",
    "to_toml",
]
