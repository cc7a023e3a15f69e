"""What the exchange keeps of its self-service accounts (``[sandbox] self_service``): which
users they are, when each one's key was last used, how many faucet top-ups each took today.

It is stored in the ``engine_state`` rows (name -> integer), staged through
``Exchange.note_state`` (a journal entry, then a row) and read back at recovery:

- ``selfservice.key.<apiKey>``: the key's last use (ms); the row marks the key, and its user,
  as self-service. A key's use is written at most once per ``persist_ms`` (a minute, or a tenth
  of the expiry when that is shorter); in memory it is exact. After a restart a key may so
  expire up to that much early, never late.
- ``selfservice.faucet.<userId>``: ``day * 1000 + top-ups`` (day: UTC days since 1970).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tradehall.exchange import ApiKey

Note = Callable[[str, int], None]
"""Stages one ``engine_state`` row (``Exchange.note_state``: journaled like any change)."""

KEY_PREFIX = "selfservice.key."
FAUCET_PREFIX = "selfservice.faucet."
DAY_MS = 86_400_000
MINUTE_MS = 60_000
_DAY_FACTOR = 1000
"""A faucet row packs the day and the day's count (at most 100) in one integer."""


class SelfServiceBook:
    def __init__(self, expiry_ms: int) -> None:
        self.expiry_ms = expiry_ms
        self.persist_ms = max(1, min(MINUTE_MS, expiry_ms // 10))
        self.users: set[int] = set()
        """Every self-service user, whatever became of its key."""
        self.used: dict[str, int] = {}
        """Live (not yet revoked) self-service keys: their last use, exact."""
        self._saved: dict[str, int] = {}
        """The last use as last staged for the store."""
        self._faucet: dict[int, int] = {}
        """Faucet rows by user (``day * 1000 + count``)."""
        self.next_expiry = 0
        """No live key expires before this (ms): a sweep before it finds nothing."""

    def restore(self, state: Mapping[str, int], keys: Mapping[str, ApiKey]) -> None:
        for name, value in state.items():
            if name.startswith(KEY_PREFIX):
                key = keys.get(name[len(KEY_PREFIX) :])
                if key is None:
                    continue
                self.users.add(key.user_id)
                if key.row.revoked is None:
                    self.used[key.row.api_key] = self._saved[key.row.api_key] = value
            elif name.startswith(FAUCET_PREFIX):
                self._faucet[int(name[len(FAUCET_PREFIX) :])] = value

    def add(self, note: Note, api_key: str, user_id: int, now: int) -> None:
        """A new self-service account's key, used now."""
        self.users.add(user_id)
        self.used[api_key] = now
        self._save(note, api_key, now)

    def use(self, note: Note, api_key: str, now: int) -> bool:
        """A signed request with ``api_key``: False when it is a self-service key that expired
        (nothing changes); otherwise True, and a self-service key's use is noted."""
        last = self.used.get(api_key)
        if last is None:
            return True
        if now - last > self.expiry_ms:
            return False
        if now > last:
            self.used[api_key] = now
            if now - self._saved[api_key] >= self.persist_ms:
                self._save(note, api_key, now)
        return True

    def _save(self, note: Note, api_key: str, now: int) -> None:
        self._saved[api_key] = now
        note(KEY_PREFIX + api_key, now)

    def live(self, keys: Mapping[str, ApiKey], now: int) -> int:
        """How many self-service keys are live: neither expired nor revoked."""
        for api_key in [k for k in self.used if keys[k].row.revoked is not None]:
            self.forget(api_key)  # revoked by the operator
        limit = now - self.expiry_ms
        return sum(1 for last in self.used.values() if last >= limit)

    def expires(self, api_key: str) -> int | None:
        """When a live self-service key expires if unused until then; None for any other."""
        last = self.used.get(api_key)
        return None if last is None else last + self.expiry_ms

    def expired(self, now: int) -> list[str]:
        """The live keys unused for longer than the expiry (to revoke)."""
        if now < self.next_expiry:
            return []
        limit = now - self.expiry_ms
        found = [key for key, last in self.used.items() if last < limit]
        for key in found:
            self.forget(key)
        self.next_expiry = min(self.used.values(), default=now) + self.expiry_ms + 1
        return found

    def forget(self, api_key: str) -> None:
        """``api_key`` is revoked: not live any more."""
        self.used.pop(api_key, None)
        self._saved.pop(api_key, None)

    def faucet_count(self, user_id: int, now: int) -> int:
        """Top-ups ``user_id`` took on ``now``'s UTC day."""
        day, count = divmod(self._faucet.get(user_id, 0), _DAY_FACTOR)
        return count if day == now // DAY_MS else 0

    def faucet_taken(self, note: Note, user_id: int, now: int) -> int:
        """Count one more top-up today; the day's count."""
        count = self.faucet_count(user_id, now) + 1
        value = self._faucet[user_id] = now // DAY_MS * _DAY_FACTOR + count
        note(FAUCET_PREFIX + str(user_id), value)
        return count
