"""The projector as a real child process of `serve`, and as a process of its own: killed at
any moment it is started again and continues where the tables stand; a server killed while
the projector is behind recovers from the tables plus the journal; nothing acknowledged is
lost and the audit (the tables against a replay of the journal) passes; told to stop, it
stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import ServerProcess, start_server, tradehall_command
from tradehall.client import AdminClient, Client


def projector_pid(server: ServerProcess) -> int | None:
    out = subprocess.run(
        ["pgrep", "-P", str(server.proc.pid), "-f", "tradehall projector"],
        capture_output=True,
        text=True,
        check=False,
    )
    pids = out.stdout.split()
    return int(pids[0]) if pids else None


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def journal_status(server: ServerProcess) -> dict[str, Any]:
    token = (server.data_dir / "admin.token").read_text().strip()
    status: dict[str, Any] = AdminClient(server.url, token).status()
    return dict(status["journal"])


def wait_until(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def audit_passes(data_dir: Path, process: bool = False) -> None:
    """`tradehall audit --json` passes: in this process (cli_support: the same entry point
    and answer, without a second of imports), or with ``process`` in a process of its own."""
    argv = ("audit", "--json", "--data-dir", str(data_dir))
    if process:
        proc = subprocess.run(
            tradehall_command(*argv), capture_output=True, text=True, timeout=60, check=False
        )
    else:
        proc = tradehall_inline(*argv)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["problems"] == []


def place_some(client: Client, count: int, start: int) -> list[int]:
    return [
        int(
            client.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.01", price=str(20000 + i))[
                "orderId"
            ]
        )
        for i in range(start, start + count)
    ]


def test_a_killed_projector_is_restarted_and_a_killed_server_loses_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    server = start_server(data, "--demo", "--no-sim")
    try:
        assert server.demo is not None
        client = Client(server.url, server.demo["apiKey"], server.demo["secret"])
        placed = place_some(client, 20, 0)
        for round_ in range(3):
            pid = wait_until(lambda: projector_pid(server))
            os.kill(pid, signal.SIGKILL)
            placed += place_some(client, 10, 100 + round_ * 10)
            # Started again; it continues from the tables and catches up.
            status = wait_until(
                lambda: (
                    (s := journal_status(server))["projector"]["running"] and s["lag"] == 0 and s
                ),
            )
            assert status["projector"]["restarts"] == round_ + 1
            # History reads see every acknowledged write.
            history = client.history_orders(symbol="BTCUSDT", limit=100)
            assert {int(o["orderId"]) for o in history} >= set(placed[-10:])
        # A second projector on the folder is refused.
        second = subprocess.run(
            tradehall_command("projector", "--data-dir", str(data)),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert second.returncode == 1 and "in use by another projector" in second.stderr
        # Stop the projector, write more: the audit (tables + journal replay) still runs, and
        # passes; then kill the server while the tables are behind.
        pid = wait_until(lambda: projector_pid(server))
        os.kill(pid, signal.SIGSTOP)
        placed += place_some(client, 15, 500)
        assert journal_status(server)["lag"] > 0
        audit_passes(data)
        server.stop(signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
        # It sees its parent gone (and gets SIGTERM from the kernel), catches up and exits.
        wait_until(lambda: not Path(f"/proc/{pid}").exists() or is_zombie(pid))
    finally:
        server.stop(signal.SIGKILL)
    again = start_server(data)
    try:
        assert again.demo is None
        open_ids = {
            int(o["orderId"])
            for o in Client(again.url, server.demo["apiKey"], server.demo["secret"]).open_orders(
                "BTCUSDT"
            )
        }
        assert set(placed) <= open_ids
        wait_until(lambda: journal_status(again)["lag"] == 0)
        audit_passes(data)
    finally:
        again.stop()
    audit_passes(data, process=True)  # offline too


SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def catches_sigterm(pid: int) -> bool:
    """Whether the process has its SIGTERM handler in place (``SigCgt`` in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & SIGTERM_BIT)
    return False


def test_the_projector_exits_on_sigterm_while_it_idles(tmp_path: Path) -> None:
    """Idle, the projector waits a few milliseconds between looks at the journal; a SIGTERM
    arriving then ends it (exit status 0). Its handler once set a threading.Event, whose lock
    the interrupted wait could be holding: the handler then waited for it forever, and the
    process never exited (seen in tests/system/test_system_read_your_writes.py's runs)."""
    data = tmp_path / "data"
    made = tradehall_inline("user", "create", "--data-dir", str(data), "--json")
    assert made.returncode == 0, made.stderr
    for _ in range(3):  # at three moments of its idle loop
        proc = subprocess.Popen(
            tradehall_command("projector", "--data-dir", str(data)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not catches_sigterm(proc.pid):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the projector never set its handler"
                time.sleep(0.01)
            time.sleep(0.3)  # started: loaded, caught up, idling
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
