"""Risk arithmetic of futures positions: unrealized P&L, maintenance margin, liquidation and
bankruptcy prices. Pure functions of a contract, a position and a price.

With ``s`` = +1 for a linear long or an inverse short and -1 otherwise, P&L at value ``v`` is
``s x (v - cost)``, so a position backed by margin ``m`` is worth zero at value
``cost - s x m`` (the bankruptcy value) and reaches its maintenance margin ``v x mmr`` at
value ``(cost - s x m) / (1 - s x mmr)`` (the liquidation value).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from tradehall.engine.contracts import RATE_ONE, ContractSpec
from tradehall.engine.futures_model import Position

NO_PRICE = Decimal(0)
"""A position that cannot reach the price in question (no liquidation price)."""


def direction(contract: ContractSpec, pos: Position) -> int:
    return 1 if pos.is_long != contract.inverse else -1


def unrealized(contract: ContractSpec, pos: Position, mark: int) -> int:
    if not pos.volume or mark <= 0:
        return 0
    return contract.pnl(pos.is_long, pos.cost, contract.value(pos.volume, mark))


def maintenance(contract: ContractSpec, pos: Position, mark: int) -> int:
    if not pos.volume or mark <= 0:
        return 0
    return maintenance_of(contract, contract.value(pos.volume, mark))


def maintenance_of(contract: ContractSpec, value: int) -> int:
    """The maintenance margin of a position worth ``value`` (margin-coin units)."""
    return value * contract.maintenance_rate // RATE_ONE


def value_where(contract: ContractSpec, pos: Position, margin: int, rate: int) -> Decimal:
    """The position value at which margin + P&L equals ``rate`` x value."""
    s = direction(contract, pos)
    denominator = Decimal(RATE_ONE - s * rate) / RATE_ONE
    if denominator <= 0:
        return NO_PRICE
    return Decimal(pos.cost - s * margin) / denominator


def price_where(contract: ContractSpec, pos: Position, margin: int, rate: int) -> Decimal:
    """Ticks (exact decimal) at which margin + P&L equals ``rate`` x value; 0 if never."""
    value = value_where(contract, pos, margin, rate)
    if value <= 0 or not pos.volume:
        return NO_PRICE
    if contract.inverse:
        return Decimal(pos.volume * contract.value_unit) / value
    return value / Decimal(pos.volume * contract.value_unit)


def group_liquidation_price(
    contract: ContractSpec, group: list[Position], backing: int
) -> tuple[Decimal, bool]:
    """The mark (ticks, exact decimal) at which ``group``, positions on one contract backed
    together by ``backing``, are worth their maintenance margin together, and whether they
    get there as the price falls (True) or rises; ``NO_PRICE`` if no price does: one isolated
    position and its margin, or a cross long and short on one contract, which move with one
    mark. Backing + P&L -
    maintenance is linear in the contracts' value per contract (``x``: the price, or 1 / the
    price for an inverse contract): slope x x + level = 0."""
    rate = Decimal(contract.maintenance_rate) / RATE_ONE
    slope, level = Decimal(0), Decimal(backing)
    for pos in group:
        s = direction(contract, pos)
        slope += (s - rate) * pos.volume * contract.value_unit
        level -= s * pos.cost
    if not slope:
        return NO_PRICE, True
    x = -level / slope
    if contract.inverse:
        return (Decimal(1) / x if x > 0 else NO_PRICE), slope < 0
    return (x if x > 0 else NO_PRICE), slope > 0


def bankruptcy_price(contract: ContractSpec, pos: Position, margin: int) -> Decimal:
    return price_where(contract, pos, margin, 0)


def bankruptcy_limit(contract: ContractSpec, pos: Position, margin: int) -> int:
    """The limit price (ticks) of the order that closes ``pos`` no worse than bankruptcy:
    a long sells at or above it (rounded up), a short buys at or below it (rounded down).
    0 means no bound: any price is better than bankruptcy."""
    price = bankruptcy_price(contract, pos, margin)
    if pos.is_long:
        if price <= 0:
            return 0
        return max(1, int(price.to_integral_value(ROUND_CEILING)))
    if price <= 0:
        return 0
    return max(1, int(price.to_integral_value(ROUND_FLOOR)))


def average_price(contract: ContractSpec, volume: int, value: int) -> Decimal:
    """Average price in ticks of ``volume`` contracts traded for ``value``."""
    return contract.price_for_value(volume, value)
