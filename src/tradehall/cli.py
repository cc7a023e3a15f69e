"""The operator's command line.

While a server runs on the data folder, the operator commands go through its local admin API;
with no server they open the store themselves (holding the folder's lock), so state is never
changed behind a running server's back. Every command takes ``--json`` for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from tradehall import __version__, adminlog, logs, market_import, sandbox, server
from tradehall import operations as ops
from tradehall.client import AdminClient, ApiError
from tradehall.cluster import (
    DEFAULT_BATCH_DELAY,
    DEFAULT_BATCH_MAX,
    DEFAULT_NATS_URL,
    DEFAULT_READ_CACHE_MS,
    DEFAULT_SUBJECT,
    DEFAULT_TIMEOUT,
    HISTORY_WAIT_S,
    LinkError,
)
from tradehall.codes import Code, Reject
from tradehall.config import Config, ConfigError, builtin_config_text, load_config, parse_config
from tradehall.datadir import DataDir, DataDirBusy
from tradehall.engine.commands import MAX_INTEREST_HOURS
from tradehall.exchange import Exchange
from tradehall.projector import attach_inline, open_exchange
from tradehall.retention import directly, prune_pass
from tradehall.secretbox import ENV_VAR as SECRET_KEY_ENV
from tradehall.secretbox import SecretBox, SecretKeyError
from tradehall.sim.replay import ReplayError, with_histories
from tradehall.sim.settings import with_speed
from tradehall.store import dump
from tradehall.store.base import Store, StoreError, StoreRefused
from tradehall.store.factory import ENV_VAR, database_problem, open_store, store_identity
from tradehall.store.journaled import JournaledStore
from tradehall.units import is_plain_decimal

# Every Typer here has plain help text (rich_markup_mode=None): Rich markup would take the
# "[default: ...]" of a help string for a tag and drop it.
app = typer.Typer(
    help="tradehall: a self-hostable crypto exchange.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
user_app = typer.Typer(help="Manage users.", no_args_is_help=True, rich_markup_mode=None)
key_app = typer.Typer(help="Manage API keys.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(user_app, name="user")
app.add_typer(key_app, name="key")
db_app = typer.Typer(
    help="Manage the store: schema upgrades, export and import, sizes, pruning, vacuum.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(db_app, name="db")
sim_app = typer.Typer(
    help="The market simulation (docs/simulation.md).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(sim_app, name="sim")
account_app = typer.Typer(
    help="Sandbox account controls.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(account_app, name="account")
funding_app = typer.Typer(
    help="Futures funding (time control).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(funding_app, name="funding")
interest_app = typer.Typer(
    help="Margin interest (time control).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(interest_app, name="interest")
config_app = typer.Typer(
    help="The configuration file (README, Configuration).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(config_app, name="config")
# `tradehall markets` lists the markets; `tradehall markets import` is its one subcommand.
markets_app = typer.Typer(rich_markup_mode=None)
app.add_typer(markets_app, name="markets")

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data folder [default: from config, ./tradehall-data]"),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML config file [default: built-in]")
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database",
        envvar=ENV_VAR,
        help="PostgreSQL URL (postgresql://...) [default: from config, else SQLite in the data"
        " folder]",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _log_format(value: str) -> str:
    if value not in ("text", "json"):
        raise typer.BadParameter("text or json")
    return value


LogFormatOpt = Annotated[
    str,
    typer.Option(
        "--log-format",
        help="Logs on stderr: text, or json (one object per line; docs/operations.md).",
        callback=lambda value: _log_format(value),
    ),
]
AccessLogOpt = Annotated[
    bool,
    typer.Option("--access-log", help="Log every answered request (logger tradehall.access)."),
]
UserOpt = Annotated[int, typer.Option("--user", help="User id.")]


def _decimal_text(value: str | None) -> str | None:
    """A malformed number is a usage error (exit status 2), as a malformed integer is; what
    the number may be (positive, within the asset's decimals) the command checks."""
    if value is not None and not is_plain_decimal(value):
        raise typer.BadParameter(f"{value!r} is not a plain decimal number (e.g. 12.5)")
    return value


def _not_empty(value: str | None) -> str | None:
    """An option whose absence widens the action (every contract, the whole index) refuses an
    empty value: that is an unset shell variable, not a wish for the wider action."""
    if value is not None and not value.strip():
        raise typer.BadParameter("must not be empty (leave the option out instead)")
    return value


SPOT_MARGIN_FUTURES = ("spot", "margin", "futures")


def _account_kind(value: str | None) -> str | None:
    if value is not None and value.lower() not in SPOT_MARGIN_FUTURES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(SPOT_MARGIN_FUTURES)}")
    return value


AmountOpt = Annotated[str, typer.Option(help="Decimal amount.", callback=_decimal_text)]


