"""Index, mark price, premium and funding of perpetual contracts.

- Index: built from its sources (``index_sources``: the spot market's mid at depth and last
  trade, operator feeds), smoothed, filtered and bounded per second; or the price the operator
  pushed as an override.
- Premium: once a minute, the basis of the contract's book at impact depth: (impact bid -
  index) if above it, (impact ask - index) if below it, 0 between or when a side is thinner
  than the impact money, at most 2.5 % of the index (the impact prices: where the index's
  depth money fills on each side); / index, the funding interval's samples are averaged, and
  an exponential moving average of the basis, from 0, feeds the mark.
- Mark: median(index x (1 + last funding rate x time left / interval), index + average basis,
  last trade price).
- Funding, at the end of each interval: rate = premium + clamp(interest - premium, +-0.05 %),
  clamped to the contract's cap; every open position pays or receives its value at the mark
  times the rate (longs pay shorts when positive), netting to exactly zero.
"""

from __future__ import annotations

from tradehall.engine import index_sources
from tradehall.engine.book import BookSide
from tradehall.engine.contracts import RATE_ONE, ContractSpec
from tradehall.engine.futures import INSURANCE_ACCOUNT, Futures
from tradehall.engine.futures_model import (
    ISOLATED,
    KIND_FUNDING,
    ContractState,
    FundingRecord,
    FuturesChanged,
    Position,
    futures_account,
)
from tradehall.engine.futures_risk import unrealized

MINUTE_MS = 60_000
BASIS_SCALE = 10_000
"""The moving average of (mid - index) is kept in 1e-4 ticks."""
BASIS_PERIOD = 30
"""Samples (minutes) of the basis moving average."""
INTEREST_BAND = 50_000
"""0.05 % in 1e-8: how far the interest component may move the rate off the premium."""
BASIS_LIMIT = 2_500_000
"""2.5 % in 1e-8: the most a premium sample, or the moving average of the basis in the mark,
may stand off the index."""


