"""The operator's command line.

While a server runs on the data folder, the operator commands go through its local admin API;
with no server they open the store themselves (holding the folder's lock), so state is never
changed behind a running server's back. Every command takes ``--json`` for scripts.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from tradehall import __version__, server
from tradehall import operations as ops
from tradehall.client import AdminClient, ApiError
from tradehall.codes import Reject
from tradehall.config import Config, ConfigError, load_config
from tradehall.datadir import DataDir, DataDirBusy
from tradehall.exchange import Exchange
from tradehall.store.base import StoreError
from tradehall.store.sqlite import SQLiteStore

app = typer.Typer(help="tradehall: a self-hostable crypto exchange.", no_args_is_help=True)
user_app = typer.Typer(help="Manage users.", no_args_is_help=True)
key_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
app.add_typer(user_app, name="user")
app.add_typer(key_app, name="key")

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data folder [default: from config, ./tradehall-data]"),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML config file [default: built-in]")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
UserOpt = Annotated[int, typer.Option("--user", help="User id.")]


class CliError(Exception):
    def __init__(self, msg: str, code: int | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.code = code


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _load(config: Path | None, data_dir: Path | None) -> tuple[Config, DataDir]:
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise CliError(f"configuration error: {exc}") from None
    return cfg, DataDir(data_dir if data_dir is not None else cfg.server.data_dir)


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
                lines.append(f"{indent}{k}: {v}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(
            f"{indent}-\n{_pretty(v, indent + '  ')}" if isinstance(v, dict) else f"{indent}- {v}"
            for v in value
        )
    return f"{indent}{value}"


def _fail(exc: CliError, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps({"code": exc.code if exc.code is not None else -1000, "msg": exc.msg})
        )
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
    client = AdminClient(url, token, timeout=30.0)
    try:
        client.status()
    except Exception:
        client.close()
        return None
    return client


@contextmanager
def _offline(cfg: Config, datadir: DataDir) -> Iterator[Exchange]:
    try:
        with datadir.lock():
            store = SQLiteStore(datadir.db_path, cfg.server.sqlite_synchronous)
            try:
                store.migrate()
                exchange = Exchange(cfg, store)
                exchange.recover()
                yield exchange
                exchange.commit_now()
            finally:
                store.close()
    except DataDirBusy as exc:
        raise CliError(f"{exc} (a server may be starting or not answering)") from None


def _operate(
    config: Path | None,
    data_dir: Path | None,
    as_json: bool,
    online: Callable[[AdminClient], Any],
    offline: Callable[[Exchange, int], Any],
    human: Callable[[Any], str] | None = None,
) -> None:
    try:
        cfg, datadir = _load(config, data_dir)
        admin = _running_admin(datadir)
        if admin is not None:
            try:
                result = online(admin)
            except ApiError as exc:
                raise CliError(exc.msg, exc.code) from None
            finally:
                admin.close()
        else:
            try:
                with _offline(cfg, datadir) as exchange:
                    result = offline(exchange, now_ms())
            except Reject as exc:
                raise CliError(exc.msg, int(exc.code)) from None
            except StoreError as exc:
                raise CliError(str(exc), -1001) from None
        _emit(result, as_json, human)
    except CliError as exc:
        _fail(exc, as_json)


# ------------------------------------------------------------------------- serve


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind [default: 127.0.0.1]")] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (0 picks a free one) [default: 8080]")
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    demo: Annotated[bool, typer.Option("--demo", help="Create and fund a demo account.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the exchange (SQLite in the data folder)."""
    try:
        cfg, datadir = _load(config, data_dir)
        bind_host = host or cfg.server.host
        bind_port = cfg.server.port if port is None else port
        with datadir.lock():
            server.run(
                cfg,
                datadir,
                bind_host,
                bind_port,
                demo=demo,
                announce=lambda url, info: _announce(url, datadir, info, as_json),
            )
    except server.ListenError as exc:
        _fail(CliError(str(exc)), as_json)
    except DataDirBusy as exc:
        _fail(CliError(f"{exc}: is a server already running on it?"), as_json)
    except CliError as exc:
        _fail(exc, as_json)


