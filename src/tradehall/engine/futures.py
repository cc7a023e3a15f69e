"""Perpetual futures: orders on their own books, two-way positions, holds, fees and settlement.

Money lives in the ledger, in each user's futures account (``futures_account(user)``), one
asset per margin coin: ``free`` is available cash, ``locked`` holds what open OPEN orders
hold (initial margin plus the open fee at the order's prices) and every position's margin.
Realized P&L is paid by (or to) the contract's clearing account, so every move nets to zero.

Prices, funding, liquidation and conditional orders build on this class in
``futures_prices``, ``liquidation`` and ``triggers``.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from tradehall.codes import Code, Reject
from tradehall.engine import price_band
from tradehall.engine.book import OrderBook
from tradehall.engine.commands import FuturesPlace
from tradehall.engine.contracts import MAX_PRICE, MONEY_DECIMALS, RATE_ONE, ContractSpec
from tradehall.engine.events import Event, Trade, TradeExecuted
from tradehall.engine.futures_model import (
    BY_LIQUIDATION,
    BY_USER,
    CLOSE,
    CROSS,
    ISOLATED,
    KIND_CONTRACT,
    KIND_ORDER,
    KIND_POSITION,
    KIND_SETTING,
    KIND_TRANSFER,
    KIND_TRIGGER,
    OPEN,
    WAITING,
    AccountTransfer,
    ContractState,
    FuturesChanged,
    FuturesOrder,
    FuturesOrderState,
    Position,
    Setting,
    Trigger,
    clearing_account,
    futures_account,
)
from tradehall.engine.futures_risk import maintenance, maintenance_of, unrealized
from tradehall.engine.ledger import MAX_BALANCE, Ledger, check_move
from tradehall.engine.orders import (
    BUY,
    CANCELED,
    FILLED,
    FOK,
    GTC,
    IOC,
    LIMIT,
    MARKET,
    NEW,
    PARTIALLY_FILLED,
    POST_ONLY,
    REJECTED,
    SELL,
)
from tradehall.engine.risk_bands import RiskBands
from tradehall.engine.spot import FEE_ACCOUNT, SpotMarkets
from tradehall.engine.trigger_book import TriggerBook
from tradehall.units import format_units, format_units_trimmed

INSURANCE_ACCOUNT = -1
"""The insurance fund (shared with margin): one balance per asset."""

Fill = tuple[int, int]
"""(price, contracts) of one planned taker fill."""


def opposite(side: str) -> str:
    return SELL if side == BUY else BUY


def check_price(contract: ContractSpec, price: int, name: str = "price") -> None:
    """Refuse (-1138) a price below 1 tick or above the contract's ``max_price``. On an
    inverse contract that bound keeps one contract worth at least one unit of the margin
    coin, so that no fill at an admissible price (a partial one against a resting order
    included) is worth nothing and every position has a positive cost."""
    if 0 < price <= contract.max_price:
        return
    highest = format_units(contract.max_price, contract.price_precision)
    why = ""
    if contract.inverse and contract.max_price < MAX_PRICE:
        unit = format_units(1, contract.margin_decimals)
        why = f" (above it one contract is worth less than {unit} {contract.margin_coin})"
    raise Reject(
        Code.PRICE_RANGE,
        f"{name} must be positive and at most {highest} on {contract.symbol}{why}",
    )


class Futures:
    def __init__(
        self,
        contracts: dict[str, ContractSpec],
        ledger: Ledger,
        spot: SpotMarkets,
        events: list[Event],
    ) -> None:
        self.contracts = contracts
        self.ledger = ledger
        self.spot = spot
        """Shares the order and trade id counters of the spot engine (one id space)."""
        self.events = events
        self.books = {symbol: OrderBook(symbol) for symbol in contracts}
        self.open_by_user: dict[int, dict[int, FuturesOrder]] = {}
        self.by_client_id: dict[tuple[int, str, str], int] = {}
        """(user, contract, client id) -> id of the open order or waiting trigger."""
        self.positions: dict[tuple[int, str, str], Position] = {}
        """Open positions by (user, contract, side)."""
        self.by_contract: dict[str, dict[int, Position]] = {s: {} for s in contracts}
        self.by_user: dict[int, dict[int, Position]] = {}
        self.settings: dict[tuple[int, str], Setting] = {}
        self.states = {symbol: ContractState(symbol) for symbol in contracts}
        self.triggers: dict[int, Trigger] = {}
        """Waiting conditional orders by id."""
        self.user_triggers: dict[int, dict[int, Trigger]] = {}
        self.trigger_books = {symbol: TriggerBook() for symbol in contracts}
        self.traded: dict[str, list[int]] = {}
        """Per contract, the prices it traded at (in order) since its triggers were last
        looked at: a trigger fires on any of them, not only on the last (``triggers.due``)."""
        self.risk_bands = RiskBands(list(contracts))
        """Which positions a move of the mark can have made due (liquidation's index)."""
        self.next_position_id = 1
        self.next_transfer_id = 1
        """Id of the next spot <-> futures transfer (``AccountTransfer``)."""
        self.margin_coins = {c.margin_coin for c in contracts.values()}

    # ----------------------------------------------------------------- lookups

    def contract(self, symbol: str) -> ContractSpec:
        contract = self.contracts.get(symbol)
        if contract is None:
            raise Reject(Code.BAD_SYMBOL, f"invalid contract {symbol!r}")
        return contract

    def setting(self, user: int, symbol: str) -> Setting:
        setting = self.settings.get((user, symbol))
        if setting is None:
            contract = self.contracts[symbol]
            return Setting(user, symbol, contract.default_leverage, CROSS)
        return setting

    def open_orders(self, user: int, symbol: str | None = None) -> list[FuturesOrder]:
        orders = self.open_by_user.get(user)
        if not orders:
            return []
        return [o for o in orders.values() if symbol is None or o.symbol == symbol]

    def waiting_triggers(self, user: int, symbol: str | None = None) -> list[Trigger]:
        triggers = self.user_triggers.get(user)
        if not triggers:
            return []
        return [t for t in triggers.values() if symbol is None or t.contract == symbol]

    def user_positions(self, user: int) -> list[Position]:
        """Open positions of ``user``, oldest first."""
        positions = self.by_user.get(user)
        return sorted(positions.values(), key=lambda p: p.id) if positions else []

    def position_by_id(self, user: int, position_id: int) -> Position | None:
        return self.by_user.get(user, {}).get(position_id)

    def mark(self, symbol: str) -> int:
        return self.states[symbol].mark

    def cross_unrealized(self, user: int, coin: str) -> int:
        total = 0
        for pos in self.user_positions(user):
            contract = self.contracts[pos.contract]
            if pos.position_type == CROSS and contract.margin_coin == coin:
                total += unrealized(contract, pos, self.states[pos.contract].mark)
        return total

    def available(self, user: int, coin: str) -> int:
        """Cash that new orders, margin top-ups and transfers out may use: free cash less
        any unrealized loss of cross positions (unrealized profit is not spendable)."""
        free = self.ledger.free(futures_account(user), coin)
        return free + min(0, self.cross_unrealized(user, coin))

    def _open_count(self, user: int, symbol: str) -> int:
        orders = self.open_by_user.get(user, {})
        count = sum(1 for o in orders.values() if o.symbol == symbol)
        return count + len(self.waiting_triggers(user, symbol))

    def has_activity(self, user: int, symbol: str) -> bool:
        """Open orders, waiting triggers or open positions on the contract."""
        if any(o.symbol == symbol for o in self.open_by_user.get(user, {}).values()):
            return True
        if self.waiting_triggers(user, symbol):
            return True
        return any((user, symbol, side) in self.positions for side in (BUY, SELL))

    # ----------------------------------------------------------------- events

    def emit_order(self, order: FuturesOrder) -> FuturesOrderState:
        state = order.state()
        live = state.status in (NEW, PARTIALLY_FILLED)
        self.events.append(
            FuturesChanged(KIND_ORDER, order.user, order.symbol, order.id, live, state)
        )
        return state

    def emit_position(self, pos: Position) -> None:
        copy = msgspec.structs.replace(pos)
        self.events.append(
            FuturesChanged(KIND_POSITION, pos.user, pos.contract, pos.id, pos.volume > 0, copy)
        )

    def emit_trigger(self, trigger: Trigger) -> None:
        copy = msgspec.structs.replace(trigger)
        live = trigger.status == WAITING
        self.events.append(
            FuturesChanged(KIND_TRIGGER, trigger.user, trigger.contract, trigger.id, live, copy)
        )

    def emit_setting(self, setting: Setting) -> None:
        copy = Setting(setting.user, setting.contract, setting.leverage, setting.position_type)
        self.events.append(
            FuturesChanged(KIND_SETTING, setting.user, setting.contract, 0, True, copy)
        )

    def emit_state(self, state: ContractState) -> None:
        sources = {
            name: msgspec.structs.replace(source, samples=list(source.samples))
            for name, source in state.sources.items()
        }
        copy = msgspec.structs.replace(state, sources=sources)
        self.events.append(FuturesChanged(KIND_CONTRACT, 0, state.contract, 0, True, copy))

    # ----------------------------------------------------------------- settings

    def set_leverage(self, user: int, symbol: str, leverage: int) -> Setting:
        contract = self.contract(symbol)
        if not 1 <= leverage <= contract.max_leverage:
            raise Reject(Code.BAD_PARAM, f"leverage must be between 1 and {contract.max_leverage}")
        current = self.setting(user, symbol)
        if current.leverage == leverage:
            return current
        if self.has_activity(user, symbol):
            raise Reject(
                Code.UNSUPPORTED,
                "leverage can change only with no open position or order on the contract",
            )
        setting = Setting(user, symbol, leverage, current.position_type)
        self.settings[(user, symbol)] = setting
        self.emit_setting(setting)
        return setting

    def set_margin_mode(self, user: int, symbol: str, position_type: int) -> Setting:
        self.contract(symbol)
        if position_type not in (CROSS, ISOLATED):
            raise Reject(Code.BAD_PARAM, "positionModel must be 1 (cross) or 2 (isolated)")
        current = self.setting(user, symbol)
        if current.position_type == position_type:
            return current
        if self.has_activity(user, symbol):
            raise Reject(
                Code.UNSUPPORTED,
                "margin mode can change only with no open position or order on the contract",
            )
        setting = Setting(user, symbol, current.leverage, position_type)
        self.settings[(user, symbol)] = setting
        self.emit_setting(setting)
        return setting

    # ----------------------------------------------------------------- transfers

    def check_coin(self, asset: str) -> None:
        if asset not in self.margin_coins:
            raise Reject(Code.BAD_PARAM, f"{asset} is not the margin coin of any contract")

    def transfer(
        self, user: int, asset: str, amount: int, into_futures: bool, ts: int
    ) -> AccountTransfer:
        self.check_coin(asset)
        check_move(amount)
        account = futures_account(user)
        ref = self.next_transfer_id
        if into_futures:
            if self.ledger.free(user, asset) < amount:
                raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient spot {asset} balance")
            self.ledger.change(user, asset, -amount, 0, "to_futures", ref)
            self.ledger.change(account, asset, amount, 0, "from_spot", ref)
        else:
            if self.available(user, asset) < amount:
                raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient futures {asset} balance")
            self.ledger.change(account, asset, -amount, 0, "to_spot", ref)
            self.ledger.change(user, asset, amount, 0, "from_futures", ref)
        self.next_transfer_id += 1
        record = AccountTransfer(ref, user, asset, amount, into_futures, ts)
        self.events.append(FuturesChanged(KIND_TRANSFER, user, asset, ref, False, record))
        return record

    def adjust_margin(self, user: int, position_id: int, amount: int, ts: int) -> Position:
        pos = self.position_by_id(user, position_id)
        if pos is None:
            raise Reject(Code.BAD_PARAM, "no such open position")
        if pos.position_type != ISOLATED:
            raise Reject(Code.UNSUPPORTED, "only isolated positions have their own margin")
        if amount == 0:
            raise Reject(Code.BAD_PARAM, "amount must not be zero")
        check_move(abs(amount))
        contract = self.contracts[pos.contract]
        account = futures_account(user)
        coin = contract.margin_coin
        if amount > 0:
            if self.available(user, coin) < amount:
                raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient futures {coin} balance")
            self.ledger.change(account, coin, -amount, amount, "position_margin", pos.id)
        else:
            take = -amount
            mark = self.states[pos.contract].mark
            upnl = unrealized(contract, pos, mark)
            # What stays must still be the initial margin of the position at entry, and
            # keep it at least that far above its maintenance margin at the mark.
            keep = pos.cost // pos.leverage + max(0, -upnl)
            if pos.margin - take < keep:
                most = format_units_trimmed(max(0, pos.margin - keep), contract.margin_decimals)
                raise Reject(
                    Code.INSUFFICIENT_BALANCE,
                    f"the position needs that margin (at most {most} {coin} may be taken out)",
                )
            self.ledger.change(account, coin, take, -take, "position_margin", pos.id)
        pos.margin += amount
        pos.mtime = ts
        self.emit_position(pos)
        return pos

    # ----------------------------------------------------------------- placement

    def validate(
        self, cmd: FuturesPlace, *, conditional: bool = False
    ) -> tuple[ContractSpec, Setting]:
        """Everything about an order but its funding and what it meets in the book. For a
        conditional order, the position a CLOSE reduces is checked when it fires."""
        contract = self.contract(cmd.contract)
        if not contract.trading:
            raise Reject(Code.TRADING_FROZEN, f"trading is suspended on {contract.symbol}")
        if cmd.side not in (BUY, SELL):
            raise Reject(Code.BAD_SIDE, "side must be BUY or SELL")
        if cmd.action not in (OPEN, CLOSE):
            raise Reject(Code.BAD_PARAM, "open must be OPEN or CLOSE")
        setting = self.setting(cmd.user, contract.symbol)
        position_type = cmd.position_type or setting.position_type
        if position_type not in (CROSS, ISOLATED):
            raise Reject(Code.BAD_PARAM, "positionType must be 1 (cross) or 2 (isolated)")
        if cmd.money and (cmd.type != MARKET or cmd.action != OPEN or cmd.volume):
            raise Reject(Code.BAD_PARAM, "only a MARKET OPEN is sized by value, not also by volume")
        if cmd.type == LIMIT:
            if cmd.tif not in (GTC, IOC, FOK, POST_ONLY):
                raise Reject(Code.BAD_ORDER_TYPE, "timeInForce must be IOC, FOK or POST_ONLY")
            check_price(contract, cmd.price)
            if not conditional:  # a conditional order's price meets the band when it fires
                self.check_band(contract, cmd.side, cmd.price)
            self._check_volume(contract, cmd.volume, contract.max_limit_volume)
            money = contract.money(cmd.volume, cmd.price)
            if money < contract.min_money:
                raise Reject(Code.BELOW_MINIMUM, _below_min_money(contract))
            if money > contract.max_limit_money:
                raise Reject(Code.BAD_PARAM, "order value above the maximum for LIMIT orders")
        elif cmd.type == MARKET:
            if cmd.tif != GTC:
                raise Reject(Code.BAD_ORDER_TYPE, "timeInForce applies to LIMIT orders only")
            if cmd.action == OPEN and cmd.volume == 0:  # sized by value
                if cmd.money <= 0 or cmd.money < contract.min_money:
                    raise Reject(Code.BELOW_MINIMUM, _below_min_money(contract))
                if cmd.money > contract.max_market_money:
                    raise Reject(Code.BAD_PARAM, "order value above the maximum for MARKET orders")
            else:
                self._check_volume(contract, cmd.volume, contract.max_market_volume)
        else:
            raise Reject(Code.BAD_ORDER_TYPE, "type must be LIMIT or MARKET")
        if cmd.client_id and (cmd.user, contract.symbol, cmd.client_id) in self.by_client_id:
            raise Reject(Code.BAD_PARAM, "clientOrderId is already used by an open order")
        if self._open_count(cmd.user, contract.symbol) >= contract.max_valid_order:
            raise Reject(
                Code.TOO_MANY_ORDERS,
                f"at most {contract.max_valid_order} open orders on {contract.symbol}",
            )
        if position_type != setting.position_type:
            if self.has_activity(cmd.user, contract.symbol):
                raise Reject(
                    Code.BAD_PARAM,
                    "positionType differs from the margin mode of your open positions and "
                    "orders on this contract",
                )
            setting = Setting(cmd.user, contract.symbol, setting.leverage, position_type)
        if not conditional and not self.states[contract.symbol].index:
            # Without an index the mark would be the last price, which two accounts trading
            # with each other set: no band, no mark to hold liquidations to. (A conditional
            # order may wait; it is refused when it fires, if there is still none.)
            raise Reject(
                Code.TRADING_FROZEN,
                f"{contract.symbol} has no index price yet: orders are taken once it has one",
            )
        if cmd.action == CLOSE and not conditional:
            pos = self.positions.get((cmd.user, contract.symbol, opposite(cmd.side)))
            closable = pos.volume - pos.pending_close if pos is not None else 0
            if cmd.volume > closable:
                raise Reject(
                    Code.INSUFFICIENT_BALANCE,
                    f"close volume {cmd.volume} exceeds the closable position ({closable})",
                )
        return contract, setting

    @staticmethod
    def _check_volume(contract: ContractSpec, volume: int, maximum: int) -> None:
        if volume <= 0 or volume < contract.min_volume:
            least = contract.min_volume
            unit = "contract" if least == 1 else "contracts"
            raise Reject(Code.BELOW_MINIMUM, f"volume below the minimum {least} {unit}")
        if volume > maximum:
            raise Reject(Code.BAD_PARAM, f"volume above the maximum ({maximum})")

    def plan(
        self,
        contract: ContractSpec,
        user: int,
        side: str,
        limit: int,
        volume: int,
        money: int,
        void: set[int] | None = None,
    ) -> tuple[list[Fill], bool]:
        """The taker fills an order would get now, skipping the user's own resting orders
        (self-trade prevention cancels them) and the orders that may no longer trade at their
        price (``_maker_void``: matching cancels them; their ids are added to ``void``, for
        matching to cancel exactly these), and whether they reach the order's size. With
        ``money`` the order is sized by value: its size is reached when what is left of the
        money no longer pays for one contract at the level it stopped at (matching cannot
        skip a level), or, once the book ran out, at the last price it traded at; not when
        the book runs out while the money could still buy. (A lower bid costs less per
        contract on a linear contract, so emptying a level exactly is not the end.)"""
        fills: list[Fill] = []
        book = self.books[contract.symbol]
        is_buy = side == BUY
        left = volume
        budget = money
        account = futures_account(user)
        last: int | None = None
        for level in book.opposite(side).iter_levels():
            if limit and (level.price > limit if is_buy else level.price < limit):
                break
            offered = 0
            node = level.head
            while node is not None:
                if node.account != account:
                    assert isinstance(node, FuturesOrder)
                    if self._maker_void(contract, node):
                        if void is not None:
                            void.add(node.id)
                    else:
                        offered += node.qty - node.filled
                node = node.next
            if not offered:
                continue  # only the user's own orders: self-trade prevention cancels them
            if money:
                left = budget // contract.money(1, level.price)
                if left == 0:
                    return fills, True
            take = min(offered, left)
            if take:
                fills.append((level.price, take))
                if money:
                    budget -= contract.money(take, level.price)
                else:
                    left -= take
            if take < offered or (not money and left == 0):
                return fills, True  # matching never reaches past a level it does not empty
            last = level.price
        # The book ran out (or the limit was reached) with every level met emptied.
        return fills, bool(money) and last is not None and budget < contract.money(1, last)

    @staticmethod
    def hold_for(
        contract: ContractSpec, leverage: int, fills: list[Fill], rest: int, limit: int
    ) -> int:
        """Initial margin plus open fee for the planned taker fills and the resting rest."""
        hold = 0
        for price, qty in fills:
            value = contract.value(qty, price)
            hold += value // leverage + value * contract.open_taker_fee // RATE_ONE
        if rest:
            value = contract.value(rest, limit)
            hold += value // leverage + value * contract.open_maker_fee // RATE_ONE
        return hold

    def place(
        self,
        cmd: FuturesPlace,
        *,
        source: str = BY_USER,
        trigger_id: int = 0,
    ) -> FuturesOrderState:
        contract, setting = self.validate(cmd)
        symbol = contract.symbol
        bound = cmd.price if cmd.type == LIMIT else self.band_edge(contract, cmd.side)
        void: set[int] = set()
        fills, reached = self.plan(contract, cmd.user, cmd.side, bound, cmd.volume, cmd.money, void)
        keep_rest = True
        if cmd.action == CLOSE and source != BY_LIQUIDATION:
            # A close trades no further than the position can pay; what it cannot pay at its
            # limit does not rest (a LIMIT that would only rest there is refused).
            closing = self.positions[(cmd.user, symbol, opposite(cmd.side))]
            cut = self.exit_levels(contract, closing, fills)
            if cut < len(fills):  # stop before the first level the position cannot pay
                price = fills[cut][0]
                bound = price + 1 if cmd.side == SELL else max(1, price - 1)
                fills, reached, keep_rest = fills[:cut], False, False
            if cmd.type == LIMIT and not fills:
                self.check_exit(contract, closing, cmd.side, cmd.volume, cmd.price)
            elif cmd.type == LIMIT and keep_rest:
                keep_rest = self._exit_payable(contract, closing, cmd.volume, cmd.price)
        planned = sum(q for _, q in fills)
        volume = planned if cmd.money else cmd.volume
        rests = cmd.type == LIMIT and cmd.tif in (GTC, POST_ONLY)
        hold = 0
        if cmd.action == OPEN:
            rest = volume - planned if rests else 0
            entries = [*fills, (cmd.price, rest)] if rest else fills
            self.check_entries(contract, cmd.side, setting.leverage, entries)
            hold = self.hold_for(contract, setting.leverage, fills, rest, cmd.price)
            if hold > MAX_BALANCE:
                raise Reject(Code.BAD_PARAM, "order value out of range")
            if hold > self.available(cmd.user, contract.margin_coin):
                raise Reject(
                    Code.INSUFFICIENT_BALANCE, f"insufficient {contract.margin_coin} margin"
                )
        order = FuturesOrder(
            self.spot.next_order_id,
            futures_account(cmd.user),
            symbol,
            cmd.side,
            cmd.type,
            cmd.tif,
            cmd.price,
            volume,
            cmd.money,
            cmd.client_id,
            cmd.ts,
            user=cmd.user,
            action=cmd.action,
            position_type=setting.position_type,
            leverage=setting.leverage,
            source=source,
            trigger_id=trigger_id,
        )
        self.spot.next_order_id += 1
        book = self.books[symbol]
        if cmd.tif == POST_ONLY and self._would_take(book, order):
            order.status = REJECTED
            return self.emit_order(order)
        if (cmd.tif == FOK and planned < volume) or volume == 0:
            order.status = CANCELED
            return self.emit_order(order)
        if self.settings.get((cmd.user, symbol)) != setting:
            self.settings[(cmd.user, symbol)] = setting  # the mode this order switched to
            self.emit_setting(setting)
        # Fills short of the order's size end it CANCELED, a MARKET OPEN's too: its quantity
        # is what the book offered, not what its money asked for.
        return self.execute(
            contract, book, order, hold, complete=reached, bound=bound, void=void, rests=keep_rest
        )

    def band_edge(self, contract: ContractSpec, side: str) -> int:
        """The worst price an order on ``side`` may trade at: the price band's edge around
        the mark (0: no band, or no mark yet)."""
        return price_band.edge(self.states[contract.symbol].mark, contract.price_band, side)

    def check_band(self, contract: ContractSpec, side: str, price: int) -> None:
        """Refuse a LIMIT price beyond the price band around the mark (``price_band``)."""
        mark = self.states[contract.symbol].mark
        places = contract.price_precision
        price_band.check(side, price, mark, contract.price_band, places, "mark price")

    def check_entries(
        self, contract: ContractSpec, side: str, leverage: int, entries: list[Fill]
    ) -> None:
        """Refuse (-1138) an OPEN order that would trade or rest at a price worse than the mark
        by more than its margin carries: the position it opens would start at or below its
        maintenance margin (margin value / leverage, P&L at the mark), be liquidated at once,
        and the insurance fund would pay its counterparty the gap. Two accounts of one owner
        could otherwise drain the fund with a trade far from the mark on a thin book."""
        mark = self.states[contract.symbol].mark
        if mark <= 0:
            return
        for price, qty in entries:
            if self._entry_too_far(contract, side, leverage, price, qty, mark):
                at = format_units(price, contract.price_precision)
                raise Reject(
                    Code.PRICE_RANGE,
                    f"{side} OPEN at {at} is too far from the mark price"
                    f" {format_units(mark, contract.price_precision)} for leverage {leverage}:"
                    " the position would start at or below its maintenance margin",
                )

    def cross_equity(self, user: int, coin: str) -> tuple[int, int]:
        """(equity, maintenance) of a user's cross positions in ``coin``, at the marks."""
        free, locked = self.ledger.get(futures_account(user), coin)
        equity = free + locked
        needed = 0
        for pos in self.user_positions(user):
            contract = self.contracts[pos.contract]
            if contract.margin_coin != coin:
                continue
            if pos.position_type == ISOLATED:
                equity -= pos.margin
                continue
            mark = self.states[pos.contract].mark
            equity += unrealized(contract, pos, mark)
            needed += maintenance(contract, pos, mark)
        return equity, needed

    def close_shortfall(
        self, contract: ContractSpec, pos: Position, qty: int, value: int, fee_rate: int
    ) -> int:
        """What the insurance fund would pay if ``qty`` of ``pos`` closed now for ``value``
        (a fee at ``fee_rate``), at once or by what the close leaves bankrupt at the marks;
        0 when what backs the position covers it. Isolated: the close's loss is paid from the
        position's margin, and the part left open must still be worth something at the mark
        (margin left + its unrealized P&L >= 0): a partial close at a loss could otherwise
        spend the margin behind the rest's own loss, and the fund would pay it at the rest's
        liquidation. Cross: the loss is paid from the free cash and then the position's
        margin, and the account's cross equity at the marks must stay >= 0 after it (cash
        behind the other cross positions' losses is not this close's to spend)."""
        cost, release = self._close_share(pos, qty)
        pnl = contract.pnl(pos.is_long, cost, value)
        fee = value * fee_rate // RATE_ONE
        net = release + pnl - fee
        rest_margin = pos.margin - release
        mark = self.states[contract.symbol].mark
        if pos.position_type == ISOLATED:
            rest = rest_margin + min(0, net)
            if mark > 0 and qty < pos.volume:
                left = pos.volume - qty
                rest += contract.pnl(pos.is_long, pos.cost - cost, contract.value(left, mark))
            return max(0, -rest)
        coin = contract.margin_coin
        free = self.ledger.free(futures_account(pos.user), coin)
        now = max(0, -net - free - rest_margin)
        equity, _ = self.cross_equity(pos.user, coin)
        if mark > 0:  # the closed part's P&L at the mark is in the equity: this replaces it
            equity -= contract.pnl(pos.is_long, cost, contract.value(qty, mark))
        return max(now, -(equity + pnl - fee))

    def check_exit(
        self, contract: ContractSpec, pos: Position, side: str, qty: int, price: int
    ) -> None:
        """Refuse (-1138) a user's CLOSE that would rest at a limit price losing more than what
        backs the position (with the maker fee it would fill with): a close past bankruptcy,
        the insurance fund paying the counterparty the gap. Two accounts of one owner could
        otherwise drain the fund with a CLOSE far from the mark (within the price band) on a
        thin book."""
        if self._exit_payable(contract, pos, qty, price):
            return
        backing = "margin" if pos.position_type == ISOLATED else "margin and free cash"
        mark = self.states[contract.symbol].mark
        raise Reject(
            Code.PRICE_RANGE,
            f"{side} CLOSE at {format_units(price, contract.price_precision)} would lose more"
            f" than the position's {backing}: close nearer the mark price"
            f" {format_units(mark, contract.price_precision)}, or add margin",
        )

    def _exit_payable(self, contract: ContractSpec, pos: Position, qty: int, price: int) -> bool:
        """Whether closing ``qty`` of ``pos`` at ``price`` as a resting order (maker fee: a
        resting order fills as the maker, and is judged again then) needs nothing of the
        insurance fund."""
        value = contract.value(qty, price)
        return self.close_shortfall(contract, pos, qty, value, contract.close_maker_fee) <= 0

    def exit_levels(self, contract: ContractSpec, pos: Position, fills: list[Fill]) -> int:
        """For a user's CLOSE: how many of its planned levels (from the first) what backs the
        position pays for."""
        qty = value = 0
        for taken, (price, take) in enumerate(fills):
            qty += take
            value += contract.value(take, price)
            if self.close_shortfall(contract, pos, qty, value, contract.close_taker_fee) > 0:
                return taken
        return len(fills)

    @staticmethod
    def _entry_too_far(
        contract: ContractSpec, side: str, leverage: int, price: int, qty: int, mark: int
    ) -> bool:
        """Whether ``qty`` opened at ``price`` would start at or below its maintenance margin
        (margin value / leverage, P&L at ``mark``)."""
        cost = contract.value(qty, price)
        value = contract.value(qty, mark)
        pnl = contract.pnl(side == BUY, cost, value)
        return pnl < 0 and cost // leverage + pnl <= maintenance_of(contract, value)

    @staticmethod
    def _would_take(book: OrderBook, order: FuturesOrder) -> bool:
        """Whether the order meets the opposite side at all (own orders included)."""
        best = book.opposite(order.side).best()
        if best is None:
            return False
        return best.price <= order.price if order.side == BUY else best.price >= order.price

    def execute(
        self,
        contract: ContractSpec,
        book: OrderBook,
        order: FuturesOrder,
        hold: int,
        *,
        complete: bool = True,
        bound: int = 0,
        void: set[int] | None = None,
        rests: bool = True,
    ) -> FuturesOrderState:
        """Hold, match, then rest or end a validated order. ``complete`` False: the planned
        fills fall short of the order's size (for a MARKET OPEN, whose quantity is what the
        book offered, not what its money asked for), so an order that does not rest ends
        CANCELED even when that quantity fills. ``rests`` False: what a LIMIT order leaves is
        cancelled rather than rested (a CLOSE whose position cannot pay at its limit)."""
        if hold:
            order.held = hold
            self.ledger.change(order.account, contract.margin_coin, -hold, hold, "hold", order.id)
        if order.action == CLOSE:
            self.positions[
                (order.user, order.symbol, opposite(order.side))
            ].pending_close += order.qty
        if order.client_id:
            self.by_client_id[(order.user, order.symbol, order.client_id)] = order.id
        self.match(contract, book, order, bound, void)
        if (
            rests
            and order.type == LIMIT
            and order.tif in (GTC, POST_ONLY)
            and order.filled < order.qty
        ):
            order.status = PARTIALLY_FILLED if order.filled else NEW
            book.rest(order)
            self.open_by_user.setdefault(order.user, {})[order.id] = order
            return self.emit_order(order)
        order.status = FILLED if order.filled == order.qty and complete else CANCELED
        self.end(order)
        return self.emit_order(order)

    def match(
        self,
        contract: ContractSpec,
        book: OrderBook,
        taker: FuturesOrder,
        bound: int = 0,
        void: set[int] | None = None,
    ) -> None:
        """Fill ``taker`` against the book up to its limit price, or for a MARKET order up to
        ``bound`` (the price band's edge; 0: none). Resting orders that may no longer trade
        at their price are cancelled as they are met: those ``plan`` found (``void``, so that
        what the taker holds covers exactly the levels it planned), else as ``_maker_void``
        finds them now."""
        opposite_side = book.opposite(taker.side)
        is_buy = taker.side == BUY
        limit = (bound or taker.price) if taker.type == LIMIT else bound
        while taker.filled < taker.qty:
            level = opposite_side.best()
            if level is None:
                return
            if limit and (level.price > limit if is_buy else level.price < limit):
                return
            maker = level.head
            while maker is not None and taker.filled < taker.qty:
                following = maker.next
                assert isinstance(maker, FuturesOrder)
                qty = min(maker.qty - maker.filled, taker.qty - taker.filled)
                if maker.account == taker.account or (
                    maker.id in void if void is not None else self._maker_void(contract, maker)
                ):  # self-trade prevention; an order that may no longer trade at its price
                    self.cancel_resting(maker, taker.time)
                elif self._past_bankruptcy(contract, taker, qty, maker.price, maker=False):
                    return
                else:
                    self.fill(contract, book, taker, maker, qty, maker.price, taker.time)
                maker = following

    def _maker_void(self, contract: ContractSpec, maker: FuturesOrder) -> bool:
        """Whether a resting order may no longer trade at its price, for all it has left: a
        CLOSE whose position's backing shrank since it rested (funding, margin taken out, a
        cross account's cash), or an OPEN the mark moved away from, which would open a
        position at or below its maintenance margin (bankrupt on arrival, the fund paying its
        counterparty the gap at its liquidation)."""
        rest = maker.qty - maker.filled
        return self._past_bankruptcy(
            contract, maker, rest, maker.price, maker=True
        ) or self._open_too_far(contract, maker, rest)

    def _open_too_far(self, contract: ContractSpec, order: FuturesOrder, qty: int) -> bool:
        if order.action != OPEN:
            return False
        mark = self.states[contract.symbol].mark
        return mark > 0 and self._entry_too_far(
            contract, order.side, order.leverage, order.price, qty, mark
        )

    def _past_bankruptcy(
        self, contract: ContractSpec, order: FuturesOrder, qty: int, price: int, *, maker: bool
    ) -> bool:
        """Whether this fill of a user's CLOSE would leave a loss for the insurance fund."""
        if order.action != CLOSE or order.source == BY_LIQUIDATION:
            return False
        pos = self.positions.get((order.user, order.symbol, opposite(order.side)))
        if pos is None:
            return False
        rate = contract.close_maker_fee if maker else contract.close_taker_fee
        return self.close_shortfall(contract, pos, qty, contract.value(qty, price), rate) > 0

    def fill(
        self,
        contract: ContractSpec,
        book: OrderBook | None,
        taker: FuturesOrder,
        maker: FuturesOrder,
        qty: int,
        price: int,
        ts: int,
        *,
        fees: bool = True,
    ) -> None:
        """One execution between two orders. ``book`` is None for a fill that does not come
        from the book (auto-deleveraging): the maker is then not resting."""
        value = contract.value(qty, price)
        trade_id = self.spot.next_trade_id
        self.spot.next_trade_id += 1
        taker_fee = self.settle(contract, taker, qty, value, False, trade_id, ts, fees)
        maker_fee = self.settle(contract, maker, qty, value, True, trade_id, ts, fees)
        for order in (taker, maker):
            order.filled += qty
            order.filled_quote += value
            order.updated = ts
        if book is not None:
            self.states[contract.symbol].last = price
            self.traded.setdefault(contract.symbol, []).append(price)
            book.side_of(maker.side).levels[price].total -= qty
            if maker.filled == maker.qty:
                maker.status = FILLED
                book.remove(maker)
                self.end(maker)
            else:
                maker.status = PARTIALLY_FILLED
        self.emit_order(maker)
        if taker.side == BUY:
            bid, ask, bid_fee, ask_fee = taker, maker, taker_fee, maker_fee
        else:
            bid, ask, bid_fee, ask_fee = maker, taker, maker_fee, taker_fee
        trade = Trade(
            trade_id,
            contract.symbol,
            price,
            qty,
            value,
            ts,
            taker.side,
            bid.id,
            ask.id,
            bid.account,
            ask.account,
            bid_fee,
            ask_fee,
        )
        self.events.append(TradeExecuted(trade))

    # ----------------------------------------------------------------- settlement

    def settle(
        self,
        contract: ContractSpec,
        order: FuturesOrder,
        qty: int,
        value: int,
        is_maker: bool,
        ref: int,
        ts: int,
        fees: bool,
    ) -> int:
        """Book one side of a fill into its position; return the fee charged."""
        coin = contract.margin_coin
        if order.action == OPEN:
            rate = contract.open_maker_fee if is_maker else contract.open_taker_fee
            fee = value * rate // RATE_ONE if fees else 0
            margin = value // order.leverage
            order.held -= margin + fee
            if order.held < 0:
                raise AssertionError(f"order {order.id} hold exhausted")
            pos = self._position_to_open(order, ts)
            if fee:
                self.ledger.change(order.account, coin, 0, -fee, "fee", ref)
                self.ledger.change(FEE_ACCOUNT, coin, fee, 0, "fee", ref)
            pos.volume += qty
            pos.cost += value
            pos.margin += margin
            pos.open_volume += qty
            pos.open_value += value
            pos.trade_fee += fee
            pos.mtime = ts
            self.emit_position(pos)
            return fee
        rate = contract.close_maker_fee if is_maker else contract.close_taker_fee
        fee = value * rate // RATE_ONE if fees else 0
        pos = self.positions[(order.user, order.symbol, opposite(order.side))]
        pos.pending_close -= qty
        # An isolated position's leftovers go to the fund fill by fill; a cross account's
        # once all its cross positions are closed (liquidation.liquidate_cross).
        to_fund = order.source == BY_LIQUIDATION and pos.position_type == ISOLATED
        self.close_part(contract, pos, qty, value, fee, ref, ts, to_fund)
        return fee

    def _position_to_open(self, order: FuturesOrder, ts: int) -> Position:
        key = (order.user, order.symbol, order.side)
        pos = self.positions.get(key)
        if pos is None:
            pos = Position(
                self.next_position_id,
                order.user,
                order.symbol,
                order.side,
                order.position_type,
                order.leverage,
                ctime=ts,
                mtime=ts,
            )
            self.next_position_id += 1
            self.restore_position(pos)
        return pos

    @staticmethod
    def _close_share(pos: Position, qty: int) -> tuple[int, int]:
        """The entry cost and the margin of ``qty`` of ``pos``."""
        if qty >= pos.volume:
            return pos.cost, pos.margin
        return pos.cost * qty // pos.volume, pos.margin * qty // pos.volume

    def close_part(
        self,
        contract: ContractSpec,
        pos: Position,
        qty: int,
        value: int,
        fee: int,
        ref: int,
        ts: int,
        to_fund: bool,
    ) -> None:
        """Close ``qty`` of ``pos`` at trade value ``value``: release its share of the
        margin, realize P&L against the clearing account, charge ``fee``.

        What the account cannot pay comes from the position's remaining margin (cross: from
        the free cash first), then from the insurance fund; whatever is still missing is
        socialised (taken short from the clearing account and recorded on the contract).
        With ``to_fund`` (liquidation of an isolated position) what is left over goes to
        the insurance fund instead of the account."""
        account = futures_account(pos.user)
        coin = contract.margin_coin
        ledger = self.ledger
        cost, release = self._close_share(pos, qty)
        pnl = contract.pnl(pos.is_long, cost, value)
        pos.volume -= qty
        pos.cost -= cost
        pos.margin -= release
        pos.close_volume += qty
        pos.close_value += value
        pos.close_profit += pnl
        pos.trade_fee += fee
        pos.mtime = ts
        net = release + pnl - fee
        social = 0
        if net >= 0:
            if to_fund:
                ledger.change(account, coin, 0, -release, "liquidation", ref)
                if net:
                    ledger.change(INSURANCE_ACCOUNT, coin, net, 0, "liquidation", ref)
                    pos.settled_by_others -= net
            else:
                ledger.change(account, coin, net, -release, "close", ref)
        else:
            due = -net
            from_free = 0
            if pos.position_type != ISOLATED:  # cross: the free cash first
                from_free = min(due, ledger.free(account, coin))
            from_locked = min(due - from_free, pos.margin)  # then the rest of the margin
            pos.margin -= from_locked
            due -= from_locked + from_free
            from_fund = min(due, ledger.free(INSURANCE_ACCOUNT, coin))
            social = due - from_fund
            pos.settled_by_others += due
            ledger.change(account, coin, -from_free, -release - from_locked, "close", ref)
            if from_fund:
                ledger.change(INSURANCE_ACCOUNT, coin, -from_fund, 0, "deficit", ref)
            if social:
                self.states[contract.symbol].socialized += social
        if pnl + social:
            ledger.change(clearing_account(contract.id), coin, -pnl - social, 0, "pnl", ref)
        if fee:
            ledger.change(FEE_ACCOUNT, coin, fee, 0, "fee", ref)
        if pos.volume == 0:
            del self.positions[(pos.user, pos.contract, pos.side)]
            del self.by_contract[pos.contract][pos.id]
            del self.by_user[pos.user][pos.id]
            if not self.by_user[pos.user]:
                del self.by_user[pos.user]
        self.emit_position(pos)

    # ----------------------------------------------------------------- cancellation

    def find_open(
        self, user: int, symbol: str, order_id: int | None, client_id: str | None
    ) -> FuturesOrder | Trigger | None:
        if order_id is None and client_id:
            order_id = self.by_client_id.get((user, symbol, client_id))
        if order_id is None:
            return None
        order = self.open_by_user.get(user, {}).get(order_id)
        if order is not None and order.symbol == symbol:
            return order
        trigger = self.triggers.get(order_id)
        if trigger is not None and trigger.user == user and trigger.contract == symbol:
            return trigger
        return None

    def cancel_resting(self, order: FuturesOrder, ts: int) -> FuturesOrderState:
        self.books[order.symbol].remove(order)
        order.status = CANCELED
        order.updated = ts
        self.end(order)
        return self.emit_order(order)

    def cancel_user(self, user: int, ts: int, symbol: str | None = None) -> list[int]:
        """Cancel every open order of ``user`` (on ``symbol``, or all): ids cancelled."""
        cancelled = []
        for order in self.open_orders(user, symbol):
            self.cancel_resting(order, ts)
            cancelled.append(order.id)
        return cancelled

    def end(self, order: FuturesOrder) -> None:
        """The order has ended: release what it holds, free its pending close volume and
        drop it from the indexes."""
        if order.held:
            coin = self.contracts[order.symbol].margin_coin
            self.ledger.change(order.account, coin, order.held, -order.held, "release", order.id)
            order.held = 0
        if order.action == CLOSE:
            pos = self.positions.get((order.user, order.symbol, opposite(order.side)))
            if pos is not None:
                pos.pending_close -= order.qty - order.filled
        orders = self.open_by_user.get(order.user)
        if orders is not None and orders.pop(order.id, None) is not None and not orders:
            del self.open_by_user[order.user]
        key = (order.user, order.symbol, order.client_id)
        if order.client_id and self.by_client_id.get(key) == order.id:
            del self.by_client_id[key]

    # ----------------------------------------------------------------- recovery

    def restore_order(self, state: FuturesOrderState) -> None:
        order = FuturesOrder.from_state(state)
        self.books[order.symbol].rest(order)
        self.open_by_user.setdefault(order.user, {})[order.id] = order
        if order.client_id:
            self.by_client_id[(order.user, order.symbol, order.client_id)] = order.id

    def restore_position(self, pos: Position) -> None:
        """After the open orders: the volume pending close is recounted from them."""
        pos.pending_close = sum(
            o.qty - o.filled
            for o in self.open_orders(pos.user, pos.contract)
            if o.action == CLOSE and o.side != pos.side
        )
        self.positions[(pos.user, pos.contract, pos.side)] = pos
        self.by_contract[pos.contract][pos.id] = pos
        self.by_user.setdefault(pos.user, {})[pos.id] = pos

    def restore_trigger(self, trigger: Trigger) -> None:
        """Add a waiting trigger to the indexes (placed, or recovered)."""
        self.triggers[trigger.id] = trigger
        self.user_triggers.setdefault(trigger.user, {})[trigger.id] = trigger
        self.trigger_books[trigger.contract].add(trigger)
        if trigger.client_id:
            self.by_client_id[(trigger.user, trigger.contract, trigger.client_id)] = trigger.id

    def drop_trigger(self, trigger: Trigger) -> None:
        """Take a trigger out of the indexes (cancelled, or firing)."""
        del self.triggers[trigger.id]
        mine = self.user_triggers[trigger.user]
        del mine[trigger.id]
        if not mine:
            del self.user_triggers[trigger.user]
        self.trigger_books[trigger.contract].remove(trigger)
        key = (trigger.user, trigger.contract, trigger.client_id)
        if trigger.client_id and self.by_client_id.get(key) == trigger.id:
            del self.by_client_id[key]

    def all_positions(self) -> Iterator[Position]:
        for positions in self.by_contract.values():
            yield from positions.values()


def _below_min_money(contract: ContractSpec) -> str:
    least = format_units_trimmed(contract.min_money, MONEY_DECIMALS)
    return f"order value below the minimum {least} {contract.quote}"
