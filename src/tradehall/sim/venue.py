"""One simulated market as the participants see it: prices and sizes in the market's integer
units, what an account holds and has resting, and the engine commands that quote, cancel and
take. A spot pair and a futures contract differ only here; the participants are the same."""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from tradehall.engine.book import OrderBook
from tradehall.engine.commands import (
    CancelBatch,
    FuturesCancel,
    FuturesPlace,
    PlaceBatch,
    PlaceOrder,
)
from tradehall.engine.contracts import MONEY_DECIMALS, RATE_ONE, ContractSpec
from tradehall.engine.futures import Futures
from tradehall.engine.futures_model import CLOSE, OPEN
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import GTC, IOC, LIMIT, MARKET
from tradehall.exchange import Exchange
from tradehall.sim.ladder import BUY, SELL, Quote, Resting
from tradehall.units import pow10

UNIT_MARGIN = 3, 2
"""A unit is the smallest order meeting the market's minimums at the start price, times 1.5:
the price may fall a good way before a unit-sized order is too small."""


class Venue(Protocol):
    symbol: str
    unit: int

    def ticks(self, price: float) -> int: ...

    def price_of(self, ticks: int) -> float: ...

    def amount(self, ticks: int, lots: int) -> int:
        """The value of ``lots`` at ``ticks`` in units of the market's value asset (a pair's
        quote, a contract's margin coin), as a trade's is counted in its candles."""
        ...

    def quantity(self, notional: Decimal, ref: int) -> int:
        """Lots (spot) or contracts (futures) worth ``notional`` in the quote currency at
        ``ref`` ticks, rounded down."""
        ...

    def inventory(self, user: int, base_target: int) -> int: ...

    def funds_room(self, user: int, side: str, ref: int) -> int: ...

    def resting(self, user: int) -> list[Resting]: ...

    def mid(self) -> int: ...

    def cancel(self, user: int, ids: list[int], ts: int) -> None: ...

    def quote(self, user: int, quotes: list[Quote], ts: int) -> int: ...

    def take(self, user: int, side: str, qty: int, limit: int, ts: int) -> bool:
        """Send a taker's order; False (nothing sent) when a MARKET order sized by value
        finds no price on the side it would take (an empty book before the makers quote)."""
        ...


def _mid(book: OrderBook) -> int:
    """The middle of the best bid and ask; 0 when a side is empty."""
    bid, ask = book.bids.best(), book.asks.best()
    return (bid.price + ask.price) // 2 if bid is not None and ask is not None else 0


