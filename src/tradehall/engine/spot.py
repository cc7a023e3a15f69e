"""Spot order placement, matching and cancellation with holds, fees and self-trade prevention.

Holds: a BUY locks quote (limit price x quantity, or the whole amount of a MARKET BUY), a SELL
locks base. Each fill consumes the hold at the order's own limit price; a BUY filled at a better
price gets the difference back to free at once. Whatever is left when an order ends goes back
to free.

Self-trade prevention (expire maker): when a taker reaches a resting order of its own account,
the resting order is cancelled and matching continues with the next order.
"""

from __future__ import annotations

from tradehall.codes import Code, Reject
from tradehall.engine import price_band
from tradehall.engine.book import Level, OrderBook
from tradehall.engine.commands import PlaceOrder
from tradehall.engine.events import BalanceChanged, Event, OrderChanged, Trade, TradeExecuted
from tradehall.engine.futures_model import PriceReference
from tradehall.engine.ledger import MAX_BALANCE, Ledger
from tradehall.engine.markets import FEE_RATE_DECIMALS, PairSpec
from tradehall.engine.orders import (
    BUY,
    CANCELED,
    FILLED,
    FOK,
    GTC,
    LIMIT,
    MARKET,
    NEW,
    PARTIALLY_FILLED,
    POST_ONLY,
    REJECTED,
    SELL,
    TIME_IN_FORCE,
    Order,
    OrderState,
)
from tradehall.units import format_units_trimmed

FEE_ACCOUNT = 0
"""The exchange's own account, credited with every trading fee."""

MAX_OPEN_ORDERS = 1000
"""Per account and pair: the most a client can list with one openOrders call."""

_FEE_SCALE = 10**FEE_RATE_DECIMALS


Hold = tuple[str, int]
"""What an order locks: (asset, amount). A plain tuple: built once per order."""


