"""The ``[simulation]`` section of the configuration (docs/simulation.md): validated like the
rest of config.py, every problem one line naming the file, line and field. A replay file is
opened here and its format told from its first line; what runs the simulation reads it whole
before it starts (``sim.replay.with_histories``), so a bad file stops that command too."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path

from tradehall.config import (
    ConfigError,
    _Document,
    _plain,
    _Table,
    asset_amounts,
    locate_line,
)
from tradehall.engine.markets import MarketsSpec
from tradehall.sim.replay import FORMATS, ReplayError, check
from tradehall.sim.settings import (
    FaultRule,
    FaultSettings,
    MakerSettings,
    PathSettings,
    SimulationSettings,
    TakerSettings,
)

BUILTIN_PREFIX = "builtin:"
"""``replay = "builtin:btcusdt-1m.csv"`` names a file shipped in tradehall/sim/data (its
README.md lists them)."""

_KEYS = (
    "enabled",
    "seed",
    "tick_ms",
    "markets",
    "path",
    "maker",
    "taker",
    "funds",
    "history_days",
    "market",
    "faults",
    "reset",
)
_RESET_KEYS = ("spot", "futures")
_PATH_KEYS = (
    "model",
    "price",
    "drift",
    "volatility",
    "jump_rate",
    "jump_size",
    "correlation",
    "replay",
    "replay_format",
    "speed",
)
_MAKER_KEYS = (
    "levels",
    "spacing_bps",
    "depth_usd",
    "growth",
    "variation",
    "inventory_limit",
    "skew",
)
_MARKET_MAKER_KEYS = ("depth", *_MAKER_KEYS)
_MARKET_KEYS = ("symbol", *_PATH_KEYS, *_MARKET_MAKER_KEYS)
_REPLACED_MAKER_KEYS = {
    "size": "depth_usd (each side's first ten levels together, in US dollars) or, per market,"
    " depth (in its quote currency)",
    "max_inventory": "inventory_limit (in multiples of the depth)",
}
"""Keys of the unit-sized ladder before the sizes were set in quote notional."""
_TAKER_KEYS = (
    "rate",
    "size_model",
    "median_usd",
    "tail",
    "max_usd",
    "min_size",
    "max_size",
    "limit_share",
    "limit_slippage_bps",
)
_SIZE_MODELS = ("pareto", "uniform")
MAX_ORDER_USD = 10_000_000
"""The largest ``max_usd``: a taker is funded for 80 of its largest orders, which must stay
well inside an asset's supply range."""
_FAULT_KEYS = ("enabled", "seed", "rule")
_RULE_KEYS = (
    "path",
    "method",
    "latency_share",
    "latency_ms_min",
    "latency_ms_max",
    "error_before_share",
    "error_after_share",
    "burst_share",
    "burst_seconds",
    "drop_share",
    "drop_after_ms_min",
    "drop_after_ms_max",
)
_FIELD_RE = re.compile(r"(.+?)(?:\[(\d+)\])?\.([A-Za-z0-9_-]+)")


@dataclass(frozen=True, slots=True)
class _SimDocument(_Document):
    """Locates nested fields (``simulation.maker.levels``, ``simulation.market[1].price``)
    under their own table headers."""

    def error(self, field: str, problem: str) -> ConfigError:
        line = None
        match = _FIELD_RE.fullmatch(field)
        if match is not None:
            table, index, key = match.groups()
            line = locate_line(self.text, table, None if index is None else int(index), key)
            if line is None and "." in table:  # a dotted key inside [simulation]
                head, _, rest = table.partition(".")
                line = locate_line(self.text, head, None, rest)
        return ConfigError(self.source, problem, line=line, field=field)


def _number(table: _Table, key: str, default: float, low: float, high: float) -> float:
    if key not in table.values:
        return default
    value = table.decimal(key)
    if not Decimal(str(low)) <= value <= Decimal(str(high)):
        raise table.error(key, f"must be between {low:g} and {high:g}, got {_plain(value)}")
    return float(value)