def _scaled_unit(minimum: int) -> int:
    num, den = UNIT_MARGIN
    return max(1, -(-minimum * num // den))


class SpotVenue:
    def __init__(self, exchange: Exchange, pair: PairSpec, start_ticks: int) -> None:
        self.exchange = exchange
        self.pair = pair
        self.symbol = pair.symbol
        by_value = -(-pair.min_notional // max(1, start_ticks * pair.quote_per_tick_lot))
        self.unit = _scaled_unit(max(pair.min_quantity, by_value, 1))

    def ticks(self, price: float) -> int:
        return max(1, round(price * pow10(self.pair.price_precision)))

    def price_of(self, ticks: int) -> float:
        return ticks / pow10(self.pair.price_precision)

    def amount(self, ticks: int, lots: int) -> int:
        return self.pair.quote_amount(ticks, lots)

    def quantity(self, notional: Decimal, ref: int) -> int:
        units = int(notional.scaleb(self.pair.quote_decimals))
        return units // max(1, ref * self.pair.quote_per_tick_lot)

    def inventory(self, user: int, base_target: int) -> int:
        """Base held (free and locked) above ``base_target`` (asset units), in lots."""
        free, locked = self.exchange.engine.ledger.get(user, self.pair.base)
        return (free + locked - base_target) // self.pair.base_per_lot

    def funds_room(self, user: int, side: str, ref: int) -> int:
        """Lots the account could have resting on ``side`` with what it holds (its own
        resting orders there count as available: a requote may move them)."""
        pair = self.pair
        if side == BUY:
            free, locked = self.exchange.engine.ledger.get(user, pair.quote)
            return (free + locked) // max(1, ref * pair.quote_per_tick_lot)
        free, locked = self.exchange.engine.ledger.get(user, pair.base)
        return (free + locked) // pair.base_per_lot

    def resting(self, user: int) -> list[Resting]:
        return [
            Resting(o.id, o.side, o.price, o.qty - o.filled, o.qty)
            for o in self.exchange.engine.open_orders(user, self.symbol)
        ]

    def mid(self) -> int:
        return _mid(self.exchange.engine.spot.books[self.symbol])

    def cancel(self, user: int, ids: list[int], ts: int) -> None:
        if ids:
            self.exchange.apply(CancelBatch(ts, user, self.symbol, tuple(ids)))

    def quote(self, user: int, quotes: list[Quote], ts: int) -> int:
        if not quotes:
            return 0
        orders = tuple(
            PlaceOrder(ts, user, self.symbol, q.side, LIMIT, q.price, q.qty) for q in quotes
        )
        self.exchange.apply(PlaceBatch(ts, user, self.symbol, orders))
        return len(orders)

    def take(self, user: int, side: str, qty: int, limit: int, ts: int) -> bool:
        """A MARKET order (``limit`` 0) or a marketable IOC LIMIT order of ``qty`` lots."""
        if limit:
            cmd = PlaceOrder(ts, user, self.symbol, side, LIMIT, limit, qty, tif=IOC)
        elif side == BUY:
            best = self.exchange.engine.spot.books[self.symbol].asks.best()
            if best is None:
                return False
            spend = self.pair.quote_amount(best.price, qty)
            cmd = PlaceOrder(ts, user, self.symbol, side, MARKET, quote_qty=spend)
        else:
            cmd = PlaceOrder(ts, user, self.symbol, side, MARKET, qty=qty)
        self.exchange.apply(cmd)
        return True


class FuturesVenue:
    """A contract. Inventory is the net position (long minus short contracts); an order
    that can reduce the opposite position does (CLOSE), so a maker never piles up margin on
    both sides."""

    def __init__(self, exchange: Exchange, contract: ContractSpec, start_ticks: int) -> None:
        self.exchange = exchange
        self.contract = contract
        self.symbol = contract.symbol
        per_contract = max(1, contract.money(1, start_ticks))
        self.unit = _scaled_unit(max(contract.min_volume, -(-contract.min_money // per_contract)))

    @property
    def fx(self) -> Futures:
        return self.exchange.engine.futures

    def ticks(self, price: float) -> int:
        return max(
            1, min(self.contract.max_price, round(price * pow10(self.contract.price_precision)))
        )

    def price_of(self, ticks: int) -> float:
        return ticks / pow10(self.contract.price_precision)

    def amount(self, ticks: int, lots: int) -> int:
        return self.contract.value(lots, ticks)

    def quantity(self, notional: Decimal, ref: int) -> int:
        return int(notional.scaleb(MONEY_DECIMALS)) // max(1, self.contract.money(1, ref))

    def _volume(self, user: int, side: str) -> tuple[int, int]:
        """(volume, closable) of the user's position on ``side``."""
        pos = self.fx.positions.get((user, self.symbol, side))
        if pos is None:
            return 0, 0
        return pos.volume, pos.volume - pos.pending_close

    def inventory(self, user: int, base_target: int) -> int:
        return self._volume(user, BUY)[0] - self._volume(user, SELL)[0]

    def _cost(self, user: int, ref: int) -> int:
        """Margin-coin units one more contract at ``ref`` needs (margin and fee), rounded up."""
        c = self.contract
        leverage = self.fx.setting(user, self.symbol).leverage
        value = c.value(1, ref)
        return value // leverage + value * c.open_maker_fee // RATE_ONE + 1

    def funds_room(self, user: int, side: str, ref: int) -> int:
        fx = self.fx
        cash = fx.available(user, self.contract.margin_coin)
        held = sum(
            o.held for o in fx.open_orders(user, self.symbol) if o.side == side and o.action == OPEN
        )
        closable = self._volume(user, SELL if side == BUY else BUY)[0]
        return max(0, cash + held) // self._cost(user, ref) + closable

    def resting(self, user: int) -> list[Resting]:
        return [
            Resting(o.id, o.side, o.price, o.qty - o.filled, o.qty)
            for o in self.fx.open_orders(user, self.symbol)
        ]

    def mid(self) -> int:
        return _mid(self.fx.books[self.symbol])

    def cancel(self, user: int, ids: list[int], ts: int) -> None:
        for order_id in ids:
            self.exchange.apply(FuturesCancel(ts, user, self.symbol, order_id))

    def _action(self, user: int, side: str, qty: int) -> str:
        closable = self._volume(user, SELL if side == BUY else BUY)[1]
        return CLOSE if closable >= qty else OPEN

    def quote(self, user: int, quotes: list[Quote], ts: int) -> int:
        for q in quotes:
            action = self._action(user, q.side, q.qty)
            self.exchange.apply(
                FuturesPlace(ts, user, self.symbol, q.side, action, LIMIT, q.price, q.qty)
            )
        return len(quotes)

    def take(self, user: int, side: str, qty: int, limit: int, ts: int) -> bool:
        action = self._action(user, side, qty)
        if limit:
            cmd = FuturesPlace(ts, user, self.symbol, side, action, LIMIT, limit, qty, tif=IOC)
        elif action == CLOSE:
            cmd = FuturesPlace(ts, user, self.symbol, side, action, MARKET, volume=qty)
        else:
            book = self.fx.books[self.symbol]
            best = book.asks.best() if side == BUY else book.bids.best()
            if best is None:
                return False
            money = self.contract.money(qty, best.price)
            cmd = FuturesPlace(ts, user, self.symbol, side, action, MARKET, money=money, tif=GTC)
        self.exchange.apply(cmd)
        return True
