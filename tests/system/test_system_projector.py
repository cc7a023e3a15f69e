"""`tradehall projector` as a process of its own: it stops when told to."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from support import tradehall_command

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
    made = subprocess.run(
        tradehall_command("user", "create", "--data-dir", str(data), "--json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
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


STOP_AT_EVERY_LINE = """
import os, signal, sys
from tradehall.projector import SignalStop

stop = SignalStop()
signal.signal(signal.SIGTERM, stop.set)  # as `tradehall projector` sets it


def tracer(frame, event, arg):
    if event == "line":  # a SIGTERM at every line of the wait, each handled right there
        os.kill(os.getpid(), signal.SIGTERM)
    return tracer


sys.settrace(tracer)
stop.wait(0.01)
sys.settrace(None)
sys.exit(0 if stop.is_set() else 1)
"""


def test_a_sigterm_at_any_line_of_the_projectors_idle_wait_stops_it() -> None:
    """Deterministically, what the test above can only catch by chance: with the
    threading.Event the projector had, this script hangs (the handler blocks in Event.set on
    the lock Event.wait holds), and the timeout kills it."""
    done = subprocess.run(
        [sys.executable, "-c", STOP_AT_EVERY_LINE], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
