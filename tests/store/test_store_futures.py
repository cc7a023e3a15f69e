"""Futures state in the store: every kind of document through commit and load on each backend,
live and closed documents, history pages by the fromId rule, lookups, export and import, id
counters, and the exchange's recovery of futures documents and contract market data.

Documents are built straight from the futures_model Structs: this is the store's contract, not
the engine's."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from support import Backend, make_exchange
from tradehall.engine.commands import Deposit
from tradehall.engine.engine import Result
from tradehall.engine.events import Event, OrderChanged, Trade, TradeExecuted
from tradehall.engine.futures_model import (
    KIND_CONTRACT,
    KIND_FUNDING,
    KIND_ORDER,
    KIND_POSITION,
    KIND_SETTING,
    KIND_TRIGGER,
    AccountTransfer,
    ContractState,
    FundingRecord,
    FuturesChanged,
    FuturesOrderState,
    Position,
    PriceReference,
    Setting,
    Trigger,
    futures_account,
)
from tradehall.engine.orders import OrderState
from tradehall.store.base import FuturesDoc, Store
from tradehall.store.batch import Batch
from tradehall.store.schema import TABLES

TS = 1_700_000_000_000
BTC, ETH = "E-BTC-USDT", "E-ETH-USDT"
MAX = 2**63 - 1


def order(
    id: int,
    user: int = 1,
    contract: str = BTC,
    status: str = "NEW",
    client_id: str = "",
    filled: int = 0,
) -> FuturesOrderState:
    return FuturesOrderState(
        id, user, contract, "BUY", "OPEN", "LIMIT", "GTC", 500_000, 10, 0, filled,
        filled * 50, 1_000, status, client_id, 1, 10, "user", 0, TS + id, TS + id,
    )  # fmt: skip


def position(id: int, user: int = 1, contract: str = BTC, volume: int = 5) -> Position:
    return Position(
        id, user, contract, "SELL", 2, 20, volume=volume, cost=123_456, margin=MAX,
        open_volume=7, open_value=999, close_profit=-42, capital_fee=-3, liquidated=True,
        ctime=TS, mtime=TS + 1,
    )  # fmt: skip


def trigger(id: int, user: int = 1, contract: str = BTC, status: str = "NEW") -> Trigger:
    return Trigger(
        id, user, contract, 3, 510_000, 100, 509_900, "SELL", "CLOSE", "MARKET", 0, 4, 0, 1,
        10, "trig", TS, status, TS + 5, order_id=0,
    )  # fmt: skip


def changed(kind: str, doc: FuturesDoc, live: bool) -> FuturesChanged:
    if isinstance(doc, ContractState):
        return FuturesChanged(kind, 0, doc.contract, 0, live, doc)
    if isinstance(doc, FundingRecord):
        return FuturesChanged(kind, 0, doc.contract, doc.time, live, doc)
    if isinstance(doc, Setting):
        return FuturesChanged(kind, doc.user, doc.contract, 0, live, doc)
    if isinstance(doc, AccountTransfer):
        return FuturesChanged(kind, doc.user, doc.asset, doc.id, live, doc)
    if isinstance(doc, PriceReference):
        return FuturesChanged(kind, 0, doc.symbol, 0, live, doc)
    return FuturesChanged(kind, doc.user, doc.contract, doc.id, live, doc)


def commit(store: Store, *events: Event) -> None:
    batch = Batch()
    batch.add_events(list(events), TS)
    store.commit(batch)


@pytest.fixture
def store(backend: Backend, tmp_path: Path) -> Any:
    opened = backend.open_store(tmp_path / "data")
    opened.migrate()
    yield opened
    opened.close()


def test_every_kind_round_trips_and_only_live_documents_load(store: Store) -> None:
    contract_state = ContractState(BTC, index=500_000, basis_ema=-17, funding_time=TS, last=9)
    setting = Setting(1, ETH, 25, 2)
    funding = FundingRecord(BTC, TS, -12_345, 501_000, 77)
    live = [
        changed(KIND_ORDER, order(12), True),
        changed(KIND_ORDER, order(3, user=2, contract=ETH), True),
        changed(KIND_POSITION, position(2), True),
        changed(KIND_TRIGGER, trigger(7), True),
        changed(KIND_SETTING, setting, True),
        changed(KIND_CONTRACT, contract_state, True),
    ]
    closed = [
        changed(KIND_ORDER, order(40, status="FILLED", filled=10), False),
        changed(KIND_POSITION, position(9, volume=0), False),
        changed(KIND_TRIGGER, trigger(41, status="CANCELED"), False),
        changed(KIND_FUNDING, funding, False),
    ]
    commit(store, *live, *closed)
    snap = store.load([], {})
    # Contract states, settings, positions, triggers, then orders in ascending id.
    assert snap.futures_docs == [
        contract_state, setting, position(2), trigger(7), order(3, user=2, contract=ETH),
        order(12),
    ]  # fmt: skip
    assert snap.futures_max_ids == {
        KIND_ORDER: 40, KIND_POSITION: 9, KIND_TRIGGER: 41, KIND_SETTING: 0,
        KIND_CONTRACT: 0, KIND_FUNDING: TS,
    }  # fmt: skip
    for event in (*live, *closed):
        assert store.futures_doc(event.kind, event.user, event.contract, event.id) == event.doc
    assert store.futures_doc(KIND_ORDER, 1, ETH, 12) is None
    assert store.futures_doc(KIND_ORDER, 2, BTC, 12) is None


def test_the_latest_change_of_a_document_wins(store: Store) -> None:
    batch = Batch()
    batch.add_events(
        [changed(KIND_ORDER, order(5), True), changed(KIND_ORDER, order(5, filled=3), True)], TS
    )
    assert len(batch.futures) == 1 and batch.row_count() == 1 and batch
    store.commit(batch)
    assert store.load([], {}).futures_docs == [order(5, filled=3)]
    # A later commit closes it: upserted in place, no longer live, still readable.
    commit(store, changed(KIND_ORDER, order(5, status="FILLED", filled=10), False))
    snap = store.load([], {})
    assert snap.futures_docs == [] and snap.futures_max_ids == {KIND_ORDER: 5}
    assert store.futures_doc(KIND_ORDER, 1, BTC, 5) == order(5, status="FILLED", filled=10)


def test_history_pages_follow_the_from_id_rule(store: Store) -> None:
    events = [changed(KIND_ORDER, order(i, status="FILLED"), False) for i in range(1, 11)]
    events += [changed(KIND_ORDER, order(i, contract=ETH), True) for i in (11, 12)]
    events += [changed(KIND_ORDER, order(i, user=2), True) for i in (13, 14)]
    events.append(changed(KIND_POSITION, position(15), True))
    commit(store, *events)

    def ids(contract: str | None, from_id: int | None, limit: int, live: bool | None) -> list[int]:
        docs = store.futures_history(KIND_ORDER, 1, contract, from_id, limit, live)
        assert all(isinstance(d, FuturesOrderState) and d.user == 1 for d in docs)
        return [d.id for d in docs if isinstance(d, FuturesOrderState)]

    assert ids(BTC, None, 3, None) == [10, 9, 8]  # the most recent, newest first
    assert ids(BTC, 4, 3, None) == [6, 5, 4]  # closest to fromId, newest first
    assert ids(BTC, 9, 5, None) == [10, 9]
    assert ids(BTC, 11, 5, None) == []
    assert ids(None, None, 4, None) == [12, 11, 10, 9]  # every contract
    assert ids(None, 9, 3, None) == [11, 10, 9]
    assert ids(ETH, None, 10, None) == [12, 11]
    assert ids(None, None, 20, True) == [12, 11]  # live only
    assert ids(None, 10, 20, False) == [10]  # closed only
    assert ids(None, None, 0, None) == []
    positions = store.futures_history(KIND_POSITION, 1, None, None, 10, None)
    assert positions == [position(15)]
    assert store.futures_history(KIND_TRIGGER, 1, None, None, 10, None) == []


def test_an_order_is_found_by_client_id(store: Store) -> None:
    commit(
        store,
        changed(KIND_ORDER, order(1, client_id="a", status="CANCELED"), False),
        changed(KIND_ORDER, order(2, client_id="a", status="FILLED"), False),
        changed(KIND_ORDER, order(3, client_id="a", contract=ETH), True),
        changed(KIND_ORDER, order(4, client_id="a", user=2), True),
        changed(KIND_ORDER, order(5, client_id="b'\"%_?"), True),
    )
    assert store.futures_by_client_id(1, BTC, "a") == order(2, client_id="a", status="FILLED")
    assert store.futures_by_client_id(1, ETH, "a") == order(3, client_id="a", contract=ETH)
    assert store.futures_by_client_id(2, BTC, "a") == order(4, client_id="a", user=2)
    assert store.futures_by_client_id(1, BTC, "b'\"%_?") == order(5, client_id="b'\"%_?")
    assert store.futures_by_client_id(1, BTC, "A") is None
    assert store.futures_by_client_id(1, BTC, "") is None
    assert store.futures_by_client_id(3, BTC, "a") is None


def test_a_conditional_order_is_found_by_client_id_until_a_later_order_takes_it(
    store: Store,
) -> None:
    commit(store, changed(KIND_TRIGGER, trigger(6, status="CANCELED"), False))
    assert store.futures_by_client_id(1, BTC, "trig") == trigger(6, status="CANCELED")
    commit(store, changed(KIND_ORDER, order(7, client_id="trig"), True))
    assert store.futures_by_client_id(1, BTC, "trig") == order(7, client_id="trig")
    assert store.futures_by_client_id(1, ETH, "trig") is None


@pytest.mark.parametrize("highest", [KIND_ORDER, KIND_TRIGGER])
def test_next_order_id_is_above_futures_orders_and_triggers(store: Store, highest: str) -> None:
    spot = OrderState(
        50, 1, "BTCUSDT", "BUY", "LIMIT", "GTC", 1, 1, 0, 0, 0, 0, "FILLED", "", TS, TS
    )
    commit(
        store,
        OrderChanged(spot),
        changed(KIND_ORDER, order(900 if highest == KIND_ORDER else 60, status="FILLED"), False),
        changed(KIND_TRIGGER, trigger(900 if highest == KIND_TRIGGER else 70), True),
        changed(KIND_POSITION, position(5000), True),  # positions have an id space of their own
    )
    assert store.load([], {}).next_order_id == 901


def test_export_and_import_carry_futures_documents(
    backend: Backend, tmp_path: Path, store: Store
) -> None:
    commit(
        store,
        changed(KIND_ORDER, order(1, client_id="x"), True),
        changed(KIND_ORDER, order(2, contract=ETH, status="CANCELED"), False),
        changed(KIND_POSITION, position(1), True),
        changed(KIND_TRIGGER, trigger(3), True),
        changed(KIND_SETTING, Setting(1, BTC, 5, 1), True),
        changed(KIND_CONTRACT, ContractState("E-BTC-USD", mark=5), True),
        changed(KIND_FUNDING, FundingRecord(BTC, TS, 1, 2, 3), False),
    )
    out = io.StringIO()
    counts = store.export_to(out)
    assert counts["futures_docs"] == 7
    assert list(TABLES)[-1] == "futures_docs"
    assert '{"table":"futures_docs"' in out.getvalue()

    target = backend.open_store(tmp_path / "target")
    try:
        target.migrate()
        assert target.import_from(io.StringIO(out.getvalue()))["futures_docs"] == 7
        before, after = store.load([], {}), target.load([], {})
        assert after.futures_docs == before.futures_docs and len(after.futures_docs) == 5
        assert after.futures_max_ids == before.futures_max_ids
        assert target.futures_doc(KIND_ORDER, 1, ETH, 2) == order(
            2, contract=ETH, status="CANCELED"
        )
        echo = io.StringIO()
        target.export_to(echo)
        assert echo.getvalue() == out.getvalue()  # byte for byte
    finally:
        target.close()


def test_exchange_recovers_futures_documents_and_contract_market_data(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = make_exchange(store=backend.open_store(tmp_path / "data"))
    try:
        assert BTC in live.book_versions and BTC in live.marketdata.symbols
        before = dict(live.book_versions)
        trade = Trade(
            1, BTC, 500_000, 3, 1_500, TS, "BUY", 2, 1, futures_account(1), futures_account(2),
            9, 4,
        )  # fmt: skip
        events: list[Event] = [
            changed(KIND_ORDER, order(1), False),
            changed(KIND_ORDER, order(2, user=2), True),
            changed(KIND_POSITION, position(1), True),
            TradeExecuted(trade),
        ]
        monkeypatch.setattr(live.engine, "apply", lambda cmd: Result(events, None))
        live.apply(Deposit(TS, 1, "USDT", 1, "tx"))
        monkeypatch.undo()
        assert live.book_versions[BTC] == before[BTC] + 2  # one bump per order event
        assert {s: v for s, v in live.book_versions.items() if s != BTC} == {
            s: v for s, v in before.items() if s != BTC
        }
        assert live.marketdata.recent_trades(BTC, 10)[0].price == 500_000
        live.commit_now()
    finally:
        live.store.close()

    restored: list[tuple[list[object], dict[str, int]]] = []
    monkeypatch.setattr(
        "tradehall.engine.engine.Engine.restore_futures",
        lambda self, docs, max_ids: restored.append((docs, max_ids)),
    )
    again = make_exchange(store=backend.open_store(tmp_path / "data"))
    try:
        assert restored == [([position(1), order(2, user=2)], {KIND_ORDER: 2, KIND_POSITION: 1})]
        assert [t.id for t in again.marketdata.recent_trades(BTC, 10)] == [1]
        ticker = again.marketdata.ticker(BTC, TS + 1000)
        assert (ticker.last, ticker.volume) == (500_000, 3)
    finally:
        again.store.close()
