"""`tradehall serve` as a real process: what it prints, how it stops, how it answers the unknown."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import tradehall
from cli_support import tradehall_inline
from support import tradehall_command
from tradehall.client import AdminClient, ApiError, Client

HEX32 = r"[0-9a-f]{32}"


def http(method: str, url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """(status, JSON body, content type) of one plain HTTP request."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), response.headers["content-type"]
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers["content-type"]


class Lines:
    """Reads a process's stdout on a thread, so waiting for a line has a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout

        def pump() -> None:
            for line in stream:
                self.queue.put(line)
            self.queue.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next(self, timeout: float = 20.0) -> str | None:
        return self.queue.get(timeout=timeout)

    def rest(self, timeout: float = 20.0) -> list[str]:
        out = []
        while (line := self.next(timeout)) is not None:
            out.append(line)
        return out


def test_json_announcement_is_one_line_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        tradehall_command("serve", "--port", "0", "--json", "--data-dir", str(data)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = Lines(proc)
        line = lines.next()
        assert line is not None and line.endswith("\n")
        announced = json.loads(line)
        assert set(announced) == {"url", "dataDir", "demo"}
        assert announced["dataDir"] == str(data) and announced["demo"] is None
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", announced["url"])
        assert Client(announced["url"]).ping() == {}
        info = json.loads((data / "server.json").read_text())
        assert info["host"] == "127.0.0.1" and info["pid"] == proc.pid
        assert announced["url"].endswith(f":{info['port']}")

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert time.monotonic() - started < 10
        assert lines.rest() == []  # the one line, nothing more
        assert not (data / "server.json").exists()
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    # The folder is free at once: an offline command can take it (run in this process, it
    # asks right away, without a process start in between).
    listed = tradehall_inline("user", "list", "--json", "--data-dir", str(data))
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"users": []}


def test_demo_announcement_and_json_errors(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--no-sim")
    assert server.demo is not None
    assert set(server.demo) == {"userId", "apiKey", "secret"}
    assert server.demo["userId"] == 1
    assert re.fullmatch(HEX32, server.demo["apiKey"])
    assert re.fullmatch(HEX32, server.demo["secret"])
    with Client(server.url, server.demo["apiKey"], server.demo["secret"]) as demo:
        balances = {b["asset"]: b["free"] for b in demo.account()["balances"]}
    assert balances == {"BTC": "100.00000000", "ETH": "1000.00000000", "USDT": "10000000.00000000"}

    # Unknown paths and methods on the real server: JSON errors, -1020.
    for path in (
        "/spot/open/sapi/v1/nope",
        "/nope",
        "/web/nope.js",
        "/spot/open/sapi/v4/ping",
        "/admin/v1/nope",
    ):
        status, body, content_type = http("GET", server.url + path)
        assert status == 404, path
        assert content_type.startswith("application/json")
        assert body["code"] == -1020 and isinstance(body["msg"], str) and body["msg"]
    wrong_methods = (("DELETE", "/spot/open/sapi/v1/order"), ("POST", "/spot/open/sapi/v1/ping"))
    for method, path in wrong_methods:
        status, body, _ = http(method, server.url + path)
        assert (status, body["code"]) == (405, -1020), (method, path)

    # The admin API wants the folder's token.
    status, body, _ = http("GET", server.url + "/admin/v1/status")
    assert (status, body["code"]) == (401, -2015)
    with AdminClient(server.url, "not-the-token") as wrong, pytest.raises(ApiError) as denied:
        wrong.status()
    assert (denied.value.status, denied.value.code) == (401, -2015)
    token = (data / "admin.token").read_text().strip()
    with AdminClient(server.url, token) as admin:
        assert admin.status()["writable"] is True
        # Keys the operator makes for the demo user, one of them sorting before the demo's.
        before = None
        for _ in range(64):
            made = admin.create_key(1)["apiKey"]
            if made < server.demo["apiKey"]:
                before = made
                break
        assert before is not None

    assert server.stop() == 0
    assert server.proc.stdout is not None and server.proc.stdout.read() == ""
    assert not (data / "server.json").exists()

    # A later start with --demo prints the same key again, not another key of the user.
    again = server_factory(data, "--demo", "--no-sim")
    assert again.demo == server.demo
    assert again.stop() == 0


def test_human_banner_and_clean_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        tradehall_command("serve", "--port", "0", "--demo", "--no-sim", "--data-dir", str(data)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = Lines(proc)
        banner = [lines.next() for _ in range(5)]
        head = re.fullmatch(
            r"tradehall (\S+) listening on (http://127\.0\.0\.1:\d+) \(data folder: (.+)\)\n",
            banner[0] or "",
        )
        assert head is not None, banner
        assert head.group(3) == str(data)
        assert banner[1] == "demo account: user 1\n"
        key = re.fullmatch(rf"  API key:    ({HEX32})\n", banner[2] or "")
        secret = re.fullmatch(rf"  API secret: ({HEX32})\n", banner[3] or "")
        assert key is not None and secret is not None, banner
        assert banner[4] == "market simulation: off (tradehall sim start to switch it on)\n"
        with Client(head.group(2), key.group(1), secret.group(1)) as demo:
            assert demo.account()["balances"]
        assert (data / "server.json").exists()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert lines.rest() == []
        assert not (data / "server.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    # Without --demo the banner is the one line, with no key in it.
    proc = subprocess.Popen(
        tradehall_command("serve", "--port", "0", "--data-dir", str(data)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = Lines(proc)
        first = lines.next()
        assert first is not None and " listening on http://127.0.0.1:" in first
        url = first.split(" listening on ")[1].split()[0]
        assert Client(url).ping() == {}
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops it cleanly too
        assert proc.wait(15) == 0
        rest = lines.rest()
        assert not any("API key" in line for line in rest), rest
        assert not (data / "server.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_serve_on_a_busy_port_fails_cleanly(server_factory: Any, tmp_path: Path) -> None:
    running = server_factory(tmp_path / "one")
    port = running.url.rsplit(":", 1)[1]
    other = tmp_path / "two"
    proc = subprocess.run(
        tradehall_command("serve", "--port", port, "--json", "--data-dir", str(other)),
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert proc.returncode == 1
    error = json.loads(proc.stdout)
    assert error["code"] < 0 and f"cannot listen on 127.0.0.1:{port}" in error["msg"]
    assert not (other / "server.json").exists()
    assert Client(running.url).ping() == {}
    assert running.stop() == 0


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: a process writing to it blocks until it is read."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for chunk in (65536, 4096, 1):
        try:
            while True:
                os.write(w, b"x" * chunk)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)
    return r, w


def test_sigterm_once_announced_stops_cleanly(tmp_path: Path) -> None:
    """The server has claimed the folder (server.json) and is printing its announcement when
    SIGTERM arrives. The announcement is held up by a full stdout pipe, which only widens the
    window deterministically: without it, a SIGTERM sent as soon as the JSON line is read hits
    the same window."""
    data = tmp_path / "data"
    r, w = _full_pipe()
    try:
        proc = subprocess.Popen(
            tradehall_command("serve", "--port", "0", "--json", "--data-dir", str(data)),
            stdout=w,
            stderr=subprocess.DEVNULL,
        )
    finally:
        os.close(w)
    try:
        deadline = time.monotonic() + 20
        while not (data / "server.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (data / "server.json").exists()
        time.sleep(0.3)  # now blocked writing the announcement
        proc.send_signal(signal.SIGTERM)

        def drain() -> None:
            while os.read(r, 65536):
                pass

        threading.Thread(target=drain, daemon=True).start()
        assert proc.wait(15) == 0
        assert not (data / "server.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_forwarded_headers_do_not_change_the_client_address(
    server_factory: Any, tmp_path: Path
) -> None:
    """The address a key's allow-list and the per-IP limits see is the connection's: an
    ``X-Forwarded-For`` (which uvicorn trusts from 127.0.0.1 by default) changes nothing."""
    data = tmp_path / "data"
    server = server_factory(data)
    token = (data / "admin.token").read_text().strip()
    with AdminClient(server.url, token) as admin:
        user = admin.create_user("forwarded")["id"]
        far = admin.create_key(user, ips=["10.0.0.0/8"])
        near = admin.create_key(user, ips=["127.0.0.1"])
    forwarded = {
        "X-Forwarded-For": "10.1.1.1",
        "X-Real-IP": "10.1.1.1",
        "Forwarded": "for=10.1.1.1",
    }
    with Client(server.url, far["apiKey"], far["secret"]) as client:
        refused = client.request("GET", "/spot/open/sapi/v1/account", headers=forwarded)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == -2015
    with Client(server.url, near["apiKey"], near["secret"]) as client:
        answered = client.request("GET", "/spot/open/sapi/v1/account", headers=forwarded)
        assert answered.status_code == 200, answered.text

    # A path with a trailing slash is an unknown path, not a redirect.
    status, body, _ = http("GET", server.url + "/spot/open/sapi/v1/ping/")
    assert (status, body["code"]) == (404, -1020)
    assert server.stop() == 0


def test_configured_clock_tolerance_widens_the_window_ahead(
    server_factory: Any, tmp_path: Path
) -> None:
    """``[server] max_clock_ahead_ms`` reaches the running server: a timestamp 2.5 s ahead
    (refused by the seed's 1000 ms rule) is accepted with 3000, one 10 s ahead is not."""
    source = (Path(__file__).parents[2] / "src/tradehall/default_config.toml").read_text()
    config = tmp_path / "wide.toml"
    config.write_text(source.replace("max_clock_ahead_ms = 1000", "max_clock_ahead_ms = 3000"))
    data = tmp_path / "data"
    server = server_factory(data, "--config", str(config))
    token = (data / "admin.token").read_text().strip()
    with AdminClient(server.url, token) as admin:
        user = admin.create_user("ahead")["id"]
        key = admin.create_key(user)
    for ahead, status in ((2500, 200), (10_000, 401)):

        def clock(ahead: int = ahead) -> int:
            return time.time_ns() // 1_000_000 + ahead

        with Client(server.url, key["apiKey"], key["secret"], clock=clock) as client:
            answer = client.request("GET", "/spot/open/sapi/v1/account")
            assert answer.status_code == status, answer.text
    assert server.stop() == 0


def test_a_stopping_server_drains_for_drain_s_before_it_stops(
    server_factory: Any, tmp_path: Path
) -> None:
    """``[server] drain_s``: after SIGTERM the server keeps answering for that long while
    ``/readyz`` says 503 draining, so a load balancer's probe sees it leave; then it stops
    cleanly (exit 0)."""
    config = tmp_path / "drain.toml"
    default = (Path(tradehall.__file__).parent / "default_config.toml").read_text()
    assert "\ndrain_s = 0 " in default
    config.write_text(default.replace("\ndrain_s = 0 ", "\ndrain_s = 3 ", 1))
    server = server_factory(tmp_path / "data", "--config", str(config))

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(server.url + path, timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return int(refused.code)

    assert status("/readyz") == 200
    server.proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    seen = []
    while time.monotonic() - started < 2.0:
        seen.append((status("/readyz"), status("/spot/open/sapi/v1/ping")))
        time.sleep(0.2)
    assert seen and set(seen) == {(503, 200)}, seen  # not ready, still serving
    assert server.proc.wait(15) == 0
    assert time.monotonic() - started >= 3.0
