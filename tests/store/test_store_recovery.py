"""Determinism and exact recovery: the same command stream gives the same state hash, and a
fresh engine recovered from the store has the hash the live engine had; on every backend."""

from __future__ import annotations

import gc
from pathlib import Path

from store_support import command_stream, run
from support import Backend
from tradehall.engine.orders import (
    BUY,
    LIMIT,
    MARKET,
    NEW,
    OPEN_STATUSES,
    PARTIALLY_FILLED,
    SELL,
    TIME_IN_FORCE,
    OrderState,
)
from tradehall.store.sql import open_orders, order_kinds


def test_same_stream_same_hash(backend: Backend, tmp_path: Path) -> None:
    commands = command_stream(7, 600)
    first = backend.exchange(tmp_path / "a")
    second = backend.exchange(tmp_path / "b")
    try:
        run(first, commands, 1)
        run(second, commands, 50)
        assert first.engine.state_hash() == second.engine.state_hash()
        other = backend.exchange(tmp_path / "c")
        run(other, command_stream(8, 600), 10)
        assert other.engine.state_hash() != first.engine.state_hash()
        other.store.close()
    finally:
        first.store.close()
        second.store.close()


def test_recovery_reproduces_the_live_state_exactly(backend: Backend, tmp_path: Path) -> None:
    db = tmp_path / "live"
    live = backend.exchange(db)
    try:
        run(live, command_stream(11, 800), 7)
        live_hash = live.engine.state_hash()
        assert any(book.orders for book in live.engine.spot.books.values())
    finally:
        live.store.close()
    recovered = backend.exchange(db)
    try:
        assert recovered.engine.state_hash() == live_hash
        # And it carries on identically: the same further commands give the same result.
        tail = command_stream(12, 200)[6:]
        run(recovered, tail, 5)
        reference = backend.exchange(tmp_path / "reference")
        run(reference, command_stream(11, 800) + tail, 3)
        assert recovered.engine.state_hash() == reference.engine.state_hash()
        reference.store.close()
    finally:
        recovered.store.close()


def test_recovered_orders_share_the_engines_strings(backend: Backend, tmp_path: Path) -> None:
    """A recovered order holds the engine's own symbol and word objects (as a live order
    does), not copies of its own; and recovery leaves the garbage collector as it found it."""
    db = tmp_path / "live"
    live = backend.exchange(db)
    try:
        run(live, command_stream(5, 3000), 7)
    finally:
        live.store.close()
    gc.disable()
    try:
        recovered = backend.exchange(db)
        assert not gc.isenabled()
    finally:
        gc.enable()
    recovered.store.close()
    recovered = backend.exchange(db)
    try:
        assert gc.isenabled()
        symbols = {s: s for s in recovered.config.markets.pairs}
        words = {w: w for w in (BUY, SELL, LIMIT, MARKET, *TIME_IN_FORCE, *OPEN_STATUSES)}
        orders = [o for b in recovered.engine.spot.books.values() for o in b.orders.values()]
        assert len(orders) > 20
        for o in orders:
            assert o.symbol is symbols[o.symbol]
            for word in (o.side, o.type, o.tif, o.status):
                assert word is words[word]
            assert o.updated is o.time or o.updated != o.time
        assert any(o.updated != o.time for o in orders)  # partly filled ones
    finally:
        recovered.store.close()


def test_open_orders_from_rows_with_words_not_configured() -> None:
    """Rows of a symbol (or word) the configuration does not list still load, their strings
    interned: every order of that kind shares one object of each."""
    kinds = order_kinds(["BTCUSDT"])
    text = "".join(["OLD", "PAIR BUY LIMIT GTC NEW"])  # built at run time: not a constant
    rows = [
        (1, 7, "BTCUSDT SELL LIMIT GTC PARTIALLY_FILLED", 5, 10, 0, 4, 20, 6, "c1", 100, 101),
        (2, 7, text, 6, 10, 0, 0, 0, 60, "", 100, 100),
        (3, 8, "".join(["OLD", "PAIR BUY LIMIT GTC NEW"]), 6, 10, 0, 0, 0, 60, "", 100, 100),
    ]
    first, second, third = open_orders(rows, kinds)
    assert first.snapshot() == OrderState(
        1, 7, "BTCUSDT", "SELL", "LIMIT", "GTC", 5, 10, 0, 4, 20, 6, "PARTIALLY_FILLED", "c1",
        100, 101,
    )  # fmt: skip
    assert first.symbol is kinds["BTCUSDT BUY LIMIT GTC NEW"][0]
    assert first.status is PARTIALLY_FILLED
    assert second.snapshot() == OrderState(
        2, 7, "OLDPAIR", "BUY", "LIMIT", "GTC", 6, 10, 0, 0, 0, 60, "NEW", "", 100, 100
    )
    assert second.symbol is third.symbol and second.side is BUY and second.status is NEW
    assert kinds[text] == ("OLDPAIR", "BUY", "LIMIT", "GTC", "NEW")
