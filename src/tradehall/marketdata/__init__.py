"""Pure market data: candles (klines), the 24h ticker and recent public trades.

No I/O and no clock: every time is a parameter in UNIX milliseconds (UTC); prices are integer
ticks and quantities integer lots of the pair.
"""

from tradehall.marketdata.candles import KEEP, KEEP_OTHER, Bar, Candles, keep_for
from tradehall.marketdata.intervals import (
    ALIASES,
    INTERVALS,
    Interval,
    bar_open,
    next_open,
    parse_interval,
    prev_open,
)
from tradehall.marketdata.service import MarketData
from tradehall.marketdata.ticker import Ticker, rose_percent
from tradehall.marketdata.trades import RECENT_TRADES, PublicTrade, RecentTrades

__all__ = [
    "ALIASES",
    "INTERVALS",
    "KEEP",
    "KEEP_OTHER",
    "RECENT_TRADES",
    "Bar",
    "Candles",
    "Interval",
    "MarketData",
    "PublicTrade",
    "RecentTrades",
    "Ticker",
    "bar_open",
    "keep_for",
    "next_open",
    "parse_interval",
    "prev_open",
    "rose_percent",
]