class CliError(Exception):
    def __init__(self, msg: str, code: int | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.code = code


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _load(
    config: Path | None, data_dir: Path | None, database: str | None = None
) -> tuple[Config, DataDir]:
    """The configuration, with ``database`` (from --database or TRADEHALL_DATABASE) overriding
    the file's, and the data folder."""
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise CliError(f"configuration error: {exc}", int(Code.BAD_PARAM)) from None
    if database:
        problem = database_problem(database)
        if problem is not None:
            raise CliError(f"--database / {ENV_VAR}: {problem}", int(Code.BAD_PARAM))
        cfg = replace(cfg, server=replace(cfg.server, database=database))
    return cfg, DataDir(data_dir if data_dir is not None else cfg.server.data_dir)


def _open_store(cfg: Config, datadir: DataDir) -> JournaledStore:
    return open_store(cfg.server.database, datadir.path, synchronous=cfg.server.sqlite_synchronous)


def _emit(result: Any, as_json: bool, human: Callable[[Any], str] | None = None) -> None:
    if as_json:
        typer.echo(json.dumps(result))
    else:
        typer.echo(human(result) if human else _pretty(result))


def _pretty(value: Any, indent: str = "") -> str:
    """Plain text for people: nested keys indented, list items dashed."""
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                lines.append(f"{indent}{k}:\n{_pretty(v, indent + '  ')}")
            else:
                lines.append(f"{indent}{k}: {_scalar(v)}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(
            f"{indent}-\n{_pretty(v, indent + '  ')}"
            if isinstance(v, dict)
            else f"{indent}- {_scalar(v)}"
            for v in value
        )
    return f"{indent}{_scalar(value)}"


def _scalar(value: Any) -> str:
    """As --json writes it for true, false and null (not Python's True, False, None)."""
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _fail(exc: CliError, as_json: bool) -> NoReturn:
    if as_json:
        _print_error(exc.code if exc.code is not None else int(Code.UNKNOWN), exc.msg)
    else:
        typer.echo(f"error: {exc.msg}", err=True)
    raise typer.Exit(1)


def _running_admin(datadir: DataDir) -> AdminClient | None:
    """An admin client for the server running on this data folder, if one answers."""
    info = datadir.read_server()
    token = datadir.read_token()
    if not info or not token:
        return None
    host = info.get("host", "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    url = f"http://{'[' + host + ']' if ':' in host else host}:{info.get('port')}"
    client = AdminClient(url, token, timeout=30.0, agent=adminlog.cli_agent())
    try:
        client.status()
    except Exception:
        client.close()
        return None
    return client


def _same_store_as_the_server(datadir: DataDir, database: str, admin: AdminClient) -> None:
    """A command naming a store (--database or TRADEHALL_DATABASE) goes through the server
    running on the data folder only if that server uses the same store: otherwise it would
    act on another store than the one named, silently."""
    running = (datadir.read_server() or {}).get("store")
    if running is not None and running != store_identity(database):
        admin.close()
        raise CliError(
            f"the server running on {datadir.path} uses another store than --database /"
            f" {ENV_VAR} names: give the server's, or stop the server to work on that store",
            int(Code.BAD_PARAM),
        )


def _creation_note(cfg: Config, datadir: DataDir) -> str | None:
    """What opening this data folder will create, if anything: said on stderr, so that a
    mistyped --data-dir does not pass unnoticed."""
    if not cfg.server.database and not datadir.db_path.exists():
        return f"note: created a new, empty exchange in {datadir.path}"
    if not datadir.path.exists():
        return f"note: created the data folder {datadir.path}"
    return None


def _refuse_no_exchange(cfg: Config, datadir: DataDir) -> None:
    """For a command that must not create an exchange (export, audit): a SQLite folder with
    no database (a mistyped --data-dir, or a PostgreSQL venue's folder without --database)."""
    if not cfg.server.database and not datadir.db_path.exists():
        raise CliError(f"no exchange in {datadir.path}", int(Code.BAD_PARAM))


def _refuse_empty_store(store: Store) -> None:
    if store.schema_version() == 0:  # PostgreSQL: nothing was ever made there
        raise CliError(
            "no exchange in this database (its schema was never created)", int(Code.BAD_PARAM)
        )


@contextmanager
def _offline(cfg: Config, datadir: DataDir, *, existing: bool = False) -> Iterator[Exchange]:
    note = _creation_note(cfg, datadir)
    if existing:
        _refuse_no_exchange(cfg, datadir)
    try:
        with datadir.lock():
            store = _open_store(cfg, datadir)
            _say(note)
            try:
                if existing:
                    _refuse_empty_store(store)
                exchange = open_exchange(cfg, store, datadir.secret_box(), inline=True)
                yield exchange
                exchange.commit_now()
            finally:
                store.close()
    except DataDirBusy as exc:
        raise CliError(
            f"{exc} (a server may be starting or not answering; or an engine follows as a"
            " standby on this folder: operator commands go to the leader's machine)",
            int(Code.UNSUPPORTED),
        ) from None
    except SecretKeyError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"data folder {datadir.path}: {exc.strerror or exc}") from None


def _say(note: str | None) -> None:
    """The creation note, said as soon as the store exists: a command that then fails has
    still created it."""
    if note:
        typer.echo(note, err=True)


def _operate(
    config: Path | None,
    data_dir: Path | None,
    as_json: bool,
    online: Callable[[AdminClient], Any],
    offline: Callable[[Exchange, int], Any],
    human: Callable[[Any], str] | None = None,
    *,
    database: str | None = None,
    log: tuple[str, dict[str, Any]] | None = None,
    existing: bool = False,
) -> None:
    """Run ``online`` through the running server's admin API, else ``offline`` on the store.
    ``log`` (action, parameters) marks an admin action: the server records it in the admin
    audit trail; offline, it is recorded here, as ``local``, in the action's own commit.
    ``existing``: offline, refuse a store that holds no exchange rather than create one."""
    try:
        cfg, datadir = _load(config, data_dir, database)
        admin = _running_admin(datadir)
        if admin is not None and database is not None:
            _same_store_as_the_server(datadir, database, admin)
        if admin is not None:
            try:
                result = online(admin)
            except ApiError as exc:
                raise CliError(exc.msg, exc.code) from None
            finally:
                admin.close()
        else:
            try:
                with _offline(cfg, datadir, existing=existing) as exchange:
                    result = _logged(offline, log)(exchange, now_ms())
            except Reject as exc:
                raise CliError(exc.msg, int(exc.code)) from None
            except StoreError as exc:
                raise CliError(str(exc), -1001) from None
        _emit(result, as_json, human)
    except CliError as exc:
        _fail(exc, as_json)


def _logged(
    offline: Callable[[Exchange, int], Any], log: tuple[str, dict[str, Any]] | None
) -> Callable[[Exchange, int], Any]:
    if log is None:
        return offline
    action, params = log

    def run(exchange: Exchange, ts: int) -> Any:
        agent = adminlog.cli_agent()
        try:
            result = offline(exchange, ts)
        except Reject as refused:  # nothing changed: the entry is all this commit holds
            exchange.log_admin(adminlog.entry(ts, adminlog.LOCAL, agent, action, params, refused))
            exchange.commit_now()
            raise
        exchange.log_admin(adminlog.entry(ts, adminlog.LOCAL, agent, action, params, result))
        return result

    return run


# ------------------------------------------------------------------------- serve


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind [default: 127.0.0.1]")] = None,
    port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Port (0 picks a free one) [default: 8080]"),
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo", help="Create and fund a demo account, and start the market simulation."
        ),
    ] = False,
    no_sim: Annotated[
        bool, typer.Option("--no-sim", help="With --demo: no market simulation (quiet books).")
    ] = False,
    sim: Annotated[
        bool,
        typer.Option("--sim", help="Start the market simulation (also without --demo)."),
    ] = False,
    speed: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            max=1_000_000,
            help="Simulated seconds per second: replays and random walks run this much faster"
            " [default: from config, 1]",
        ),
    ] = None,
    no_rate_limits: Annotated[
        bool,
        typer.Option(
            "--no-rate-limits", help="Switch rate limits off (local testing, benchmarks)."
        ),
    ] = False,
    database: DatabaseOpt = None,
    log_format: LogFormatOpt = "text",
    access_log: AccessLogOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the exchange (SQLite in the data folder, or PostgreSQL with --database). Health
    at /healthz and /readyz; Prometheus metrics at /metrics with the admin token
    (docs/operations.md)."""
    logs.configure(log_format, access_log)

    def run(cfg: Config, datadir: DataDir) -> None:
        if speed is not None:
            cfg = replace(cfg, simulation=with_speed(cfg.simulation, speed))
        simulate = (sim or demo or cfg.simulation.enabled) and not no_sim
        cfg = _with_histories(cfg, simulate)
        server.run(
            cfg,
            datadir,
            host or cfg.server.host,
            cfg.server.port if port is None else port,
            demo=demo,
            announce=lambda url, info: _announce(url, datadir, info, as_json, simulate),
            rate_limits=not no_rate_limits,
            simulate=simulate,
        )

    _run_server(config, data_dir, database, as_json, run)


def _with_histories(cfg: Config, simulate: bool) -> Config:
    """The simulation's replay files read, when it runs (only then: a day of trades takes
    seconds); a bad file stops the command like a bad configuration."""
    if not simulate:
        return cfg
    try:
        return replace(cfg, simulation=with_histories(cfg.simulation))
    except ReplayError as exc:
        raise CliError(f"configuration error: {exc}", int(Code.BAD_PARAM)) from None


def _run_server(
    config: Path | None,
    data_dir: Path | None,
    database: str | None,
    as_json: bool,
    run: Callable[[Config, DataDir], None],
) -> None:
    """``run`` with the data folder locked, its failures told as the CLI tells them."""
    try:
        cfg, datadir = _load(config, data_dir, database)
        with datadir.lock():
            run(cfg, datadir)
    except (server.ListenError, server.StartError, LinkError) as exc:
        _fail(CliError(str(exc)), as_json)
    except DataDirBusy as exc:
        _fail(
            CliError(f"{exc}: is a server already running on it?", int(Code.UNSUPPORTED)), as_json
        )
    except StoreError as exc:
        _fail(CliError(str(exc), -1001), as_json)
    except SecretKeyError as exc:
        _fail(CliError(str(exc)), as_json)
    except OSError as exc:
        _fail(CliError(f"data folder {datadir.path}: {exc.strerror or exc}"), as_json)
    except CliError as exc:
        _fail(exc, as_json)


NatsOpt = Annotated[str, typer.Option("--nats", help="NATS server URL.")]
SubjectOpt = Annotated[
    str, typer.Option("--engine-subject", help="Subject prefix the engine listens under.")
]


@app.command()
def engine(
    admin_port: Annotated[
        int, typer.Option(min=0, max=65535, help="Loopback port of the admin API (0: free one)")
    ] = 0,
    nats_url: NatsOpt = DEFAULT_NATS_URL,
    subject: SubjectOpt = DEFAULT_SUBJECT,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    demo: Annotated[bool, typer.Option("--demo", help="Create and fund a demo account.")] = False,
    sim: Annotated[
        bool, typer.Option("--sim", help="Run the market simulation in the engine process.")
    ] = False,
    database: DatabaseOpt = None,
    no_projector: Annotated[
        bool,
        typer.Option(
            "--no-projector",
            help="Start no projector child: `tradehall projector` runs elsewhere (PostgreSQL).",
        ),
    ] = False,
    standby: Annotated[
        bool,
        typer.Option(
            "--standby",
            help="High availability (PostgreSQL): follow the journal as a standby and lead"
            " when no other engine does (docs/deployment.md).",
        ),
    ] = False,
    node: Annotated[
        str | None,
        typer.Option(help="This engine's name in the HA status (default: host:pid)."),
    ] = None,
    log_format: LogFormatOpt = "text",
    access_log: AccessLogOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the engine process of the scale-out topology: clients reach it through
    `tradehall gateway` processes over NATS (docs/deployment.md). Its admin listener serves
    /healthz, /readyz and /metrics too. With --standby (any number of engines on one
    PostgreSQL database): one leads, the others follow and take over when it is gone."""
    from tradehall.cluster.run import run_engine
    from tradehall.cluster.standby import Role, StandbyStart, Stopped, default_node
    from tradehall.projector import SignalStop

    logs.configure(log_format, access_log)
    role = Role(node or default_node()) if standby else None
    if role is not None:
        role.patient = os.environ.pop(STEPPED_DOWN, "") == "1"

    def start(cfg: Config, datadir: DataDir) -> None:
        simulate = sim or cfg.simulation.enabled
        ha: StandbyStart | None = None
        if role is not None:
            if not cfg.server.database:
                raise CliError(
                    "--standby needs PostgreSQL (--database): SQLite has no HA",
                    int(Code.BAD_PARAM),
                )
            stop = SignalStop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, stop.set)
            ha = StandbyStart(role, lambda: _announce_standby(role, datadir, as_json), stop.is_set)
        try:
            run_engine(
                _with_histories(cfg, simulate),
                datadir,
                "127.0.0.1",
                admin_port,
                nats_url=nats_url,
                subject=subject,
                demo=demo,
                simulate=simulate,
                announce=lambda url, info: _announce(
                    url, datadir, info, as_json, simulate, role="engine", ha=role
                ),
                with_projector=not no_projector,
                standby=ha,
            )
        except Stopped:
            return

    try:
        _run_server(config, data_dir, database, as_json, start)
    finally:
        if role is not None and role.stepped_down is not None:
            _start_again_as_standby()


