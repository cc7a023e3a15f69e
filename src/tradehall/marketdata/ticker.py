"""24h rolling ticker values and the percent change, in integer ticks and lots."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ticker:
    """24h rolling statistics; prices in ticks, volume in lots."""

    high: int
    low: int
    last: int
    """Close of the latest bar ever (even if older than 24h); 0 if there has been no trade."""
    volume: int
    open: int
    """Open of the earliest 1min bar in the window."""
    amount: int = 0
    """Traded value in the window (units of the market's value asset, as ``Bar.amount``)."""

    @property
    def rose(self) -> str:
        """Change from ``open`` to ``last`` in percent, see :func:`rose_percent`."""
        return rose_percent(self.open, self.last)


def rose_percent(open: int, last: int) -> str:
    """``(last - open) / open * 100`` with exactly 2 decimals, rounded half away from zero.

    ``open`` 0 gives ``"0.00"``. Never ``"-0.00"``.
    """
    if open == 0:
        return "0.00"
    num = (last - open) * 10_000  # hundredths of a percent, times open
    negative = (num < 0) != (open < 0)
    a, b = abs(num), abs(open)
    hundredths = (2 * a + b) // (2 * b)
    if hundredths == 0:
        return "0.00"
    whole, frac = divmod(hundredths, 100)
    return f"{'-' if negative else ''}{whole}.{frac:02d}"
