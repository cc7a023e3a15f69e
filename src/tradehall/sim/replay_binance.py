"""The CSV layouts of Binance's public bulk-data archive (data.binance.vision), as unzipped or
still zipped (replay.py opens a one-file .zip):

- klines (``replay_format = "binance-klines"``), 12 columns: open time, open, high, low,
  close, volume, close time, quote volume, count, taker buy base volume, taker buy quote
  volume, ignore;
- aggregated trades (``"binance-aggtrades"``), 8 columns (spot): aggregate trade id, price,
  quantity, first trade id, last trade id, timestamp, is buyer maker, is best match; or 7
  (futures, without is best match).

With or without a header line (the futures files have one, the spot files none). Times are in
milliseconds, or microseconds (the spot files from 2025 on), told apart by magnitude, row by
row: files of both eras can be joined.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import TextIO

from tradehall.sim.replay_history import (
    Candle,
    ReplayError,
    candles_history,
    integer,
    number,
    trades_history,
    unix_ms,
)
from tradehall.sim.settings import History

KLINES = "binance-klines"
AGGTRADES = "binance-aggtrades"
KLINE_COLUMNS = (
    "open_time",
    "open",
    "high",
    "low",
    "close",
    "volume",
    "close_time",
    "quote_volume",
    "count",
    "taker_buy_volume",
    "taker_buy_quote_volume",
    "ignore",
)
AGGTRADE_COLUMNS = (
    "agg_trade_id",
    "price",
    "quantity",
    "first_trade_id",
    "last_trade_id",
    "transact_time",
    "is_buyer_maker",
    "is_best_match",
)
BOOLEANS = ("true", "false")


def looks_like(row: list[str]) -> str:
    """The layout a first row shows (a header, or a row of either layout), else ''."""
    first = row[0].strip().lower() if row else ""
    if first == KLINE_COLUMNS[0]:
        return KLINES
    if first == AGGTRADE_COLUMNS[0]:
        return AGGTRADES
    if not first.isdigit():
        return ""
    if len(row) == len(KLINE_COLUMNS):
        return KLINES
    flags = [cell.strip().lower() in BOOLEANS for cell in row[6:]]
    if len(row) in (7, 8) and flags and all(flags):
        return AGGTRADES
    return ""


def read_klines(source: str, stream: TextIO) -> History:
    return candles_history(source, _klines(source, _rows(source, stream, KLINE_COLUMNS)), KLINES)


def read_aggtrades(source: str, stream: TextIO) -> History:
    return trades_history(
        source, _aggtrades(source, _rows(source, stream, AGGTRADE_COLUMNS)), AGGTRADES
    )


def _rows(source: str, stream: TextIO, names: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of every data row; a first line that is a header is checked, not read."""
    wanted = (len(names) - 1, len(names)) if names is AGGTRADE_COLUMNS else (len(names),)
    layout = KLINES if names is KLINE_COLUMNS else AGGTRADES
    for line, row in enumerate(csv.reader(stream), start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) not in wanted:
            counts = " or ".join(str(n) for n in wanted)
            raise ReplayError(
                source, line, "columns", f"{len(row)} columns, a {layout} row has {counts}"
            )
        if line == 1 and not row[0].strip().isdigit():
            if row[0].strip().lower() != names[0]:
                raise ReplayError(
                    source, 1, names[0], f"a header line starts with {names[0]}, got {row[0]!r}"
                )
            continue
        yield line, [cell.strip() for cell in row]


def _klines(source: str, rows: Iterator[tuple[int, list[str]]]) -> Iterator[Candle]:
    n = KLINE_COLUMNS
    for line, cells in rows:
        open_ms = unix_ms(source, line, n[0], integer(source, line, n[0], cells[0]))
        o, h, low, c = (number(source, line, n[i], cells[i]) for i in range(1, 5))
        number(source, line, n[5], cells[5], positive=False)
        close_ms = unix_ms(source, line, n[6], integer(source, line, n[6], cells[6]))
        if close_ms < open_ms:
            raise ReplayError(source, line, n[6], "before the open time")
        yield Candle(line, open_ms, close_ms + 1 - open_ms, o, h, low, c)


def _aggtrades(
    source: str, rows: Iterator[tuple[int, list[str]]]
) -> Iterator[tuple[int, int, float]]:
    n = AGGTRADE_COLUMNS
    for line, cells in rows:
        integer(source, line, n[0], cells[0])
        price = number(source, line, n[1], cells[1])
        number(source, line, n[2], cells[2])
        ms = unix_ms(source, line, n[5], integer(source, line, n[5], cells[5]))
        if cells[6].lower() not in BOOLEANS:
            raise ReplayError(source, line, n[6], f"must be true or false, got {cells[6]!r}")
        yield line, ms, price
