"""Isolated margin: one margin account per (user, pair), borrowing from a lending pool,
hourly interest, auto-borrow and auto-repay around orders, and liquidation through the book.

Accounts here are ledger accounts like any other, so conservation covers them: borrowing moves
funds from the lending pool's account to the margin account and records the debt; repaying
moves them back (interest first). A deficit left after liquidation is paid to the pool by the
insurance fund; what the fund cannot cover is written off (the pool's loss).

Values are in the pair's quote units at its last trade price. Risk ratio = assets / debts,
compared in integer arithmetic against levels expressed in 1e-4 (1.25 == 12_500).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from tradehall.codes import Code, Reject
from tradehall.engine.bands import FAR, Watch
from tradehall.engine.commands import PlaceOrder
from tradehall.engine.events import (
    BalanceChanged,
    DebtChanged,
    Event,
    InterestAccrued,
    Liquidated,
    MarginAccountOpened,
    WrittenOff,
)
from tradehall.engine.ledger import Ledger
from tradehall.engine.markets import (
    FEE_RATE_DECIMALS,
    LEVEL_SCALE,
    RATE_SCALE,
    MarginSpec,
    PairSpec,
)
from tradehall.engine.orders import BUY, MARKET, SELL
from tradehall.engine.spot import SpotMarkets
from tradehall.units import format_units_trimmed

MARGIN_ACCOUNT_BASE = 10**12
"""Margin account ids start here, far above any user id (a user's spot account is its id)."""
INSURANCE_ACCOUNT = -1
POOL_ACCOUNT = -2
HOUR_MS = 3_600_000


class MarginAccount:
    __slots__ = ("debts", "id", "symbol", "user")

    def __init__(self, id: int, user: int, symbol: str) -> None:
        self.id = id
        self.user = user
        self.symbol = symbol
        self.debts: dict[str, list[int]] = {}
        """asset -> [principal, interest]."""

    def has_debt(self) -> bool:
        return any(p or i for p, i in self.debts.values())


@dataclass(frozen=True, slots=True)
class Risk:
    assets: int
    """Value of everything the account holds (free + locked), quote units, rounded down."""
    debts: int
    """Value of principal + interest, quote units, rounded up."""

    def ratio_at_least(self, level: int) -> bool:
        return self.debts == 0 or self.assets * LEVEL_SCALE >= level * self.debts

    def at_or_below(self, level: int) -> bool:
        return self.debts > 0 and self.assets * LEVEL_SCALE <= level * self.debts

    def ratio(self) -> Fraction | None:
        return None if self.debts == 0 else Fraction(self.assets, self.debts)


class Margin:
    def __init__(
        self,
        specs: dict[str, MarginSpec],
        pairs: dict[str, PairSpec],
        ledger: Ledger,
        spot: SpotMarkets,
        events: list[Event],
    ) -> None:
        self.specs = specs
        self.pairs = pairs
        self.ledger = ledger
        self.spot = spot
        self.events = events
        self.accounts: dict[int, MarginAccount] = {}
        self.by_user: dict[tuple[int, str], MarginAccount] = {}
        self.next_account_id = MARGIN_ACCOUNT_BASE
        self.accrued_hour: int | None = None
        self.written_off: dict[str, int] = {}
        """Per asset, the debts nobody could pay since the venue began (the pool's losses)."""
        self.waiting: set[int] = set()
        """Accounts whose liquidation is unfinished for want of liquidity: retried whenever an
        order arrives on their pair."""
        self.watch: Watch[int] = Watch(specs)
        """Per pair, the price range within which each account with debt is known to stay
        above its liquidation level (drawn when a sweep finds it there): a sweep after a
        trade looks only at the accounts the new price has left, and at stale ones (changed
        since, as the engine reports)."""

    # ----------------------------------------------------------------- accounts

    def spec(self, symbol: str) -> MarginSpec:
        spec = self.specs.get(symbol)
        if spec is None:
            raise Reject(Code.BAD_SYMBOL, f"margin trading is not offered on {symbol}")
        return spec

    def account_of(self, user: int, symbol: str) -> MarginAccount | None:
        return self.by_user.get((user, symbol))

    def open_account(self, user: int, symbol: str) -> MarginAccount:
        account = self.by_user.get((user, symbol))
        if account is None:
            account = MarginAccount(self.next_account_id, user, symbol)
            self.next_account_id += 1
            self.restore_account(account)
            self.events.append(MarginAccountOpened(account.id, user, symbol))
        return account

    def restore_account(self, account: MarginAccount) -> None:
        self.accounts[account.id] = account
        self.by_user[(account.user, account.symbol)] = account
        self.next_account_id = max(self.next_account_id, account.id + 1)

    # ----------------------------------------------------------------- valuation

    def prices(self, symbol: str) -> tuple[int, ...]:
        """The prices a loan or a transfer out is valued at: the last trade price; before the
        pair's first trade, the best bid and the best ask (both, or the one side there is: a
        check must pass at each, so neither side of a wide book flatters the account)."""
        price = self.spot.last_price.get(symbol)
        if price:
            return (price,)
        book = self.spot.books[symbol]
        sides = tuple(level.price for level in (book.bids.best(), book.asks.best()) if level)
        if not sides:
            raise Reject(
                Code.INSUFFICIENT_BALANCE,
                f"{symbol} has no trade price and no order in its book yet to value a loan",
            )
        return sides

    def risk(
        self,
        account: MarginAccount,
        price: int,
        change: tuple[str, int, int] | None = None,
    ) -> Risk:
        """Assets and debts valued at ``price``. ``change`` = (asset, assets delta, debt delta)
        values a move being considered: a loan adds to both, a transfer out takes assets."""
        pair = self.pairs[account.symbol]
        base_free, base_locked = self.ledger.get(account.id, pair.base)
        quote_free, quote_locked = self.ledger.get(account.id, pair.quote)
        base_assets, quote_assets = base_free + base_locked, quote_free + quote_locked
        base_debt = sum(account.debts.get(pair.base, (0, 0)))
        quote_debt = sum(account.debts.get(pair.quote, (0, 0)))
        if change is not None:
            asset, assets_delta, debt_delta = change
            if asset == pair.base:
                base_assets += assets_delta
                base_debt += debt_delta
            else:
                quote_assets += assets_delta
                quote_debt += debt_delta
        scale = price * pair.quote_per_tick_lot
        lot = pair.base_per_lot
        assets = base_assets * scale // lot + quote_assets
        debts = -(-base_debt * scale // lot) + quote_debt
        return Risk(assets, debts)

    def liquidation_price(self, account: MarginAccount) -> Fraction | None:
        """The price (in ticks) at which the risk ratio reaches the liquidation level."""
        pair = self.pairs[account.symbol]
        spec = self.specs[account.symbol]
        base_assets = sum(self.ledger.get(account.id, pair.base))
        quote_assets = sum(self.ledger.get(account.id, pair.quote))
        base_debt = sum(account.debts.get(pair.base, (0, 0)))
        quote_debt = sum(account.debts.get(pair.quote, (0, 0)))
        unit = Fraction(
            pair.quote_per_tick_lot, pair.base_per_lot
        )  # quote units per base unit per tick
        s, level = LEVEL_SCALE, spec.liquidation_level
        denominator = (s * base_assets - level * base_debt) * unit
        numerator = level * quote_debt - s * quote_assets
        if denominator == 0 or not (base_debt or quote_debt):
            return None
        price = Fraction(numerator) / denominator
        return price if price > 0 else None

    # ----------------------------------------------------------------- borrowing

    def check_borrow(self, account: MarginAccount, asset: str, amount: int) -> None:
        """Refuse (-2017, nothing changed) a loan the pool cannot give or that would take the
        account past its maximum leverage."""
        spec = self.spec(account.symbol)
        if self.ledger.free(POOL_ACCOUNT, asset) < amount:
            raise Reject(Code.INSUFFICIENT_BALANCE, f"the lending pool cannot lend {asset} now")
        for price in self.prices(account.symbol):
            risk = self.risk(account, price, (asset, amount, amount))
            equity = risk.assets - risk.debts
            if risk.debts > (spec.max_leverage - 1) * equity:
                raise Reject(
                    Code.INSUFFICIENT_BALANCE,
                    f"insufficient margin: borrowing would exceed {spec.max_leverage}x leverage",
                )
            if not risk.ratio_at_least(spec.initial_level):
                level = format_units_trimmed(spec.initial_level, 4)
                raise Reject(
                    Code.INSUFFICIENT_BALANCE,
                    "insufficient margin: borrowing would take the account's risk ratio below"
                    f" its initial level {level}",
                )

    def borrow(self, account: MarginAccount, asset: str, amount: int, ref: int) -> None:
        self.ledger.change(POOL_ACCOUNT, asset, -amount, 0, "loan", ref)
        self.ledger.change(account.id, asset, amount, 0, "loan", ref)
        debt = account.debts.setdefault(asset, [0, 0])
        debt[0] += amount
        self.events.append(DebtChanged(account.id, asset, debt[0], debt[1], "borrow", ref))

    def return_loan(self, account: MarginAccount, asset: str, amount: int, ref: int) -> None:
        """Give back, principal only, a loan taken in this same command for an order that
        came to nothing."""
        debt = account.debts[asset]
        debt[0] -= amount
        self.ledger.change(account.id, asset, -amount, 0, "loan_return", ref)
        self.ledger.change(POOL_ACCOUNT, asset, amount, 0, "loan_return", ref)
        self.events.append(DebtChanged(account.id, asset, debt[0], debt[1], "loan_return", ref))
        if debt == [0, 0]:
            del account.debts[asset]

    def repay(self, account: MarginAccount, asset: str, amount: int, reason: str, ref: int) -> int:
        """Repay up to ``amount`` of the debt in ``asset`` from free balance, interest first.
        Returns what was repaid."""
        debt = account.debts.get(asset)
        if not debt:
            return 0
        pay = min(amount, debt[0] + debt[1], self.ledger.free(account.id, asset))
        if pay <= 0:
            return 0
        to_interest = min(pay, debt[1])
        debt[1] -= to_interest
        debt[0] -= pay - to_interest
        self.ledger.change(account.id, asset, -pay, 0, reason, ref)
        self.ledger.change(POOL_ACCOUNT, asset, pay, 0, reason, ref)
        self.events.append(DebtChanged(account.id, asset, debt[0], debt[1], reason, ref))
        if debt == [0, 0]:
            del account.debts[asset]
        return pay

    def auto_repay(self, events: Iterable[Event]) -> set[str]:
        """What fills brought into margin accounts repays their debt in that asset. Returns the
        symbols of margin accounts touched (for the liquidation sweep)."""
        credited: dict[tuple[int, str], int] = {}
        touched: set[str] = set()
        for event in events:
            if (
                type(event) is BalanceChanged
                and event.reason == "trade"
                and event.d_free > 0
                and event.account >= MARGIN_ACCOUNT_BASE
            ):
                key = (event.account, event.asset)
                credited[key] = credited.get(key, 0) + event.d_free
        for (account_id, asset), amount in credited.items():
            account = self.accounts[account_id]
            touched.add(account.symbol)
            if asset in account.debts:
                self.repay(account, asset, amount, "repay", account_id)
        return touched

    # ----------------------------------------------------------------- transfers

    def transfer_in(self, user: int, symbol: str, asset: str, amount: int) -> MarginAccount:
        self.check_asset(symbol, asset)
        if self.ledger.free(user, asset) < amount:
            raise Reject(Code.INSUFFICIENT_BALANCE, f"insufficient {asset} in the spot account")
        account = self.open_account(user, symbol)
        self.ledger.change(user, asset, -amount, 0, "margin_in", account.id)
        self.ledger.change(account.id, asset, amount, 0, "margin_in", account.id)
        return account

    def transfer_out(self, user: int, symbol: str, asset: str, amount: int) -> MarginAccount:
        """Only free funds, and only what keeps the account at or above its initial level."""
        self.check_asset(symbol, asset)
        account = self.by_user.get((user, symbol))
        if account is None or self.ledger.free(account.id, asset) < amount:
            raise Reject(
                Code.INSUFFICIENT_BALANCE, f"insufficient free {asset} in the margin account"
            )
        if account.has_debt():
            for price in self.prices(symbol):
                risk = self.risk(account, price, (asset, -amount, 0))
                if not risk.ratio_at_least(self.specs[symbol].initial_level):
                    raise Reject(
                        Code.INSUFFICIENT_BALANCE,
                        "transfer would take the margin account below its initial risk level",
                    )
        self.ledger.change(account.id, asset, -amount, 0, "margin_out", account.id)
        self.ledger.change(user, asset, amount, 0, "margin_out", account.id)
        return account

    def check_asset(self, symbol: str, asset: str) -> None:
        self.spec(symbol)
        pair = self.pairs[symbol]
        if asset not in (pair.base, pair.quote):
            raise Reject(Code.BAD_PARAM, f"{asset} is not an asset of {symbol}")

    # ----------------------------------------------------------------- interest

    def accrue(self, ts: int) -> int:
        """Charge interest for every whole hour passed since the last accrual. Returns the
        number of hours charged."""
        hour = ts // HOUR_MS
        if self.accrued_hour is None or hour <= self.accrued_hour:
            if self.accrued_hour is None:
                self.accrued_hour = hour
                self.events.append(InterestAccrued(hour))
            return 0
        hours = hour - self.accrued_hour
        self.accrued_hour = hour
        self.charge(hours, hour)
        self.events.append(InterestAccrued(hour))
        return hours

    def charge(self, hours: int, hour: int) -> list[tuple[MarginAccount, str, int]]:
        """Charge ``hours`` hours of interest on every debt (each hour's charge rounded up,
        as the hourly accrual does), at hour ``hour``: (account, asset, charged) of each."""
        charged: list[tuple[MarginAccount, str, int]] = []
        for account in self.accounts.values():
            if not account.debts:
                continue
            spec = self.specs[account.symbol]
            pair = self.pairs[account.symbol]
            for asset, debt in account.debts.items():
                rate = spec.base_hourly_rate if asset == pair.base else spec.quote_hourly_rate
                amount = hours * -(-debt[0] * rate // RATE_SCALE)
                if amount:
                    debt[1] += amount
                    self.events.append(
                        DebtChanged(account.id, asset, debt[0], debt[1], "interest", hour)
                    )
                    charged.append((account, asset, amount))
        return charged

    # ----------------------------------------------------------------- liquidation

    def changed(self, accounts: Iterable[int]) -> None:
        """These accounts' balances or debts changed: their ranges no longer hold."""
        self.watch.stale.update(a for a in accounts if a in self.accounts)

    def sweep(self, symbols: Iterable[str], ts: int) -> None:
        """Liquidate every account of these pairs at or below its liquidation level, pairs in
        name order, accounts in id order. A liquidation's trades move the price and may reach
        others, so the pair is looked at again; each account is tried at most once per sweep.

        Looked at: the accounts of the pair whose range the price has left and the stale ones
        (the others provably are not due), each found above its level getting a new range;
        the first time, and after a liquidation (its trades changed accounts no range knows
        of), every account of the pair."""
        pending = set(symbols) & self.specs.keys()
        tried: set[int] = set()
        whole = False
        while pending:
            symbol = min(pending)
            pending.discard(symbol)
            price = self.spot.last_price.get(symbol)
            if not price:
                continue
            level = self.specs[symbol].liquidation_level
            named = None if whole else self._candidates(symbol, price)
            accounts = (
                list(self.accounts.values()) if named is None else sorted(named, key=lambda a: a.id)
            )
            for account in accounts:
                if account.symbol != symbol or account.id in tried:
                    continue
                if not account.has_debt():
                    self.watch.stale.discard(account.id)  # nothing owed: nothing to liquidate
                    continue
                if self.risk(account, price).at_or_below(level):
                    tried.add(account.id)
                    self.liquidate(account, ts)
                    pending.add(symbol)
                    whole = True
                    break
                if not whole:
                    self._draw(account, price, level)
            else:
                if not whole:
                    self.watch.banded.add(symbol)

    def _candidates(self, symbol: str, price: int) -> list[MarginAccount] | None:
        """The accounts of ``symbol`` that may be due at ``price`` (None: every one, the
        pair has no ranges yet)."""
        if symbol not in self.watch.banded:
            return None
        accounts = self.accounts
        stale = self.watch.flag_left(symbol, price)
        return [accounts[a] for a in stale if accounts[a].symbol == symbol]

    def _draw(self, account: MarginAccount, price: int, level: int) -> None:
        """The range of prices within which ``account``, found above ``level`` at ``price``,
        provably stays above it. Computed exactly (without rounding), assets x LEVEL_SCALE
        less level x debts is a straight line in the price, ``(a x price + b) / lot``; the
        computed values round by less than LEVEL_SCALE + level, so where the line is above
        that the account is not due."""
        pair = self.pairs[account.symbol]
        base_assets = sum(self.ledger.get(account.id, pair.base))
        quote_assets = sum(self.ledger.get(account.id, pair.quote))
        lot = pair.base_per_lot
        a = base_assets * LEVEL_SCALE - level * self.owed(account, pair.base)
        a *= pair.quote_per_tick_lot
        b = (quote_assets * LEVEL_SCALE - level * self.owed(account, pair.quote)) * lot
        rounding = (LEVEL_SCALE + level) * lot
        if a > 0:  # it holds more base than it owes (at its level): falls hurt
            low, high = (rounding - b) // a + 1, FAR
        elif a < 0:  # rises hurt
            low, high = 1, (b - rounding - 1) // -a
        else:
            low, high = (1, FAR) if b > rounding else (price, price)
        if not low <= price <= high:  # too close to call: any move is looked at
            low = high = price
        self.watch.draw(account.symbol, account.id, low, high)

    def owed(self, account: MarginAccount, asset: str) -> int:
        return sum(account.debts.get(asset, (0, 0)))

    def liquidate(self, account: MarginAccount, ts: int) -> None:
        """Cancel the account's orders, trade through the book what repays its debts, repay.
        A deficit is covered (insurance fund, then written off) only once the account has
        nothing left that could still pay it; until then the debt stays and the next trade
        on the pair tries again."""
        pair = self.pairs[account.symbol]
        book = self.spot.books[account.symbol]
        for order in [o for o in book.orders.values() if o.account == account.id]:
            self.spot.cancel_resting(book, order, ts)
        self._repay_from_free(account, pair)
        base_debt = self.owed(account, pair.base)
        if base_debt:
            budget = min(
                self._cost_to_buy(pair, base_debt), self.ledger.free(account.id, pair.quote)
            )
            if budget:
                self._market(account, pair, BUY, budget, ts)
                self._repay_from_free(account, pair)
        base_lots = self.ledger.free(account.id, pair.base) // pair.base_per_lot
        if self.owed(account, pair.quote) and base_lots and book.bids.best() is not None:
            self._market(account, pair, SELL, base_lots, ts)
            self._repay_from_free(account, pair)
        if not account.debts:
            self.waiting.discard(account.id)
            self.events.append(Liquidated(account.id, account.symbol, 0, 0, ts))
        elif self.exhausted(account, pair):
            self.waiting.discard(account.id)
            self._cover_deficit(account, pair, ts)
        elif self.due(account):
            self.waiting.add(account.id)
        else:  # what it sold lifted it above its level: done for now, it trades again
            self.waiting.discard(account.id)

    def waiting_on(self, symbol: str) -> bool:
        return any(self.accounts[a].symbol == symbol for a in self.waiting)

    def due(self, account: MarginAccount) -> bool:
        """Whether ``account`` owes and stands at or below its liquidation level at its pair's
        last price. An account waits for liquidity exactly while this holds, so that the
        waiting set is a function of the state (a replay or a restart finds the same one)."""
        price = self.spot.last_price.get(account.symbol)
        spec = self.specs.get(account.symbol)
        return bool(
            price
            and spec
            and account.has_debt()
            and self.risk(account, price).at_or_below(spec.liquidation_level)
        )

    def restore_waiting(self) -> None:
        """After recovery: every account at or below its level waits for liquidity."""
        self.waiting = {account.id for account in self.accounts.values() if self.due(account)}

    def release_rescued(self, symbol: str | None = None, account: int | None = None) -> None:
        """Waiting accounts (of ``symbol``, or just ``account``) no longer due: rescued by a
        transfer in, a repayment or a better price, they trade again."""
        for waiting in list(self.waiting):
            held = self.accounts[waiting]
            if account is not None and waiting != account:
                continue
            if symbol is not None and held.symbol != symbol:
                continue
            if not self.due(held):
                self.waiting.discard(waiting)

    def _repay_from_free(self, account: MarginAccount, pair: PairSpec) -> None:
        for asset in (pair.base, pair.quote):
            self.repay(
                account, asset, self.ledger.free(account.id, asset), "liquidation", account.id
            )

    def _cost_to_buy(self, pair: PairSpec, base_units: int) -> int:
        """Quote needed to receive ``base_units`` of base, taker fee included, from the asks
        as they rest now (all of them if they are not enough)."""
        scale = 10**FEE_RATE_DECIMALS
        lots = -(-base_units // pair.base_per_lot)
        while (
            lots * pair.base_per_lot - lots * pair.base_per_lot * pair.taker_fee // scale
            < base_units
        ):
            lots += 1
        cost = 0
        for level in self.spot.books[pair.symbol].asks.iter_levels():
            take = min(lots, level.total)
            cost += level.price * take * pair.quote_per_tick_lot
            lots -= take
            if not lots:
                break
        return cost

    def exhausted(self, account: MarginAccount, pair: PairSpec) -> bool:
        """Nothing the account holds can still pay what it owes: no base lot left to sell for a
        quote debt; for a base debt, not enough quote for one lot at the best ask."""
        if (
            self.owed(account, pair.quote)
            and self.ledger.free(account.id, pair.base) >= pair.base_per_lot
        ):
            return False
        if self.owed(account, pair.base):
            best = self.spot.books[pair.symbol].asks.best()
            quote = self.ledger.free(account.id, pair.quote)
            if best is None and quote > 0:
                return False
            if best is not None and quote >= best.price * pair.quote_per_tick_lot:
                return False
        return True

    def _cover_deficit(self, account: MarginAccount, pair: PairSpec, ts: int) -> None:
        """The insurance fund pays the pool what the account cannot; the rest is written off."""
        covered = written_off = 0
        price = self.spot.last_price.get(account.symbol, 0)
        for asset in list(account.debts):
            owed = self.owed(account, asset)
            paid = min(owed, self.ledger.free(INSURANCE_ACCOUNT, asset))
            if paid:
                self.ledger.change(INSURANCE_ACCOUNT, asset, -paid, 0, "insurance", account.id)
                self.ledger.change(POOL_ACCOUNT, asset, paid, 0, "insurance", account.id)
            covered += self._value(pair, asset, paid, price)
            written_off += self._value(pair, asset, owed - paid, price)
            if owed > paid:
                total = self.written_off[asset] = self.written_off.get(asset, 0) + owed - paid
                self.events.append(WrittenOff(asset, owed - paid, total))
            del account.debts[asset]
            reason = "insured" if paid == owed else "written_off"
            self.events.append(DebtChanged(account.id, asset, 0, 0, reason, account.id))
        self.events.append(Liquidated(account.id, account.symbol, covered, written_off, ts))

    def _value(self, pair: PairSpec, asset: str, amount: int, price: int) -> int:
        if asset == pair.quote:
            return amount
        return amount * price * pair.quote_per_tick_lot // pair.base_per_lot

    def _market(
        self, account: MarginAccount, pair: PairSpec, side: str, size: int, ts: int
    ) -> None:
        """A liquidation order: MARKET through the book, bypassing order minimums."""
        if side == BUY:
            cmd = PlaceOrder(ts, account.id, pair.symbol, BUY, MARKET, quote_qty=size)
            hold = (pair.quote, size)
        else:
            cmd = PlaceOrder(ts, account.id, pair.symbol, SELL, MARKET, qty=size)
            hold = (pair.base, size * pair.base_per_lot)
        self.spot.place(cmd, pair, hold)
