"""Reading a price history to replay from CSV.

Two formats, told apart by the header line (column names, case-insensitive, any order, other
columns ignored):

- candles: ``time,open,high,low,close`` (``volume`` optional): each candle is replayed as
  open, then the extreme nearer the open, the other extreme and the close, spread evenly over
  the time to the next candle;
- trades: ``time,price`` (``qty`` optional): each trade's price at its time.

``time`` is UNIX time in milliseconds or seconds (values below 10**11 are seconds), or an
ISO 8601 date-time; rows must be in time order. Prices are positive decimals.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from tradehall.sim.settings import ReplayPoint

CANDLE_COLUMNS = ("time", "open", "high", "low", "close")
TRADE_COLUMNS = ("time", "price")


class ReplayError(Exception):
    """A problem with a replay file: ``<file>:<line>: <field>: <problem>``."""

    def __init__(self, source: str, line: int, field: str, problem: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(f"{source}:{line}: {field}: {problem}")


def load_points(path: Path) -> tuple[ReplayPoint, ...]:
    source = str(path)
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayError(source, 1, "file", f"cannot read: {exc}") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise ReplayError(source, 1, "header", "empty file: a header line is required")
    header = [name.strip().lower() for name in rows[0]]
    columns: tuple[str, ...]
    if all(c in header for c in CANDLE_COLUMNS):
        columns = CANDLE_COLUMNS
    elif "price" in header or "open" not in header:
        columns = TRADE_COLUMNS
    else:
        columns = CANDLE_COLUMNS
    for name in columns:
        if name not in header:
            kind = "candles" if columns is CANDLE_COLUMNS else "trades"
            raise ReplayError(
                source, 1, name, f"missing column (a {kind} file needs {', '.join(columns)})"
            )
    at = {name: header.index(name) for name in columns}
    points: list[tuple[int, list[float]]] = []
    for number, row in enumerate(rows[1:], start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        values: dict[str, str] = {}
        for name in columns:
            if at[name] >= len(row) or not row[at[name]].strip():
                raise ReplayError(source, number, name, "missing value")
            values[name] = row[at[name]].strip()
        ms = _time(source, number, values["time"])
        if points and ms < points[-1][0]:
            raise ReplayError(source, number, "time", "rows must be in time order")
        prices = [_price(source, number, name, values[name]) for name in columns[1:]]
        points.append((ms, prices))
    if not points:
        raise ReplayError(source, 2, "rows", "no data rows")
    if columns is CANDLE_COLUMNS:
        for number, (_, (o, h, low, c)) in enumerate(points, start=2):
            if not (low <= min(o, c) and max(o, c) <= h):
                raise ReplayError(source, number, "high", "high/low do not contain open/close")
    return _expand(points, columns is CANDLE_COLUMNS)


def _time(source: str, line: int, text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        try:
            return int(datetime.fromisoformat(text).timestamp() * 1000)
        except ValueError:
            raise ReplayError(
                source, line, "time", f"{text!r} is neither UNIX time nor ISO 8601"
            ) from None
    return int(value * 1000) if value < 10**11 else int(value)


def _price(source: str, line: int, field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ReplayError(source, line, field, f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ReplayError(source, line, field, f"must be a positive number, got {text}")
    return value


def _expand(points: list[tuple[int, list[float]]], candles: bool) -> tuple[ReplayPoint, ...]:
    start = points[0][0]
    if not candles:
        return tuple(ReplayPoint(ms - start, prices[0]) for ms, prices in points)
    out: list[ReplayPoint] = []
    for i, (ms, (o, h, low, c)) in enumerate(points):
        span = points[i + 1][0] - ms if i + 1 < len(points) else 60_000
        path = (o, low, h, c) if o - low < h - o else (o, h, low, c)
        for k, price in enumerate(path):
            out.append(ReplayPoint(ms - start + span * k // 4, price))
    return tuple(out)