def _announce_standby(role: Any, datadir: DataDir, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"role": "standby", "node": role.node, "dataDir": str(datadir.path)}))
    else:
        typer.echo(
            f"tradehall {__version__} engine {role.node}: standby, following the journal"
            " (it leads when no other engine does)"
        )
    sys.stdout.flush()


def _start_again_as_standby() -> None:
    """A leader that stepped down starts again, as a standby, in the same process (same pid,
    same arguments): its memory may hold what it applied but never committed, so it is
    rebuilt from the store."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[STEPPED_DOWN] = "1"  # it waits for its database, rather than exit at once
    os.execv(sys.executable, [sys.executable, "-m", "tradehall", *sys.argv[1:]])


STEPPED_DOWN = "TRADEHALL_STEPPED_DOWN"


@app.command()
def projector(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    parent: Annotated[
        int | None,
        typer.Option(help="Stop when this process (the engine that started it) is gone."),
    ] = None,
    log_format: LogFormatOpt = "text",
) -> None:
    """Build the tables (orders, trades, ledger, balances, history) from the journal, until
    stopped (SIGTERM: catch up, then exit). `serve` and `engine` start one as a child; run it
    yourself beside `engine --no-projector` on PostgreSQL (docs/durability.md)."""

    from tradehall.projector import Projector, SignalStop
    from tradehall.store.factory import open_journal, open_projections

    logs.configure(log_format, False)
    try:
        cfg, datadir = _load(config, data_dir, database)
        stop = SignalStop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop.set)
        if parent is not None:
            _die_with_parent()
        sync = cfg.server.sqlite_synchronous
        projections = open_projections(cfg.server.database, datadir.path, synchronous=sync)
        journal = open_journal(projections, datadir.path, sync)
        # One projector per store: PostgreSQL's takes an advisory lock; SQLite's this file's.
        only = (
            datadir.lock("projector.lock", "another projector")
            if not cfg.server.database
            else contextlib.nullcontext()
        )
        try:
            with only:
                _wait_for_projector_lock(projections, stop)
                worker = Projector(cfg, projections, journal, datadir.secret_box())
                worker.run(stop.is_set, parent)
        finally:
            projections.close()
            journal.db.close()
    except DataDirBusy as exc:
        _fail(CliError(str(exc), int(Code.UNSUPPORTED)), False)
    except StoreError as exc:
        _fail(CliError(str(exc), -1001), False)
    except CliError as exc:
        _fail(exc, False)


def _wait_for_projector_lock(projections: Any, stop: Any) -> None:
    """PostgreSQL: one projector per database. Another one still running (the child of an
    engine that stopped leading, finishing its catch-up) is waited for, not raced."""
    try_lead = getattr(projections, "try_lead", None)
    if try_lead is None:
        return
    told = False
    while not try_lead():
        if stop.is_set():
            raise typer.Exit(0)
        if not told:
            logging.getLogger("tradehall.projector").warning(
                "another projector holds this database: waiting for it to stop"
            )
            told = True
        time.sleep(0.5)


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when its parent dies (the loop also checks)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@app.command()
def gateway(
    host: Annotated[str | None, typer.Option(help="Address to bind [default: 127.0.0.1]")] = None,
    port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Port (0 picks a free one) [default: 8080]"),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=256, help="Worker processes.")] = 1,
    nats_url: NatsOpt = DEFAULT_NATS_URL,
    subject: SubjectOpt = DEFAULT_SUBJECT,
    timeout: Annotated[
        float,
        typer.Option(
            min=0.05,
            help="Seconds to wait for the engine's answer (keep it above the engine's"
            f" {HISTORY_WAIT_S:g} s wait of history reads for the projector).",
        ),
    ] = DEFAULT_TIMEOUT,
    batch_max: Annotated[
        int, typer.Option(min=1, max=4096, help="Commands per message to the engine, at most.")
    ] = DEFAULT_BATCH_MAX,
    batch_delay_ms: Annotated[
        float,
        typer.Option(
            min=0,
            max=100,
            help="Milliseconds a command waits for others to join its message"
            " (0: those admitted in one event-loop turn go together).",
        ),
    ] = DEFAULT_BATCH_DELAY * 1000,
    read_cache_ms: Annotated[
        int,
        typer.Option(
            min=0,
            max=60_000,
            help="Public reads (depth, trades, klines, tickers, symbols) are answered again"
            " from the engine's last answer while nothing they show changed, for at most"
            " this many milliseconds (0: every read goes to the engine).",
        ),
    ] = DEFAULT_READ_CACHE_MS,
    engine_wait_ms: Annotated[
        int,
        typer.Option(
            min=0,
            max=30_000,
            help="When no engine listens (an HA standby taking over), a request waits this"
            " many milliseconds for one before it is answered 503 (0: at once).",
        ),
    ] = 0,
    config: ConfigOpt = None,
    no_rate_limits: Annotated[
        bool, typer.Option("--no-rate-limits", help="Switch rate limits off.")
    ] = False,
    metrics_host: Annotated[
        str, typer.Option(help="Address the metrics listeners bind.")
    ] = "127.0.0.1",
    log_format: LogFormatOpt = "text",
    access_log: AccessLogOpt = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve each worker's Prometheus metrics at /metrics on this port plus the"
            " worker's index (0, 1, ...) [default: no metrics listener].",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Serve the REST API, the WebSocket streams and the trader's page in front of a
    `tradehall engine`, over NATS (docs/deployment.md). With several workers or gateways, set
    `limits.storage` to Redis so that they share rate limits and replay protection; the
    `[websocket]` settings and any `[simulation.faults]` come from --config."""
    from tradehall.cluster.gateway import Gateway
    from tradehall.cluster.run import run_gateway

    logs.configure(log_format, access_log)

    try:
        cfg, _ = _load(config, None, None)
        limits = replace(cfg.limits, enabled=cfg.limits.enabled and not no_rate_limits)

        def make_gateway() -> Gateway:
            return Gateway(
                nats_url,
                subject,
                limits=limits,
                timeout=timeout,
                max_ahead_ms=cfg.server.max_clock_ahead_ms,
                websocket=cfg.websocket,
                batch_max=batch_max,
                batch_delay=batch_delay_ms / 1000,
                read_cache_ms=read_cache_ms,
                faults=cfg.simulation.faults,
                allowed_hosts=cfg.server.allowed_hosts,
                metrics_host=metrics_host,
                metrics_port=metrics_port,
                drain_s=cfg.server.drain_s,
                self_service=cfg.sandbox.self_service,
                engine_wait=engine_wait_ms / 1000,
            )

        if metrics_port is not None and metrics_port + workers - 1 > 65535:
            raise CliError(
                f"--metrics-port {metrics_port} leaves no port for {workers} workers",
                int(Code.BAD_PARAM),
            )
        if workers > 1 and not limits.storage.startswith(("redis", "rediss", "async+redis")):
            typer.echo(
                f"warning: {workers} workers with limits.storage = {limits.storage!r}: each"
                " worker keeps its own rate limits and replay guard; set a Redis URL to"
                " share them (docs/deployment.md)",
                err=True,
            )

        def announce(url: str) -> None:
            if as_json:
                typer.echo(json.dumps({"url": url, "workers": workers, "nats": nats_url}))
            else:
                typer.echo(f"tradehall {__version__} gateway on {url} ({workers} workers)")
            sys.stdout.flush()

        run_gateway(
            host or cfg.server.host,
            cfg.server.port if port is None else port,
            workers=workers,
            make_gateway=make_gateway,
            announce=announce,
        )
    except (server.ListenError, server.StartError, LinkError) as exc:
        _fail(CliError(str(exc)), as_json)
    except CliError as exc:
        _fail(exc, as_json)


