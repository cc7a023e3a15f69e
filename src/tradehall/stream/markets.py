"""The markets as the streams name and render them: a spot pair ``BTCUSDT`` is ``btcusdt``, a
contract ``E-BTC-USDT`` is ``e_btcusdt``; prices, volumes and values as exact JSON numbers in
each market's own precision (the same digits as the REST answers)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from tradehall.api import futures_view, wire
from tradehall.config import Config
from tradehall.engine.book import OrderBook
from tradehall.engine.contracts import ContractSpec
from tradehall.engine.engine import Engine
from tradehall.engine.markets import PairSpec
from tradehall.marketdata import Bar
from tradehall.marketdata import Ticker as TickerStats
from tradehall.marketdata.trades import PublicTrade
from tradehall.units import format_units

DEPTH_LEVELS = 30


def stream_name(symbol: str, futures: bool) -> str:
    """``BTCUSDT`` -> ``btcusdt``; ``E-BTC-USDT`` -> ``e_btcusdt``."""
    if not futures:
        return symbol.lower()
    head, _, rest = symbol.lower().partition("-")
    return f"{head}_{rest.replace('-', '')}"


def utc_text(ms: int) -> str:
    """``ds`` of a trade: UTC date and time, ``YYYY-MM-DD HH:MM:SS``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class StreamMarket:
    """One market as the streams see it."""

    symbol: str
    """Canonical name (``BTCUSDT``, ``E-BTC-USDT``)."""
    name: str
    """Name in channels (``btcusdt``, ``e_btcusdt``)."""
    futures: bool
    price_precision: int
    volume_precision: int
    """Decimals of a volume: the pair's quantity precision; 0 for contracts (whole contracts)."""
    amount_decimals: int
    """Decimals of a traded value: the quote asset's (spot) or the margin coin's (futures)."""

    @classmethod
    def of_pair(cls, pair: PairSpec) -> StreamMarket:
        return cls(
            pair.symbol,
            stream_name(pair.symbol, False),
            False,
            pair.price_precision,
            pair.quantity_precision,
            pair.quote_decimals,
        )

    @classmethod
    def of_contract(cls, contract: ContractSpec) -> StreamMarket:
        return cls(
            contract.symbol,
            stream_name(contract.symbol, True),
            True,
            contract.price_precision,
            0,
            contract.margin_decimals,
        )

    def price(self, ticks: int) -> wire.Num:
        return wire.Num(format_units(ticks, self.price_precision))

    def volume(self, lots: int) -> wire.Num:
        return wire.Num(format_units(lots, self.volume_precision))

    def amount(self, units: int) -> wire.Num:
        return wire.Num(format_units(units, self.amount_decimals))

    def book(self, engine: Engine) -> OrderBook:
        if self.futures:
            return engine.futures.books[self.symbol]
        return engine.spot.books[self.symbol]

    # ------------------------------------------------------------- ticks

    def depth(self, engine: Engine) -> dict[str, object]:
        """``{asks, buys}``: up to 30 levels a side from the best, each ``["price", volume]``
        (the price a string, the volume a number, as the family sends them)."""
        book = self.book(engine)
        pp = self.price_precision
        return {
            "asks": [
                [format_units(p, pp), self.volume(q)] for p, q in book.asks.depth(DEPTH_LEVELS)
            ],
            "buys": [
                [format_units(p, pp), self.volume(q)] for p, q in book.bids.depth(DEPTH_LEVELS)
            ],
        }

    def trade(self, trade: PublicTrade) -> dict[str, object]:
        return {
            "id": trade.id,
            "side": trade.taker_side,
            "price": self.price(trade.price),
            "vol": self.volume(trade.qty),
            "amount": self.amount(trade.amount),
            "ts": trade.time,
            "ds": utc_text(trade.time),
        }

    def kline(self, bar: Bar) -> dict[str, object]:
        return {
            "id": bar.open_time // 1000,
            "open": self.price(bar.open),
            "close": self.price(bar.close),
            "high": self.price(bar.high),
            "low": self.price(bar.low),
            "vol": self.volume(bar.volume),
            "amount": self.amount(bar.amount),
        }

    def ticker(self, stats: TickerStats) -> dict[str, object]:
        return {
            "amount": self.amount(stats.amount),
            "vol": self.volume(stats.volume),
            "open": self.price(stats.open),
            "close": self.price(stats.last),
            "high": self.price(stats.high),
            "low": self.price(stats.low),
            "rose": wire.Num(stats.rose),
        }


def mark_price_tick(engine: Engine, contract: ContractSpec) -> dict[str, object]:
    """Mark and index price, the funding rate applied at the last funding time and when the
    next funding is due (as ``GET /index`` and the contract's funding clock)."""
    state = engine.futures.states[contract.symbol]
    next_funding = state.funding_time + contract.funding_interval_ms if state.funding_time else 0
    return {
        "contractName": contract.symbol,
        "markPrice": futures_view.price(contract, state.mark),
        "indexPrice": futures_view.price(contract, state.index),
        "fundingRate": futures_view.rate(state.last_funding_rate),
        "nextFundingTime": next_funding,
    }


def stream_markets(config: Config, futures: bool) -> dict[str, StreamMarket]:
    """The markets of one endpoint (spot or futures), by channel name."""
    if futures:
        markets = [StreamMarket.of_contract(c) for c in config.markets.contracts.values()]
    else:
        markets = [StreamMarket.of_pair(p) for p in config.markets.pairs.values()]
    return {m.name: m for m in markets}
