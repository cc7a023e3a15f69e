"""Market data of every symbol: candles, 24h ticker and recent public trades."""

from __future__ import annotations

from collections.abc import Iterable

from tradehall.marketdata.candles import Bar, Candles
from tradehall.marketdata.intervals import Interval
from tradehall.marketdata.ticker import Ticker
from tradehall.marketdata.trades import PublicTrade, RecentTrades

_SIDES = frozenset(("BUY", "SELL"))


class MarketData:
    """Holds one :class:`Candles` and one :class:`RecentTrades` per symbol.

    Every method raises KeyError for a symbol not given to the constructor.
    """

    __slots__ = ("_candles", "_trades")

    def __init__(self, symbols: Iterable[str]) -> None:
        names = list(symbols)
        self._candles: dict[str, Candles] = {s: Candles() for s in names}
        self._trades: dict[str, RecentTrades] = {s: RecentTrades() for s in names}

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(self._candles)

    def on_trade(
        self,
        symbol: str,
        trade_id: int,
        ts_ms: int,
        price: int,
        qty: int,
        taker_side: str,
        amount: int = 0,
    ) -> None:
        """Record one trade (``price`` in ticks, ``qty`` in lots, ``taker_side`` BUY/SELL,
        ``amount`` its value in units of the market's value asset)."""
        candles = self._candles[symbol]
        if taker_side not in _SIDES:
            raise ValueError(f"taker side must be BUY or SELL, not {taker_side!r}")
        candles.on_trade(ts_ms, price, qty, amount)
        self._trades[symbol].add(PublicTrade(trade_id, ts_ms, price, qty, taker_side, amount))

    def has_bars(self, symbol: str) -> bool:
        """Whether ``symbol`` has a bar (it traded, or its past was drawn)."""
        return self._candles[symbol].has_bars()

    def klines(self, symbol: str, interval: Interval, limit: int, now_ms: int) -> list[Bar]:
        """See :meth:`Candles.query`."""
        return self._candles[symbol].query(interval, limit, now_ms)

    def ticker(self, symbol: str, now_ms: int) -> Ticker:
        return self._candles[symbol].ticker(now_ms)

    def recent_trades(self, symbol: str, limit: int) -> list[PublicTrade]:
        """At most ``limit`` trades, newest first."""
        return self._trades[symbol].latest(limit)

    def take_changed_bars(self) -> list[tuple[str, str, Bar]]:
        """(symbol, canonical interval name, bar copy) for every bar changed since the last call."""
        out: list[tuple[str, str, Bar]] = []
        for symbol, candles in self._candles.items():
            out.extend((symbol, name, bar) for name, bar in candles.take_changed())
        return out

    def restore_bars(self, symbol: str, interval_name: str, bars: list[Bar]) -> None:
        self._candles[symbol].restore(interval_name, bars)

    def seed_bars(self, symbol: str, interval_name: str, bars: list[Bar]) -> int:
        """See :meth:`Candles.seed`."""
        return self._candles[symbol].seed(interval_name, bars)

    def restore_trades(self, symbol: str, trades: Iterable[PublicTrade]) -> None:
        self._trades[symbol].restore(trades)