def _announce(
    url: str,
    datadir: DataDir,
    demo: dict[str, Any] | None,
    as_json: bool,
    simulate: bool = False,
    role: str = "",
    ha: Any = None,
) -> None:
    if as_json:
        out: dict[str, Any] = {"url": url, "dataDir": str(datadir.path), "demo": demo}
        if ha is not None:
            out.update(role="leader", node=ha.node, epoch=ha.epoch)
        typer.echo(json.dumps(out))
    else:
        where = "engine, admin API on" if role == "engine" else "listening on"
        typer.echo(f"tradehall {__version__} {where} {url} (data folder: {datadir.path})")
        if ha is not None:
            typer.echo(f"engine {ha.node} leads (epoch {ha.epoch})")
        if demo:
            typer.echo(f"demo account: user {demo['userId']}")
            typer.echo(f"  API key:    {demo['apiKey']}")
            typer.echo(f"  API secret: {demo['secret']}")
        if simulate:
            off = "tradehall sim stop" if role == "engine" else "serve --no-sim"
            typer.echo(f"market simulation: on (tradehall sim status; {off} to switch it off)")
        elif demo:
            typer.echo("market simulation: off (tradehall sim start to switch it on)")
    sys.stdout.flush()


# ------------------------------------------------------------------------- users and keys


@user_app.command("create")
def user_create(
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a user (its spot account starts empty)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.create_user(name),
        lambda ex, ts: ops.create_user(ex, name, ts),
        database=database,
        log=("user.create", {"name": name}),
    )


@user_app.command("list")
def user_list(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List users."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.list_users(),
        lambda ex, ts: ops.list_users(ex),
        database=database,
    )