def _positive(table: _Table, key: str, default: Decimal | None) -> Decimal | None:
    """A positive decimal, or ``default`` when the key is absent."""
    if key not in table.values:
        return default
    value = table.decimal(key)
    if value <= 0:
        raise table.error(key, f"must be positive, got {_plain(value)}")
    return value


def parse_simulation(
    source: str, text: str, value: object, markets: MarketsSpec
) -> SimulationSettings:
    doc = _SimDocument(source, text)
    root = _Table(doc, doc.table(value, "simulation"), "simulation")
    doc.check_keys(root.values, "simulation", _KEYS)
    symbols: tuple[str, ...] = ()
    if "markets" in root.values:
        listed = root.values["markets"]
        if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
            raise root.error("markets", "must be an array of symbols")
        symbols = tuple(s.upper() for s in listed)
        for symbol in symbols:
            _check_market(root, "markets", symbol, markets)
    base = _path(doc, root.values.get("path", {}), "simulation.path", PathSettings(), source)
    overrides: dict[str, PathSettings] = {}
    makers: dict[str, dict[str, object]] = {}
    listed_markets = root.values.get("market", [])
    for i, values in enumerate(
        doc.array_of_tables(listed_markets, "simulation.market", allow_empty=True)
    ):
        path = f"simulation.market[{i}]"
        table = _Table(doc, values, path)
        doc.check_keys(values, path, _MARKET_KEYS)
        symbol = table.string("symbol").upper()
        _check_market(table, "symbol", symbol, markets)
        if symbol in makers:
            raise table.error("symbol", f"{symbol} has two [[simulation.market]] tables")
        rest = {k: v for k, v in values.items() if k in _PATH_KEYS}
        if rest:  # a table of maker keys only leaves the market on the common path
            overrides[symbol] = _path(doc, rest, path, base, source)
        makers[symbol] = {k: v for k, v in values.items() if k in _MARKET_MAKER_KEYS}
    maker = _maker(doc, root.values.get("maker", {}), "simulation.maker", MakerSettings())
    per_market = {
        symbol: _maker(doc, values, f"simulation.market[{i}]", maker)
        for i, (symbol, values) in enumerate(makers.items())
        if values
    }
    taker = _taker(doc, root.values.get("taker", {}))
    defaults = SimulationSettings()
    return SimulationSettings(
        enabled=root.boolean("enabled", defaults.enabled),
        seed=root.integer("seed", 0, 2**63 - 1, defaults.seed),
        tick_ms=root.integer("tick_ms", 50, 60_000, defaults.tick_ms),
        markets=symbols,
        path=base,
        overrides=overrides,
        maker=maker,
        makers=per_market,
        taker=taker,
        funds=root.integer("funds", 1, 1_000, defaults.funds),
        history_days=root.integer("history_days", 0, 3_650, defaults.history_days),
        faults=_faults(doc, root.values.get("faults", {})),
        reset_spot=_balances(doc, root.values.get("reset", {}), "spot", markets, coins=False),
        reset_futures=_balances(doc, root.values.get("reset", {}), "futures", markets, coins=True),
        source=source,
    )


def _check_market(table: _Table, key: str, symbol: str, markets: MarketsSpec) -> None:
    if symbol not in markets.pairs and symbol not in markets.contracts:
        known = ", ".join([*markets.pairs, *markets.contracts])
        raise table.error(key, f"unknown market {symbol!r} (markets: {known})")


