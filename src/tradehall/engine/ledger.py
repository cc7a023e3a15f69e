"""Balances with double-entry bookkeeping: every change is an entry, so conservation is checkable.

Per asset, the sum over all accounts of free + locked always equals what came in by deposits
minus what went out by withdrawals (``external``); moves between accounts net to zero.
"""

from __future__ import annotations

from tradehall.codes import Code, Reject
from tradehall.engine.events import BalanceChanged, Event
from tradehall.engine.futures_model import CLEARING_ACCOUNT_BASE as CLEARING_FLOOR

MAX_BALANCE = 2**63 - 1
"""Balances are stored as signed 64-bit integers. Deposits keep each asset's total supply
(deposits - withdrawals) within this bound; since every asset is conserved, no balance can
then ever exceed it, whatever trades happen."""


def check_move(amount: int) -> None:
    """Refuse (-1102) an amount to move between a user's accounts that is not positive, or
    that is beyond what any balance can hold: a bad amount, not a balance too small."""
    if amount <= 0:
        raise Reject(Code.BAD_PARAM, "amount must be positive")
    if amount > MAX_BALANCE:
        raise Reject(Code.BAD_PARAM, "amount is larger than any balance can hold")


class Ledger:
    __slots__ = ("balances", "events", "external")

    def __init__(self, events: list[Event]) -> None:
        self.balances: dict[tuple[int, str], list[int]] = {}
        """(account, asset) -> [free, locked]."""
        self.external: dict[str, int] = {}
        """asset -> deposits - withdrawals."""
        self.events = events
        """The engine's event sink for the command being applied."""

    def get(self, account: int, asset: str) -> tuple[int, int]:
        bal = self.balances.get((account, asset))
        return (bal[0], bal[1]) if bal is not None else (0, 0)

    def free(self, account: int, asset: str) -> int:
        bal = self.balances.get((account, asset))
        return bal[0] if bal is not None else 0

    def record(self, account: int, asset: str) -> list[int]:
        """The account's [free, locked] record of ``asset``, made (zero) when it has none.
        Records are never replaced, so a caller may keep one."""
        key = (account, asset)
        bal = self.balances.get(key)
        if bal is None:
            bal = self.balances[key] = [0, 0]
        return bal

    def change(
        self, account: int, asset: str, d_free: int, d_locked: int, reason: str, ref: int
    ) -> None:
        """Apply one entry. Callers check sufficiency first; a negative result is a bug
        (except for a futures clearing account)."""
        bal = self.record(account, asset)
        free = bal[0] + d_free
        locked = bal[1] + d_locked
        if (free < 0 or locked < 0) and account > CLEARING_FLOOR:
            raise AssertionError(
                f"negative balance {(account, asset)}: free={free} locked={locked}"
            )
        bal[0] = free
        bal[1] = locked
        self.events.append(
            BalanceChanged(account, asset, d_free, d_locked, free, locked, reason, ref)
        )

    def hold(
        self, account: int, asset: str, amount: int, ref: int, bal: list[int] | None = None
    ) -> list[int]:
        """Move ``amount`` from free to locked: ``change(account, asset, -amount, amount,
        "hold", ref)`` for a caller that has checked free covers it (placements). ``bal`` is
        the account's record of ``asset`` when the caller has it at hand; the record is
        returned (records are never replaced: an order may keep it until it ends)."""
        if bal is None:
            bal = self.balances[(account, asset)]
        free = bal[0] = bal[0] - amount
        locked = bal[1] = bal[1] + amount
        self.events.append(
            BalanceChanged(account, asset, -amount, amount, free, locked, "hold", ref)
        )
        return bal

    def credit(
        self,
        account: int,
        asset: str,
        amount: int,
        reason: str,
        ref: int,
        bal: list[int] | None = None,
    ) -> None:
        """Add ``amount`` to free: ``change(account, asset, amount, 0, reason, ref)`` for a
        credit, which can never make a balance negative (a fill's proceeds, a fee). ``bal``:
        the account's record of ``asset``, when the caller keeps it."""
        if bal is None:
            bal = self.record(account, asset)
        free = bal[0] = bal[0] + amount
        self.events.append(BalanceChanged(account, asset, amount, 0, free, bal[1], reason, ref))

    def release(
        self, account: int, asset: str, amount: int, ref: int, bal: list[int] | None = None
    ) -> None:
        """Move ``amount`` from locked back to free: ``change(account, asset, amount, -amount,
        "release", ref)`` for an order giving back what it still holds (``bal``: the record,
        when the caller kept it)."""
        if bal is None:
            bal = self.balances[(account, asset)]
        free = bal[0] = bal[0] + amount
        locked = bal[1] = bal[1] - amount
        self.events.append(
            BalanceChanged(account, asset, amount, -amount, free, locked, "release", ref)
        )

    def deposit(self, account: int, asset: str, amount: int, ref: int) -> None:
        if self.external.get(asset, 0) + amount > MAX_BALANCE:
            raise Reject(
                Code.BAD_PARAM, f"amount would take the total supply of {asset} out of range"
            )
        self.external[asset] = self.external.get(asset, 0) + amount
        self.change(account, asset, amount, 0, "deposit", ref)

    def withdraw(self, account: int, asset: str, amount: int, ref: int) -> None:
        if self.free(account, asset) < amount:
            raise Reject(Code.INSUFFICIENT_BALANCE, "insufficient balance")
        self.external[asset] = self.external.get(asset, 0) - amount
        self.change(account, asset, -amount, 0, "withdraw", ref)

    def totals(self) -> dict[str, int]:
        """Per asset, free + locked summed over every account."""
        out: dict[str, int] = {}
        for (_, asset), (free, locked) in self.balances.items():
            out[asset] = out.get(asset, 0) + free + locked
        return out