def impact_price(side: BookSide, contract: ContractSpec, money: int) -> int:
    """The average price (ticks) at which contracts worth ``money`` (10**-8 quote) fill on
    ``side`` of the contract's book; 0 if the side holds less."""
    spent = filled = weighted = 0
    sign = 1 if side.is_bid else -1
    for key in reversed(side.keys):
        price = key * sign
        available = side.levels[price].total
        cost = contract.money(available, price)
        if spent + cost >= money:
            take = -(-(money - spent) // contract.money(1, price))  # contracts, rounded up
            return (weighted + price * take) // (filled + take)
        spent += cost
        filled += available
        weighted += price * available
    return 0


def impact_basis(fx: Futures, contract: ContractSpec, index: int) -> int | None:
    """This minute's basis sample (ticks): how far the book's impact bid stands above the
    index, or its impact ask below it (0 when the index lies between them), within
    ``BASIS_LIMIT`` of the index; None when a side holds less than the impact money. One
    order far from the touch, or a book of one-contract quotes, does not move it."""
    book = fx.books[contract.symbol]
    money = contract.index.depth_money
    bid = impact_price(book.bids, contract, money)
    ask = impact_price(book.asks, contract, money)
    if not bid or not ask:
        return None
    return within_limit(max(0, bid - index) - max(0, index - ask), index)


def within_limit(basis: int, index: int) -> int:
    limit = index * BASIS_LIMIT // RATE_ONE
    return max(-limit, min(limit, basis))


def mark_price(contract: ContractSpec, state: ContractState, ts: int) -> int:
    index = state.index
    if not index:
        return state.last
    interval = contract.funding_interval_ms
    left = max(0, state.funding_time + interval - ts) if state.funding_time else interval
    funding_basis = index + index * state.last_funding_rate * left // (RATE_ONE * interval)
    average_basis = index + within_limit(state.basis_ema // BASIS_SCALE, index)
    last = state.last or index
    return sorted((funding_basis, average_basis, last))[1]


def sample(fx: Futures, contract: ContractSpec, state: ContractState, ts: int) -> bool:
    """Take this minute's premium sample if it is not taken yet. True if state changed."""
    minute = ts // MINUTE_MS
    if minute <= state.sample_minute or not state.index:
        return False
    state.sample_minute = minute
    # A minute whose book is thinner than the impact money counts as no premium, and the
    # average starts from none: a book spoofed for a minute moves funding by a minute's
    # share of the interval and the mark by 2/31 of the basis, and both decay once it goes.
    basis = impact_basis(fx, contract, state.index) or 0
    state.premium_sum += basis * RATE_ONE // state.index
    state.premium_samples += 1
    state.basis_ema += (basis * BASIS_SCALE - state.basis_ema) * 2 // (BASIS_PERIOD + 1)
    state.basis_samples += 1
    return True


def funding_rate(contract: ContractSpec, state: ContractState) -> int:
    premium = state.premium_sum // state.premium_samples if state.premium_samples else 0
    interest = max(-INTEREST_BAND, min(INTEREST_BAND, contract.interest_rate - premium))
    rate = premium + interest
    return max(-contract.funding_cap, min(contract.funding_cap, rate))


def settle_funding(fx: Futures, contract: ContractSpec, state: ContractState, ts: int) -> None:
    """Apply the rate of the interval just ended to every open position."""
    rate = funding_rate(contract, state)
    mark = state.mark
    state.last_funding_rate = rate
    state.premium_sum = 0
    state.premium_samples = 0
    positions = sorted(fx.by_contract[contract.symbol].values(), key=lambda p: p.id)
    paid = 0
    if rate and mark:
        paid = _exchange_payments(fx, contract, positions, rate, mark, ts)
    fx.events.append(
        FuturesChanged(
            KIND_FUNDING,
            0,
            contract.symbol,
            ts,
            False,
            FundingRecord(contract.symbol, ts, rate, mark, paid),
        )
    )


def _exchange_payments(
    fx: Futures, contract: ContractSpec, positions: list[Position], rate: int, mark: int, ts: int
) -> int:
    """Collect from the paying side, then share exactly what was collected among the
    receiving side in proportion to what each is owed (largest remainders get the last
    units): payments always net to zero, and the insurance fund pays none of them.

    A payer pays what it owes out of what backs its position, never past bankruptcy: an
    isolated position from its margin, at most what it is worth at the mark (margin +
    unrealized P&L); a cross one from the account's free cash and then the position's
    margin, at most the account's cross equity at the marks. What a payer cannot pay, the
    receivers do not get. (The fund used to cover it: a cross account that parked its cash
    in a far order's hold before funding, or an isolated position left with little margin,
    had the fund pay its colluding counterparty.)"""
    ledger = fx.ledger
    coin = contract.margin_coin
    pay_long = rate > 0
    magnitude = abs(rate)
    owed = {p.id: contract.value(p.volume, mark) * magnitude // RATE_ONE for p in positions}
    collected = 0
    receivers = []
    for pos in positions:
        amount = owed[pos.id]
        if pos.is_long != pay_long:
            receivers.append(pos)
            continue
        if not amount:
            continue
        account = futures_account(pos.user)
        if pos.position_type == ISOLATED:
            worth = pos.margin + unrealized(contract, pos, mark)
            paid = max(0, min(amount, pos.margin, worth))
            pos.margin -= paid
            ledger.change(account, coin, 0, -paid, "funding", pos.id)
        else:
            equity, _ = fx.cross_equity(pos.user, coin)
            due = max(0, min(amount, equity))
            from_free = min(due, ledger.free(account, coin))
            from_margin = min(due - from_free, pos.margin)
            pos.margin -= from_margin
            ledger.change(account, coin, -from_free, -from_margin, "funding", pos.id)
            paid = from_free + from_margin
        pos.capital_fee -= paid
        pos.mtime = ts
        collected += paid
        fx.emit_position(pos)
    total_owed = sum(owed[p.id] for p in receivers)
    if not total_owed:
        if collected:
            ledger.change(INSURANCE_ACCOUNT, coin, collected, 0, "funding", 0)
        return collected
    shares = {p.id: collected * owed[p.id] // total_owed for p in receivers}
    rest = collected - sum(shares.values())
    by_remainder = sorted(receivers, key=lambda p: (-(collected * owed[p.id] % total_owed), p.id))
    for pos in by_remainder[:rest]:
        shares[pos.id] += 1
    for pos in receivers:
        share = shares[pos.id]
        if not share:
            continue
        account = futures_account(pos.user)
        if pos.position_type == ISOLATED:
            pos.margin += share
            ledger.change(account, coin, 0, share, "funding", pos.id)
        else:
            ledger.change(account, coin, share, 0, "funding", pos.id)
        pos.capital_fee += share
        pos.mtime = ts
        fx.emit_position(pos)
    return collected


def refresh(
    fx: Futures, contract: ContractSpec, ts: int, *, tick: bool, dirty: bool = False
) -> bool:
    """Bring index, premium, funding and mark up to ``ts``. ``tick`` (the scheduler's
    command) also re-reads the index source and samples the premium; ``dirty`` says the
    state changed already (a trade moved the last price) and must be reported. Returns
    whether anything changed."""
    state = fx.states[contract.symbol]
    changed = dirty
    interval = contract.funding_interval_ms
    if tick:
        changed |= index_sources.tick(fx.spot, contract, state, ts)
        changed |= sample(fx, contract, state, ts)
        start = ts // interval * interval
        if not state.funding_time:
            state.funding_time = start
            changed = True
        elif start > state.funding_time:
            # Funding is due (once, also after a downtime that missed several times).
            state.mark = mark_price(contract, state, ts)
            settle_funding(fx, contract, state, start)
            state.funding_time = start
            changed = True
    mark = mark_price(contract, state, ts)
    moved = mark != state.mark
    if moved:
        state.mark = mark
    if moved or changed:
        fx.emit_state(state)
    return moved or changed
