"""Loading and validating the TOML configuration (server settings, assets, spot pairs, margin
and perpetual futures contracts).

Every problem is reported as a ConfigError whose text is one line of the form
``<file>:<line>: <field>: <problem>``. tomllib reports lines only for syntax errors, so for
semantic errors the line is located in the raw text by ``locate_line``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from importlib import resources

from tradehall.engine.contracts import (
    HOUR_MS,
    LAST,
    MID,
    MONEY_DECIMALS,
    RATE_ONE,
    ContractSpec,
    IndexSpec,
)
from tradehall.engine.index_sources import FEED_NAME, MAX_SOURCES
from tradehall.engine.markets import (
    FEE_RATE_DECIMALS,
    AssetSpec,
    MarginSpec,
    MarketsSpec,
    PairSpec,
)
from tradehall.sim.settings import SimulationSettings
from tradehall.store.factory import database_problem
from tradehall.units import UnitsError, format_units_trimmed, to_units

BUILTIN_SOURCE = "<built-in>"

_NAME_RE = re.compile(r"[A-Z0-9]{1,20}")
_MAX_PLACES = 18
_MAX_FEE_RATE = Decimal("0.1")
_SYNCHRONOUS_LEVELS = ("full", "normal")

_TOP_KEYS = (
    "server",
    "limits",
    "websocket",
    "assets",
    "pairs",
    "margin",
    "contracts",
    "simulation",
    "admin",
    "retention",
    "sandbox",
)
_ADMIN_KEYS = ("max_deposit",)
_WEBSOCKET_KEYS = (
    "push_interval_ms",
    "heartbeat_s",
    "idle_timeout_s",
    "max_subscriptions",
    "queue_frames",
    "max_message_bytes",
)
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}")
_NAMESPACE_RULE = (
    "must be 1 to 48 letters, digits, '_', '-' or '.', starting with a letter or digit"
)
_LIMIT_KEYS = (
    "storage",
    "namespace",
    "signed_default",
    "public_per_ip",
    "global_per_ip",
    "ban_after",
    "ban_seconds",
    "self_service_per_ip",
    "self_service_global",
)
_MARGIN_KEYS = (
    "symbol",
    "max_leverage",
    "base_hourly_rate",
    "quote_hourly_rate",
    "initial_level",
    "warning_level",
    "liquidation_level",
)
_MAX_HOURLY_RATE = Decimal("0.01")
_SERVER_KEYS = (
    "host",
    "port",
    "data_dir",
    "database",
    "sqlite_synchronous",
    "rate_limits",
    "max_clock_ahead_ms",
    "drain_s",
    "admin_remote",
    "allowed_hosts",
)
_HOST_NAME_RE = re.compile(r"(\*\.)?[a-z0-9_.-]+|\[[0-9a-f:.]+\]|\*")
_ASSET_KEYS = ("name", "decimals")
_PAIR_KEYS = (
    "symbol",
    "base",
    "quote",
    "price_precision",
    "quantity_precision",
    "min_quantity",
    "min_notional",
    "maker_fee",
    "taker_fee",
    "market_orders",
    "trading",
    "price_band",
)
_CONTRACT_KEYS = (
    "symbol",
    "id",
    "base",
    "quote",
    "side",
    "multiplier",
    "price_precision",
    "min_volume",
    "max_limit_volume",
    "max_market_volume",
    "min_money",
    "max_limit_money",
    "max_market_money",
    "max_valid_order",
    "open_maker_fee",
    "open_taker_fee",
    "close_maker_fee",
    "close_taker_fee",
    "maintenance_rate",
    "default_leverage",
    "max_leverage",
    "funding_interval_hours",
    "interest_rate",
    "funding_cap",
    "index_source",
    "index_weights",
    "index_window_s",
    "index_smoothing",
    "index_depth",
    "index_band",
    "index_stale_s",
    "index_max_move",
    "price_band",
    "trading",
)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: str = "./tradehall-data"
    database: str = ""
    """Empty: SQLite in data_dir. A postgresql:// URL: PostgreSQL (see docs/storage.md)."""
    sqlite_synchronous: str = "full"
    """SQLite PRAGMA synchronous level: "full" or "normal"."""
    rate_limits: bool = True
    max_clock_ahead_ms: int = 1000
    """How far ahead of the server's clock a signed request's X-CH-TS may be (strictly less
    than this many ms); 1000 is the seed's rule."""
    admin_remote: bool = False
    """The admin API and the operator page (/admin) also answer callers off loopback (the
    admin token is still required)."""
    allowed_hosts: tuple[str, ...] = ("*",)
    """The ``Host`` header names answered: exact names, ``*.example.com``, or ``*`` (any)."""
    drain_s: int = 0
    """Seconds a stopping server (serve, engine, gateway worker) keeps serving with
    ``/readyz`` at 503 before it stops taking requests: a load balancer's time to notice."""


Rate = tuple[int, int]
"""(requests, seconds)."""
MAX_CLOCK_AHEAD_MS = 60_000
"""The widest ``max_clock_ahead_ms`` (the widest recvWindow too)."""


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """Rate limits beyond the interface document's per-key table (see api/ratelimit.py)."""

    enabled: bool = True
    storage: str = "memory://"
    """``memory://`` or a Redis URL (``redis://host:6379``) shared by several processes."""
    namespace: str = ""
    """This venue's part of every Redis key (``tradehall:<namespace>:...``); empty: the one
    derived from the store's identity (``tradehall.venue``)."""
    signed_default: Rate = (100, 2)
    """Per key, for signed endpoints the seed's table leaves open."""
    public_per_ip: Rate = (200, 2)
    global_per_ip: Rate = (2000, 10)
    ban_after: int = 50
    """Refusals (429) from one IP within 60 s beyond which it is banned."""
    ban_seconds: int = 120
    self_service_per_ip: Rate = (5, 3600)
    """Self-service accounts (``[sandbox] self_service``) one IP may create."""
    self_service_global: Rate = (100, 3600)
    """Self-service accounts every IP together may create."""