def _path(
    doc: _Document, value: object, path: str, base: PathSettings, source: str
) -> PathSettings:
    table = _Table(doc, doc.table(value, path), path)
    if path == "simulation.path":
        doc.check_keys(table.values, path, _PATH_KEYS)
    model = table.string("model", base.model) if "model" in table.values else base.model
    if model not in ("gbm", "replay"):
        raise table.error("model", f"must be 'gbm' or 'replay', got {model!r}")
    price = _positive(table, "price", base.price)
    replay = table.string("replay") if "replay" in table.values else base.replay
    fmt = table.string("replay_format", base.replay_format)
    if fmt not in FORMATS:
        raise table.error("replay_format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    replay_file = ""
    if model == "replay":
        if not replay:
            raise table.error("replay", "missing: model 'replay' needs a history file")
        replay_file = str(_replay_file(replay, source))
        try:
            check(Path(replay_file), fmt)
        except ReplayError as exc:
            raise ConfigError(exc.source, exc.problem, line=exc.line, field=exc.field) from None
    return PathSettings(
        model=model,
        price=price,
        drift=_number(table, "drift", base.drift, -10.0, 10.0),
        volatility=_number(table, "volatility", base.volatility, 0.0, 10.0),
        jump_rate=_number(table, "jump_rate", base.jump_rate, 0.0, 3600.0),
        jump_size=_number(table, "jump_size", base.jump_size, 0.0, 1.0),
        correlation=_number(table, "correlation", base.correlation, 0.0, 1.0),
        replay=replay,
        replay_format=fmt,
        replay_file=replay_file,
        speed=_number(table, "speed", base.speed, 0.001, 1_000_000.0),
    )


def _replay_file(name: str, source: str) -> Path:
    if name.startswith(BUILTIN_PREFIX):
        data = resources.files("tradehall.sim").joinpath("data", name[len(BUILTIN_PREFIX) :])
        return Path(str(data))
    path = Path(name)
    if not path.is_absolute() and not source.startswith("<"):
        path = Path(source).parent / path  # relative to the configuration file
    return path


def _maker(doc: _Document, value: object, path: str, d: MakerSettings) -> MakerSettings:
    """``[simulation.maker]`` (``d``: the defaults), or the maker keys of a
    ``[[simulation.market]]`` table (``d``: ``[simulation.maker]``)."""
    table = _Table(doc, doc.table(value, path), path)
    for key, replacement in _REPLACED_MAKER_KEYS.items():
        if key in table.values:
            raise table.error(key, f"replaced by {replacement} (docs/simulation.md)")
    if path == "simulation.maker":
        doc.check_keys(table.values, path, _MAKER_KEYS)
    return MakerSettings(
        levels=table.integer("levels", 1, 200, d.levels),
        spacing_bps=_number(table, "spacing_bps", d.spacing_bps, 0.01, 1_000.0),
        depth=_positive(table, "depth", d.depth),
        depth_usd=_positive(table, "depth_usd", d.depth_usd) or d.depth_usd,
        growth=_number(table, "growth", d.growth, 0.0, 10.0),
        variation=_number(table, "variation", d.variation, 0.0, 0.9),
        inventory_limit=_number(table, "inventory_limit", d.inventory_limit, 0.01, 1_000.0),
        skew=_number(table, "skew", d.skew, 0.0, 100.0),
    )


def _taker(doc: _Document, value: object) -> TakerSettings:
    table = _Table(doc, doc.table(value, "simulation.taker"), "simulation.taker")
    doc.check_keys(table.values, "simulation.taker", _TAKER_KEYS)
    d = TakerSettings()
    model = table.string("size_model", d.size_model)
    if model not in _SIZE_MODELS:
        raise table.error("size_model", f"must be 'pareto' or 'uniform', got {model!r}")
    keys = ("median_usd", "tail", "max_usd") if model == "uniform" else ("min_size", "max_size")
    for key in keys:
        if key in table.values:
            other = "pareto" if model == "uniform" else "uniform"
            raise table.error(key, f"applies to size_model = {other!r} (docs/simulation.md)")
    min_size = table.integer("min_size", 1, 1_000_000, d.min_size)
    max_size = table.integer("max_size", 1, 1_000_000, d.max_size)
    if max_size < min_size:
        raise table.error("max_size", f"must be at least min_size ({min_size})")
    median = _positive(table, "median_usd", d.median_usd) or d.median_usd
    largest = _positive(table, "max_usd", d.max_usd) or d.max_usd
    if largest <= median:
        raise table.error("max_usd", f"must be above median_usd ({_plain(median)})")
    if largest > MAX_ORDER_USD:
        raise table.error("max_usd", f"must be at most {MAX_ORDER_USD}, got {_plain(largest)}")
    return TakerSettings(
        rate=_number(table, "rate", d.rate, 0.0, 1_000.0),
        size_model=model,
        median_usd=median,
        tail=_number(table, "tail", d.tail, 0.5, 5.0),
        max_usd=largest,
        min_size=min_size,
        max_size=max_size,
        limit_share=_number(table, "limit_share", d.limit_share, 0.0, 1.0),
        limit_slippage_bps=_number(table, "limit_slippage_bps", d.limit_slippage_bps, 0.0, 5_000.0),
    )


def _faults(doc: _Document, value: object) -> FaultSettings:
    table = _Table(doc, doc.table(value, "simulation.faults"), "simulation.faults")
    doc.check_keys(table.values, "simulation.faults", _FAULT_KEYS)
    rules = []
    raw = table.values.get("rule", [])
    for i, values in enumerate(
        doc.array_of_tables(raw, "simulation.faults.rule", allow_empty=True)
    ):
        path = f"simulation.faults.rule[{i}]"
        rule = _Table(doc, values, path)
        doc.check_keys(values, path, _RULE_KEYS)
        d = FaultRule()
        where = rule.string("path", d.path)
        if where != "*" and not where.startswith("/"):
            raise rule.error("path", f"must be '*' or start with '/', got {where!r}")
        method = rule.string("method", "*").upper()
        if method not in ("*", "GET", "POST", "PUT", "DELETE"):
            raise rule.error("method", f"must be GET, POST, PUT or DELETE, got {method!r}")
        low = rule.integer("latency_ms_min", 0, 600_000, d.latency_ms_min)
        high = rule.integer("latency_ms_max", 0, 600_000, max(low, d.latency_ms_max))
        if high < low:
            raise rule.error("latency_ms_max", f"must be at least latency_ms_min ({low})")
        shares = {
            key: _number(rule, key, 0.0, 0.0, 1.0)
            for key in (
                "latency_share",
                "error_before_share",
                "error_after_share",
                "burst_share",
                "drop_share",
            )
        }
        drop_low = rule.integer("drop_after_ms_min", 0, 86_400_000, d.drop_after_ms_min)
        drop_high = rule.integer(
            "drop_after_ms_max", 0, 86_400_000, max(drop_low, d.drop_after_ms_max)
        )
        if drop_high < drop_low:
            raise rule.error(
                "drop_after_ms_max", f"must be at least drop_after_ms_min ({drop_low})"
            )
        if shares["error_before_share"] + shares["error_after_share"] > 1:
            raise rule.error("error_after_share", "error shares add up to more than 1")
        rules.append(
            FaultRule(
                path=where,
                method="" if method == "*" else method,
                latency_ms_min=low,
                latency_ms_max=high,
                burst_seconds=_number(rule, "burst_seconds", d.burst_seconds, 0.0, 3600.0),
                drop_after_ms_min=drop_low,
                drop_after_ms_max=drop_high,
                **shares,
            )
        )
    return FaultSettings(
        enabled=table.boolean("enabled", False),
        seed=table.integer("seed", 0, 2**63 - 1, 0),
        rules=tuple(rules),
    )


def _balances(
    doc: _Document, value: object, key: str, markets: MarketsSpec, *, coins: bool
) -> dict[str, Decimal]:
    """``[simulation.reset]`` ``spot``/``futures``: ``{ASSET = "amount"}``."""
    reset = _Table(doc, doc.table(value, "simulation.reset"), "simulation.reset")
    doc.check_keys(reset.values, "simulation.reset", _RESET_KEYS)
    return asset_amounts(reset, key, markets, coins=coins)
