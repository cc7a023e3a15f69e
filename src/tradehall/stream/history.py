"""The answer to a ``req`` event: a channel's history (klines, trades) or its current state."""

from __future__ import annotations

from typing import Any

from tradehall.api.errors import ApiError
from tradehall.api.params import Params
from tradehall.codes import Code
from tradehall.exchange import Exchange
from tradehall.stream.channels import DEPTH, KLINE, TRADES, Channel

MAX_PAGE = 300
DEFAULT_PAGE = 100
RECENT_TRADES = 1000
"""Trades a ``req`` looks back through (the ones kept in memory)."""


def history_data(exchange: Exchange, channel: Channel, params: dict[str, Any], now: int) -> Any:
    """``data`` of the answer; None where the channel shows nothing yet. Raises ApiError for
    a bad ``pageSize``/``top``/``endIdx``."""
    read = Params(params)
    page = _page_size(read)
    market = channel.market
    marketdata = exchange.marketdata
    if channel.kind == KLINE:
        assert channel.interval is not None
        bars = marketdata.klines(market.symbol, channel.interval, page, _end_ms(read, now))
        return [market.kline(bar) for bar in bars]
    if channel.kind == TRADES:
        end = _end_ms(read, now)
        recent = marketdata.recent_trades(market.symbol, RECENT_TRADES)
        return [market.trade(t) for t in recent if t.time <= end][:page]
    if channel.kind == DEPTH:
        return market.depth(exchange.engine)
    return None


def _page_size(params: Params) -> int:
    for name in ("pageSize", "top"):  # some of the family's clients send top
        size = params.integer(name, minimum=1, maximum=MAX_PAGE)
        if size is not None:
            return size
    return DEFAULT_PAGE


MAX_END_IDX = 99_999_999_999
"""The largest ``endIdx`` taken (UNIX seconds, the year 5138): a larger one is a time in
milliseconds (REST's candle ``idx``) that would silently read as the far future, i.e. the
newest page, and a client paging back with it would get that page forever."""


def _end_ms(params: Params, now: int) -> int:
    """``endIdx`` (UNIX seconds) as milliseconds: the last second included; now if absent."""
    end = params.integer("endIdx", minimum=0)
    if end is not None and end > MAX_END_IDX:
        raise ApiError(
            Code.BAD_PARAM,
            f"parameter 'endIdx' is a time in UNIX seconds; {end} looks like milliseconds",
        )
    return now if end is None else min(end * 1000 + 999, now)