@dataclass(frozen=True, slots=True)
class WebSocketSettings:
    """The WebSocket streams (see docs/websocket.md)."""

    push_interval_ms: int = 100
    """Market pushes of one channel are coalesced: at most one per this interval."""
    heartbeat_s: int = 10
    """The server sends ``{"ping": ms}`` this often."""
    idle_timeout_s: int = 60
    """A connection that has sent nothing for this long is closed."""
    max_subscriptions: int = 100
    """Channels one connection may follow."""
    queue_frames: int = 1000
    """Frames waiting for one slow client; one more and it is dropped (closed)."""
    max_message_bytes: int = 4096
    """Larger client messages are refused with an error frame."""


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """The operator's actions (``[admin]``)."""

    max_deposit: Decimal | None = None
    """The most one deposit to a user may credit, in units of its asset, for every asset
    (None: no ceiling) ..."""
    max_deposit_by_asset: dict[str, Decimal] = field(default_factory=dict)
    """... or per asset (an asset not listed: no ceiling)."""

    def deposit_ceiling(self, asset: str) -> Decimal | None:
        return self.max_deposit_by_asset.get(asset, self.max_deposit)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """What history the store keeps (docs/storage.md, "Retention"). A horizon of 0 keeps
    that kind forever."""

    enabled: bool = True
    interval_s: int = 60
    """How often a pruning pass runs."""
    batch_rows: int = 2000
    """Rows looked at per transaction: each is short, so commits are never held up long."""
    orders_days: int = 90
    """Ended orders (spot, margin, futures) of users, counted from when they ended."""
    trades_days: int = 90
    """Trades with a user on either side."""
    ledger_days: int = 90
    """Ledger entries of users' accounts (folded into per-account checkpoints)."""
    system_ledger_hours: int = 1
    """Ledger entries of the exchange's own accounts (fees, clearing, insurance, pools,
    deposits' counterpart): one per fee and per settlement, redundant with the trades."""
    simulation_minutes: int = 30
    """Orders, trades and ledger entries of the market simulation's participants (0: as
    long as users')."""
    journal_hours: int = 24
    """Journal records the tables already hold, kept this long for audits and replay, then
    compacted away (docs/durability.md)."""


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """Self-service accounts (``[sandbox]``, docs/api.md "Self-service accounts"); their
    creation's rate limits are ``[limits] self_service_per_ip`` and ``self_service_global``."""

    self_service: bool = False
    """The public endpoints under /sandbox/v1 and the trader page's "Create a test account"."""
    spot: dict[str, Decimal] = field(default_factory=dict)
    """A new account's spot funds, by asset; empty: what ``serve --demo`` gives the demo
    account."""
    futures: dict[str, Decimal] = field(default_factory=dict)
    """Its futures funds, by margin coin; empty: the demo account's (a tenth of its spot
    funding of each margin coin)."""
    faucet_per_day: int = 3
    """Faucet top-ups an account may take per UTC day."""
    max_accounts: int = 1000
    """Self-service accounts whose key is live (not expired, not revoked) at most."""
    key_expiry_s: int = 7 * 86_400
    """A self-service key unused (no signed request) for this long is refused, then revoked."""


MIN_HISTORY_DAYS = 7
"""The shortest horizon for users' orders and trades: the v3 history endpoints' window."""


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerConfig
    markets: MarketsSpec
    source: str
    """The file path the configuration came from, or "<built-in>"."""
    limits: LimitSettings = LimitSettings()
    websocket: WebSocketSettings = WebSocketSettings()
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    admin: AdminSettings = field(default_factory=AdminSettings)
    retention: RetentionSettings = RetentionSettings()
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)


