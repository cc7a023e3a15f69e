"""The engine's de-duplication window (``RecentIds``): the last ``size`` command ids at
least, each with what it maps to, and never more than twice as many."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tradehall.cluster.engine_service import RecentIds


@given(size=st.integers(1, 40), count=st.integers(0, 200))
def test_the_last_size_ids_are_always_kept_and_at_most_twice_as_many(size: int, count: int) -> None:
    window: RecentIds[int] = RecentIds(size)
    for n in range(count):
        window.add(f"id-{n}", n)
        assert len(window) <= 2 * size
        for back in range(max(0, n + 1 - size), n + 1):
            assert window.get(f"id-{back}") == back
            assert f"id-{back}" in window


def test_ids_older_than_two_generations_are_forgotten() -> None:
    window: RecentIds[str] = RecentIds(3)
    for n in range(7):
        window.add(f"id-{n}", f"value-{n}")
    assert [window.get(f"id-{n}") for n in range(7)] == [
        None, None, None, "value-3", "value-4", "value-5", "value-6"
    ]  # fmt: skip
    assert "id-0" not in window
    assert window.get("never-seen") is None


def test_a_window_holds_at_least_one_id() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RecentIds(0)
