"""Static description of what the engine trades: assets and spot pairs, all in integer units."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tradehall.units import pow10

if TYPE_CHECKING:
    from tradehall.engine.contracts import ContractSpec

FEE_RATE_DECIMALS = 8
"""Fee rates are integers in units of 1e-8 (0.001 == 100_000)."""
LEVEL_SCALE = 10_000
"""Margin risk levels are integers in units of 1e-4 (1.25 == 12_500)."""
RATE_SCALE = 10**8
"""Interest rates are integers in units of 1e-8 per hour."""


@dataclass(frozen=True, slots=True)
class AssetSpec:
    name: str
    decimals: int
    """Places of the asset's smallest unit: balances are integers of 10**-decimals."""


@dataclass(frozen=True, slots=True)
class PairSpec:
    """A spot pair. Prices are integer ticks (10**-price_precision quote per base), quantities
    integer lots (10**-quantity_precision base)."""

    symbol: str
    base: str
    quote: str
    price_precision: int
    quantity_precision: int
    min_quantity: int
    """In lots."""
    min_notional: int
    """Minimum order value in quote asset units."""
    maker_fee: int
    """Rate in units of 1e-8."""
    taker_fee: int
    market_orders: bool
    trading: bool
    base_decimals: int
    quote_decimals: int
    price_band: int = 5_000_000
    """Orders may trade at most this fraction (1e-8) away from the pair's reference price (a
    LIMIT beyond it on its side is refused, a MARKET order stops at it); 0: no band."""
    base_per_lot: int = field(init=False, compare=False)
    """Base asset units in one lot."""
    quote_per_tick_lot: int = field(init=False, compare=False)
    """Quote asset units of one tick times one lot (price 1 tick, quantity 1 lot)."""

    def __post_init__(self) -> None:
        # Precomputed: both are read on every order and every fill.
        lot = pow10(self.base_decimals - self.quantity_precision)
        tick_lot = pow10(self.quote_decimals - self.price_precision - self.quantity_precision)
        object.__setattr__(self, "base_per_lot", lot)
        object.__setattr__(self, "quote_per_tick_lot", tick_lot)

    def quote_amount(self, price: int, qty: int) -> int:
        """Quote asset units for ``qty`` lots at ``price`` ticks (always exact)."""
        return price * qty * self.quote_per_tick_lot


@dataclass(frozen=True, slots=True)
class MarginSpec:
    """Margin settings of one pair."""

    symbol: str
    max_leverage: int = 5
    base_hourly_rate: int = 1_000
    """Interest per hour on borrowed base, in 1e-8 (1_000 == 0.001 % an hour)."""
    quote_hourly_rate: int = 1_000
    initial_level: int = 12_500
    warning_level: int = 11_500
    liquidation_level: int = 11_000


@dataclass(frozen=True, slots=True)
class MarketsSpec:
    assets: dict[str, AssetSpec]
    pairs: dict[str, PairSpec]
    margin: dict[str, MarginSpec] = field(default_factory=dict)
    """Pairs that offer isolated margin, with their settings."""
    contracts: dict[str, ContractSpec] = field(default_factory=dict)
    """Perpetual futures contracts by contractName."""
