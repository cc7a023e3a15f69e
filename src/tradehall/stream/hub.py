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
    FIRED,
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
from tradehall.exchange import ApiKey, Exchange
from tradehall.marketdata.trades import PublicTrade
from tradehall.store.batch import Batch
from tradehall.store.writer import GroupCommitter
from tradehall.stream.channels import DEPTH, KLINE, MARK, TICKER, TRADES, Channel, parse_channel
from tradehall.stream.fanout import FUTURES, SPOT, Fanout, Opened
from tradehall.stream.frames import gzip_json, json_bytes, reply
from tradehall.stream.history import history_data
from tradehall.stream.markets import StreamMarket, mark_price_tick, stream_markets
from tradehall.units import format_units

log = logging.getLogger("tradehall.stream")


class Hub(Fanout):
    """The streams of this process's exchange: pushes rendered from each committed batch."""

    def __init__(
        self,
        exchange: Exchange,
        committer: GroupCommitter,
        clock: Callable[[], int],
        settings: WebSocketSettings,
    ) -> None:
        super().__init__(clock, settings)
        self.exchange = exchange
        self.committer = committer
        self.markets = {
            SPOT: stream_markets(exchange.config, futures=False),
            FUTURES: stream_markets(exchange.config, futures=True),
        }
        self._known: dict[str, Channel] = {}
        """Every channel a snapshot was asked of, by name (a finite set: names are checked)."""
        self._watched: dict[str, int] = {}
        """Symbol -> subscribed channels driven by its trades (trades, klines, ticker)."""
        self._trades: dict[str, list[PublicTrade]] = {}
        """Committed trades of watched symbols not pushed yet, oldest first."""
        self._marks: set[str] = set()
        self._stale: set[str] = set()
        """Channels whose current state is pushed next, changed or not (``resend``)."""
        self._pushed: dict[str, int] = {}
        """Depth channel -> the book version it last pushed."""
        self._last: dict[str, bytes] = {}
        """Depth and mark-price channel -> the JSON of the tick it last pushed: a tick equal
        to it is not pushed again (a book change below the 30 levels shown, a contract state
        change that left the prices and funding as they were)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

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
        self.drop_all("the server is shutting down")

    # ------------------------------------------------------------- what the endpoints ask

    def channel(self, kind: str, name: object) -> Channel:
        channel = parse_channel(name, self.markets[kind])
        self._known[channel.name] = channel
        return channel

    async def snapshot(self, kind: str, params: dict[str, Any]) -> tuple[str, bytes | None]:
        channel = self.channel(kind, params.get("channel"))
        now = self.clock()
        tick = self.current_tick(channel, now)
        await self.committer.durable_shielded()  # the first push shows what is committed
        if tick is None:
            return channel.name, None
        return channel.name, gzip_json({"channel": channel.name, "ts": now, "tick": tick})

    async def open(self, kind: str, params: dict[str, Any], opened: Opened) -> None:
        opened(*await self.snapshot(kind, params))

    async def history(self, kind: str, params: dict[str, Any]) -> bytes:
        channel = self.channel(kind, params.get("channel"))
        now = self.clock()
        data = history_data(self.exchange, channel, params, now)
        if channel.kind not in (KLINE, TRADES, DEPTH):
            data = self.current_tick(channel, now)
        await self.committer.durable_shielded()
        answer = reply("rep", channel.name, params.get("cb_id"), now)
        answer["data"] = data
        return gzip_json(answer)

    def find_key(self, api_key: str) -> ApiKey | None:
        return self.exchange.keys.get(api_key)

    async def confirm(self, kind: str, key: ApiKey, confirmed: Callable[[], None]) -> bool:
        await self.committer.durable_shielded()
        exchange = self.exchange
        if key.row.revoked is not None or exchange.keys.get(key.row.api_key) is not key:
            return False
        if not exchange.selfservice.use(exchange.note_state, key.row.api_key, self.clock()):
            return False  # a self-service key that expired
        confirmed()
        return True

    # ------------------------------------------------------------- subscriptions

    def resend(self, name: str) -> None:
        """Push ``name``'s current state soon, for followers that may have missed changes (a
        gateway restating what it follows after the engine restarted)."""
        self._stale.add(name)
        self._wake.set()

    def opened(self, name: str) -> None:
        channel = self._known[name]
        if channel.kind in (TRADES, KLINE, TICKER):
            symbol = channel.market.symbol
            self._watched[symbol] = self._watched.get(symbol, 0) + 1

    def closed(self, name: str) -> None:
        self._pushed.pop(name, None)
        self._last.pop(name, None)
        channel = self._known[name]
        if channel.kind in (TRADES, KLINE, TICKER):
            symbol = channel.market.symbol
            left = self._watched.get(symbol, 0) - 1
            if left > 0:
                self._watched[symbol] = left
            else:
                self._watched.pop(symbol, None)
                self._trades.pop(symbol, None)

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
            self.drop_keys(key for key, row in batch.keys.items() if row.revoked is not None)
        if self.users[SPOT] or self.users[FUTURES]:
            self._push_private(batch)

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
        stale, self._stale = self._stale, set()
        now = self.clock()
        versions = self.exchange.book_versions
        ticks: list[tuple[str, Any]] = []
        for name in self.channels:
            channel = self._known[name]
            symbol = channel.market.symbol
            kind = channel.kind
            if name in stale and kind != TRADES:  # trades have no state to show
                tick = self.current_tick(channel, now)
                if tick is not None:
                    ticks.append((name, tick))
                    if kind in (DEPTH, MARK):
                        self._last[name] = json_bytes(tick)
                if kind == DEPTH:
                    self._pushed[name] = versions.get(symbol, 0)
            elif kind == DEPTH:
                version = versions.get(symbol, 0)
                if self._pushed.get(name) != version:
                    self._pushed[name] = version
                    tick = channel.market.depth(self.exchange.engine)
                    if self._changed(name, tick):
                        ticks.append((name, tick))
            elif kind == MARK:
                if symbol in marks:
                    tick = self.mark_tick(channel.market)
                    if self._changed(name, tick):
                        ticks.append((name, tick))
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
            if name in self.channels:
                self.publish(name, gzip_json({"channel": name, "ts": now, "tick": tick}))

    def _changed(self, name: str, tick: Any) -> bool:
        """Whether ``tick`` differs from the last one pushed on ``name`` (and remember it).
        Clients of the family take the ping as the heartbeat, not a repeated push."""
        encoded = json_bytes(tick)
        if self._last.get(name) == encoded:
            return False
        self._last[name] = encoded
        return True

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
        spot, futures = self.users[SPOT], self.users[FUTURES]
        engine = self.exchange.engine
        config = self.exchange.config.markets
        margin_accounts = engine.margin.accounts
        for change in batch.changes:
            if isinstance(change, FuturesChanged):
                if change.user in futures and _pushed(change, batch):
                    message = self._futures_change(change, now, batch)
                    if message is not None:
                        self.publish_user(FUTURES, change.user, gzip_json(message))
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
            if user in spot:
                pair = config.pairs[order.symbol]
                detail = wire.order_detail(pair, order)
                message = {
                    "channel": "user_order",
                    "ts": now,
                    "accountType": account_type,
                    "tick": detail,
                }
                self.publish_user(SPOT, user, gzip_json(message))
        for (account, asset), (free, locked) in batch.balances.items():
            if account <= 0:
                continue  # the venue's own accounts (fees, pool, insurance, clearing)
            symbol = None
            kind, by_user = SPOT, spot
            if account >= FUTURES_ACCOUNT_BASE:
                user, account_type = account - FUTURES_ACCOUNT_BASE, "futures"
                kind, by_user = FUTURES, futures
            elif account >= MARGIN_ACCOUNT_BASE:
                margin_account = margin_accounts.get(account)
                if margin_account is None:
                    continue
                user, account_type = margin_account.user, "margin"
                symbol = margin_account.symbol
            else:
                user, account_type = account, "spot"
            if user not in by_user:
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
            message = {"channel": "user_balance", "ts": now, "tick": tick}
            self.publish_user(kind, user, gzip_json(message))

    def _futures_change(
        self, change: FuturesChanged, now: int, batch: Batch
    ) -> dict[str, Any] | None:
        contracts = self.exchange.config.markets.contracts
        contract = contracts.get(change.contract)
        doc = change.doc
        if contract is None:
            return None
        tick: Any
        if change.kind == KIND_ORDER and isinstance(doc, FuturesOrderState):
            channel, tick = "user_order", futures_view.order(contract, doc)
        elif change.kind == KIND_TRIGGER and isinstance(doc, Trigger):
            order = _submitted(batch, doc) if doc.status == FIRED and doc.order_id else None
            channel, tick = "user_trigger", futures_view.trigger(contract, doc, order)
        elif change.kind == KIND_POSITION and isinstance(doc, Position):
            channel = "user_position"
            tick = futures_view.position(self.exchange.engine.futures, doc)
        else:
            return None
        return {"channel": channel, "ts": now, "contractName": contract.symbol, "tick": tick}


def _submitted(batch: Batch, trigger: Trigger) -> FuturesOrderState | None:
    """The order a conditional order fired in this batch submitted, in its last state of the
    batch (fired in the same command, so it is there): what GET /order shows of the trigger."""
    change = batch.futures.get((KIND_ORDER, trigger.user, trigger.contract, trigger.order_id))
    doc = change.doc if change is not None else None
    return doc if isinstance(doc, FuturesOrderState) else None


def _pushed(change: FuturesChanged, batch: Batch) -> bool:
    """Whether a futures change is pushed: every order and trigger change, but a position
    once per commit, at its last change (its state after the commit), as balances are."""
    if change.kind != KIND_POSITION:
        return True
    return batch.futures.get((change.kind, change.user, change.contract, change.id)) is change
