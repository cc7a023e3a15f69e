"""tradehall's own CSV layout of a price history (``replay_format = "csv"``), told apart by its
header line (column names, case-insensitive, any order, other columns ignored):

- candles: ``time,open,high,low,close`` (``volume`` optional);
- trades: ``time,price`` (``qty`` optional).

``time`` is UNIX time in seconds (decimals allowed), milliseconds or microseconds (told apart
by magnitude), or ISO 8601 (UTC unless it names its offset).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO

from tradehall.sim.replay_history import (
    SECONDS_BELOW,
    Candle,
    ReplayError,
    candles_history,
    integer,
    number,
    trades_history,
    unix_ms,
)
from tradehall.sim.settings import History

FORMAT = "csv"
CANDLE_COLUMNS = ("time", "open", "high", "low", "close")
TRADE_COLUMNS = ("time", "price")


def read(source: str, stream: TextIO) -> History:
    reader = csv.reader(stream)
    header = [name.strip().lower() for name in next(reader, [])]
    if not any(header):
        raise ReplayError(source, 1, "header", "empty file: a header line is required")
    candles = all(c in header for c in CANDLE_COLUMNS) or (
        "open" in header and "price" not in header
    )
    columns = CANDLE_COLUMNS if candles else TRADE_COLUMNS
    for name in columns:
        if name not in header:
            kind = "candles" if candles else "trades"
            raise ReplayError(
                source, 1, name, f"missing column (a {kind} file needs {', '.join(columns)})"
            )
    at = [header.index(name) for name in columns]
    if candles:
        return candles_history(source, _candles(source, reader, at), FORMAT)
    return trades_history(
        source,
        ((line, ms, values[0]) for line, ms, values in _rows(source, reader, at)),
        FORMAT,
    )


def _candles(source: str, reader: Iterator[list[str]], at: list[int]) -> Iterator[Candle]:
    for line, ms, (o, h, low, c) in _rows(source, reader, at):
        yield Candle(line, ms, 0, o, h, low, c)


def _rows(
    source: str, reader: Iterator[list[str]], at: list[int]
) -> Iterator[tuple[int, int, list[float]]]:
    """(line, UNIX ms, prices) of every data row."""
    line = 1
    names = CANDLE_COLUMNS if len(at) == len(CANDLE_COLUMNS) else TRADE_COLUMNS
    for row in reader:
        line += 1
        if not row or all(not cell.strip() for cell in row):
            continue
        cells = []
        for name, index in zip(names, at, strict=True):
            if index >= len(row) or not row[index].strip():
                raise ReplayError(source, line, name, "missing value")
            cells.append(row[index].strip())
        ms = _time(source, line, cells[0])
        yield (
            line,
            ms,
            [number(source, line, n, v) for n, v in zip(names[1:], cells[1:], strict=True)],
        )


def _time(source: str, line: int, text: str) -> int:
    if text.isdigit():
        return unix_ms(source, line, "time", integer(source, line, "time", text))
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if 0 <= seconds < SECONDS_BELOW:
            return int(seconds * 1000)
        raise ReplayError(source, line, "time", f"{text!r}: decimals only for seconds")
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ReplayError(
            source, line, "time", f"{text!r} is neither UNIX time nor ISO 8601"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)