class SpotMarkets:
    """All spot books and the orders on them."""

    def __init__(self, pairs: dict[str, PairSpec], ledger: Ledger, events: list[Event]) -> None:
        self.pairs = pairs
        self.ledger = ledger
        self.events = events
        self.books = {symbol: OrderBook(symbol) for symbol in pairs}
        self.by_account: dict[int, dict[int, Order]] = {}
        """account -> open orders by id (ascending id order)."""
        self.by_client_id: dict[tuple[int, str, str], Order] = {}
        self.next_order_id = 1
        self.next_trade_id = 1
        self.last_price: dict[str, int] = {}
        """symbol -> price (ticks) of its latest trade."""
        self.references: dict[str, PriceReference] = {}
        """symbol -> the reference price of its price band (``spot_reference``)."""
        self.band_edges: dict[str, tuple[int, int]] = {}
        """symbol -> (lowest SELL, highest BUY) price its band allows now; absent: no band."""
        self._fee_balances: dict[str, list[int]] = {}
        """asset -> the fee account's [free, locked] record (see ``_fee_balance``)."""

    # ----------------------------------------------------------------- validation

    def book(self, symbol: str) -> OrderBook:
        book = self.books.get(symbol)
        if book is None:
            raise Reject(Code.BAD_SYMBOL, f"invalid symbol {symbol!r}")
        return book

    def validate(self, cmd: PlaceOrder) -> tuple[PairSpec, Hold]:
        """Check a placement against everything but the balance; return what it must hold."""
        pair = self.pairs.get(cmd.symbol)
        if pair is None:
            raise Reject(Code.BAD_SYMBOL, f"invalid symbol {cmd.symbol!r}")
        if not pair.trading:
            raise Reject(Code.TRADING_FROZEN, f"trading is suspended on {pair.symbol}")
        side = cmd.side
        if side != BUY and side != SELL:
            raise Reject(Code.BAD_SIDE, "side must be BUY or SELL")
        qty = cmd.qty
        if cmd.type == LIMIT:
            if cmd.tif not in TIME_IN_FORCE:
                raise Reject(Code.BAD_ORDER_TYPE, "timeInForce must be GTC, IOC, FOK or POST_ONLY")
            price = cmd.price
            if price <= 0:
                raise Reject(Code.PRICE_RANGE, "price must be positive")
            self.check_band(pair, side, price)
            if qty <= 0 or qty < pair.min_quantity:
                raise Reject(Code.BELOW_MINIMUM, _below_min_quantity(pair))
            notional = price * qty * pair.quote_per_tick_lot
            if notional > MAX_BALANCE:
                raise Reject(Code.PRICE_RANGE, "order value out of range")
            if notional < pair.min_notional:
                raise Reject(Code.BELOW_MINIMUM, _below_min_value(pair))
            hold = (pair.quote, notional) if side == BUY else (pair.base, qty * pair.base_per_lot)
        elif cmd.type == MARKET:
            if not pair.market_orders:
                raise Reject(Code.MARKET_NOT_SUPPORTED, f"market orders are off on {pair.symbol}")
            if cmd.tif != GTC:
                raise Reject(Code.BAD_ORDER_TYPE, "timeInForce applies to LIMIT orders only")
            if side == BUY:
                if cmd.quote_qty <= 0 or cmd.quote_qty < pair.min_notional:
                    raise Reject(Code.BELOW_MINIMUM, _below_min_value(pair))
                hold = (pair.quote, cmd.quote_qty)
            else:
                if qty <= 0 or qty < pair.min_quantity:
                    raise Reject(Code.BELOW_MINIMUM, _below_min_quantity(pair))
                hold = (pair.base, qty * pair.base_per_lot)
        else:
            raise Reject(Code.BAD_ORDER_TYPE, "type must be LIMIT or MARKET")
        if hold[1] > MAX_BALANCE:
            raise Reject(Code.BAD_PARAM, "volume out of range")
        if cmd.client_id and (cmd.account, pair.symbol, cmd.client_id) in self.by_client_id:
            raise Reject(Code.BAD_PARAM, "newClientOrderId is already used by an open order")
        open_orders = self.by_account.get(cmd.account)
        # Fewer open orders in total than the per-pair cap is the usual, cheap answer.
        if (
            open_orders is not None
            and len(open_orders) >= MAX_OPEN_ORDERS
            and self._open_count(cmd.account, pair.symbol) >= MAX_OPEN_ORDERS
        ):
            raise Reject(Code.TOO_MANY_ORDERS, f"at most {MAX_OPEN_ORDERS} open orders per pair")
        return pair, hold

    def _open_count(self, account: int, symbol: str) -> int:
        orders = self.by_account.get(account)
        if not orders:
            return 0
        if len(orders) < MAX_OPEN_ORDERS:
            return len(orders)  # cheap bound: fewer in total than the per-pair cap
        return sum(1 for order in orders.values() if order.symbol == symbol)

    def check_batch(self, account: int, symbol: str, orders: tuple[PlaceOrder, ...]) -> None:
        """What a batch needs beyond each order's own validation: one account and pair,
        distinct client ids, and room for all of it under the open-order cap."""
        if any(o.account != account or o.symbol != symbol for o in orders):
            raise Reject(
                Code.BAD_PARAM, "every order of a batch is for the batch's account and symbol"
            )
        first: dict[str, int] = {}
        for index, order in enumerate(orders):
            if not order.client_id:
                continue
            earlier = first.setdefault(order.client_id, index)
            if earlier != index:
                raise Reject(
                    Code.BAD_PARAM,
                    f"orders[{index}]: newClientOrderId {order.client_id!r} repeats"
                    f" orders[{earlier}]'s",
                )
        if self._open_count(account, symbol) + len(orders) > MAX_OPEN_ORDERS:
            raise Reject(Code.TOO_MANY_ORDERS, f"at most {MAX_OPEN_ORDERS} open orders per pair")

    def check_funds(self, account: int, holds: list[Hold]) -> None:
        """Refuse (-2017) holds the account's free balance cannot cover together, naming the
        first (``orders[i]``, as a batch's request names its elements) that takes them past
        it."""
        needed: dict[str, int] = {}
        for index, (asset, amount) in enumerate(holds):
            needed[asset] = needed.get(asset, 0) + amount
            free = self.ledger.free(account, asset)
            if free < needed[asset]:
                together = " with the orders before it" if amount <= free else ""
                raise Reject(
                    Code.INSUFFICIENT_BALANCE,
                    f"orders[{index}]: insufficient {asset} balance{together}",
                )

    # ----------------------------------------------------------------- placement

    def rest_at_once(self, cmd: PlaceOrder) -> OrderState | None:
        """The most common placement in one step: a valid, funded LIMIT GTC order without a
        client id that does not reach the opposite side rests at once. Returns None for any
        other order, and for one that would be refused: ``validate`` and ``place`` then take
        it. For the orders it takes, the result is what they give (events, reply, state;
        held equal by a property test)."""
        if cmd.type != LIMIT or cmd.tif != GTC or cmd.client_id or cmd.dry_run:
            return None
        pair = self.pairs.get(cmd.symbol)
        if pair is None or not pair.trading:
            return None
        price = cmd.price
        qty = cmd.qty
        if price <= 0 or qty <= 0 or qty < pair.min_quantity:
            return None
        notional = price * qty * pair.quote_per_tick_lot
        if notional > MAX_BALANCE or notional < pair.min_notional:
            return None
        edges = self.band_edges.get(pair.symbol)
        if edges is not None and not (price <= edges[1] if cmd.side == BUY else price >= edges[0]):
            return None  # beyond the band: the general path refuses it
        book = self.books[pair.symbol]
        side = cmd.side
        if side == BUY:
            keys = book.asks.keys
            if keys and -keys[-1] <= price:
                return None
            asset = pair.quote
            amount = notional
        elif side == SELL:
            keys = book.bids.keys
            if keys and keys[-1] >= price:
                return None
            asset = pair.base
            amount = qty * pair.base_per_lot
            if amount > MAX_BALANCE:
                return None
        else:
            return None
        account = cmd.account
        open_orders = self.by_account.get(account)
        if open_orders is not None and len(open_orders) >= MAX_OPEN_ORDERS:
            return None
        balance = self.ledger.balances.get((account, asset))
        if balance is None or balance[0] < amount:
            return None

        order_id = self.next_order_id
        self.next_order_id = order_id + 1
        order = Order(
            order_id, account, pair.symbol, side, LIMIT, GTC, price, qty, 0, "", cmd.ts
        )  # fmt: skip
        order.held = amount
        order.balance = self.ledger.hold(account, asset, amount, order_id, balance)
        book.rest(order)
        if open_orders is None:
            open_orders = self.by_account[account] = {order_id: order}
        else:
            open_orders[order_id] = order
        order.open_orders = open_orders
        return self._emit(order)

    def place(
        self, cmd: PlaceOrder, pair: PairSpec, hold: Hold, balance: list[int] | None = None
    ) -> OrderState:
        """Place a validated, funded order: match it, then rest or end it. ``balance`` is the
        account's [free, locked] record of the held asset when the caller has it at hand."""
        order_id = self.next_order_id
        self.next_order_id = order_id + 1
        account = cmd.account
        side = cmd.side
        price = cmd.price
        order = Order(
            order_id, account, pair.symbol, side, cmd.type, cmd.tif, price, cmd.qty,
            cmd.quote_qty, cmd.client_id, cmd.ts,
        )  # fmt: skip
        book = self.books[pair.symbol]
        tif = cmd.tif
        if tif == POST_ONLY and self._would_take(book, order):
            order.status = REJECTED
            return self._emit(order)
        if tif == FOK and self._fillable(book, order) < order.qty:
            order.status = CANCELED
            return self._emit(order)

        asset, amount = hold
        order.held = amount
        order.balance = self.ledger.hold(account, asset, amount, order_id, balance)
        if order.client_id:
            self.by_client_id[(account, order.symbol, order.client_id)] = order
        # Match only when the best opposite price is within reach: most orders rest at once.
        opposite = book.asks if side == BUY else book.bids
        keys = opposite.keys
        budget_spent = False
        if keys and (
            not price or (-keys[-1] <= price if opposite is book.asks else keys[-1] >= price)
        ):
            bound = price or self.band_edge(pair, side)
            budget_spent = self._match(pair, book, order, bound)

        if order.type == LIMIT and tif in (GTC, POST_ONLY) and order.filled < order.qty:
            order.status = PARTIALLY_FILLED if order.filled else NEW
            book.rest(order)
            open_orders = self.by_account.get(account)
            if open_orders is None:
                open_orders = self.by_account[account] = {order_id: order}
            else:
                open_orders[order_id] = order
            order.open_orders = open_orders
            return self._emit(order)

        if order.type == MARKET and side == BUY:
            complete = budget_spent and order.filled > 0
        else:
            complete = order.filled == order.qty
        order.status = FILLED if complete else CANCELED
        self._close(order)
        return self._emit(order)

    def set_reference(self, reference: PriceReference) -> None:
        """The pair's band reference, and the edges it gives its orders."""
        symbol = reference.symbol
        self.references[symbol] = reference
        band = self.pairs[symbol].price_band
        if band and reference.value > 0:
            low = price_band.edge(reference.value, band, SELL)
            self.band_edges[symbol] = (low, price_band.edge(reference.value, band, BUY))
        else:
            self.band_edges.pop(symbol, None)

    def band_edge(self, pair: PairSpec, side: str) -> int:
        """The worst price an order on ``side`` may trade at (0: no band, or no reference)."""
        edges = self.band_edges.get(pair.symbol)
        if edges is None:
            return 0
        return edges[1] if side == BUY else edges[0]

    def check_band(self, pair: PairSpec, side: str, price: int) -> None:
        if pair.symbol in self.band_edges:
            reference = self.references[pair.symbol].value
            price_band.check(
                side, price, reference, pair.price_band, pair.price_precision, "reference price"
            )

    def _would_take(self, book: OrderBook, order: Order) -> bool:
        best = book.opposite(order.side).best()
        if best is None:
            return False
        return best.price <= order.price if order.side == BUY else best.price >= order.price

    def _fillable(self, book: OrderBook, order: Order) -> int:
        """Lots available to ``order`` within its limit, not counting its own account's."""
        want = order.qty
        got = 0
        is_buy = order.side == BUY
        for level in book.opposite(order.side).iter_levels():
            if level.price > order.price if is_buy else level.price < order.price:
                break
            maker = level.head
            while maker is not None:
                if maker.account != order.account:
                    got += maker.qty - maker.filled
                    if got >= want:
                        return got
                maker = maker.next
        return got

    def _match(self, pair: PairSpec, book: OrderBook, taker: Order, limit: int) -> bool:
        """Match ``taker`` against the book up to ``limit`` (its price, or for a MARKET order
        the price band's edge; 0: none). Returns True when a MARKET BUY stopped because its
        budget could not buy one more lot.

        Self-trade prevention only touches resting orders the taker would really reach: the
        taker must still have quantity (or budget for a lot at that price) left."""
        opposite = book.opposite(taker.side)
        is_buy = taker.side == BUY
        by_budget = taker.type == MARKET and is_buy
        lot_cost = pair.quote_per_tick_lot
        while True:
            if by_budget and taker.filled_quote == taker.quote_qty:
                return True
            level = opposite.best()
            if level is None:
                return False
            if limit and (level.price > limit if is_buy else level.price < limit):
                return False
            if by_budget:
                affordable = (taker.quote_qty - taker.filled_quote) // (level.price * lot_cost)
                if affordable == 0:
                    return True
            maker = level.head
            while maker is not None:
                following = maker.next
                if maker.account == taker.account:
                    self.cancel_resting(book, maker, taker.time)
                    maker = following
                    continue
                available = maker.qty - maker.filled
                # Conditionals, not min(): builtins.min parses its arguments (10x the cost).
                if by_budget:
                    qty = available if available < affordable else affordable
                    affordable -= qty
                else:
                    wanted = taker.qty - taker.filled
                    qty = available if available < wanted else wanted
                self._execute(pair, book, level, taker, maker, qty)
                if by_budget:
                    if affordable == 0:
                        break  # re-check the budget (and stop) before touching more orders
                elif taker.filled == taker.qty:
                    return False
                maker = following

    def _execute(
        self, pair: PairSpec, book: OrderBook, level: Level, taker: Order, maker: Order, qty: int
    ) -> None:
        """One fill of ``maker`` (resting in ``level``) by ``taker``."""
        price = maker.price
        quote = price * qty * pair.quote_per_tick_lot
        base = qty * pair.base_per_lot
        if taker.side == BUY:
            buyer, seller = taker, maker
            buyer_fee = base * pair.taker_fee // _FEE_SCALE
            seller_fee = quote * pair.maker_fee // _FEE_SCALE
        else:
            buyer, seller = maker, taker
            buyer_fee = base * pair.maker_fee // _FEE_SCALE
            seller_fee = quote * pair.taker_fee // _FEE_SCALE
        trade_id = self.next_trade_id
        self.next_trade_id = trade_id + 1
        symbol = pair.symbol
        self.last_price[symbol] = price
        append = self.events.append
        ledger = self.ledger
        balances = ledger.balances
        base_asset = pair.base
        quote_asset = pair.quote

        # The ledger entries of a fill, written out (each as Ledger.change would make it):
        # a fill is most of the work of a crossing order. Both parties' holds exist, and a
        # hold is never smaller than what a fill takes from it, so nothing can go negative.
        # The buyer's hold is consumed at its own limit (or by the amount spent, for MARKET).
        hold_used = buyer.price * qty * pair.quote_per_tick_lot if buyer.type == LIMIT else quote
        buyer.held -= hold_used
        account = buyer.account
        bal = buyer.balance  # the record of what the buyer holds: its quote
        if bal is None:
            bal = balances[(account, quote_asset)]
        free = bal[0] = bal[0] + hold_used - quote
        locked = bal[1] = bal[1] - hold_used
        append(
            BalanceChanged(
                account, quote_asset, hold_used - quote, -hold_used, free, locked, "trade",
                trade_id,
            )
        )  # fmt: skip
        ledger.credit(account, base_asset, base - buyer_fee, "trade", trade_id)
        seller.held -= base
        account = seller.account
        bal = seller.balance  # the record of what the seller holds: its base
        if bal is None:
            bal = balances[(account, base_asset)]
        locked = bal[1] = bal[1] - base
        append(BalanceChanged(account, base_asset, 0, -base, bal[0], locked, "trade", trade_id))
        ledger.credit(account, quote_asset, quote - seller_fee, "trade", trade_id)
        if buyer_fee:
            fee_bal = self._fee_balance(base_asset)
            ledger.credit(FEE_ACCOUNT, base_asset, buyer_fee, "fee", trade_id, fee_bal)
        if seller_fee:
            fee_bal = self._fee_balance(quote_asset)
            ledger.credit(FEE_ACCOUNT, quote_asset, seller_fee, "fee", trade_id, fee_bal)

        ts = taker.time
        taker.filled += qty
        taker.filled_quote += quote
        taker.updated = ts
        maker.filled += qty
        maker.filled_quote += quote
        maker.updated = ts
        level.total -= qty
        if maker.filled == maker.qty:
            maker.status = FILLED
            book.remove(maker)
            self._unindex(maker)  # a filled maker holds nothing more
        else:
            maker.status = PARTIALLY_FILLED
        self._emit(maker)
        trade = Trade(
            trade_id, symbol, price, qty, quote, ts, taker.side, buyer.id,
            seller.id, buyer.account, seller.account, buyer_fee, seller_fee,
        )  # fmt: skip
        append(TradeExecuted(trade))

    def _fee_balance(self, asset: str) -> list[int]:
        """The exchange's [free, locked] record of ``asset``, kept once looked up (records
        are never replaced); made when a fee is about to be credited to it."""
        bal = self._fee_balances.get(asset)
        if bal is None:
            bal = self._fee_balances[asset] = self.ledger.record(FEE_ACCOUNT, asset)
        return bal

    # ----------------------------------------------------------------- cancellation

    def find_open(
        self, account: int, symbol: str, order_id: int | None, client_id: str | None
    ) -> Order | None:
        if order_id is not None:
            order = self.books[symbol].orders.get(order_id)
        elif client_id:
            order = self.by_client_id.get((account, symbol, client_id))
        else:
            return None
        if order is None or order.account != account or order.symbol != symbol:
            return None
        return order

    def cancel_resting(self, book: OrderBook, order: Order, ts: int) -> OrderState:
        book.remove(order)
        order.status = CANCELED
        order.updated = ts
        self._close(order)
        return self._emit(order)

    # ----------------------------------------------------------------- helpers

    def _close(self, order: Order) -> None:
        """The order has ended: give back what it still holds and drop it from the indexes."""
        held = order.held
        account = order.account
        if held:
            pair = self.pairs[order.symbol]
            asset = pair.quote if order.side == BUY else pair.base
            self.ledger.release(account, asset, held, order.id, order.balance)
            order.held = 0
        self._unindex(order)

    def _unindex(self, order: Order) -> None:
        """Drop an order that has ended from the account's open orders and the client ids."""
        # Only a resting order is in the account's index (place and restore keep it there).
        orders = order.open_orders
        if orders is not None:
            order.open_orders = None
            del orders[order.id]
            if not orders:
                del self.by_account[order.account]
        if order.client_id:
            key = (order.account, order.symbol, order.client_id)
            if self.by_client_id.get(key) is order:
                del self.by_client_id[key]

    def _emit(self, order: Order) -> OrderState:
        state = order.snapshot()
        self.events.append(OrderChanged(state))
        return state

    def restore(self, order: Order) -> None:
        """Put a recovered open order back, in the order of its original arrival."""
        self.books[order.symbol].rest(order)
        open_orders = self.by_account.setdefault(order.account, {})
        open_orders[order.id] = order
        order.open_orders = open_orders
        if order.client_id:
            self.by_client_id[(order.account, order.symbol, order.client_id)] = order


def _below_min_quantity(pair: PairSpec) -> str:
    """The refusal says the minimum: ``/symbols`` (the seed's shape) does not carry it."""
    least = format_units_trimmed(pair.min_quantity, pair.quantity_precision)
    return f"quantity below the minimum {least} {pair.base}"


def _below_min_value(pair: PairSpec) -> str:
    least = format_units_trimmed(pair.min_notional, pair.quote_decimals)
    return f"order value below the minimum {least} {pair.quote}"
