"""`tradehall admin-log`: the CLI's admin actions are recorded whether it works on the data
folder itself (as ``local``) or through a running server's admin API (as the token's
fingerprint); both read the same trail back, and the audit covers it."""

from __future__ import annotations

import getpass
import json
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import start_server, tradehall_command


def cli(data_dir: Path, *args: str, expect: int = 0, process: bool = False) -> Any:
    """A --json command, in this process (cli_support) or, with ``process``, in its own."""
    argv = [*args, "--data-dir", str(data_dir), "--json"]
    if process:
        proc = subprocess.run(
            tradehall_command(*argv), capture_output=True, text=True, timeout=60, check=False
        )
    else:
        proc = tradehall_inline(*argv)
    assert proc.returncode == expect, (args, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def test_cli_actions_offline_and_online_are_in_the_trail(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agent = f"cli:{getpass.getuser()}@{socket.gethostname()}"
    user = cli(data, "user", "create", "--name", "ops", process=True)
    refused = cli(data, "deposit", "--user", "99", "--asset", "USDT", "--amount", "1", expect=1)
    offline = cli(data, "admin-log")["entries"]
    assert [(e["action"], e["actor"], e["agent"], e["result"]) for e in offline] == [
        ("deposit", "local", agent, "refused"),
        ("user.create", "local", agent, "ok"),
    ]
    assert offline[0]["code"] == refused["code"] and offline[1]["params"] == {"name": "ops"}

    server = start_server(data)
    try:
        # (A process of its own, as the operator's: the agent recorded is still the CLI's.)
        deposit = ("deposit", "--user", str(user["id"]), "--asset", "USDT", "--amount", "5")
        cli(data, *deposit, process=True)
        online = cli(data, "admin-log", "--limit", "2")["entries"]
        assert [e["id"] for e in online] == [3, 2]
        assert online[0]["action"] == "deposit" and online[0]["agent"] == agent
        assert online[0]["actor"].startswith("token:")
        assert cli(data, "audit")["ok"]
    finally:
        server.stop(signal.SIGTERM)
    assert [e["id"] for e in cli(data, "admin-log")["entries"]] == [3, 2, 1]
