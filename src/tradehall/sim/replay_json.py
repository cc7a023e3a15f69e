"""Saved answers of this family's candle endpoints (``replay_format = "klines-json"``): the
``GET /sapi/v1/klines`` (and ``/fapi/v1/klines``) answer, an array of
``{"idx", "open", "close", "high", "low", "vol"}``, or the live venues'
``GET /v1/spot/market/kline`` answer, ``{"data": {"data": [{"id", "open", ...}]}}``.

A file holds one answer, or several one after another (one per line, as JSON lines, or
pretty-printed): answers saved while polling overlap, so the bars are merged by open time, a
later answer's bar replacing an earlier one's (the bar was still forming when the earlier was
taken). ``idx``/``id`` is UNIX time in seconds, milliseconds or microseconds (by magnitude);
prices are strings or numbers. The interval is the smallest spacing of the bars.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tradehall.sim.replay_history import (
    Candle,
    ReplayError,
    candles_history,
    number,
    unix_ms,
)
from tradehall.sim.settings import History

FORMAT = "klines-json"
PRICES = ("open", "high", "low", "close")
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def read(source: str, text: str) -> History:
    bars: dict[int, Candle] = {}
    for line, bar in _bars(source, text):
        candle = _candle(source, line, bar)
        bars[candle.open_ms] = candle
    return candles_history(source, (bars[ms] for ms in sorted(bars)), FORMAT)


def _bars(source: str, text: str) -> Iterator[tuple[int, Any]]:
    """(line, bar) of every bar of every answer in ``text``."""
    at = _Cursor(source, text)
    at.skip()
    if at.done():
        raise ReplayError(source, 1, "answer", "empty file: one or more /klines answers needed")
    while not at.done():
        if text[at.pos] == "[":
            yield from at.elements()
        else:
            line = at.line
            answer = at.value()
            bars = _unwrap(answer)
            if bars is None:
                raise ReplayError(
                    source, line, "answer", 'neither a /klines array nor {"data": {"data": [...]}}'
                )
            for bar in bars:
                yield line, bar
        at.skip()


def _unwrap(answer: Any) -> list[Any] | None:
    """The bars of the live venues' kline answer, ``{"data": {"data": [...]}}``."""
    data = answer.get("data") if isinstance(answer, dict) else None
    inner = data.get("data") if isinstance(data, dict) else None
    return inner if isinstance(inner, list) else None


class _Cursor:
    """Walks JSON values one by one, knowing the line of each (json.loads does not say)."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.text = text
        self.pos = 0
        self.line = 1
        self._counted = 0

    def done(self) -> bool:
        return self.pos >= len(self.text)

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
            self.pos += 1
        self.line += self.text.count("\n", self._counted, self.pos)
        self._counted = self.pos

    def value(self) -> Any:
        try:
            value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise ReplayError(self.source, exc.lineno, "json", exc.msg) from None
        return value

    def elements(self) -> Iterator[tuple[int, Any]]:
        """The elements of the array at ``pos``, with their lines; ``pos`` after it."""
        self.pos += 1
        while True:
            self.skip()
            if self.done():
                raise ReplayError(self.source, self.line, "json", "unterminated array")
            if self.text[self.pos] == "]":
                self.pos += 1
                return
            line = self.line
            yield line, self.value()
            self.skip()
            if not self.done() and self.text[self.pos] == ",":
                self.pos += 1
            elif self.done() or self.text[self.pos] != "]":
                raise ReplayError(self.source, self.line, "json", "expected ',' or ']'")


def _candle(source: str, line: int, bar: Any) -> Candle:
    if not isinstance(bar, dict):
        raise ReplayError(source, line, "bar", f"a bar is an object, got {json.dumps(bar)[:40]}")
    key = "idx" if "idx" in bar else "id"
    raw = bar.get(key)
    if isinstance(raw, str) and raw.isdigit():
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        problem = "missing" if raw is None else f"must be an integer (open time), got {raw!r}"
        raise ReplayError(source, line, "idx", problem)
    prices: list[float] = []
    for name in PRICES:
        value = bar.get(name)
        if value is None:
            raise ReplayError(source, line, name, "missing")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ReplayError(source, line, name, f"{value!r} is not a number")
        prices.append(number(source, line, name, str(value)))
    o, h, low, c = prices
    return Candle(line, unix_ms(source, line, key, raw), 0, o, h, low, c)
