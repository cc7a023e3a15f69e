"""Perpetual futures contracts: their static description and the arithmetic of value.

All in integers. A price is in ticks (``10**-price_precision`` quote per base), a volume in
whole contracts, a value in units of the margin coin, money (order value in the quote
currency, for limits and MARKET OPEN budgets) in ``10**-MONEY_DECIMALS`` quote.

- Linear (``side`` 1, margin coin = quote): value = contracts x multiplier x price, exact.
- Inverse (``side`` 0, margin coin = base): value = contracts x multiplier / price, rounded
  down to the margin coin's unit. A trade's value is computed once and used by both sides,
  so rounding never creates or destroys money.

Order prices are bounded per contract (``max_price``) so that one contract at any price an
order may carry is worth at least one unit of the margin coin: every fill, however small and
whatever price it executes at (a resting order's), is then worth something, and every open
position has a positive entry cost. Linear value is never below ``value_unit`` >= 1 per
contract, so only ``MAX_PRICE`` bounds it; inverse value falls with the price and reaches 0
above ``value_unit`` ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from tradehall.engine.markets import FEE_RATE_DECIMALS

MONEY_DECIMALS = 8
"""Order money (value in the quote currency) is an integer of 10**-8 quote."""
RATE_ONE: int = 10**FEE_RATE_DECIMALS
"""Rates (fees, maintenance, funding, interest) are integers in 1e-8: RATE_ONE is 100 %."""
HOUR_MS = 3_600_000
MAX_PRICE = 2**40
"""Largest price in ticks a futures order may carry on any contract (keeps every value inside
64 bits); a contract's own bound (``ContractSpec.max_price``) may be lower."""


MID, LAST = "mid", "last"
"""The index sources a spot market gives: its mid at depth and its last trade price. Any
other source name is an operator feed."""


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """How a contract's index is built from its sources (see ``index_sources``)."""

    weights: tuple[tuple[str, int], ...] = ()
    """Configured sources and their weights: ``mid`` and ``last`` of the index's spot
    market, or operator feeds by name (a feed not named here counts with weight 1)."""
    window_ms: int = 60_000
    """Each source's value is smoothed over its samples of this window."""
    median: bool = True
    """Smoothing: the median of the window's samples, or (False) their time-weighted mean."""
    depth_money: int = 10_000 * 10**MONEY_DECIMALS
    """The spot mid is the mid of the average prices at which this much quote money (in
    10**-8) fills on each side; a side thinner than that gives no mid."""
    band: int = 5_000_000
    """A source further than this (1e-8 of the sources' weighted median) is left out."""
    stale_ms: int = 30_000
    """An operator feed not pushed for this long is left out."""
    max_move: int = 500_000
    """The index moves at most this fraction (1e-8) per second; 0: unbounded."""


@dataclass(frozen=True, slots=True)
class ContractSpec:
    id: int
    """``contractId``: a small positive integer, stable for the contract's life."""
    symbol: str
    """``contractName``, e.g. ``E-BTC-USDT``."""
    type: str
    """``E`` perpetual (the only kind traded here)."""
    base: str
    quote: str
    """Quote currency; for an inverse contract it need not be an asset (``USD``)."""
    inverse: bool
    margin_coin: str
    """Asset that holds margin and settles P&L: the quote (linear) or the base (inverse)."""
    margin_decimals: int
    multiplier: Decimal
    """Face value of one contract, in ``multiplier_coin``."""
    multiplier_coin: str
    price_precision: int
    min_volume: int
    max_limit_volume: int
    max_market_volume: int
    min_money: int
    max_limit_money: int
    max_market_money: int
    """Money limits, in 10**-MONEY_DECIMALS quote."""
    max_valid_order: int
    """Most open orders (conditional ones included) per account on this contract."""
    open_maker_fee: int
    open_taker_fee: int
    close_maker_fee: int
    close_taker_fee: int
    maintenance_rate: int
    default_leverage: int
    max_leverage: int
    funding_interval_ms: int
    interest_rate: int
    """Per funding interval, in 1e-8."""
    funding_cap: int
    """Largest absolute funding rate, in 1e-8."""
    index_source: str
    """A spot symbol of this exchange (its last price is the index), or ``operator``."""
    trading: bool = True
    index: IndexSpec = IndexSpec()
    price_band: int = 5_000_000
    """Orders may trade or rest at most this fraction (1e-8) away from the mark price: a LIMIT
    beyond it is refused, a MARKET order and a liquidation stop at it; 0: no band."""
    value_unit: int = field(init=False, compare=False)
    """Linear: margin units of 1 contract at 1 tick. Inverse: margin units x ticks of one
    contract (value = contracts x value_unit // price)."""
    money_unit: int = field(init=False, compare=False)
    """Linear: money of 1 contract at 1 tick. Inverse: money of 1 contract."""
    max_price: int = field(init=False, compare=False)
    """Highest price in ticks an order may carry: ``MAX_PRICE``, and for an inverse contract
    at most ``value_unit``, the highest price at which one contract is still worth one unit
    of the margin coin (``value(1, p) >= 1`` exactly when ``p <= value_unit``)."""

    def __post_init__(self) -> None:
        tick = Decimal(1).scaleb(-self.price_precision)
        money_scale = Decimal(1).scaleb(MONEY_DECIMALS)
        margin_scale = Decimal(1).scaleb(self.margin_decimals)
        if self.inverse:
            value_unit = self.multiplier / tick * margin_scale
            money_unit = self.multiplier * money_scale
        else:
            value_unit = self.multiplier * tick * margin_scale
            money_unit = self.multiplier * tick * money_scale
        if value_unit != value_unit.to_integral_value() or value_unit <= 0:
            raise ValueError(
                f"{self.symbol}: multiplier x tick is not a whole number of "
                f"{self.margin_coin} units; use more decimals for the margin coin"
            )
        if money_unit != money_unit.to_integral_value() or money_unit <= 0:
            raise ValueError(f"{self.symbol}: multiplier x tick has more than 8 decimals")
        object.__setattr__(self, "value_unit", int(value_unit))
        object.__setattr__(self, "money_unit", int(money_unit))
        max_price = min(MAX_PRICE, int(value_unit)) if self.inverse else MAX_PRICE
        object.__setattr__(self, "max_price", max_price)

    def value(self, volume: int, price: int) -> int:
        """Margin-coin value of ``volume`` contracts at ``price`` ticks."""
        if self.inverse:
            return volume * self.value_unit // price
        return volume * price * self.value_unit

    def money(self, volume: int, price: int) -> int:
        """Quote money of ``volume`` contracts at ``price`` (order limits, MARKET budgets)."""
        if self.inverse:
            return volume * self.money_unit
        return volume * price * self.money_unit

    def pnl(self, is_long: bool, cost: int, value: int) -> int:
        """P&L of a position whose entry cost is ``cost`` valued now at ``value``.

        Linear long gains when value rises; inverse long gains when value (in base) falls."""
        gain = value - cost if is_long else cost - value
        return -gain if self.inverse else gain

    def price_for_value(self, volume: int, value: int) -> Decimal:
        """The price (in ticks, exact decimal) at which ``volume`` contracts are worth
        ``value``: the inverse of ``value``, used for average and liquidation prices."""
        if volume <= 0 or value <= 0:
            return Decimal(0)
        if self.inverse:
            return Decimal(volume * self.value_unit) / Decimal(value)
        return Decimal(value) / Decimal(volume * self.value_unit)
