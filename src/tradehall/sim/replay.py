"""Reading a price history to replay (docs/simulation.md, "Replayed histories"): the format
named by ``replay_format``, or told from the file's first line (``auto``), and read into the
steps of a reference path. A file that cannot be read is refused with one line naming the file,
the line and the field (``ReplayError``).

Formats: ``csv`` (tradehall's own columns, replay_csv.py), ``binance-klines`` and
``binance-aggtrades`` (data.binance.vision, replay_binance.py), ``klines-json`` (saved
``/klines`` answers, replay_json.py). A ``.zip`` holding one file (as the archive serves them)
is read as that file.
"""

from __future__ import annotations

import csv
import io
import itertools
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from tradehall.sim import replay_binance, replay_csv, replay_json
from tradehall.sim.replay_history import ReplayError
from tradehall.sim.settings import History, PathSettings, SimulationSettings

__all__ = ["FORMATS", "ReplayError", "check", "detect", "load_history", "with_histories"]

AUTO = "auto"
_READERS: dict[str, Callable[[str, TextIO], History]] = {
    replay_csv.FORMAT: replay_csv.read,
    replay_binance.KLINES: replay_binance.read_klines,
    replay_binance.AGGTRADES: replay_binance.read_aggtrades,
    replay_json.FORMAT: lambda source, stream: replay_json.read(source, stream.read()),
}
FORMATS = (AUTO, *_READERS)
CHECKED_LINES = 50


def load_history(path: Path, fmt: str = AUTO) -> History:
    source = str(path)
    fmt = check(path, fmt)
    try:
        with _open(source, path) as stream:
            return _READERS[fmt](source, stream)
    except UnicodeDecodeError as exc:
        raise ReplayError(source, 1, "file", f"not UTF-8 text: {exc.reason}") from None


def check(path: Path, fmt: str = AUTO) -> str:
    """The format of the file at ``path`` (``fmt``, or told from its first line), having read
    its first ``CHECKED_LINES`` lines as that format (a JSON file: its first line only): the
    configuration's check, cheap on a file of any size."""
    source = str(path)
    try:
        with _open(source, path) as stream:
            head = list(itertools.islice(stream, CHECKED_LINES))
    except UnicodeDecodeError as exc:
        raise ReplayError(source, 1, "file", f"not UTF-8 text: {exc.reason}") from None
    fmt = detect(source, head[0] if head else "") if fmt == AUTO else fmt
    if fmt != replay_json.FORMAT:
        _READERS[fmt](source, io.StringIO("".join(head), newline=""))
    return fmt


def with_histories(settings: SimulationSettings) -> SimulationSettings:
    """``settings`` with every replay's history read (each file once)."""
    read: dict[tuple[str, str], History] = {}

    def load(path: PathSettings) -> PathSettings:
        if path.model != "replay" or path.history is not None:
            return path
        key = (path.replay_file, path.replay_format)
        if key not in read:
            read[key] = load_history(Path(path.replay_file), path.replay_format)
        return replace(path, history=read[key])

    return replace(
        settings,
        path=load(settings.path),
        overrides={symbol: load(path) for symbol, path in settings.overrides.items()},
    )


def detect(source: str, first_line: str) -> str:
    """The format a file's first line shows; a ReplayError when it shows none."""
    head = first_line.lstrip("\ufeff \t\r\n")
    if not head:
        raise ReplayError(source, 1, "format", "empty first line: cannot tell the format")
    if head[0] in "[{":
        return replay_json.FORMAT
    row = next(csv.reader([head]), [])
    binance = replay_binance.looks_like(row)
    if binance:
        return binance
    if row and not row[0].strip().lstrip("-").replace(".", "", 1).isdigit():
        return replay_csv.FORMAT  # a header line: tradehall's own columns
    raise ReplayError(
        source,
        1,
        "format",
        f"cannot tell the format of a row of {len(row)} columns without a header"
        f" (binance-klines rows have 12, binance-aggtrades 7 or 8 ending in true/false):"
        f" name it with replay_format ({', '.join(FORMATS[1:])})",
    )


@contextmanager
def _open(source: str, path: Path) -> Iterator[TextIO]:
    try:
        if path.suffix.lower() == ".zip":
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if not n.endswith("/")]
                if len(names) != 1:
                    raise ReplayError(
                        source, 1, "file", f"a .zip must hold one file, it holds {len(names)}"
                    )
                with archive.open(names[0]) as raw:
                    yield io.TextIOWrapper(raw, "utf-8-sig", newline="")
            return
        with path.open(encoding="utf-8-sig", newline="") as stream:
            yield stream
    except (OSError, zipfile.BadZipFile) as exc:
        raise ReplayError(source, 1, "file", f"cannot read: {exc}") from None
