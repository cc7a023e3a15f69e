"""Channel names of the market-data protocol:

- ``market_<m>_depth_step0``: the book, up to 30 levels a side;
- ``market_<m>_trade_ticker``: trades;
- ``market_<m>_kline_<interval>``: the current candle of one interval;
- ``market_<m>_ticker``: 24 h statistics;
- ``mark_price_<m>`` (futures only): mark and index price, funding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tradehall.codes import Code
from tradehall.marketdata import INTERVALS, Interval, parse_interval
from tradehall.stream.frames import BadMessage
from tradehall.stream.markets import StreamMarket

DEPTH: Final = "depth"
TRADES: Final = "trades"
KLINE: Final = "kline"
TICKER: Final = "ticker"
MARK: Final = "mark"

_SUFFIXES: Final = (("_depth_step0", DEPTH), ("_trade_ticker", TRADES), ("_ticker", TICKER))
MARK_PREFIX: Final = "mark_price_"


@dataclass(frozen=True, slots=True)
class Channel:
    name: str
    kind: str
    market: StreamMarket
    interval: Interval | None = None


def parse_channel(name: object, markets: dict[str, StreamMarket]) -> Channel:
    """The channel called ``name`` on an endpoint serving ``markets`` (by stream name);
    BadMessage naming what is wrong otherwise."""
    if not isinstance(name, str) or not name:
        raise BadMessage(Code.BAD_PARAM, "params.channel must be a non-empty string")
    if len(name) > 100:
        raise BadMessage(Code.BAD_PARAM, "params.channel is too long")
    if name.startswith(MARK_PREFIX):
        market_name, kind, interval = name[len(MARK_PREFIX) :], MARK, None
    elif name.startswith("market_"):
        rest = name[len("market_") :]
        market_name, kind, interval = _market_channel(name, rest)
    else:
        raise BadMessage(Code.UNSUPPORTED, f"unknown channel {name!r}")
    # Symbols in any case, as everywhere (the api contract); the channel keeps the name it
    # was asked by, so a client finds its pushes under the name it sent.
    market = markets.get(market_name) or markets.get(market_name.lower())
    if market is None:
        raise BadMessage(Code.BAD_SYMBOL, f"unknown symbol {market_name!r} in channel {name!r}")
    if kind == MARK and not market.futures:
        raise BadMessage(Code.UNSUPPORTED, f"unknown channel {name!r}")
    return Channel(name, kind, market, interval)


def _market_channel(name: str, rest: str) -> tuple[str, str, Interval | None]:
    for suffix, kind in _SUFFIXES:
        if rest.endswith(suffix):
            return rest[: -len(suffix)], kind, None
    head, sep, interval_name = rest.rpartition("_kline_")
    if sep:
        try:
            return head, KLINE, parse_interval(interval_name)
        except ValueError:
            names = ", ".join(iv.name for iv in INTERVALS)
            raise BadMessage(
                Code.BAD_PARAM, f"unknown kline interval {interval_name!r}; expected {names}"
            ) from None
    raise BadMessage(Code.UNSUPPORTED, f"unknown channel {name!r}")
