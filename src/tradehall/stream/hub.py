"""The broadcaster between the committed exchange and the connected clients.

It listens to the group committer: every committed batch is looked at once, on the event loop,
after its commit (so a client only ever sees what is durable), and never slows the engine:
market pushes are coalesced and sent by a flusher at most once per ``push_interval_ms`` per
channel, each push is encoded and compressed once for all of its subscribers, and every client
has a bounded queue of frames: a client too slow to keep up is dropped (closed), never waited
for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from tradehall.api import futures_view, wire
from tradehall.config import WebSocketSettings
from tradehall.engine.futures_model import (
    FUTURES_ACCOUNT_BASE,
    KIND_CONTRACT,
    KIND_ORDER,
    KIND_POSITION,
    KIND_TRIGGER,
    FuturesChanged,
    FuturesOrderState,
    Position,
    Trigger,
)
from tradehall.engine.margin import MARGIN_ACCOUNT_BASE
from tradehall.exchange import Exchange
from tradehall.marketdata.trades import PublicTrade
from tradehall.store.batch import Batch
from tradehall.store.writer import GroupCommitter
from tradehall.stream.channels import DEPTH, KLINE, MARK, TICKER, TRADES, Channel
from tradehall.stream.frames import gzip_json
from tradehall.stream.markets import StreamMarket, mark_price_tick, stream_markets
from tradehall.units import format_units

log = logging.getLogger("tradehall.stream")

SPOT = "spot"
FUTURES = "futures"


class Subscriber:
    """One connection's outbox: a bounded queue of encoded frames. ``drop`` is called (once)
    when the queue overflows; the connection then closes."""

    __slots__ = ("api_key", "channels", "drop", "dropped", "queue", "user")

    def __init__(self, limit: int, drop: Callable[[str], None]) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(limit)
        self.drop = drop
        self.dropped = False
        self.channels: dict[str, Channel] = {}
        self.user: int | None = None
        self.api_key: str | None = None

    def offer(self, frame: bytes) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.dropped = True
            self.drop("too slow: the client did not read its frames")


class Hub:
    def __init__(
        self,
        exchange: Exchange,
        committer: GroupCommitter,
        clock: Callable[[], int],
        settings: WebSocketSettings,
    ) -> None:
        self.exchange = exchange
        self.committer = committer
        self.clock = clock
        self.settings = settings
        self.markets = {
            SPOT: stream_markets(exchange.config, futures=False),
            FUTURES: stream_markets(exchange.config, futures=True),
        }
        self.channels: dict[str, tuple[Channel, set[Subscriber]]] = {}
        self._watched: dict[str, int] = {}
        """Symbol -> subscriptions to its trade-driven channels (trades, klines, ticker)."""
        self._private: dict[str, dict[int, set[Subscriber]]] = {SPOT: {}, FUTURES: {}}
        self._trades: dict[str, list[PublicTrade]] = {}
        """Committed trades of watched symbols not pushed yet, oldest first."""
        self._marks: set[str] = set()
        self._pushed: dict[str, int] = {}
        """Depth channel -> the book version it last pushed."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connections: set[Subscriber] = set()

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self.exchange.keep_changes = True
        self.committer.listeners.append(self.on_commit)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.on_commit in self.committer.listeners:
            self.committer.listeners.remove(self.on_commit)
        self.exchange.keep_changes = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for sub in list(self.connections):
            sub.drop("the server is shutting down")

    # ------------------------------------------------------------- subscriptions

    def subscribe(self, sub: Subscriber, channel: Channel) -> None:
        entry = self.channels.get(channel.name)
        if entry is None:
            entry = self.channels[channel.name] = (channel, set())
        if sub in entry[1]:
            return
        entry[1].add(sub)
        sub.channels[channel.name] = channel
        if channel.kind in (TRADES, KLINE, TICKER):
            symbol = channel.market.symbol
            self._watched[symbol] = self._watched.get(symbol, 0) + 1

    def unsubscribe(self, sub: Subscriber, name: str) -> bool:
        channel = sub.channels.pop(name, None)
        if channel is None:
            return False
        channel_entry = self.channels.get(name)
        if channel_entry is not None:
            channel_entry[1].discard(sub)
            if not channel_entry[1]:
                del self.channels[name]
                self._pushed.pop(name, None)
        if channel.kind in (TRADES, KLINE, TICKER):
            symbol = channel.market.symbol
            left = self._watched.get(symbol, 0) - 1
            if left > 0:
                self._watched[symbol] = left
            else:
                self._watched.pop(symbol, None)
                self._trades.pop(symbol, None)
        return True

    def add_private(self, sub: Subscriber, kind: str, user: int, api_key: str) -> None:
        sub.user = user
        sub.api_key = api_key
        self._private[kind].setdefault(user, set()).add(sub)

    def forget(self, sub: Subscriber) -> None:
        """A connection ended: remove it everywhere."""
        for name in list(sub.channels):
            self.unsubscribe(sub, name)
        if sub.user is not None:
            for by_user in self._private.values():
                subs = by_user.get(sub.user)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del by_user[sub.user]
        self.connections.discard(sub)

    # ------------------------------------------------------------- after each commit

    def on_commit(self, batch: Batch) -> None:
        if self._watched:
            for t in batch.trades:
                if t.symbol in self._watched:
                    trade = PublicTrade(t.id, t.time, t.price, t.qty, t.taker_side, t.quote)
                    self._trades.setdefault(t.symbol, []).append(trade)
        if self.channels:
            for kind, _, contract, _ in batch.futures:
                if kind == KIND_CONTRACT:
                    self._marks.add(contract)
            self._wake.set()
        if batch.keys:
            self._close_revoked(batch)
        if self._private[SPOT] or self._private[FUTURES]:
            self._push_private(batch)

    def _close_revoked(self, batch: Batch) -> None:
        revoked = {key for key, row in batch.keys.items() if row.revoked is not None}
        if not revoked:
            return
        for by_user in self._private.values():
            for subs in by_user.values():
                for sub in list(subs):
                    if sub.api_key in revoked:
                        sub.drop("the API key was revoked")

    # ------------------------------------------------------------- market pushes

    async def _run(self) -> None:
        interval = self.settings.push_interval_ms / 1000
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
            except Exception:
                log.exception("market push failed")
            await asyncio.sleep(interval)

    async def flush(self) -> None:
        """Push what changed on every subscribed channel, once what the pushes show is
        committed."""
        trades, self._trades = self._trades, {}
        marks, self._marks = self._marks, set()
        now = self.clock()
        versions = self.exchange.book_versions
        ticks: list[tuple[str, Any]] = []
        for name, (channel, _subs) in self.channels.items():
            symbol = channel.market.symbol
            kind = channel.kind
            if kind == DEPTH:
                version = versions.get(symbol, 0)
                if self._pushed.get(name) != version:
                    self._pushed[name] = version
                    ticks.append((name, channel.market.depth(self.exchange.engine)))
            elif kind == MARK:
                if symbol in marks:
                    ticks.append((name, self.mark_tick(channel.market)))
            elif symbol in trades:
                if kind == TRADES:
                    ticks.append((name, self.trades_tick(channel.market, trades[symbol], now)))
                elif kind == KLINE:
                    tick = self.kline_tick(channel, now)
                    if tick is not None:
                        ticks.append((name, tick))
                elif kind == TICKER:
                    ticks.append((name, self.ticker_tick(channel.market, now)))
        if not ticks:
            return
        await self.committer.durable_shielded()  # depth, candles and tickers are read from memory
        for name, tick in ticks:
            entry = self.channels.get(name)
            if entry is None:
                continue
            frame = gzip_json({"channel": name, "ts": now, "tick": tick})
            for sub in list(entry[1]):
                sub.offer(frame)

    def current_tick(self, channel: Channel, now: int) -> Any | None:
        """What a new subscriber gets at once: the channel's current state (None: nothing
        yet, e.g. no trade)."""
        market = channel.market
        if channel.kind == DEPTH:
            return market.depth(self.exchange.engine)
        if channel.kind == MARK:
            return self.mark_tick(market)
        if channel.kind == KLINE:
            return self.kline_tick(channel, now)
        if channel.kind == TICKER:
            return self.ticker_tick(market, now)
        return None

    def trades_tick(self, market: StreamMarket, trades: list[PublicTrade], now: int) -> Any:
        newest = trades[-1]
        return {
            "id": newest.id,
            "ts": newest.time,
            "data": [market.trade(t) for t in reversed(trades)],
        }

    def kline_tick(self, channel: Channel, now: int) -> Any | None:
        assert channel.interval is not None
        bars = self.exchange.marketdata.klines(channel.market.symbol, channel.interval, 1, now)
        return channel.market.kline(bars[-1]) if bars else None

    def ticker_tick(self, market: StreamMarket, now: int) -> Any:
        return market.ticker(self.exchange.marketdata.ticker(market.symbol, now))

    def mark_tick(self, market: StreamMarket) -> Any:
        contract = self.exchange.config.markets.contracts[market.symbol]
        return mark_price_tick(self.exchange.engine, contract)

    # ------------------------------------------------------------- private pushes

    def _push_private(self, batch: Batch) -> None:
        now = self.clock()
        spot, futures = self._private[SPOT], self._private[FUTURES]
        engine = self.exchange.engine
        config = self.exchange.config.markets
        margin_accounts = engine.margin.accounts
        for change in batch.changes:
            if isinstance(change, FuturesChanged):
                if change.user in futures:
                    message = self._futures_change(change, now)
                    if message is not None:
                        _deliver(futures[change.user], message)
                continue
            order = change.order
            account = order.account
            if account < MARGIN_ACCOUNT_BASE:
                user, account_type = account, "spot"
            else:
                margin_account = margin_accounts.get(account)
                if margin_account is None:
                    continue
                user, account_type = margin_account.user, "margin"
            subs = spot.get(user)
            if subs:
                pair = config.pairs[order.symbol]
                detail = wire.order_detail(pair, order)
                _deliver(
                    subs,
                    {
                        "channel": "user_order",
                        "ts": now,
                        "accountType": account_type,
                        "tick": detail,
                    },
                )
        for (account, asset), (free, locked) in batch.balances.items():
            if account <= 0:
                continue  # the venue's own accounts (fees, pool, insurance, clearing)
            symbol = None
            by_user = spot
            if account >= FUTURES_ACCOUNT_BASE:
                user, account_type, by_user = account - FUTURES_ACCOUNT_BASE, "futures", futures
            elif account >= MARGIN_ACCOUNT_BASE:
                margin_account = margin_accounts.get(account)
                if margin_account is None:
                    continue
                user, account_type = margin_account.user, "margin"
                symbol = margin_account.symbol
            else:
                user, account_type = account, "spot"
            targets = by_user.get(user)
            if not targets:
                continue
            decimals = config.assets[asset].decimals if asset in config.assets else 0
            tick: dict[str, Any] = {
                "accountType": account_type,
                "asset": asset,
                "free": format_units(free, decimals),
                "locked": format_units(locked, decimals),
            }
            if symbol is not None:
                tick["symbol"] = symbol
            _deliver(targets, {"channel": "user_balance", "ts": now, "tick": tick})

    def _futures_change(self, change: FuturesChanged, now: int) -> dict[str, Any] | None:
        contracts = self.exchange.config.markets.contracts
        contract = contracts.get(change.contract)
        doc = change.doc
        if contract is None:
            return None
        tick: Any
        if change.kind == KIND_ORDER and isinstance(doc, FuturesOrderState):
            channel, tick = "user_order", futures_view.order(contract, doc)
        elif change.kind == KIND_TRIGGER and isinstance(doc, Trigger):
            channel, tick = "user_trigger", futures_view.trigger(contract, doc)
        elif change.kind == KIND_POSITION and isinstance(doc, Position):
            channel = "user_position"
            tick = futures_view.position(self.exchange.engine.futures, doc)
        else:
            return None
        return {"channel": channel, "ts": now, "contractName": contract.symbol, "tick": tick}


def _deliver(subs: set[Subscriber], message: dict[str, Any]) -> None:
    frame = gzip_json(message)
    for sub in list(subs):
        sub.offer(frame)