@key_app.command("create")
def key_create(
    user: UserOpt,
    read_only: Annotated[bool, typer.Option("--read-only", help="No trading permission.")] = False,
    ip: Annotated[
        list[str] | None, typer.Option("--ip", help="Allowed IP or CIDR (repeatable).")
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create an API key for a user; the secret is shown once."""
    ips = list(ip or [])
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.create_key(user, read_only=read_only, ips=ips),
        lambda ex, ts: ops.create_key(ex, user, read_only, ips, ts),
        database=database,
        log=("key.create", {"userId": user, "readOnly": read_only, "ips": ips}),
    )


@key_app.command("list")
def key_list(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List API keys, revoked ones included (never their secrets)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.list_keys(),
        lambda ex, ts: ops.list_keys(ex),
        database=database,
    )


@key_app.command("revoke")
def key_revoke(
    api_key: Annotated[str, typer.Argument(help="The API key to revoke.")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke an API key (effective at once)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.revoke_key(api_key),
        lambda ex, ts: ops.revoke_key(ex, api_key, ts),
        database=database,
        log=("key.revoke", {"apiKey": api_key}),
    )


# ------------------------------------------------------------------------- money


def _transfer_command(kind: str) -> Callable[..., None]:
    def command(
        user: UserOpt,
        asset: Annotated[str, typer.Option(help="Asset, e.g. USDT.")],
        amount: AmountOpt,
        tx_id: Annotated[
            str | None,
            typer.Option("--tx-id", help="Idempotency id: repeating it changes nothing."),
        ] = None,
        data_dir: DataDirOpt = None,
        config: ConfigOpt = None,
        database: DatabaseOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        def online(admin: AdminClient) -> Any:
            call = admin.deposit if kind == "deposit" else admin.withdraw
            return call(user, asset, amount, tx_id)

        _operate(
            config,
            data_dir,
            as_json,
            online,
            lambda ex, ts: ops.transfer(ex, kind, user, asset, amount, tx_id, ts),
            database=database,
            log=(kind, {"userId": user, "asset": asset, "amount": amount, "txId": tx_id}),
        )

    command.__doc__ = (
        "Credit a user's spot account from outside (idempotent by --tx-id)."
        if kind == "deposit"
        else "Debit a user's spot account to outside; never below zero (idempotent by --tx-id)."
    )
    return command


app.command("deposit")(_transfer_command("deposit"))
app.command("withdraw")(_transfer_command("withdraw"))


def _fund_command(system: str, kind: str) -> Callable[..., None]:
    def command(
        asset: Annotated[str, typer.Option(help="Asset, e.g. USDT.")],
        amount: AmountOpt,
        tx_id: Annotated[
            str | None,
            typer.Option("--tx-id", help="Idempotency id: repeating it changes nothing."),
        ] = None,
        data_dir: DataDirOpt = None,
        config: ConfigOpt = None,
        database: DatabaseOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        _operate(
            config,
            data_dir,
            as_json,
            lambda admin: admin.fund(system, asset, amount, tx_id, withdraw=kind == "withdraw"),
            lambda ex, ts: ops.fund(ex, kind, system, asset, amount, tx_id, ts),
            database=database,
            log=(
                f"system.{kind}",
                {"account": system, "asset": asset, "amount": amount, "txId": tx_id},
            ),
        )

    what = "the margin lending pool" if system == "pool" else "the insurance fund"
    command.__doc__ = (
        f"Put operator funds into {what} (idempotent by --tx-id)."
        if kind == "deposit"
        else f"Take free funds out of {what} (idempotent by --tx-id)."
    )
    return command


for _system in ops.FUNDABLE:
    _system_app = typer.Typer(
        help="The margin lending pool." if _system == "pool" else "The insurance fund.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    _system_app.command("deposit")(_fund_command(_system, "deposit"))
    _system_app.command("withdraw")(_fund_command(_system, "withdraw"))
    app.add_typer(_system_app, name=_system)


@app.command()
def system(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Balances of the exchange's own accounts: fees, lending pool, insurance fund."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.system(),
        lambda ex, ts: ops.system_balances(ex),
        database=database,
    )


@app.command()
def transfer(
    user: UserOpt,
    asset: Annotated[str, typer.Option(help="Asset, e.g. USDT.")],
    amount: AmountOpt,
    source: Annotated[
        str, typer.Option("--from", help="spot, margin or futures", callback=_account_kind)
    ],
    target: Annotated[
        str, typer.Option("--to", help="margin, futures or spot", callback=_account_kind)
    ],
    symbol: Annotated[
        str | None, typer.Option(help="The margin pair, e.g. BTCUSDT (margin transfers only).")
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move a user's funds between its spot account and its margin account on a pair
    (--symbol), or its futures account (the asset: a contract's margin coin)."""
    try:
        kind = ops.transfer_target(source, target)
    except Reject as exc:
        _fail(CliError(exc.msg, int(exc.code)), as_json)
    if kind == "futures":
        if symbol is not None:
            _fail(CliError("--symbol is for margin transfers only", -1102), as_json)
        _operate(
            config,
            data_dir,
            as_json,
            lambda admin: admin.futures_transfer(user, asset, amount, source, target),
            lambda ex, ts: ops.futures_transfer(ex, user, asset, amount, source, target, ts),
            database=database,
            log=(
                "futures.transfer",
                {"userId": user, "asset": asset, "amount": amount, "from": source, "to": target},
            ),
        )
        return
    if symbol is None:
        _fail(
            CliError("--symbol (the margin pair) is required for margin transfers", -1102), as_json
        )
    pair = symbol
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.margin_transfer(user, pair, asset, amount, source, target),
        lambda ex, ts: ops.margin_transfer(ex, user, pair, asset, amount, source, target, ts),
        database=database,
        log=(
            "margin.transfer",
            {
                "userId": user,
                "symbol": pair,
                "asset": asset,
                "amount": amount,
                "from": source,
                "to": target,
            },
        ),
    )


@app.command("index-price")
def index_price(
    contract: Annotated[str, typer.Option(help="The contract, e.g. E-BTC-USDT.")],
    price: Annotated[
        str,
        typer.Option(help="Decimal price, at the contract's precision.", callback=_decimal_text),
    ],
    feed: Annotated[
        str | None,
        typer.Option(
            help="A named feed (e.g. a feeder of other venues' prices): the price is one"
            " source among the index's, not the index itself.",
            callback=_not_empty,
        ),
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a contract's index price at once (the operator's override), or push one price of
    a named index feed (--feed)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.set_index_price(contract, price, feed),
        lambda ex, ts: ops.set_index_price(ex, contract, price, ts, feed or ""),
        database=database,
        log=("index-price", {"contract": contract, "price": price, "feed": feed}),
    )


@app.command("index-sources")
def index_sources(
    contract: Annotated[str, typer.Option(help="The contract, e.g. E-BTC-USDT.")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a contract's index, mark, price band and each source of its index (weight,
    value, age, whether it was used)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.index_sources(contract),
        lambda ex, ts: ops.index_sources(ex, contract, ts),
        database=database,
    )


@funding_app.command("now")
def funding_now(
    contract: Annotated[
        str | None,
        typer.Option(
            help="The contract, e.g. E-BTC-USDT [default: every one]", callback=_not_empty
        ),
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Settle funding now (time control for a sandbox): every position pays or receives the
    rate the interval's premium gives so far; the regular funding times are unchanged."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.funding_now(contract),
        lambda ex, ts: sandbox.funding_now(ex, contract, ts),
        database=database,
        log=("funding.now", {"contract": contract}),
    )


@interest_app.command("now")
def interest_now(
    hours: Annotated[
        int,
        typer.Option(min=1, max=MAX_INTEREST_HOURS, help="Hours of interest to charge at once"),
    ] = 1,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Charge margin interest now (time control for a sandbox): every debt is charged HOURS
    hours of interest, as that many hourly accruals would; the hourly schedule is
    unchanged."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.interest_now(hours),
        lambda ex, ts: sandbox.interest_now(ex, hours, ts),
        database=database,
        log=("interest.now", {"hours": hours}),
    )


@account_app.command("reset")
def account_reset(
    user: UserOpt,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reset a user's account: cancel its orders, close its futures positions at the mark
    and restore its starting balances ([simulation.reset]; by default the demo account's),
    all as ledger entries."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.reset_account(user),
        lambda ex, ts: sandbox.reset_account(ex, user, ts),
        database=database,
        log=("account.reset", {"userId": user}),
    )


def _sim_command(action: str) -> Callable[..., None]:
    def command(
        data_dir: DataDirOpt = None,
        config: ConfigOpt = None,
        database: DatabaseOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        try:
            _, datadir = _load(config, data_dir, database)
            admin = _running_admin(datadir)
            if admin is None:
                if action != "status":
                    raise CliError(
                        "no server is running on this data folder: the simulation runs in"
                        " the server (tradehall serve --demo, or --sim)",
                        int(Code.UNSUPPORTED),
                    )
                result: Any = {"running": False, "server": False}
            else:
                try:
                    call = {"start": admin.sim_start, "stop": admin.sim_stop}.get(
                        action, admin.sim_status
                    )
                    result = call()
                    if action == "status":  # one key a script reads in either case
                        result = {**result, "server": True}
                except ApiError as exc:
                    raise CliError(exc.msg, exc.code) from None
                finally:
                    admin.close()
            _emit(result, as_json, _sim_text)
        except CliError as exc:
            _fail(exc, as_json)

    command.__doc__ = {
        "start": "Start the market simulation in the running server.",
        "stop": "Stop the market simulation (the participants' orders are cancelled).",
        "status": "Show the simulation: markets, participants (and any out of funds), faults.",
    }[action]
    return command


def _sim_text(result: Any) -> str:
    if not result.get("server", True):
        return "simulation: not running (no server on this data folder)"
    lines = [
        f"simulation: {'running' if result['running'] else 'stopped'}"
        + (f" (seed {result['seed']}, {result['ticks']} ticks)" if "seed" in result else "")
    ]
    if result.get("error"):
        lines.append(f"error: {result['error']}")
    for m in result.get("markets", []):
        line = f"  {m['symbol']:<12} {m['model']:<7} reference {m['reference']}"
        if "replay" in m:
            r = m["replay"]
            at = datetime.fromtimestamp(r["historyTime"] / 1000, UTC).isoformat(timespec="seconds")
            line += f"  ({r['file']} at {at.replace('+00:00', 'Z')}, round {r['round']})"
        lines.append(line)
    for p in result.get("participants", []):
        state = p["state"] + (f": {p['note']}" if p["note"] else "")
        lines.append(
            f"  user {p['userId']:<4} {p['name']:<22} {state:<16}  orders {p['orders']}"
            f" cancels {p['cancels']} rejected {p['rejected']}"
        )
    faults = result.get("faults", {})
    if faults.get("enabled"):
        counts = ", ".join(f"{k} {v}" for k, v in faults["injected"].items())
        lines.append(f"faults injected: {counts}")
    else:
        lines.append("faults: off")
    return "\n".join(lines)


for _action in ("start", "stop", "status"):
    sim_app.command(_action)(_sim_command(_action))


@app.command()
def margin(
    user: UserOpt,
    symbol: Annotated[str, typer.Option(help="The margin pair, e.g. BTCUSDT.")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's margin account on a pair: assets, debts, risk ratio, liquidation price."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.margin_account(user, symbol),
        lambda ex, ts: ops.margin_view(ex, user, symbol.upper()),
        database=database,
    )


def _balances_table(result: Any) -> str:
    rows = [f"{'asset':<8} {'free':>24} {'locked':>24}"]
    rows += [f"{b['asset']:<8} {b['free']:>24} {b['locked']:>24}" for b in result["balances"]]
    return f"user {result['userId']}\n" + "\n".join(rows)


@app.command()
def balances(
    user: UserOpt,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's spot balances."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.balances(user),
        lambda ex, ts: ops.balances(ex, user),
        _balances_table,
        database=database,
    )


_MARKET_COLUMNS = [
    ("symbol", "symbol", 10),
    ("base", "baseAsset", 6),
    ("quote", "quoteAsset", 6),
    ("price dp", "pricePrecision", 8),
    ("qty dp", "quantityPrecision", 6),
    ("min qty", "minQuantity", 12),
    ("min value", "minNotional", 10),
    ("maker", "makerFee", 8),
    ("taker", "takerFee", 8),
]


_CONTRACT_COLUMNS = [
    ("contract", "symbol", 12),
    ("id", "id", 4),
    ("side", "side", 8),
    ("margin", "marginCoin", 6),
    ("multiplier", "multiplier", 10),
    ("price dp", "pricePrecision", 8),
    ("maker", "openMakerFee", 8),
    ("taker", "openTakerFee", 8),
    ("maint.", "maintenanceRate", 8),
    ("lever", "maxLeverage", 5),
    ("index", "indexSource", 10),
]


def _table(columns: list[tuple[str, str, int]], items: list[Any]) -> str:
    rows = [[title for title, _, _ in columns]]
    rows += [[str(item[key]) for _, key, _ in columns] for item in items]
    widths = [width for _, _, width in columns]
    return "\n".join(
        " ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _markets_table(result: Any) -> str:
    text = _table(_MARKET_COLUMNS, result["pairs"])
    contracts = result.get("contracts")
    if contracts:
        text += "\n\n" + _table(_CONTRACT_COLUMNS, contracts)
    return text


def _audit_text(result: Any) -> str:
    head = "audit: OK" if result["ok"] else "audit: VIOLATIONS\n" + "\n".join(result["problems"])
    assets = [
        f"{a['asset']}: held {a['held']}, deposits - withdrawals"
        f" {a['depositsMinusWithdrawals']}, fees {a['fees']}"
        for a in result["assets"]
    ]
    return "\n".join([head, *assets])


@markets_app.callback(invoke_without_command=True)
def markets(
    ctx: typer.Context,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List assets, spot pairs and futures contracts (`markets import`: mirror a venue's)."""
    if ctx.invoked_subcommand is not None:
        return
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.markets(),
        lambda ex, ts: ops.markets(ex),
        _markets_table,
        database=database,
    )


_GATEWAY_COLUMNS = [
    ("host", "host", 16),
    ("pid", "pid", 8),
    ("requests/s", "requestsPerSecond", 11),
    ("errors/s", "errorsPerSecond", 9),
    ("requests", "requestsTotal", 10),
    ("streams", "connections", 8),
    ("heard (s ago)", "lastHeardSecondsAgo", 13),
]


def _gateways_table(result: Any) -> str:
    if not result["gateways"]:
        return "no gateway heard from (tradehall gateway reports every 5 s to a running engine)"
    return _table(_GATEWAY_COLUMNS, result["gateways"])


@app.command()
def gateways(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the gateway workers a running `tradehall engine` heard from lately: host,
    process, requests and errors per second, WebSocket connections."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.gateways(),
        lambda ex, ts: {"gateways": []},
        _gateways_table,
        database=database,
    )


_HA_COLUMNS = [
    ("NODE", "node", 24),
    ("ROLE", "role", 8),
    ("EPOCH", "epoch", 6),
    ("RECORD", "seq", 10),
    ("LAG", "lag", 8),
    ("SEEN (ms ago)", "seenMsAgo", 14),
    ("PID", "pid", 0),
]


def _status_text(result: Any) -> str:
    writable = "writable" if result["writable"] else f"NOT writable: {result['failure']}"
    lines = [
        f"tradehall {result['version']}: {result['users']} users,"
        f" {result['openOrders']} open orders, {writable}"
    ]
    journal = result.get("journal")
    if journal:
        child = journal.get("projector")
        projector = (
            "no projector child"
            if child is None
            else f"projector {'running' if child['running'] else 'NOT running'}"
            f" ({child['restarts']} restarts)"
        )
        lines.append(
            f"journal: record {journal['head']} (epoch {journal['epoch']}), tables at"
            f" {journal['projected']} (lag {journal['lag']}); {projector}"
        )
    ha = result.get("ha")
    if ha:
        since = datetime.fromtimestamp(ha["since"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(
            f"high availability: {ha['node']} leads (epoch {ha['epoch']}) since {since} UTC,"
            f" took over in {ha['takeoverSeconds']} s; {ha['standbys']} standby(s)"
        )
        lines.append(_table(_HA_COLUMNS, ha["engines"]))
    return "\n".join(lines)


@app.command()
def status(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The exchange's state: users, open orders, whether it takes writes, the journal and
    its projector, and, for an HA engine (`engine --standby`), who leads, its epoch and each
    standby's lag. From the running server (`GET /admin/v1/status`), else from the store."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.status(),
        lambda ex, ts: ops.status(ex),
        _status_text,
        database=database,
        existing=True,
    )


def _admin_log_table(result: Any) -> str:
    items = [
        {
            **entry,
            "when": datetime.fromtimestamp(entry["time"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "outcome": entry["result"] if not entry["code"] else f"refused {entry['code']}",
        }
        for entry in result["entries"]
    ]
    columns = [
        ("ID", "id", 6),
        ("TIME (UTC)", "when", 20),
        ("ACTOR", "actor", 19),
        ("AGENT", "agent", 24),
        ("ACTION", "action", 17),
        ("RESULT", "outcome", 13),
        ("DETAIL", "detail", 0),
    ]
    return _table(columns, items)


@app.command("admin-log")
def admin_log(
    limit: Annotated[
        int, typer.Option(min=1, max=ops.MAX_ADMIN_LOG, help="Entries to show, newest first.")
    ] = 20,
    before: Annotated[
        int | None, typer.Option(min=1, help="Only entries with a smaller id (paging).")
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The admin audit trail: every admin action (CLI, admin API, operator page), who did
    it (the admin token's fingerprint, or `local`), through what, when, with what and the
    result. Append-only; `tradehall audit` checks that no entry is missing."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.admin_log(limit, before),
        lambda ex, ts: ops.admin_log(ex, limit, before),
        _admin_log_table,
        database=database,
    )


@app.command()
def audit(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check every invariant (conservation, holds, books, ledger); exit 1 on any violation."""
    holder: dict[str, Any] = {}

    def keep(result: Any) -> Any:
        holder["result"] = result
        return result

    _operate(
        config,
        data_dir,
        as_json,
        lambda a: keep(a.audit()),
        lambda ex, ts: keep(ops.audit(ex)),
        _audit_text,
        database=database,
        existing=True,  # an audit of a mistyped --data-dir must not pass on an empty venue
    )
    if not holder.get("result", {}).get("ok", False):
        raise typer.Exit(1)


# ------------------------------------------------------------------------- the store


def _with_store(
    config: Path | None,
    data_dir: Path | None,
    database: str | None,
    as_json: bool,
    action: Callable[[JournaledStore, DataDir], Any],
    human: Callable[[Any], str],
    *,
    existing: bool = False,
) -> None:
    """Run ``action`` on the store alone (and its data folder), holding the folder's lock
    (and, on PostgreSQL, the database's): never beside a running server. ``existing``: refuse
    a store that holds no exchange (a mistyped --data-dir or URL) instead of creating one."""
    try:
        cfg, datadir = _load(config, data_dir, database)
        note = _creation_note(cfg, datadir)
        if existing:
            _refuse_no_exchange(cfg, datadir)
        try:
            with datadir.lock():
                store = _open_store(cfg, datadir)
                _say(note)
                try:
                    if existing:
                        _refuse_empty_store(store)
                    attach_inline(store, cfg, datadir.secret_box)
                    result = action(store, datadir)
                finally:
                    store.close()
        except DataDirBusy as exc:
            raise CliError(f"{exc}: stop the server first", int(Code.UNSUPPORTED)) from None
        except StoreRefused as exc:
            raise CliError(str(exc), int(Code.UNSUPPORTED)) from None
        except dump.ExportFileError as exc:
            raise CliError(str(exc), int(Code.BAD_PARAM)) from None
        except StoreError as exc:
            raise CliError(str(exc), -1001) from None
        except OSError as exc:
            raise CliError(f"data folder {datadir.path}: {exc.strerror or exc}") from None
        _emit(result, as_json, human)
    except CliError as exc:
        _fail(exc, as_json)


def _rows_text(result: Any, done: str) -> str:
    """``done`` is e.g. "exported {n} rows to {file}"."""
    rows = result["rows"]
    head = done.format(n=sum(rows.values()), file=result["file"])
    lines = [f"{head} (schema version {result['version']})"]
    return "\n".join(lines + [f"  {table}: {n}" for table, n in rows.items()])


def _to_incremental_vacuum(store: JournaledStore) -> bool:
    """A SQLite file made before tradehall set ``auto_vacuum`` cannot give pruned pages back
    until one VACUUM switches its mode: done here, offline. True if it was done."""
    mode = getattr(store.projections, "auto_vacuum", None)
    if mode is None or mode() != "none":
        return False
    store.projections.vacuum()
    return True


@db_app.command("upgrade")
def db_upgrade(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create or upgrade the store's schema and layout (serve also does this on start): the
    journal is created beside the tables if it is not there yet (a store of a release before
    the journal: its tables are the projections as of record 0); a SQLite file still without
    incremental auto_vacuum is vacuumed once to switch it on ("vacuumed")."""

    def upgrade(store: JournaledStore, _: DataDir) -> Any:
        had_journal = store.journal.exists()
        version = store.migrate()
        journal = {
            "created": not had_journal,
            "head": store.head,
            "projected": store.projected(),
        }
        vacuumed = {"vacuumed": True} if _to_incremental_vacuum(store) else {}
        return {"version": version, "journal": journal} | vacuumed

    def human(result: Any) -> str:
        note = " (vacuumed once: SQLite auto_vacuum is now incremental)"
        journal = result["journal"]
        made = "created" if journal["created"] else "present"
        return (
            f"schema version {result['version']}; journal {made}, at record {journal['head']}"
            f" (tables at {journal['projected']})" + (note if "vacuumed" in result else "")
        )

    _with_store(config, data_dir, database, as_json, upgrade, human)


@db_app.command("vacuum")
def db_vacuum(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Offline: rewrite the SQLite file compactly (switching it to incremental auto_vacuum),
    or VACUUM ANALYZE the PostgreSQL tables. Needs free disk about the database's size."""

    def vacuum(store: JournaledStore, datadir: DataDir) -> Any:
        store.migrate()
        before = _folder_bytes(datadir)
        store.vacuum()
        return {"folderBytesBefore": before, "folderBytes": _folder_bytes(datadir)}

    def human(result: Any) -> str:
        return (
            f"vacuumed: data folder {_mb(result['folderBytesBefore'])}"
            f" -> {_mb(result['folderBytes'])}"
        )

    _with_store(config, data_dir, database, as_json, vacuum, human, existing=True)


def _folder_bytes(datadir: DataDir) -> int:
    """The data folder's files (with SQLite: the database, its WAL and shared memory)."""
    return sum(f.stat().st_size for f in datadir.path.iterdir() if f.is_file())


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f} MB"


def _stats_text(result: Any) -> str:
    lines = [f"{result['backend']}: data folder {_mb(result['folderBytes'])}"]
    lines += [
        f"  {t['table']:<20} {t['rows']:>12,} rows {_mb(t['bytes']):>12}" for t in result["tables"]
    ]
    store = ", ".join(f"{k} {v}" for k, v in result["store"].items())
    lines.append(f"store: {store}")
    r = result["retention"]
    if not r["enabled"]:
        lines.append("retention: off (everything is kept)")
    else:
        lines.append(
            "retention: on, a pass every {intervalSeconds} s; orders {ordersDays} d, trades"
            " {tradesDays} d, ledger {ledgerDays} d, system ledger {systemLedgerHours} h,"
            " simulation {simulationMinutes} min (0: kept forever)".format(**r)
        )
    if r.get("prunedSinceStart"):
        lines.append(f"pruned since the server started: {r['prunedSinceStart']}")
    return "\n".join(lines)


@db_app.command("stats")
def db_stats(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rows and size of every table, the data folder's size, and the retention in force
    (the running server's, if one runs on the folder)."""
    try:
        _, datadir = _load(config, data_dir, database)
    except CliError as exc:
        _fail(exc, as_json)

    def with_folder(result: Any) -> Any:
        return {"folderBytes": _folder_bytes(datadir), **result}

    _operate(
        config,
        data_dir,
        as_json,
        lambda a: with_folder(a.storage()),
        lambda ex, _: with_folder(ops.storage(ex)),
        _stats_text,
        database=database,
    )


@db_app.command("prune")
def db_prune(
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Offline: prune now what the [retention] horizons say is past (even with retention
    switched off); a running server does this by itself every interval_s."""

    def online(_: AdminClient) -> Any:
        raise CliError(
            "the running server prunes by itself ([retention] interval_s)", int(Code.UNSUPPORTED)
        )

    def offline(ex: Exchange, now: int) -> Any:
        settings = replace(ex.config.retention, enabled=True)
        return {"pruned": asyncio.run(prune_pass(ex, settings, now, directly))}

    def human(result: Any) -> str:
        return "pruned: " + ", ".join(f"{k} {v}" for k, v in result["pruned"].items())

    _operate(config, data_dir, as_json, online, offline, human, database=database)


@db_app.command("export")
def db_export(
    out: Annotated[Path, typer.Option("--out", help="File to write (JSON Lines).")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write every table to a file that `db import` loads into another store (of either kind)."""

    def export(store: JournaledStore, _: DataDir) -> Any:
        version = store.migrate()
        partial = out.with_name(out.name + ".partial")
        try:
            with open(partial, "w", encoding="utf-8") as f:
                rows = store.export_to(f)
                f.flush()
                os.fsync(f.fileno())
            partial.replace(out)
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
        finally:
            partial.unlink(missing_ok=True)
        return {"file": str(out), "version": version, "rows": rows}

    human = "exported {n} rows to {file}"
    _with_store(
        config,
        data_dir,
        database,
        as_json,
        export,
        lambda r: _rows_text(r, human),
        existing=True,  # a mistyped --data-dir must not export an empty exchange
    )


@db_app.command("import")
def db_import(
    source: Annotated[Path, typer.Option("--in", help="A file written by `db export`.")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load an export into an empty store, all or nothing (e.g. from SQLite to PostgreSQL)."""

    def load(store: JournaledStore, datadir: DataDir) -> Any:
        version = store.migrate()
        try:
            f = open(source, encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise CliError(
                f"cannot read {source}: {exc.strerror or exc}", int(Code.BAD_PARAM)
            ) from None
        with f:
            _check_sealing_key(f, datadir)
            f.seek(0)
            rows = store.import_from(f)
        return {"file": str(source), "version": version, "rows": rows}

    human = "imported {n} rows from {file}"
    _with_store(config, data_dir, database, as_json, load, lambda r: _rows_text(r, human))


def _check_sealing_key(export: Any, datadir: DataDir) -> None:
    """Refuse an import whose API secrets this data folder's sealing key cannot open: no
    command, and no server, could then open the store (its keys are decrypted at start)."""
    sealed: list[tuple[str, str]] = []
    for table, rows in dump.Reader(export).tables():
        if table.name == "api_keys":
            key_at, secret_at = table.columns.index("api_key"), table.columns.index("secret")
            sealed = [
                (row[key_at], row[secret_at])
                for row in rows
                if isinstance(row[secret_at], str) and SecretBox.is_sealed(row[secret_at])
            ]
            break
    if not sealed:
        return
    refused = int(Code.UNSUPPORTED)  # as an import into a store that is not empty
    hint = (
        f"copy secret.key from the source's data folder into {datadir.path} (or set"
        f" {SECRET_KEY_ENV} to the source's key) and import again"
    )
    try:
        box = datadir.existing_secret_box()
    except SecretKeyError as exc:
        raise CliError(f"{exc}: {hint}", refused) from None
    if box is None:
        raise CliError(
            f"the export's API secrets are sealed with the source's secret key: {hint}", refused
        )
    for api_key, secret in sealed:
        try:
            box.open(secret, api_key)
        except SecretKeyError:
            raise CliError(
                "the export's API secrets are sealed with another secret key than this data"
                f" folder's: {hint}",
                refused,
            ) from None


@config_app.command("show")
def config_show(
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write it to this file (refused if the file exists)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the built-in configuration: the whole file to copy and edit for --config (a
    file must be whole: one holding only the keys to change is refused for what it lacks)."""
    text = builtin_config_text()
    if out is None:
        if as_json:
            _emit({"config": text}, True)
        else:
            typer.echo(text, nl=False)
        return
    try:
        with open(out, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        _fail(CliError(f"{out} exists: choose another --out (nothing was written)", -1102), as_json)
    except OSError as exc:
        _fail(CliError(f"cannot write {out}: {exc.strerror or exc}", -1102), as_json)
    _emit({"path": str(out), "bytes": len(text.encode())}, as_json, lambda r: f"wrote {r['path']}")


@app.command()
def version(as_json: JsonOpt = False) -> None:
    """Print the version."""
    _emit({"version": __version__}, as_json, lambda result: str(result["version"]))


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """tradehall: a self-hostable crypto exchange."""


@markets_app.command("import")
def markets_import(
    symbols: Annotated[
        Path,
        typer.Option(
            "--symbols",
            help="The venue's GET /sapi/v1/symbols answer (a configuration needs a spot pair).",
        ),
    ],
    contracts: Annotated[
        Path | None,
        typer.Option("--contracts", help="The venue's GET /fapi/v1/contracts answer."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="TOML file to write [default: stdout].")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a configuration with a family venue's pairs and contracts (docs/operations.md)."""
    try:
        try:
            listed = market_import.symbol_list(_answer(symbols))
            offered = market_import.contract_list(_answer(contracts)) if contracts else None
            imported = market_import.import_markets(listed, offered)
        except market_import.ImportRefused as exc:
            raise CliError(f"cannot import: {exc}", int(Code.BAD_PARAM)) from None
        sources = [
            f"{flag} {path}"
            for flag, path in (("--symbols", symbols), ("--contracts", contracts))
            if path
        ]
        text = market_import.to_toml(imported, sources)
        try:  # what `serve --config` will read, checked before anything is written
            parse_config(text, str(out or "<stdout>"))
        except ConfigError as exc:
            raise CliError(f"cannot import: {exc}", int(Code.BAD_PARAM)) from None
        if out is not None:
            _write_text(out, text)
        result = {
            "file": str(out) if out is not None else None,
            "assets": imported.assets,
            "pairs": [p["symbol"] for p in imported.pairs],
            "contracts": [c["symbol"] for c in imported.contracts],
            "defaults": market_import.DEFAULTS,
        }
        if out is None and as_json:
            result["config"] = text
        if out is None and not as_json:
            typer.echo(text, nl=False)
            return
        _emit(result, as_json, _imported_text)
    except CliError as exc:
        _fail(exc, as_json)


def _answer(path: Path) -> object:
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(
            f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", int(Code.BAD_PARAM)
        ) from None
    return market_import.parse_answer(text, str(path))


def _write_text(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, "utf-8")
        partial.replace(path)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)


def _imported_text(result: Any) -> str:
    pairs, contracts = len(result["pairs"]), len(result["contracts"])
    return f"wrote {pairs} pairs and {contracts} contracts to {result['file']}"


def main() -> None:
    """The ``tradehall`` command. Under ``--json`` a script always gets one JSON object on
    stdout, also for a usage error (exit status 2) and an unexpected failure (exit status 1,
    the traceback on stderr)."""
    if "--json" not in sys.argv[1:]:
        app()
        return
    try:
        status = app(standalone_mode=False)
    except typer.TyperException as exc:  # bad usage: unknown option, missing or bad value
        _print_error(int(Code.BAD_PARAM), exc.format_message())
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:
        traceback.print_exc()
        _print_error(int(Code.UNKNOWN), f"internal error: {type(exc).__name__}: {exc}")
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)


def _print_error(code: int, msg: str) -> None:
    typer.echo(json.dumps({"code": code, "msg": msg}))