class ConfigError(Exception):
    """A configuration problem; ``str(err)`` is one line: ``<file>:<line>: <field>: <problem>``.

    The line is omitted when unknown, the field when the problem is not about one field
    (an unreadable file).
    """

    def __init__(
        self, source: str, problem: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem
        where = source if line is None else f"{source}:{line}"
        super().__init__(": ".join(part for part in (where, field, problem) if part))


# --- entry points ---------------------------------------------------------------------------


def builtin_config_text() -> str:
    """The built-in configuration file: the default, and the template to copy and edit."""
    return resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load the configuration file at ``path``, or the built-in default when ``path`` is None."""
    if path is None:
        return parse_config(builtin_config_text(), BUILTIN_SOURCE)
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ConfigError(source, f"cannot read file: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(source, f"not valid UTF-8 (byte offset {err.start})") from None
    return parse_config(text, source)


def parse_config(text: str, source: str) -> Config:
    """Parse and validate configuration ``text``; ``source`` names it in errors and the result."""
    doc = _Document(source, text)
    root = _parse_toml(text, source)
    doc.check_keys(root, "", _TOP_KEYS)
    server = _server_config(doc, root.get("server", {}))
    limits = _limits(doc, root.get("limits", {}), server.rate_limits)
    assets = _assets(doc, root.get("assets"))
    pairs = _pairs(doc, root.get("pairs"), assets)
    margin = _margin(doc, root.get("margin", []), pairs)
    contracts = _contracts(doc, root.get("contracts", []), assets, pairs)
    markets = MarketsSpec(assets=assets, pairs=pairs, margin=margin, contracts=contracts)
    websocket = _websocket(doc, root.get("websocket", {}))
    admin = _admin(doc, root.get("admin", {}), assets)
    from tradehall.config_simulation import parse_simulation  # it builds on this module

    simulation = parse_simulation(source, text, root.get("simulation", {}), markets)
    retention = _retention(doc, root.get("retention", {}))
    from tradehall.config_sandbox import parse_sandbox  # it builds on this module

    sandbox = parse_sandbox(doc, root.get("sandbox", {}), markets, admin)
    return Config(
        server=server,
        markets=markets,
        source=source,
        limits=limits,
        websocket=websocket,
        simulation=simulation,
        admin=admin,
        retention=retention,
        sandbox=sandbox,
    )


# --- locating lines ---------------------------------------------------------------------------

_ARRAY_HEADER_RE = re.compile(r"\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(?:#.*)?")
_TABLE_HEADER_RE = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?")
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
_FIELD_RE = re.compile(r"([A-Za-z0-9_-]+)(?:\[(\d+)\])?(?:\.(.+))?")


def locate_line(
    text: str, table: str, index: int | None = None, key: str | None = None
) -> int | None:
    """The 1-based line of ``table[index].key`` (or ``table.key`` when ``index`` is None).

    Finds the (index+1)-th ``[[table]]`` header (or the ``[table]`` header), then the first
    line after it, before the next header, that assigns ``key``. Falls back to the header's
    line when the key is not there, and to a top-level ``table = ...`` line when there is no
    header. None when nothing matches.
    """
    lines = text.splitlines()
    header = _find_header(lines, table, index)
    if header is None:
        return _find_key(lines, 0, table)
    if key is not None:
        found = _find_key(lines, header + 1, key)
        if found is not None:
            return found
    return header + 1


def _header_name(line: str) -> tuple[str, bool] | None:
    """(table name, is array-of-tables) when ``line`` is a table header."""
    match = _ARRAY_HEADER_RE.fullmatch(line)
    if match:
        return _unquote(match.group(1)), True
    match = _TABLE_HEADER_RE.fullmatch(line)
    if match:
        return _unquote(match.group(1)), False
    return None


def _find_header(lines: list[str], table: str, index: int | None) -> int | None:
    """0-based index of the header line of ``table`` (its ``index``-th array element)."""
    seen = 0
    for number, line in enumerate(lines):
        header = _header_name(line)
        if header is None or header[0] != table:
            continue
        if index is None:
            return number
        if header[1]:
            if seen == index:
                return number
            seen += 1
    return None


def _find_key(lines: list[str], start: int, key: str) -> int | None:
    """1-based line assigning ``key`` at or after 0-based ``start``, before the next header."""
    pattern = re.compile(rf"\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    for number in range(start, len(lines)):
        if _header_name(lines[number]) is not None:
            return None
        if pattern.match(lines[number]):
            return number + 1
    return None


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        return name[1:-1]
    return name


def _locate_field(text: str, field: str) -> int | None:
    """The line of a field path such as ``pairs[1].quote``, ``server.port`` or ``assets``."""
    match = _FIELD_RE.fullmatch(field)
    if match is None:
        return None
    table, index, key = match.groups()
    return locate_line(text, table, None if index is None else int(index), key)


# --- TOML and typed access --------------------------------------------------------------------

_TOML_POSITION_RE = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)$")


def _parse_toml(text: str, source: str) -> dict[str, object]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise _syntax_error(err, text, source) from None


def _syntax_error(err: tomllib.TOMLDecodeError, text: str, source: str) -> ConfigError:
    """One line ``<file>:<line>: TOML syntax: <message> (column N)`` from tomllib's message."""
    message = " ".join(str(err).split()) or "invalid TOML"
    line: int | None = None
    match = _TOML_POSITION_RE.search(message)
    if match is not None:
        message = message[: match.start()]
        if match.group(1) is None:
            line = max(1, len(text.splitlines()))
            message += " (at end of file)"
        else:
            line = int(match.group(1))
            message += f" (column {match.group(2)})"
    return ConfigError(source, message, line=line, field="TOML syntax")


@dataclass(frozen=True, slots=True)
class _Document:
    """The configuration text being validated: builds errors that carry their line."""

    source: str
    text: str

    def error(self, field: str, problem: str) -> ConfigError:
        return ConfigError(
            self.source, problem, line=_locate_field(self.text, field), field=field or None
        )

    def check_keys(self, table: dict[str, object], path: str, allowed: tuple[str, ...]) -> None:
        """Reject keys of ``table`` that are not in ``allowed`` (typo protection)."""
        for key in table:
            if key not in allowed:
                shown = key if _BARE_KEY_RE.fullmatch(key) else json.dumps(key)
                field = f"{path}.{shown}" if path else shown
                raise self.error(field, f"unknown key{_suggestion(key, allowed)}")

    def table(self, value: object, field: str) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.error(field, f"must be a table, not {_type_name(value)}")
        return value

    def array_of_tables(
        self, value: object, field: str, *, allow_empty: bool = False
    ) -> list[dict[str, object]]:
        if value is None:
            raise self.error(field, f"missing: at least one [[{field}]] table is required")
        if not isinstance(value, list):
            raise self.error(field, f"must be an array of tables, not {_type_name(value)}")
        if not value and not allow_empty:
            raise self.error(field, f"must not be empty: at least one [[{field}]] is required")
        return [self.table(item, f"{field}[{i}]") for i, item in enumerate(value)]


def _suggestion(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (allowed: {', '.join(allowed)})"


_TYPE_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    str: "a string",
    list: "an array",
    dict: "a table",
}


def _type_name(value: object) -> str:
    return _TYPE_NAMES.get(type(value), f"a {type(value).__name__}")


def _plain(value: Decimal) -> str:
    """``value`` as plain decimal text (``0.0000001`` rather than ``1E-7``) when not huge."""
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and -40 <= exponent <= 40:
        return format(value, "f")
    return str(value)


@dataclass(frozen=True, slots=True)
class _Table:
    """Typed, validated access to the values of one TOML table at field path ``path``."""

    doc: _Document
    values: dict[str, object]
    path: str

    def field(self, key: str) -> str:
        return f"{self.path}.{key}"

    def error(self, key: str, problem: str) -> ConfigError:
        return self.doc.error(self.field(key), problem)

    def get(self, key: str) -> object:
        if key not in self.values:
            raise self.error(key, "missing required key")
        return self.values[key]

    def string(self, key: str, default: str | None = None) -> str:
        value = self.values.get(key, default) if default is not None else self.get(key)
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, not {_type_name(value)}")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool:
        value = self.values.get(key, default) if default is not None else self.get(key)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {_type_name(value)}")
        return value

    def integer(self, key: str, low: int, high: int, default: int | None = None) -> int:
        value = self.values.get(key, default) if default is not None else self.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, not {_type_name(value)}")
        if not low <= value <= high:
            raise self.error(key, f"must be between {low} and {high}, got {value}")
        return value

    def decimal(self, key: str) -> Decimal:
        """A string or TOML number as an exact Decimal (floats via their shortest repr)."""
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(key, f"must be a decimal string or number, not {_type_name(value)}")
        try:
            result = Decimal(repr(value) if isinstance(value, float) else value)
        except InvalidOperation:
            raise self.error(key, f"not a decimal number: {value!r}") from None
        if not result.is_finite():
            raise self.error(key, f"must be a finite number, got {value!r}")
        return result

    def units(self, key: str, value: Decimal, places: int, why: str) -> int:
        """``value`` in integer units of 10**-places; ``why`` explains where ``places`` is from."""
        try:
            return to_units(value, places)
        except UnitsError as err:
            if err.precision:
                problem = f"{_plain(value)} has more than {places} decimal places ({why})"
                raise self.error(key, problem) from None
            raise self.error(key, f"{_plain(value)}: {err}") from None


# --- sections ---------------------------------------------------------------------------------


def _server_config(doc: _Document, value: object) -> ServerConfig:
    table = _Table(doc, doc.table(value, "server"), "server")
    doc.check_keys(table.values, "server", _SERVER_KEYS)
    defaults = ServerConfig()
    host = table.string("host", defaults.host)
    if not host.strip():
        raise table.error("host", "must not be empty")
    data_dir = table.string("data_dir", defaults.data_dir)
    if not data_dir.strip():
        raise table.error("data_dir", "must not be empty")
    database = table.string("database", defaults.database)
    problem = database_problem(database)
    if problem is not None:
        raise table.error("database", problem)
    synchronous = table.string("sqlite_synchronous", defaults.sqlite_synchronous)
    if synchronous not in _SYNCHRONOUS_LEVELS:
        choices = " or ".join(repr(level) for level in _SYNCHRONOUS_LEVELS)
        raise table.error("sqlite_synchronous", f"must be {choices}, got {synchronous!r}")
    return ServerConfig(
        host=host,
        port=table.integer("port", 1, 65535, defaults.port),
        data_dir=data_dir,
        database=database,
        sqlite_synchronous=synchronous,
        rate_limits=table.boolean("rate_limits", defaults.rate_limits),
        max_clock_ahead_ms=table.integer(
            "max_clock_ahead_ms", 1, MAX_CLOCK_AHEAD_MS, defaults.max_clock_ahead_ms
        ),
        admin_remote=table.boolean("admin_remote", defaults.admin_remote),
        allowed_hosts=_allowed_hosts(table, defaults.allowed_hosts),
        drain_s=table.integer("drain_s", 0, 120, defaults.drain_s),
    )


def _allowed_hosts(table: _Table, default: tuple[str, ...]) -> tuple[str, ...]:
    value = table.values.get("allowed_hosts")
    if value is None:
        return default
    if not isinstance(value, list) or not value:
        raise table.error("allowed_hosts", "must be a non-empty array of host names")
    hosts = []
    for item in value:
        if not isinstance(item, str) or not _HOST_NAME_RE.fullmatch(item.lower()):
            raise table.error(
                "allowed_hosts",
                f"{item!r} is not a host name: give names without scheme, port or path"
                ' ("exchange.example.com", "*.example.com", "127.0.0.1", "[::1]", or "*")',
            )
        hosts.append(item.lower())
    return tuple(hosts)


def _rate(table: _Table, key: str, default: Rate) -> Rate:
    value = table.values.get(key)
    if value is None:
        return default
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise table.error(key, "must be [requests, seconds], two positive integers")
    return (value[0], value[1])


def _limits(doc: _Document, value: object, enabled: bool) -> LimitSettings:
    table = _Table(doc, doc.table(value, "limits"), "limits")
    doc.check_keys(table.values, "limits", _LIMIT_KEYS)
    defaults = LimitSettings()
    storage = table.string("storage", defaults.storage)
    if not storage.startswith(("memory://", "redis://", "rediss://")):
        raise table.error("storage", "must be memory:// or a redis:// URL")
    namespace = table.string("namespace", defaults.namespace)
    if "namespace" in table.values and not _NAMESPACE_RE.fullmatch(namespace):
        raise table.error("namespace", _NAMESPACE_RULE)
    return LimitSettings(
        enabled=enabled,
        storage=storage,
        namespace=namespace,
        signed_default=_rate(table, "signed_default", defaults.signed_default),
        public_per_ip=_rate(table, "public_per_ip", defaults.public_per_ip),
        global_per_ip=_rate(table, "global_per_ip", defaults.global_per_ip),
        ban_after=table.integer("ban_after", 1, 1_000_000, defaults.ban_after),
        ban_seconds=table.integer("ban_seconds", 1, 86_400 * 30, defaults.ban_seconds),
        self_service_per_ip=_rate(table, "self_service_per_ip", defaults.self_service_per_ip),
        self_service_global=_rate(table, "self_service_global", defaults.self_service_global),
    )


def _websocket(doc: _Document, value: object) -> WebSocketSettings:
    table = _Table(doc, doc.table(value, "websocket"), "websocket")
    doc.check_keys(table.values, "websocket", _WEBSOCKET_KEYS)
    d = WebSocketSettings()
    return WebSocketSettings(
        push_interval_ms=table.integer("push_interval_ms", 10, 60_000, d.push_interval_ms),
        heartbeat_s=table.integer("heartbeat_s", 1, 3600, d.heartbeat_s),
        idle_timeout_s=table.integer("idle_timeout_s", 2, 86_400, d.idle_timeout_s),
        max_subscriptions=table.integer("max_subscriptions", 1, 10_000, d.max_subscriptions),
        queue_frames=table.integer("queue_frames", 1, 1_000_000, d.queue_frames),
        max_message_bytes=table.integer("max_message_bytes", 256, 1 << 20, d.max_message_bytes),
    )


def _admin(doc: _Document, value: object, assets: dict[str, AssetSpec]) -> AdminSettings:
    """``max_deposit``: one ceiling for every asset (``"1000000"``), or a table of ceilings
    by asset (``{ USDT = "1000000", BTC = "20" }``)."""
    table = _Table(doc, doc.table(value, "admin"), "admin")
    doc.check_keys(table.values, "admin", _ADMIN_KEYS)
    raw = table.values.get("max_deposit")
    if raw is None:
        return AdminSettings()
    if not isinstance(raw, dict):
        return AdminSettings(max_deposit=_ceiling(table, "max_deposit"))
    by_asset = _Table(doc, raw, "admin.max_deposit")
    ceilings: dict[str, Decimal] = {}
    for name in raw:
        if name.upper() not in assets:
            raise by_asset.error(name, f"unknown asset {name!r}")
        ceilings[name.upper()] = _ceiling(by_asset, name)
    return AdminSettings(max_deposit_by_asset=ceilings)


def _ceiling(table: _Table, key: str) -> Decimal:
    value = table.decimal(key)
    if value <= 0:
        raise table.error(key, f"must be above 0, got {_plain(value)}")
    return value


def asset_amounts(
    parent: _Table, key: str, markets: MarketsSpec, *, coins: bool
) -> dict[str, Decimal]:
    """``parent``'s ``key``: a table ``{ASSET = "amount"}`` of this exchange's assets (with
    ``coins``, of its margin coins), amounts not negative (``[simulation.reset]``,
    ``[sandbox]``)."""
    raw = parent.values.get(key, {})
    table = _Table(parent.doc, parent.doc.table(raw, parent.field(key)), parent.path)
    allowed = {c.margin_coin for c in markets.contracts.values()} if coins else markets.assets
    out: dict[str, Decimal] = {}
    for asset in table.values:
        if asset.upper() not in allowed:
            what = "a margin coin" if coins else "an asset"
            raise parent.error(key, f"{asset!r} is not {what} of this exchange")
        amount = table.decimal(asset)
        if amount < 0:
            raise parent.error(key, f"{asset}: must not be negative, got {_plain(amount)}")
        out[asset.upper()] = amount
    return out


_RETENTION_KEYS = (
    "journal_hours",
    "enabled",
    "interval_s",
    "batch_rows",
    "orders_days",
    "trades_days",
    "ledger_days",
    "system_ledger_hours",
    "simulation_minutes",
)
_MAX_DAYS = 36_500


def _horizon(table: _Table, key: str, default: int, low: int, high: int, why: str) -> int:
    """0 (keep forever) or a horizon within [low, high]."""
    value = table.integer(key, 0, high, default)
    if 0 < value < low:
        raise table.error(key, f"must be 0 (keep forever) or at least {low} ({why}), got {value}")
    return value


def _retention(doc: _Document, value: object) -> RetentionSettings:
    table = _Table(doc, doc.table(value, "retention"), "retention")
    doc.check_keys(table.values, "retention", _RETENTION_KEYS)
    d = RetentionSettings()
    window = "the history endpoints' 7-day window"
    return RetentionSettings(
        enabled=table.boolean("enabled", d.enabled),
        interval_s=table.integer("interval_s", 1, 86_400, d.interval_s),
        batch_rows=table.integer("batch_rows", 100, 100_000, d.batch_rows),
        orders_days=_horizon(
            table, "orders_days", d.orders_days, MIN_HISTORY_DAYS, _MAX_DAYS, window
        ),
        trades_days=_horizon(
            table, "trades_days", d.trades_days, MIN_HISTORY_DAYS, _MAX_DAYS, window
        ),
        ledger_days=_horizon(table, "ledger_days", d.ledger_days, 1, _MAX_DAYS, "a day"),
        system_ledger_hours=_horizon(
            table, "system_ledger_hours", d.system_ledger_hours, 1, _MAX_DAYS * 24, "an hour"
        ),
        simulation_minutes=_horizon(
            table, "simulation_minutes", d.simulation_minutes, 1, _MAX_DAYS * 1440, "a minute"
        ),
        journal_hours=_horizon(
            table, "journal_hours", d.journal_hours, 1, _MAX_DAYS * 24, "an hour"
        ),
    )


def _level(table: _Table, key: str, default: int) -> int:
    if table.values.get(key) is None:
        return default
    value = table.decimal(key)
    if not Decimal(1) < value <= Decimal(100):
        raise table.error(key, f"must be above 1 and at most 100, got {_plain(value)}")
    return table.units(key, value, 4, "risk levels have 4 decimal places")


def _hourly_rate(table: _Table, key: str, default: int) -> int:
    if table.values.get(key) is None:
        return default
    value = table.decimal(key)
    if not 0 <= value <= _MAX_HOURLY_RATE:
        raise table.error(key, f"must be between 0 and {_MAX_HOURLY_RATE} per hour")
    return table.units(key, value, 8, "interest rates are in units of 1e-8 per hour")


def _margin(doc: _Document, value: object, pairs: dict[str, PairSpec]) -> dict[str, MarginSpec]:
    specs: dict[str, MarginSpec] = {}
    for i, values in enumerate(doc.array_of_tables(value, "margin", allow_empty=True)):
        table = _Table(doc, values, f"margin[{i}]")
        doc.check_keys(values, table.path, _MARGIN_KEYS)
        symbol = table.string("symbol").upper()
        if symbol not in pairs:
            raise table.error("symbol", f"unknown pair {symbol!r}")
        if symbol in specs:
            raise table.error("symbol", f"duplicate margin pair {symbol!r}")
        defaults = MarginSpec(symbol)
        spec = MarginSpec(
            symbol=symbol,
            max_leverage=table.integer("max_leverage", 2, 100, defaults.max_leverage),
            base_hourly_rate=_hourly_rate(table, "base_hourly_rate", defaults.base_hourly_rate),
            quote_hourly_rate=_hourly_rate(table, "quote_hourly_rate", defaults.quote_hourly_rate),
            initial_level=_level(table, "initial_level", defaults.initial_level),
            warning_level=_level(table, "warning_level", defaults.warning_level),
            liquidation_level=_level(table, "liquidation_level", defaults.liquidation_level),
        )
        if not spec.initial_level > spec.warning_level > spec.liquidation_level:
            raise table.error(
                "warning_level", "levels must satisfy initial > warning > liquidation"
            )
        specs[symbol] = spec
    return specs


def _name(table: _Table, key: str) -> str:
    """An asset name or symbol: upper-cased, 1..20 characters of A-Z and 0-9."""
    name = table.string(key).upper()
    if not _NAME_RE.fullmatch(name):
        raise table.error(key, f"must be 1 to 20 characters A-Z and 0-9, got {name!r}")
    return name


def _assets(doc: _Document, value: object) -> dict[str, AssetSpec]:
    assets: dict[str, AssetSpec] = {}
    for i, values in enumerate(doc.array_of_tables(value, "assets")):
        table = _Table(doc, values, f"assets[{i}]")
        doc.check_keys(values, table.path, _ASSET_KEYS)
        name = _name(table, "name")
        if name in assets:
            raise table.error("name", f"duplicate asset {name!r}")
        assets[name] = AssetSpec(name=name, decimals=table.integer("decimals", 0, _MAX_PLACES))
    return assets


def _pairs(doc: _Document, value: object, assets: dict[str, AssetSpec]) -> dict[str, PairSpec]:
    pairs: dict[str, PairSpec] = {}
    for i, values in enumerate(doc.array_of_tables(value, "pairs")):
        table = _Table(doc, values, f"pairs[{i}]")
        doc.check_keys(values, table.path, _PAIR_KEYS)
        pair = _pair(table, assets)
        if pair.symbol in pairs:
            raise table.error("symbol", f"duplicate symbol {pair.symbol!r}")
        pairs[pair.symbol] = pair
    return pairs


def _asset_ref(table: _Table, key: str, assets: dict[str, AssetSpec]) -> AssetSpec:
    name = table.string(key).upper()
    if name not in assets:
        raise table.error(key, f"unknown asset {name!r}")
    return assets[name]


def _pair(table: _Table, assets: dict[str, AssetSpec]) -> PairSpec:
    symbol = _name(table, "symbol")
    base = _asset_ref(table, "base", assets)
    quote = _asset_ref(table, "quote", assets)
    if base.name == quote.name:
        raise table.error("quote", f"must differ from base (both are {base.name!r})")
    price_precision = table.integer("price_precision", 0, _MAX_PLACES)
    quantity_precision = table.integer("quantity_precision", 0, _MAX_PLACES)
    _check_exact_amounts(table, base, quote, price_precision, quantity_precision)
    return PairSpec(
        symbol=symbol,
        base=base.name,
        quote=quote.name,
        price_precision=price_precision,
        quantity_precision=quantity_precision,
        min_quantity=_min_quantity(table, quantity_precision),
        min_notional=_min_notional(table, quote),
        maker_fee=_fee_rate(table, "maker_fee"),
        taker_fee=_fee_rate(table, "taker_fee"),
        market_orders=table.boolean("market_orders", True),
        trading=table.boolean("trading", True),
        base_decimals=base.decimals,
        quote_decimals=quote.decimals,
        price_band=_band_rate(table, "price_band"),
    )


def _check_exact_amounts(
    table: _Table, base: AssetSpec, quote: AssetSpec, price_precision: int, quantity_precision: int
) -> None:
    """Every price x quantity, and every quantity, must be a whole number of asset units."""
    places = price_precision + quantity_precision
    if quote.decimals < places:
        raise table.error(
            "price_precision",
            f"price_precision + quantity_precision = {places} exceeds the {quote.decimals} "
            f"decimals of quote asset {quote.name}; every price x quantity must be exact "
            f"in integer {quote.name} units",
        )
    if base.decimals < quantity_precision:
        raise table.error(
            "quantity_precision",
            f"quantity_precision = {quantity_precision} exceeds the {base.decimals} decimals "
            f"of base asset {base.name}; every quantity must be exact in integer "
            f"{base.name} units",
        )


def _min_quantity(table: _Table, quantity_precision: int) -> int:
    """In lots of 10**-quantity_precision base."""
    value = table.decimal("min_quantity")
    if value <= 0:
        raise table.error("min_quantity", f"must be greater than 0, got {_plain(value)}")
    why = f"quantity_precision is {quantity_precision}"
    return table.units("min_quantity", value, quantity_precision, why)


def _min_notional(table: _Table, quote: AssetSpec) -> int:
    """In units of the quote asset."""
    value = table.decimal("min_notional")
    if value < 0:
        raise table.error("min_notional", f"must not be negative, got {_plain(value)}")
    why = f"quote asset {quote.name} has {quote.decimals} decimals"
    return table.units("min_notional", value, quote.decimals, why)


def _fee_rate(table: _Table, key: str) -> int:
    """In units of 10**-FEE_RATE_DECIMALS."""
    value = table.decimal(key)
    if not 0 <= value < _MAX_FEE_RATE:
        problem = f"must be at least 0 and less than {_MAX_FEE_RATE}, got {_plain(value)}"
        raise table.error(key, problem)
    why = f"fee rates are in units of 1e-{FEE_RATE_DECIMALS}"
    return table.units(key, value, FEE_RATE_DECIMALS, why)


# --- perpetual futures contracts -----------------------------------------------------------------

_CONTRACT_SYMBOL_RE = re.compile(r"([A-Z0-9]+)-([A-Z0-9]{1,20})-([A-Z0-9]{1,20})")
_CONTRACT_TYPES = ("E",)
"""Contract type letters accepted in a symbol: E, perpetual."""
_CONTRACT_SIDES = ("linear", "inverse")
_OPERATOR_INDEX = "operator"
_MAX_CONTRACT_ID = 10_000
_MAX_VOLUME = 10**12
_MAX_LEVERAGE = 125
_MAX_VALID_ORDER = 1_000
_MAX_MAINTENANCE_RATE = Decimal("0.5")
_MAX_INTEREST_RATE = Decimal("0.01")
_MAX_FUNDING_CAP = Decimal("0.1")
_CONTRACT_DEFAULTS: dict[str, object] = {
    "max_valid_order": 200,
    "funding_interval_hours": 8,
    "interest_rate": "0.0001",
    "funding_cap": "0.0075",
    "trading": True,
}
"""Defaults of the optional contract keys (``default_leverage`` and ``index_source`` have
derived defaults: ``min(10, max_leverage)`` and the spot pair of the contract's coins)."""
_DEFAULT_LEVERAGE = 10
_RATE_WHY = f"rates are in units of 1e-{FEE_RATE_DECIMALS}"


def _contracts(
    doc: _Document, value: object, assets: dict[str, AssetSpec], pairs: dict[str, PairSpec]
) -> dict[str, ContractSpec]:
    specs: dict[str, ContractSpec] = {}
    ids: dict[int, str] = {}
    for i, values in enumerate(doc.array_of_tables(value, "contracts", allow_empty=True)):
        table = _Table(doc, {**_CONTRACT_DEFAULTS, **values}, f"contracts[{i}]")
        doc.check_keys(values, table.path, _CONTRACT_KEYS)
        spec = _contract(table, assets, pairs)
        if spec.symbol in specs:
            raise table.error("symbol", f"duplicate contract {spec.symbol!r}")
        if spec.id in ids:
            raise table.error("id", f"duplicate contract id {spec.id} (also {ids[spec.id]})")
        specs[spec.symbol] = spec
        ids[spec.id] = spec.symbol
    return specs


def _contract(
    table: _Table, assets: dict[str, AssetSpec], pairs: dict[str, PairSpec]
) -> ContractSpec:
    symbol, kind = _contract_symbol(table)
    contract_id = table.integer("id", 1, _MAX_CONTRACT_ID)
    side = table.string("side").lower()
    if side not in _CONTRACT_SIDES:
        raise table.error("side", f"must be 'linear' or 'inverse', got {side!r}")
    inverse = side == "inverse"
    base = _asset_ref(table, "base", assets)
    # An inverse contract is quoted in a currency that need not be an asset (USD).
    quote = _name(table, "quote") if inverse else _asset_ref(table, "quote", assets).name
    if quote == base.name:
        raise table.error("quote", f"must differ from base (both are {quote!r})")
    expected = f"{kind}-{base.name}-{quote}"
    if symbol != expected:
        raise table.error("symbol", f"must be {expected!r} (<TYPE>-<BASE>-<QUOTE>), got {symbol!r}")
    margin = base if inverse else assets[quote]
    multiplier = table.decimal("multiplier")
    if multiplier <= 0:
        raise table.error("multiplier", f"must be greater than 0, got {_plain(multiplier)}")
    price_precision = table.integer("price_precision", 0, _MAX_PLACES)
    min_volume, max_limit_volume, max_market_volume = _volume_limits(table)
    min_money, max_limit_money, max_market_money = _money_limits(table, quote)
    max_leverage = table.integer("max_leverage", 1, _MAX_LEVERAGE)
    default_leverage = table.integer(
        "default_leverage", 1, _MAX_LEVERAGE, min(_DEFAULT_LEVERAGE, max_leverage)
    )
    if default_leverage > max_leverage:
        problem = f"must be at most max_leverage ({max_leverage}), got {default_leverage}"
        raise table.error("default_leverage", problem)
    maintenance_rate = _open_rate(table, "maintenance_rate", _MAX_MAINTENANCE_RATE)
    if maintenance_rate * max_leverage >= RATE_ONE:
        raise table.error(
            "max_leverage",
            f"maintenance_rate ({_format_rate(maintenance_rate)}) must be below 1/max_leverage"
            f" (1/{max_leverage}): a position opened at full leverage would start at or below"
            " maintenance",
        )
    hours = table.integer("funding_interval_hours", 1, 24)
    if 24 % hours:
        raise table.error(
            "funding_interval_hours", f"must divide 24 (1, 2, 3, 4, 6, 8, 12 or 24), got {hours}"
        )
    interest = table.decimal("interest_rate")
    if not 0 <= interest < _MAX_INTEREST_RATE:
        problem = f"must be at least 0 and less than {_MAX_INTEREST_RATE}, got {_plain(interest)}"
        raise table.error("interest_rate", problem)
    try:
        return ContractSpec(
            id=contract_id,
            symbol=symbol,
            type=kind,
            base=base.name,
            quote=quote,
            inverse=inverse,
            margin_coin=margin.name,
            margin_decimals=margin.decimals,
            multiplier=multiplier,
            multiplier_coin=quote if inverse else base.name,
            price_precision=price_precision,
            min_volume=min_volume,
            max_limit_volume=max_limit_volume,
            max_market_volume=max_market_volume,
            min_money=min_money,
            max_limit_money=max_limit_money,
            max_market_money=max_market_money,
            max_valid_order=table.integer("max_valid_order", 1, _MAX_VALID_ORDER),
            open_maker_fee=_fee_rate(table, "open_maker_fee"),
            open_taker_fee=_fee_rate(table, "open_taker_fee"),
            close_maker_fee=_fee_rate(table, "close_maker_fee"),
            close_taker_fee=_fee_rate(table, "close_taker_fee"),
            maintenance_rate=maintenance_rate,
            default_leverage=default_leverage,
            max_leverage=max_leverage,
            funding_interval_ms=hours * HOUR_MS,
            interest_rate=table.units("interest_rate", interest, FEE_RATE_DECIMALS, _RATE_WHY),
            funding_cap=_open_rate(table, "funding_cap", _MAX_FUNDING_CAP),
            index_source=(index_source := _index_source(table, base.name, quote, inverse, pairs)),
            trading=table.boolean("trading"),
            index=_index_spec(table, index_source),
            price_band=_band_rate(table, "price_band"),
        )
    except ValueError as err:  # multiplier x tick not exact in margin-coin or money units
        problem = str(err).removeprefix(f"{symbol}: ")
        where = f"multiplier {_plain(multiplier)}, price_precision {price_precision}"
        raise table.error("multiplier", f"{problem} ({where})") from None


def _format_rate(units: int) -> str:
    """A rate in 1e-8 units as trimmed decimal text (``500_000`` -> ``0.005``)."""
    return format_units_trimmed(units, FEE_RATE_DECIMALS)


def _contract_symbol(table: _Table) -> tuple[str, str]:
    """The upper-cased ``<TYPE>-<BASE>-<QUOTE>`` symbol and its type letter."""
    symbol = table.string("symbol").upper()
    match = _CONTRACT_SYMBOL_RE.fullmatch(symbol)
    if match is None:
        problem = f"must be <TYPE>-<BASE>-<QUOTE> such as 'E-BTC-USDT', got {symbol!r}"
        raise table.error("symbol", problem)
    kind = match.group(1)
    if kind not in _CONTRACT_TYPES:
        raise table.error(
            "symbol", f"contract type {kind!r} is not supported (only 'E', perpetual)"
        )
    return symbol, kind


def _volume_limits(table: _Table) -> tuple[int, int, int]:
    """Whole contracts: min_volume <= max_limit_volume and max_market_volume."""
    low = table.integer("min_volume", 1, _MAX_VOLUME)
    limits = [low]
    for key in ("max_limit_volume", "max_market_volume"):
        high = table.integer(key, 1, _MAX_VOLUME)
        if high < low:
            raise table.error(key, f"must be at least min_volume ({low}), got {high}")
        limits.append(high)
    return limits[0], limits[1], limits[2]


def _money_limits(table: _Table, quote: str) -> tuple[int, int, int]:
    """Order value in the quote currency, in units of 10**-MONEY_DECIMALS."""
    why = f"money is in units of 1e-{MONEY_DECIMALS} {quote}"
    low = table.decimal("min_money")
    if low < 0:
        raise table.error("min_money", f"must not be negative, got {_plain(low)}")
    limits = [table.units("min_money", low, MONEY_DECIMALS, why)]
    for key in ("max_limit_money", "max_market_money"):
        high = table.decimal(key)
        if high <= 0 or high < low:
            problem = f"must be greater than 0 and at least min_money ({_plain(low)})"
            raise table.error(key, f"{problem}, got {_plain(high)}")
        limits.append(table.units(key, high, MONEY_DECIMALS, why))
    return limits[0], limits[1], limits[2]


def _open_rate(table: _Table, key: str, high: Decimal) -> int:
    """A rate strictly between 0 and ``high``, in units of 1e-8."""
    value = table.decimal(key)
    if not 0 < value < high:
        raise table.error(key, f"must be above 0 and below {high}, got {_plain(value)}")
    return table.units(key, value, FEE_RATE_DECIMALS, _RATE_WHY)


_SPOT_WEIGHTS = ((MID, 2), (LAST, 1))
"""A spot-sourced index by default: the mid at depth, then the last trade at half its
weight (the mid decides when the two disagree)."""
_MAX_WEIGHT = 1_000
_MAX_BAND = Decimal("0.5")


def _index_spec(table: _Table, index_source: str) -> IndexSpec:
    defaults = IndexSpec()
    weights = _index_weights(table, index_source)
    smoothing = table.string("index_smoothing", "median").lower()
    if smoothing not in ("median", "mean"):
        raise table.error("index_smoothing", f"must be 'median' or 'mean', got {smoothing!r}")
    depth = table.decimal("index_depth") if "index_depth" in table.values else Decimal(10_000)
    if not 0 < depth <= 10**12:
        raise table.error("index_depth", f"must be above 0 and at most 1e12, got {_plain(depth)}")
    max_move = _band_rate(table, "index_max_move", defaults.max_move)
    return IndexSpec(
        weights=weights,
        window_ms=table.integer("index_window_s", 1, 3_600, defaults.window_ms // 1000) * 1000,
        median=smoothing == "median",
        depth_money=table.units("index_depth", depth, MONEY_DECIMALS, "8 decimals at most"),
        band=_band_rate(table, "index_band", defaults.band, zero=False),
        stale_ms=table.integer("index_stale_s", 1, 86_400, defaults.stale_ms // 1000) * 1000,
        max_move=max_move,
    )


def _index_weights(table: _Table, index_source: str) -> tuple[tuple[str, int], ...]:
    """``{mid = 2, last = 1, <feed> = 1}``: the spot market's sources (not on an operator
    index) and operator feeds by name, each with a whole weight."""
    if "index_weights" not in table.values:
        return () if index_source == _OPERATOR_INDEX else _SPOT_WEIGHTS
    value = table.values["index_weights"]
    if not isinstance(value, dict):
        raise table.error("index_weights", "must be a table of source = weight")
    weights = []
    for name, weight in value.items():
        if name in (MID, LAST) and index_source == _OPERATOR_INDEX:
            raise table.error("index_weights", f"{name!r} needs a spot index_source")
        if name not in (MID, LAST) and not FEED_NAME.fullmatch(name):
            problem = f"{name!r} is not a feed name (1-32 of a-z 0-9 _ . -)"
            raise table.error("index_weights", problem)
        if type(weight) is not int or not 1 <= weight <= _MAX_WEIGHT:
            problem = f"the weight of {name!r} must be a whole number 1..{_MAX_WEIGHT}"
            raise table.error("index_weights", problem)
        weights.append((name, weight))
    if len(weights) > MAX_SOURCES:
        raise table.error("index_weights", f"at most {MAX_SOURCES} sources")
    return tuple(weights)


def _band_rate(table: _Table, key: str, default: int = 5_000_000, *, zero: bool = True) -> int:
    """A fraction in 1e-8, from 0 (off, where ``zero``) to 0.5; 0.05 unless set."""
    if key not in table.values:
        return default
    value = table.decimal(key)
    if not (value >= 0 if zero else value > 0) or value > _MAX_BAND:
        low = "at least 0" if zero else "above 0"
        raise table.error(key, f"must be {low} and at most {_MAX_BAND}, got {_plain(value)}")
    return table.units(key, value, FEE_RATE_DECIMALS, _RATE_WHY)


def _index_source(
    table: _Table, base: str, quote: str, inverse: bool, pairs: dict[str, PairSpec]
) -> str:
    """``operator``, or a spot pair of the contract's base and quote (quote USDT for an inverse
    USD contract); by default the first such pair."""

    def matches(pair: PairSpec) -> bool:
        usd = inverse and quote == "USD" and pair.quote == "USDT"
        return pair.base == base and (pair.quote == quote or usd)

    if "index_source" not in table.values:
        found = next((p.symbol for p in pairs.values() if matches(p)), None)
        if found is None:
            raise table.error(
                "index_source",
                f"missing: no spot pair of {base}/{quote} to take the index price from;"
                f" name one or set {_OPERATOR_INDEX!r}",
            )
        return found
    source = table.string("index_source")
    if source.lower() == _OPERATOR_INDEX:
        return _OPERATOR_INDEX
    symbol = source.upper()
    pair = pairs.get(symbol)
    if pair is None:
        raise table.error(
            "index_source", f"must be {_OPERATOR_INDEX!r} or a spot pair, got {source!r}"
        )
    if not matches(pair):
        coins = f"{base}/{quote}" + (" (or quote USDT)" if inverse and quote == "USD" else "")
        problem = f"spot pair {symbol} is {pair.base}/{pair.quote}, not {coins}"
        raise table.error("index_source", problem)
    return symbol
