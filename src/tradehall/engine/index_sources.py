"""A contract's index from several sources, so that no one account can move it with pocket
change.

Sources: the index's spot market gives two, ``mid`` (the mid of the average prices at which
``IndexSpec.depth_money`` of quote fills on each side, so a one-lot quote cannot move it) and
``last`` (its last trade); operator feeds give one each, by name (``SetIndexPrice`` with a
feed). On every index tick each source is sampled. A sample is kept only when the price
changed, as a change point: the source's value is the time-weighted median (or mean) of the
prices it held over the window, so a price held for a second weighs a second of the window.

Then: a feed not pushed for ``stale_ms`` is left out; the weighted median of the remaining
values is the reference, and a source further from it than ``band`` is left out as an
outlier; the index moves toward the weighted mean of the rest, by at most ``max_move`` per
second since the last move. With no source left, the index stays as it was (an operator's
override, ``SetIndexPrice`` without a feed, is the index until the sources move it).

Pure: integers only, the time is the command's.
"""

from __future__ import annotations

import re

from tradehall.codes import Code, Reject
from tradehall.engine.book import BookSide
from tradehall.engine.contracts import LAST, MID, RATE_ONE, ContractSpec, IndexSpec
from tradehall.engine.futures_model import ContractState, IndexSource
from tradehall.engine.markets import PairSpec
from tradehall.engine.spot import SpotMarkets
from tradehall.units import pow10

USED, STALE, OUTLIER, THIN, NONE = "used", "stale", "outlier", "thin", "none"
OPERATOR = "operator"
"""``index_source`` of a contract with no spot market behind its index."""


def rescale(price: int, from_places: int, to_places: int) -> int:
    """A price in ticks of ``from_places`` decimals as ticks of ``to_places`` (half up)."""
    if to_places >= from_places:
        return price * pow10(to_places - from_places)
    step = pow10(from_places - to_places)
    return (price + step // 2) // step


def source_names(contract: ContractSpec, state: ContractState) -> list[str]:
    """The configured sources, then the feeds that pushed without being configured."""
    names = [name for name, _ in contract.index.weights]
    names += sorted(name for name in state.sources if name not in names)
    return names


def weight_of(spec: IndexSpec, name: str) -> int:
    for configured, weight in spec.weights:
        if configured == name:
            return weight
    return 1


FEED_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}")
MAX_SOURCES = 16
"""Sources a contract may have (configured and fed): each costs every index tick."""


def feed(state: ContractState, name: str, price: int, ts: int) -> None:
    """An operator feed's price, taken at the next index tick."""
    if not FEED_NAME.fullmatch(name) or name in (MID, LAST):
        raise Reject(
            Code.BAD_PARAM,
            f"invalid feed name {name!r}: 1-32 of a-z 0-9 _ . - (not 'mid' or 'last')",
        )
    if name not in state.sources and len(state.sources) >= MAX_SOURCES:
        raise Reject(Code.BAD_PARAM, f"at most {MAX_SOURCES} index sources on a contract")
    source = state.sources.get(name)
    if source is None:
        source = state.sources[name] = IndexSource()
    source.fed = price
    source.fed_at = ts


