"""The operator command line as a script drives it: `--json` output parsed, exit statuses
checked; first with no server on the data folder (the CLI opens the store itself), then with a
server running on it (the CLI goes through the admin API).

Real `python -m tradehall ...` processes wherever the process itself is what is tested: its
own stdout and stderr (the creation note, no traceback), its environment, a lock another
process holds, commands side by side beside a server, `serve`; and at least once for each kind
of answer (a result, a refusal, a usage error, offline and through a server). The rest run the
same entry point in this process (cli_support), which answers the same without a second of
imports per command.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cli_support import tradehall_inline
from support import Backend, tradehall_command
from tradehall.client import AdminClient, ApiError, Client
from tradehall.config import load_config, parse_config

CLI_TIMEOUT = 30.0
HEX32 = re.compile(r"[0-9a-f]{32}")


def run(
    data_dir: Path | None, *args: str, timeout: float = CLI_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """One CLI command in a process of its own; it ends by itself (subprocess.run kills it on
    timeout)."""
    argv = list(args)
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return subprocess.run(
        tradehall_command(*argv), capture_output=True, text=True, timeout=timeout, check=False
    )


def inline(data_dir: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    """One CLI command in this process (never from two threads at once)."""
    argv = list(args)
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return tradehall_inline(*argv)


def ok(data_dir: Path | None, *args: str, process: bool = False) -> Any:
    """A --json command that must succeed: exit 0 and exactly one JSON line on stdout (in a
    process of its own with ``process``)."""
    proc = (run if process else inline)(data_dir, *args, "--json")
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def fails(
    data_dir: Path | None, *args: str, code: int | None = None, process: bool = False
) -> dict[str, Any]:
    """A --json command that must fail: exit 1 and one JSON error {"code", "msg"} on stdout
    (in a process of its own with ``process``)."""
    proc = (run if process else inline)(data_dir, *args, "--json")
    assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    error: dict[str, Any] = json.loads(lines[0])
    assert set(error) == {"code", "msg"}, error
    assert isinstance(error["code"], int) and error["code"] < 0, error
    assert isinstance(error["msg"], str) and error["msg"], error
    if code is not None:
        assert error["code"] == code, error
    return error


def free_locked(data_dir: Path, user: int, process: bool = False) -> dict[str, tuple[str, str]]:
    result = ok(data_dir, "balances", "--user", str(user), process=process)
    return {b["asset"]: (b["free"], b["locked"]) for b in result["balances"]}


def parallel(*jobs: Callable[[], Any]) -> list[Any]:
    """Run independent commands side by side (each in a process of its own: the in-process
    runner swaps this process's streams); results in the order given."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


def account_of(client: Client) -> dict[str, tuple[str, str]]:
    return {b["asset"]: (b["free"], b["locked"]) for b in client.account()["balances"]}


# --------------------------------------------------------------------------- offline


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_offline_user_and_key_lifecycle(data_dir: Path) -> None:
    user = ok(data_dir, "user", "create", "--name", "x")
    assert user["id"] == 1 and user["name"] == "x" and isinstance(user["created"], int)
    assert ok(data_dir, "user", "create")["id"] == 2

    key = ok(data_dir, "key", "create", "--user", "1")
    assert HEX32.fullmatch(key["apiKey"]) and HEX32.fullmatch(key["secret"])
    assert key["userId"] == 1 and key["readOnly"] is False and key["ips"] == []

    limited = ok(
        data_dir,
        "key", "create", "--user", "2", "--read-only", "--ip", "10.0.0.0/8", "--ip", "127.0.0.1",
    )  # fmt: skip
    assert limited["userId"] == 2 and limited["readOnly"] is True
    assert limited["ips"] == ["10.0.0.0/8", "127.0.0.1/32"]
    assert limited["apiKey"] != key["apiKey"]

    fails(data_dir, "key", "create", "--user", "99")

    revoked = ok(data_dir, "key", "revoke", key["apiKey"])
    assert revoked == {"apiKey": key["apiKey"], "userId": 1, "revoked": True}
    assert ok(data_dir, "key", "revoke", key["apiKey"]) == revoked  # idempotent
    fails(data_dir, "key", "revoke", "0" * 32, code=-2015)
    fails(data_dir, "key", "revoke", "", code=-1102)

    users = ok(data_dir, "user", "list")["users"]
    assert [(u["id"], u["name"]) for u in users] == [(1, "x"), (2, "user-2")]
    keys = {k["apiKey"]: k for k in ok(data_dir, "key", "list")["keys"]}
    assert {(k["userId"], k["readOnly"]) for k in keys.values()} == {(1, False), (2, True)}
    assert keys[key["apiKey"]]["revoked"] is not None and keys[limited["apiKey"]]["revoked"] is None
    assert not any("secret" in k for k in keys.values())


def test_offline_deposits_and_withdrawals_are_idempotent_by_tx_id(data_dir: Path) -> None:
    uid = str(ok(data_dir, "user", "create", "--name", "alice")["id"])
    dep = ok(data_dir, "deposit", "--user", uid, "--asset", "USDT", "--amount", "5000",
             "--tx-id", "bank-0001")  # fmt: skip
    assert dep["duplicate"] is False and dep["txId"] == "bank-0001"
    assert dep["userId"] == int(uid) and dep["asset"] == "USDT" and dep["amount"] == "5000"
    assert dep["free"] == "5000.00000000" and dep["locked"] == "0.00000000"

    again = ok(data_dir, "deposit", "--user", uid, "--asset", "USDT", "--amount", "5000",
               "--tx-id", "bank-0001")  # fmt: skip
    assert again["duplicate"] is True and again["transferId"] == dep["transferId"]
    assert again["free"] == "5000.00000000"

    # The same tx id with other values is refused, and changes nothing.
    fails(data_dir, "deposit", "--user", uid, "--asset", "USDT", "--amount", "5001",
          "--tx-id", "bank-0001", code=-1102)  # fmt: skip
    fails(data_dir, "withdraw", "--user", uid, "--asset", "USDT", "--amount", "5000",
          "--tx-id", "bank-0001", code=-1102)  # fmt: skip

    w = ok(data_dir, "withdraw", "--user", uid, "--asset", "USDT", "--amount", "100.5",
           "--tx-id", "payout-0001")  # fmt: skip
    assert w["duplicate"] is False and w["free"] == "4899.50000000" and w["amount"] == "100.5"
    w2 = ok(data_dir, "withdraw", "--user", uid, "--asset", "USDT", "--amount", "100.5",
            "--tx-id", "payout-0001")  # fmt: skip
    assert w2["duplicate"] is True and w2["transferId"] == w["transferId"]
    assert w2["free"] == "4899.50000000"

    # More than free: refused with -2017, nothing changes, and the tx id is not used up.
    fails(data_dir, "withdraw", "--user", uid, "--asset", "USDT", "--amount", "4899.50000001",
          "--tx-id", "payout-0002", code=-2017)  # fmt: skip
    assert free_locked(data_dir, int(uid)) == {
        "BTC": ("0.00000000", "0.00000000"),
        "ETH": ("0.00000000", "0.00000000"),
        "USDT": ("4899.50000000", "0.00000000"),
    }
    ok(data_dir, "deposit", "--user", uid, "--asset", "USDT", "--amount", "0.00000001")
    later = ok(data_dir, "withdraw", "--user", uid, "--asset", "USDT", "--amount", "4899.50000001",
               "--tx-id", "payout-0002")  # fmt: skip
    assert later["duplicate"] is False and later["free"] == "0.00000000"

    report = ok(data_dir, "audit")
    assert report["ok"] is True and report["problems"] == []
    usdt = next(a for a in report["assets"] if a["asset"] == "USDT")
    assert usdt["held"] == usdt["depositsMinusWithdrawals"] == "0.00000000"


def test_offline_refusals_change_nothing_and_audit_catches_tampering(data_dir: Path) -> None:
    ok(data_dir, "user", "create")
    ok(data_dir, "deposit", "--user", "1", "--asset", "USDT", "--amount", "10")
    refusals = [
        ("deposit", "1", "USDT", "1.123456789", -1111),  # more than the asset's 8 decimals
        ("withdraw", "1", "USDT", "0.000000001", -1111),
        ("withdraw", "1", "USDT", "-5", -1102),
        ("deposit", "1", "USDT", "0", -1102),
        # (a malformed amount is a usage error: test_usage_errors_are_json_too_...)
        ("deposit", "1", "DOGE", "1", -1102),  # unknown asset
        ("withdraw", "7", "USDT", "1", None),  # unknown user
    ]
    for kind, user, asset, amount, code in refusals:
        error = fails(
            data_dir, kind, "--user", user, "--asset", asset, f"--amount={amount}", code=code
        )
        if user == "7":
            assert "7" in error["msg"]

    # A folder locked by another process is refused, not changed behind its back.
    fd = os.open(data_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        error = fails(
            data_dir,
            "deposit",
            *("--user", "1", "--asset", "USDT", "--amount", "1"),
            code=-1020,  # refused in this state: a catalogue code, not "unknown error"
            process=True,
        )
        assert "in use" in error["msg"]
    finally:
        os.close(fd)

    assert free_locked(data_dir, 1) == {
        "BTC": ("0.00000000", "0.00000000"),
        "ETH": ("0.00000000", "0.00000000"),
        "USDT": ("10.00000000", "0.00000000"),
    }

    # Someone edits a balance behind the exchange's back: one unit out of thin air.
    db = sqlite3.connect(data_dir / "tradehall.db")
    try:
        with db:
            changed = db.execute(
                "UPDATE balances SET free = free + 1 WHERE account = 1 AND asset = 'USDT'"
            ).rowcount
        assert changed == 1
    finally:
        db.close()
    proc = inline(data_dir, "audit", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["ok"] is False and len(report["problems"]) >= 1
    assert any("USDT" in problem for problem in report["problems"])
    usdt = next(a for a in report["assets"] if a["asset"] == "USDT")
    assert (usdt["held"], usdt["depositsMinusWithdrawals"]) == ("10.00000001", "10.00000000")
    human = inline(data_dir, "audit")
    assert human.returncode == 1 and "VIOLATIONS" in human.stdout


def test_offline_views_json_and_human(data_dir: Path) -> None:
    ok(data_dir, "user", "create", "--name", "viewer")
    # Asset names are case-insensitive on input, upper case in answers.
    assert ok(data_dir, "deposit", "--user", "1", "--asset", "btc", "--amount", "1.5")["asset"] == (
        "BTC"
    )
    bal = ok(data_dir, "balances", "--user", "1")
    assert bal == {
        "userId": 1,
        "balances": [
            {"asset": "BTC", "free": "1.50000000", "locked": "0.00000000"},
            {"asset": "ETH", "free": "0.00000000", "locked": "0.00000000"},
            {"asset": "USDT", "free": "0.00000000", "locked": "0.00000000"},
        ],
    }

    mk = ok(data_dir, "markets")
    assert mk["assets"] == [
        {"name": "BTC", "decimals": 8},
        {"name": "ETH", "decimals": 8},
        {"name": "USDT", "decimals": 8},
    ]
    pairs = {p["symbol"]: p for p in mk["pairs"]}
    assert list(pairs) == ["BTCUSDT", "ETHUSDT", "ETHBTC"]
    expected = {
        "BTCUSDT": ("BTC", "USDT", 2, 6),
        "ETHUSDT": ("ETH", "USDT", 2, 4),
        "ETHBTC": ("ETH", "BTC", 5, 3),
    }
    for symbol, (base, quote, pp, qp) in expected.items():
        p = pairs[symbol]
        assert (p["baseAsset"], p["quoteAsset"]) == (base, quote)
        assert (p["pricePrecision"], p["quantityPrecision"]) == (pp, qp)
        assert set(p) == {
            "symbol", "baseAsset", "quoteAsset", "pricePrecision", "quantityPrecision",
            "minQuantity", "minNotional", "makerFee", "takerFee", "marketOrders", "trading",
        }  # fmt: skip
        assert p["makerFee"] == "0.0008" and p["takerFee"] == "0.001"
        assert p["marketOrders"] is True and p["trading"] is True

    report = inline(data_dir, "audit", "--json")
    assert report.returncode == 0
    audit = json.loads(report.stdout)
    assert audit["ok"] is True and audit["problems"] == []
    assert [a["asset"] for a in audit["assets"]] == ["BTC", "ETH", "USDT"]
    assert audit["assets"][0] == {
        "asset": "BTC",
        "held": "1.50000000",
        "depositsMinusWithdrawals": "1.50000000",
        "fees": "0.00000000",
    }

    # Human output names the assets and symbols, and is not JSON.
    human = inline(data_dir, "balances", "--user", "1")
    assert human.returncode == 0, human.stderr
    for word in ("BTC", "ETH", "USDT", "1.50000000", "user 1"):
        assert word in human.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(human.stdout)
    human = inline(data_dir, "markets")
    assert human.returncode == 0, human.stderr
    for word in ("BTCUSDT", "ETHUSDT", "ETHBTC", "BTC", "ETH", "USDT"):
        assert word in human.stdout
    # true, false and null as --json writes them, not Python's True, False and None.
    human = inline(data_dir, "deposit", "--user", "1", "--asset", "ETH", "--amount", "1")
    assert "duplicate: false" in human.stdout.splitlines(), human.stdout
    system = inline(data_dir, "system").stdout
    assert not any(word in system.split() for word in ("True", "False", "None")), system

    # Errors without --json: a message on stderr, nothing on stdout, exit 1.
    bad = inline(data_dir, "withdraw", "--user", "1", "--asset", "BTC", "--amount", "2")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "insufficient" in bad.stderr.lower()


# --------------------------------------------------------------------------- with a server


def test_commands_go_through_the_running_server(server_factory: Any, data_dir: Path) -> None:
    server = server_factory(data_dir)

    token = data_dir / "admin.token"
    assert token.is_file()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert len(token.read_text().strip()) >= 32
    admin = AdminClient(server.url, token.read_text().strip())

    # A user and keys made by the CLI while the server runs can trade through it at once.
    bob = ok(data_dir, "user", "create", "--name", "bob")
    carol = ok(data_dir, "user", "create", "--name", "carol")
    # (Independent commands run side by side: the server serializes them itself.)
    bob_key, carol_key, dep, _ = parallel(
        lambda: ok(data_dir, "key", "create", "--user", str(bob["id"]), process=True),
        lambda: ok(data_dir, "key", "create", "--user", str(carol["id"]), process=True),
        lambda: ok(data_dir, "deposit", "--user", str(bob["id"]), "--asset", "USDT",
                   "--amount", "10000", "--tx-id", "bob-1", process=True),
        lambda: ok(data_dir, "deposit", "--user", str(carol["id"]), "--asset", "BTC",
                   "--amount", "1", "--tx-id", "carol-1", process=True),
    )  # fmt: skip
    assert dep["duplicate"] is False

    with (
        Client(server.url, bob_key["apiKey"], bob_key["secret"]) as b,
        Client(server.url, carol_key["apiKey"], carol_key["secret"]) as c,
    ):
        assert account_of(b)["USDT"] == ("10000.00000000", "0.00000000")
        order = b.create_order("BTCUSDT", "BUY", "LIMIT", "0.1", price="30000")
        assert order["status"] == "NEW"
        assert account_of(b)["USDT"] == ("7000.00000000", "3000.00000000")
        assert free_locked(data_dir, bob["id"]) == account_of(b)

        # A deposit by the CLI shows at once in /account.
        ok(data_dir, "deposit", "--user", str(bob["id"]), "--asset", "USDT", "--amount", "0.5",
           "--tx-id", "bob-2")  # fmt: skip
        assert account_of(b)["USDT"] == ("7000.50000000", "3000.00000000")

        sell = c.create_order("BTCUSDT", "SELL", "LIMIT", "0.04", price="30000")
        assert sell["status"] == "FILLED"
        assert b.get_order("BTCUSDT", order["orderId"])["status"] == "PARTIALLY_FILLED"
        bob_seen, carol_seen = free_locked(data_dir, bob["id"]), free_locked(data_dir, carol["id"])
        assert (bob_seen, carol_seen) == (account_of(b), account_of(c))

        # Idempotency and refusals behave as offline, through the admin API.
        bid = str(bob["id"])
        again, *_ = parallel(
            lambda: ok(data_dir, "deposit", "--user", bid, "--asset", "USDT",
                       "--amount", "10000", "--tx-id", "bob-1", process=True),
            lambda: fails(data_dir, "deposit", "--user", bid, "--asset", "USDT",
                          "--amount", "9999", "--tx-id", "bob-1", code=-1102, process=True),
            # Locked funds cannot be withdrawn: only the 7000.5 free.
            lambda: fails(data_dir, "withdraw", "--user", bid, "--asset", "USDT",
                          "--amount", "7000.50000001", code=-2017, process=True),
            lambda: fails(data_dir, "deposit", "--user", bid, "--asset", "USDT",
                          "--amount", "1.123456789", code=-1111, process=True),
        )  # fmt: skip
        assert again["duplicate"] is True and again["transferId"] == dep["transferId"]
        assert account_of(b)["USDT"] == ("7000.50000000", "1800.00000000")
        w = ok(data_dir, "withdraw", "--user", str(bob["id"]), "--asset", "USDT",
               "--amount", "500", "--tx-id", "bob-out-1")  # fmt: skip
        assert w["free"] == "6500.50000000"
        assert account_of(b)["USDT"] == ("6500.50000000", "1800.00000000")

        # Read-only and IP-restricted keys made by the CLI are enforced by the server at once.
        ro, far = parallel(
            lambda: ok(data_dir, "key", "create", "--user", bid, "--read-only",
                       "--ip", "127.0.0.0/8", process=True),
            lambda: ok(data_dir, "key", "create", "--user", bid, "--ip", "10.0.0.0/8",
                       process=True),
        )  # fmt: skip
        with Client(server.url, ro["apiKey"], ro["secret"]) as r:
            assert account_of(r) == account_of(b)
            with pytest.raises(ApiError) as denied:
                r.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", price="20000")
            assert (denied.value.status, denied.value.code) == (403, -2015)
        with Client(server.url, far["apiKey"], far["secret"]) as f:
            with pytest.raises(ApiError) as denied:
                f.account()
            assert (denied.value.status, denied.value.code) == (403, -2015)

        # Revocation by the CLI is effective at once.
        ok(data_dir, "key", "revoke", carol_key["apiKey"])
        with pytest.raises(ApiError) as denied:
            c.account()
        assert (denied.value.status, denied.value.code) == (401, -2015)

    users = ok(data_dir, "user", "list")["users"]
    listed = {k["apiKey"]: k["revoked"] for k in ok(data_dir, "key", "list")["keys"]}  # online
    assert listed[carol_key["apiKey"]] is not None and "secret" not in str(listed)
    audit = inline(data_dir, "audit", "--json")
    human = inline(data_dir, "balances", "--user", bid)
    assert [u["name"] for u in users] == ["bob", "carol"]
    fees = {b["asset"]: (b["free"], b["locked"]) for b in admin.balances(0)["balances"]}
    assert fees["BTC"] == ("0.00003200", "0.00000000")  # maker 0.08 % of 0.04 BTC bought
    assert fees["USDT"] == ("1.20000000", "0.00000000")  # taker 0.1 % of 1200 USDT
    assert audit.returncode == 0, audit.stdout
    assert json.loads(audit.stdout)["ok"] is True
    assert human.returncode == 0 and "USDT" in human.stdout and "6500.50000000" in human.stdout

    admin.close()
    assert server.stop() == 0
    # After the server stops, the CLI works on the store itself and sees the same state.
    assert free_locked(data_dir, bob["id"])["USDT"] == ("6500.50000000", "1800.00000000")


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_command_naming_another_store_than_the_running_servers_is_refused(
    server_factory: Any, backend: Backend, tmp_path: Path
) -> None:
    """With a server on the folder, commands go through it: one that names another store
    (--database or TRADEHALL_DATABASE) would silently act on the server's instead."""
    data = tmp_path / "data"
    server_factory(data, *backend.server_args(data))
    own = backend.database(data)
    other = backend.database(tmp_path / "other")  # another schema, same server
    ok(data, "user", "create", "--database", own)  # the server's own store: through it
    ok(data, "user", "create")  # none named: the running server's
    before = ok(data, "user", "list")
    for named in (other, ""):  # another PostgreSQL schema; SQLite in the folder
        error = fails(data, "user", "create", "--database", named, code=-1102)
        assert "uses another store" in error["msg"] and "password" not in error["msg"]
    proc = subprocess.run(
        tradehall_command("user", "create", "--data-dir", str(data), "--json"),
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
        env={**os.environ, "TRADEHALL_DATABASE": other},
    )  # fmt: skip
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == -1102
    assert ok(data, "user", "list") == before  # nothing created anywhere


def test_serve_refuses_a_data_dir_with_a_running_server(
    server_factory: Any, data_dir: Path
) -> None:
    server = server_factory(data_dir)
    before = json.loads((data_dir / "server.json").read_text())

    second = run(data_dir, "serve", "--port", "0", "--json", timeout=20)
    assert second.returncode == 1
    error = json.loads(second.stdout.strip())
    assert error["code"] < 0 and "already running" in error["msg"]
    assert str(data_dir) in error["msg"]

    human = run(data_dir, "serve", "--port", "0", timeout=20)
    assert human.returncode == 1 and human.stdout == ""
    assert len(human.stderr.strip().splitlines()) == 1
    assert "already running" in human.stderr

    # The refused start left the running server and its address file alone.
    assert json.loads((data_dir / "server.json").read_text()) == before
    assert Client(server.url).ping() == {}
    assert ok(data_dir, "user", "create")["id"] == 1
    assert server.stop() == 0


# --------------------------------------------------------------------------- configuration


def _default_toml() -> str:
    return resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def broken_configs(tmp_path: Path) -> Iterator[list[tuple[Path, int, str]]]:
    """(file, line, field) of configuration files with one mistake each."""
    default = _default_toml()
    cases = []

    unknown_asset = default.replace('quote = "BTC"', 'quote = "USDC"')
    assert unknown_asset != default
    path = tmp_path / "unknown-asset.toml"
    path.write_text(unknown_asset)
    cases.append((path, _line_of(unknown_asset, '"USDC"'), "pairs[2].quote"))

    typo = default.replace('maker_fee = "0.0008"', 'maker_fe = "0.0008"', 1)
    assert typo != default
    path = tmp_path / "typo.toml"
    path.write_text(typo)
    cases.append((path, _line_of(typo, "maker_fe "), "pairs[0].maker_fe"))

    port = default.replace("port = 8080 ", "port = 70000 ")
    assert port != default
    path = tmp_path / "port.toml"
    path.write_text(port)
    cases.append((path, _line_of(port, "70000"), "server.port"))
    yield cases


def test_serve_with_a_broken_config_exits_with_one_line_naming_file_line_and_field(
    tmp_path: Path, broken_configs: list[tuple[Path, int, str]]
) -> None:
    data = tmp_path / "never-created"
    for path, line, field in broken_configs:
        proc = run(data, "serve", "--port", "0", "--config", str(path), timeout=20)
        assert proc.returncode != 0, proc.stdout
        assert proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert f"{path}:{line}: {field}:" in lines[0], (lines[0], line, field)
        if field == "pairs[2].quote":
            assert "unknown asset 'USDC'" in lines[0]

    path, line, field = broken_configs[0]
    as_json = run(data, "serve", "--port", "0", "--json", "--config", str(path), timeout=20)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)
    assert f"{path}:{line}: {field}:" in error["msg"]
    assert error["code"] == -1102  # a bad value given, not an unknown error
    # Nothing was started, nothing was created.
    assert not data.exists()


def test_config_show_gives_the_whole_built_in_file_to_copy_and_edit(tmp_path: Path) -> None:
    """The template a --config file starts from, without reading the package's files: printed,
    in --json, or written to --out (never over an existing file); what it writes loads, and
    an edited copy is what serve reads."""
    printed = inline(None, "config", "show")
    assert printed.returncode == 0 and printed.stdout.startswith("# tradehall configuration.")
    assert ok(None, "config", "show")["config"] == printed.stdout
    shown, builtin = parse_config(printed.stdout, "shown"), load_config()
    assert (shown.markets, shown.server) == (builtin.markets, builtin.server)
    out = tmp_path / "venue.toml"
    written = ok(None, "config", "show", "--out", str(out))
    assert written == {"path": str(out), "bytes": len(printed.stdout.encode())}
    assert out.read_text() == printed.stdout
    out.write_text(printed.stdout.replace("drain_s = 0", "drain_s = 6"))
    assert load_config(out).server.drain_s == 6
    fails(None, "config", "show", "--out", str(out), code=-1102)  # exists: left alone
    assert "drain_s = 6" in out.read_text()


def test_cli_commands_use_the_given_config(tmp_path: Path) -> None:
    custom = _default_toml().replace(
        '[[assets]]\nname = "USDT"',
        '[[assets]]\nname = "SOL"\ndecimals = 9\n\n[[assets]]\nname = "USDT"',
    )
    assert 'name = "SOL"' in custom
    custom += (
        '\n[[pairs]]\nsymbol = "SOLUSDT"\nbase = "SOL"\nquote = "USDT"\nprice_precision = 3\n'
        'quantity_precision = 2\nmin_quantity = "0.01"\nmin_notional = "1"\n'
        'maker_fee = "0"\ntaker_fee = "0.002"\n'
    )
    path = tmp_path / "custom.toml"
    path.write_text(custom)
    data = tmp_path / "data"
    mk = ok(data, "markets", "--config", str(path))
    assert {"name": "SOL", "decimals": 9} in mk["assets"]
    sol = next(p for p in mk["pairs"] if p["symbol"] == "SOLUSDT")
    assert (sol["pricePrecision"], sol["quantityPrecision"], sol["makerFee"]) == (3, 2, "0")
    ok(data, "user", "create", "--config", str(path))
    dep = ok(data, "deposit", "--user", "1", "--asset", "SOL", "--amount", "0.123456789",
             "--config", str(path))  # fmt: skip
    assert dep["free"] == "0.123456789"


def test_empty_name_is_refused_with_or_without_a_server(
    server_factory: Any, data_dir: Path
) -> None:
    fails(data_dir, "user", "create", "--name", "", code=-1102)
    server_factory(data_dir)
    fails(data_dir, "user", "create", "--name", "", code=-1102)


# --------------------------------------------------------------------------- errors under --json


def json_error(proc: subprocess.CompletedProcess[str], status: int) -> dict[str, Any]:
    """Exactly one JSON error object on stdout, and the exit status expected."""
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    error: dict[str, Any] = json.loads(lines[0])
    assert set(error) == {"code", "msg"} and isinstance(error["code"], int), error
    assert error["code"] < 0 and error["msg"], error
    return error


def test_usage_errors_are_json_too_with_exit_status_2(data_dir: Path) -> None:
    error = json_error(run(data_dir, "balances", "--json"), 2)  # --user missing
    assert error["code"] == -1102 and "--user" in error["msg"]
    error = json_error(inline(data_dir, "balances", "--user", "abc", "--json"), 2)
    assert "--user" in error["msg"]
    json_error(inline(data_dir, "user", "list", "--no-such-option", "--json"), 2)
    json_error(run(None, "no-such-command", "--json"), 2)
    error = json_error(run(data_dir, "serve", "--port", "70000", "--json"), 2)
    assert "--port" in error["msg"]
    assert not data_dir.exists()  # nothing was started, nothing created
    # A malformed number or account name is a usage error too; a well-formed value the
    # command cannot take (a negative amount, spot to spot) is not.
    for args in (
        ("deposit", "--user", "1", "--asset", "USDT", "--amount", "abc"),
        ("deposit", "--user", "1", "--asset", "USDT", "--amount", "1e3"),
        ("withdraw", "--user", "1", "--asset", "USDT", "--amount", "1,5"),
        ("pool", "deposit", "--asset", "USDT", "--amount", " 5"),
        ("transfer", "--user", "1", "--asset", "USDT", "--amount", "1", "--from", "spot",
         "--to", "moon"),
        ("transfer", "--user", "1", "--asset", "USDT", "--amount", "1", "--from", "spot",
         "--to", "fütures"),
        ("index-price", "--contract", "E-BTC-USDT", "--price", "0x10"),
        # An empty value where leaving the option out widens the action (an unset variable
        # must not settle every contract, or set the whole index instead of one feed).
        ("funding", "now", "--contract", ""),
        ("index-price", "--contract", "E-BTC-USDT", "--price", "30100", "--feed", " "),
    ):  # fmt: skip
        error = json_error(inline(data_dir, *args, "--json"), 2)
        assert error["code"] == -1102 and args[-2] in error["msg"], (args, error)
    assert not data_dir.exists()
    error = json_error(
        inline(data_dir, "transfer", "--user", "1", "--asset", "USDT", "--amount", "1", "--from",
               "spot", "--to", "SPOT", "--json"),
        1,
    )  # fmt: skip
    assert error["code"] == -1102
    # Without --json they stay the usual usage message on stderr.
    proc = run(data_dir, "serve", "--port", "-1")
    assert proc.returncode == 2 and proc.stdout == "" and "--port" in proc.stderr


def test_data_folder_problems_are_one_clear_error(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for args in (("user", "list"), ("db", "upgrade")):
        error = json_error(inline(a_file, *args, "--json"), 1)
        assert str(a_file) in error["msg"], error
    error = json_error(run(a_file, "serve", "--port", "0", "--json", timeout=20), 1)
    assert str(a_file) in error["msg"], error
    proc = run(a_file, "user", "list")
    assert (
        proc.returncode == 1
        and proc.stderr.startswith("error: ")
        and "Traceback" not in (proc.stderr)
    )


def test_a_bad_sealing_key_is_one_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok(data, "user", "create")
    env = {**os.environ, "TRADEHALL_SECRET_KEY": "not base64 at all!"}
    for args in (("user", "list"), ("serve", "--port", "0")):
        proc = subprocess.run(
            tradehall_command(*args, "--data-dir", str(data), "--json"),
            capture_output=True, text=True, timeout=CLI_TIMEOUT, env=env, check=False,
        )  # fmt: skip
        assert "secret key" in json_error(proc, 1)["msg"]


def test_a_command_that_creates_an_exchange_says_so_on_stderr(tmp_path: Path) -> None:
    data = tmp_path / "typo"
    proc = run(data, "user", "list", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"users": []}
    assert f"created a new, empty exchange in {data}" in proc.stderr
    again = run(data, "user", "list", "--json")
    assert again.returncode == 0 and again.stderr == ""
    # Said also when the command then fails: the exchange was created all the same.
    other = tmp_path / "other"
    failed = run(other, "balances", "--user", "1", "--json")
    assert json_error(failed, 1) == {"code": -1102, "msg": "unknown user 1"}
    assert f"created a new, empty exchange in {other}" in failed.stderr
    upgraded = run(tmp_path / "third", "db", "upgrade", "--json")
    assert upgraded.returncode == 0
    assert f"created a new, empty exchange in {tmp_path / 'third'}" in upgraded.stderr


def test_version(tmp_path: Path) -> None:
    from tradehall import __version__

    assert ok(None, "version") == {"version": __version__}
    assert run(None, "version").stdout.strip() == __version__
    assert run(None, "--version").stdout.strip() == __version__


def test_an_empty_tx_id_is_refused_with_or_without_a_server(
    server_factory: Any, data_dir: Path
) -> None:
    """`--tx-id "$UNSET"` must not quietly become a fresh, non-idempotent deposit."""
    ok(data_dir, "user", "create")
    for args in (("deposit", "--user", "1"), ("withdraw", "--user", "1"), ("pool", "deposit")):
        error = fails(
            data_dir, *args, "--asset", "USDT", "--amount", "1", "--tx-id", "", code=-1102
        )
        assert "txId is empty" in error["msg"]
    server_factory(data_dir)
    fails(data_dir, "deposit", "--user", "1", "--asset", "USDT", "--amount", "1", "--tx-id", " ",
          code=-1102)  # fmt: skip
    assert free_locked(data_dir, 1).get("USDT", ("0", "0"))[0] in ("0", "0.00000000")


def test_margin_names_an_unknown_user(data_dir: Path) -> None:
    ok(data_dir, "user", "create")
    error = fails(data_dir, "margin", "--user", "99", "--symbol", "BTCUSDT", code=-1102)
    assert error["msg"] == "unknown user 99"
    error = fails(data_dir, "margin", "--user", "1", "--symbol", "BTCUSDT", code=-2017)
    assert "no margin account" in error["msg"]


def test_db_stats_beside_a_running_server_shows_its_retention(
    server_factory: Any, data_dir: Path
) -> None:
    server_factory(data_dir)
    bob = ok(data_dir, "user", "create", "--name", "bob")
    ok(data_dir, "deposit", "--user", str(bob["id"]), "--asset", "USDT", "--amount", "5")
    # Through the server's admin API (GET /storage). Its figures are the tables as they stand,
    # which the projector writes a moment after each commit: asked at once, they may not show
    # the deposit yet (a command in a process of its own took long enough to hide that).
    deadline = time.monotonic() + 10
    while True:
        stats = ok(data_dir, "db", "stats")
        rows = {t["table"]: t["rows"] for t in stats["tables"]}
        if (rows["users"] >= 1 and rows["ledger"] >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert rows["users"] >= 1 and rows["ledger"] >= 1 and "ledger_checkpoints" in rows
    assert stats["folderBytes"] > 0
    assert stats["retention"]["enabled"] is True
    assert stats["retention"]["prunedSinceStart"] == {
        "orders": 0, "futures_orders": 0, "trades": 0, "ledger": 0
    }  # fmt: skip
    # Pruning is the server's own business while it runs.
    fails(data_dir, "db", "prune", code=-1020)