def _announce(url: str, datadir: DataDir, demo: dict[str, Any] | None, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"url": url, "dataDir": str(datadir.path), "demo": demo}))
    else:
        typer.echo(f"tradehall {__version__} listening on {url} (data folder: {datadir.path})")
        if demo:
            typer.echo(f"demo account: user {demo['userId']}")
            typer.echo(f"  API key:    {demo['apiKey']}")
            typer.echo(f"  API secret: {demo['secret']}")
    sys.stdout.flush()


# ------------------------------------------------------------------------- users and keys


@user_app.command("create")
def user_create(
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a user (its spot account starts empty)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.create_user(name),
        lambda ex, ts: ops.create_user(ex, name, ts),
    )


@user_app.command("list")
def user_list(
    data_dir: DataDirOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False
) -> None:
    """List users."""
    _operate(config, data_dir, as_json, lambda a: a.list_users(), lambda ex, ts: ops.list_users(ex))


@key_app.command("create")
def key_create(
    user: UserOpt,
    read_only: Annotated[bool, typer.Option("--read-only", help="No trading permission.")] = False,
    ip: Annotated[
        list[str] | None, typer.Option("--ip", help="Allowed IP or CIDR (repeatable).")
    ] = None,
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
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
    )


@key_app.command("revoke")
def key_revoke(
    api_key: Annotated[str, typer.Argument(help="The API key to revoke.")],
    data_dir: DataDirOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke an API key (effective at once)."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.revoke_key(api_key),
        lambda ex, ts: ops.revoke_key(ex, api_key, ts),
    )


# ------------------------------------------------------------------------- money


def _transfer_command(kind: str) -> Callable[..., None]:
    def command(
        user: UserOpt,
        asset: Annotated[str, typer.Option(help="Asset, e.g. USDT.")],
        amount: Annotated[str, typer.Option(help="Decimal amount.")],
        tx_id: Annotated[
            str | None,
            typer.Option("--tx-id", help="Idempotency id: repeating it changes nothing."),
        ] = None,
        data_dir: DataDirOpt = None,
        config: ConfigOpt = None,
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
        )

    command.__doc__ = (
        "Credit a user's spot account from outside (idempotent by --tx-id)."
        if kind == "deposit"
        else "Debit a user's spot account to outside; never below zero (idempotent by --tx-id)."
    )
    return command


app.command("deposit")(_transfer_command("deposit"))
app.command("withdraw")(_transfer_command("withdraw"))


def _balances_table(result: Any) -> str:
    rows = [f"{'asset':<8} {'free':>24} {'locked':>24}"]
    rows += [f"{b['asset']:<8} {b['free']:>24} {b['locked']:>24}" for b in result["balances"]]
    return f"user {result['userId']}\n" + "\n".join(rows)


@app.command()
def balances(
    user: UserOpt, data_dir: DataDirOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False
) -> None:
    """Show a user's spot balances."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda admin: admin.balances(user),
        lambda ex, ts: ops.balances(ex, user),
        _balances_table,
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


def _markets_table(result: Any) -> str:
    rows = [[title for title, _, _ in _MARKET_COLUMNS]]
    rows += [[str(p[key]) for _, key, _ in _MARKET_COLUMNS] for p in result["pairs"]]
    widths = [width for _, _, width in _MARKET_COLUMNS]
    return "\n".join(
        " ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)) for row in rows
    )


def _audit_text(result: Any) -> str:
    head = "audit: OK" if result["ok"] else "audit: VIOLATIONS\n" + "\n".join(result["problems"])
    assets = [
        f"{a['asset']}: held {a['held']}, deposits - withdrawals"
        f" {a['depositsMinusWithdrawals']}, fees {a['fees']}"
        for a in result["assets"]
    ]
    return "\n".join([head, *assets])


@app.command()
def markets(
    data_dir: DataDirOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False
) -> None:
    """List assets and spot pairs."""
    _operate(
        config,
        data_dir,
        as_json,
        lambda a: a.markets(),
        lambda ex, ts: ops.markets(ex),
        _markets_table,
    )


@app.command()
def audit(data_dir: DataDirOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
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
    )
    if not holder.get("result", {}).get("ok", False):
        raise typer.Exit(1)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
