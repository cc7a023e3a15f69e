"""The most recent public trades of one symbol."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Final

RECENT_TRADES: Final = 1000
"""How many trades are kept per symbol."""


@dataclass(frozen=True, slots=True)
class PublicTrade:
    """One executed trade as the public sees it: price in ticks, quantity in lots."""

    id: int
    time: int
    """UNIX milliseconds."""
    price: int
    qty: int
    taker_side: str
    """``"BUY"`` or ``"SELL"``."""
    amount: int = 0
    """Traded value, in units of the market's value asset (quote asset or margin coin)."""


class RecentTrades:
    """The last :data:`RECENT_TRADES` trades of one symbol."""

    __slots__ = ("_trades",)

    def __init__(self) -> None:
        self._trades: deque[PublicTrade] = deque(maxlen=RECENT_TRADES)

    def __len__(self) -> int:
        return len(self._trades)

    def add(self, trade: PublicTrade) -> None:
        self._trades.append(trade)

    def latest(self, limit: int) -> list[PublicTrade]:
        """At most ``limit`` trades, newest first (``limit`` <= 0 gives none)."""
        if limit <= 0:
            return []
        return list(islice(reversed(self._trades), limit))

    def restore(self, trades: Iterable[PublicTrade]) -> None:
        """Replace the content with persisted ``trades`` (oldest first); keeps the newest."""
        self._trades.clear()
        self._trades.extend(trades)
