"""`tradehall status`: the exchange's state from the running server, else from the store, as
text and as JSON (scripts parse the JSON)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from support import start_server, tradehall_command


def status(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tradehall_command("status", "--data-dir", str(data_dir), *extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def status_json(data_dir: Path) -> dict[str, Any]:
    done = status(data_dir, "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_status_from_the_server_then_from_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, "--demo", "--no-sim")
    try:
        live = status_json(data)
        assert live["writable"] is True and live["users"] == 1 and "ha" not in live
        journal = live["journal"]
        assert journal["head"] >= 1 and journal["projector"]["running"] is True
        text = status(data)
        assert text.returncode == 0
        assert "1 users" in text.stdout and "journal: record" in text.stdout
    finally:
        server.stop()
    stored = status_json(data)  # no server: the store itself, caught up
    assert stored["users"] == 1 and stored["journal"]["lag"] == 0
    assert stored["journal"]["projector"] is None


def test_status_of_a_folder_without_an_exchange_is_an_error(tmp_path: Path) -> None:
    done = status(tmp_path / "empty", "--json")
    assert done.returncode != 0
    assert "no exchange" in json.loads(done.stdout)["msg"]
