"""The operator command line run inside the test process: the same entry point as
`python -m tradehall` (``tradehall.cli.main``, with its handling of usage errors and failures
under --json), its exit status, stdout and stderr returned as a finished process's, without
the process (each start imports the package again: most of a second on a busy machine).

For what a command answers. What only a real process shows (the streams of the process
itself, an environment of its own, a lock held by another process, commands side by side,
a server started by the command) stays with ``support.tradehall_command``; every test module
that uses this keeps real processes for those."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from click.testing import CliRunner

from tradehall.cli import main


def tradehall_inline(
    *args: str, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tradehall ARGS` in this process (``env``: variables set, or unset with None, while it
    runs). Not thread-safe: it swaps sys.stdout, sys.stderr and sys.argv."""
    argv = ["tradehall", *args]
    saved = sys.argv
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        sys.argv = argv
        try:
            main()
            status = 0  # (main() exits; a return is a process ending normally)
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        finally:
            sys.argv = saved
            sys.stdout.flush()
            sys.stderr.flush()
        out, err = stdout.getvalue(), stderr.getvalue()
    return subprocess.CompletedProcess(
        argv, status, out.decode("utf-8"), err.decode("utf-8", "backslashreplace")
    )