def depth_price(side: BookSide, pair: PairSpec, money: int) -> int:
    """The average price (ticks) at which ``money`` (10**-8 quote) fills on ``side``; 0 if the
    side holds less."""
    needed = money * pow10(pair.quote_decimals) // pow10(8)
    if needed <= 0:
        return 0
    spent = lots = 0
    levels = side.levels
    sign = 1 if side.is_bid else -1
    for key in reversed(side.keys):
        price = key * sign
        available = levels[price].total
        cost = pair.quote_amount(price, available)
        if spent + cost >= needed:
            take = -(-(needed - spent) // pair.quote_amount(price, 1))  # lots, rounded up
            spent += pair.quote_amount(price, take)
            lots += take
            return spent // (lots * pair.quote_per_tick_lot)
        spent += cost
        lots += available
    return 0


def spot_price(spot: SpotMarkets, contract: ContractSpec, name: str) -> int:
    """What the index's spot market shows now as source ``name`` (contract ticks; 0: none)."""
    pair = spot.pairs.get(contract.index_source)
    if pair is None:
        return 0
    if name == LAST:
        price = spot.last_price.get(pair.symbol, 0)
    else:
        book = spot.books[pair.symbol]
        bid = depth_price(book.bids, pair, contract.index.depth_money)
        ask = depth_price(book.asks, pair, contract.index.depth_money)
        price = (bid + ask) // 2 if bid and ask else 0
    return rescale(price, pair.price_precision, contract.price_precision) if price else 0


def smoothed(samples: list[tuple[int, int]], start: int, now: int, median: bool) -> int:
    """The time-weighted median (or mean) of the change points over [start, now]: each price
    holds from its sample until the next one (the first one from ``start`` at the latest)."""
    if not samples:
        return 0
    spans: list[tuple[int, int]] = []
    for i, (ts, price) in enumerate(samples):
        until = samples[i + 1][0] if i + 1 < len(samples) else now
        # The first price stands for the whole window before it too: in a source's first
        # minute a new price must still hold for half a window to become its value.
        begin = start if i == 0 else max(ts, start)
        spans.append((price, max(until - begin, 0)))
    total = sum(d for _, d in spans)
    if total == 0:
        return samples[-1][1]
    if not median:
        return sum(p * d for p, d in spans) // total
    run = 0
    for price, held in sorted(spans):
        run += held
        if 2 * run >= total:
            return price
    return samples[-1][1]  # not reached: the spans add up to the total


def sample_points(samples: list[tuple[int, int]], price: int, ts: int, start: int) -> bool:
    """Record ``price`` (0: none now) as a change point and drop what the window no longer
    needs (the last point before ``start`` still holds at ``start``). True if it changed."""
    changed = False
    if price and (not samples or samples[-1][1] != price):
        samples.append((ts, price))
        changed = True
    while len(samples) > 1 and samples[1][0] <= start:
        del samples[0]
        changed = True
    return changed


def weighted_median(values: list[tuple[int, int]]) -> int:
    """Of (value, weight) pairs, weights > 0. Where the weights split exactly in half, the
    mean of the two values beside the split: two equal sources far apart then both fall
    outside the band (the index holds) rather than one of them deciding."""
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    run = 0
    for i, (value, weight) in enumerate(ordered):
        run += weight
        if 2 * run == total and i + 1 < len(ordered):
            return (value + ordered[i + 1][0]) // 2
        if 2 * run >= total:
            return value
    return ordered[-1][0]


def tick(spot: SpotMarkets, contract: ContractSpec, state: ContractState, ts: int) -> bool:
    """Sample every source, then move the index. True if the state changed."""
    spec = contract.index
    start = ts - spec.window_ms
    changed = False
    seen: dict[str, tuple[int, str]] = {}
    candidates: list[tuple[str, int, int]] = []
    for name in source_names(contract, state):
        source = state.sources.get(name)
        if source is None:
            source = state.sources[name] = IndexSource()
            changed = True
        if name in (MID, LAST):
            now = spot_price(spot, contract, name)
        else:
            now = source.fed if source.fed and ts - source.fed_at <= spec.stale_ms else 0
        if not now:
            # No price now (a book thinner than the depth, a silent feed): left out, and its
            # history forgotten, so that it comes back on fresh prices, not on old ones.
            if source.samples:
                source.samples.clear()
                changed = True
            status = THIN if name == MID else STALE if source.fed else NONE
            seen[name] = (0, status)
            continue
        changed |= sample_points(source.samples, now, ts, start)
        value = smoothed(source.samples, start, ts, spec.median)
        seen[name] = (value, USED)
        candidates.append((name, value, weight_of(spec, name)))
    if candidates:
        reference = weighted_median([(value, weight) for _, value, weight in candidates])
        kept = []
        for name, value, weight in candidates:
            if abs(value - reference) * RATE_ONE > spec.band * reference:
                seen[name] = (value, OUTLIER)
            else:
                kept.append((value, weight))
        # Every source an outlier (two equal ones far apart): the index holds.
        index = state.index
        if kept:
            target = sum(v * w for v, w in kept) // sum(w for _, w in kept)
            index = bounded(state, spec, target, ts)
        if (index, ts) != (state.index, state.index_time):
            state.index = index
            state.index_time = ts
            changed = True
    for name, (value, status) in seen.items():
        source = state.sources[name]
        if (value, status) != (source.value, source.status):
            source.value, source.status = value, status
            changed = True
    return changed


def bounded(state: ContractState, spec: IndexSpec, target: int, ts: int) -> int:
    """``target``, or as near as the index may move toward it in the seconds since the
    sources last set it (at least one; a tick after a downtime catches up at once)."""
    index = state.index
    if not index or not spec.max_move:
        return target
    seconds = max(1, (ts - state.index_time) // 1000) if state.index_time else 1
    step = max(1, index * spec.max_move * seconds // RATE_ONE)
    return max(index - step, min(index + step, target))
