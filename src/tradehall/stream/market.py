"""The market-data endpoints: ``sub``, ``unsub`` and ``req`` on the family's channels."""

from __future__ import annotations

from typing import Any

from tradehall.api.errors import ApiError
from tradehall.api.params import Params
from tradehall.codes import Code
from tradehall.stream.channels import DEPTH, KLINE, TRADES, parse_channel
from tradehall.stream.connection import Connection, params_of
from tradehall.stream.frames import BadMessage
from tradehall.stream.hub import FUTURES, SPOT

MAX_PAGE = 300
DEFAULT_PAGE = 100


def market_handler(futures: bool) -> Any:
    kind = FUTURES if futures else SPOT

    async def handle(conn: Connection, message: dict[str, Any]) -> None:
        event = message.get("event")
        params = params_of(message)
        cb_id = params.get("cb_id")
        try:
            if event == "sub":
                await _sub(conn, kind, params, cb_id)
            elif event == "unsub":
                _unsub(conn, params, cb_id)
            elif event == "req":
                await _req(conn, kind, params, cb_id)
            else:
                raise BadMessage(
                    Code.UNSUPPORTED, f"unknown event {event!r}; expected sub, unsub or req"
                )
        except (BadMessage, ApiError) as exc:
            extra: dict[str, Any] = {"event_rep": "error"}
            if isinstance(params.get("channel"), str):
                extra["channel"] = params["channel"]
            if cb_id is not None:
                extra["cb_id"] = cb_id
            conn.error(exc.code, exc.msg, **extra)

    return handle


async def _sub(conn: Connection, kind: str, params: dict[str, Any], cb_id: Any) -> None:
    hub = conn.hub
    channel = parse_channel(params.get("channel"), hub.markets[kind])
    sub = conn.subscriber
    if channel.name not in sub.channels and len(sub.channels) >= conn.settings.max_subscriptions:
        raise BadMessage(
            Code.BAD_PARAM,
            f"too many subscriptions: at most {conn.settings.max_subscriptions} per connection",
        )
    now = hub.clock()
    tick = hub.current_tick(channel, now)
    await hub.committer.durable_shielded()  # the first push shows what is committed
    hub.subscribe(sub, channel)
    conn.send(_reply("subed", channel.name, cb_id, now))
    if tick is not None:
        conn.send({"channel": channel.name, "ts": now, "tick": tick})


def _unsub(conn: Connection, params: dict[str, Any], cb_id: Any) -> None:
    name = params.get("channel")
    if not isinstance(name, str) or not conn.hub.unsubscribe(conn.subscriber, name):
        raise BadMessage(Code.BAD_PARAM, f"not subscribed to {name!r}")
    conn.send(_reply("unsubed", name, cb_id, conn.hub.clock()))


async def _req(conn: Connection, kind: str, params: dict[str, Any], cb_id: Any) -> None:
    hub = conn.hub
    channel = parse_channel(params.get("channel"), hub.markets[kind])
    now = hub.clock()
    page = _page_size(Params(params))
    market = channel.market
    marketdata = hub.exchange.marketdata
    data: Any
    if channel.kind == KLINE:
        assert channel.interval is not None
        end = _end_ms(Params(params), now)
        bars = marketdata.klines(market.symbol, channel.interval, page, end)
        data = [market.kline(bar) for bar in bars]
    elif channel.kind == TRADES:
        end = _end_ms(Params(params), now)
        recent = marketdata.recent_trades(market.symbol, 1000)
        data = [market.trade(t) for t in recent if t.time <= end][:page]
    elif channel.kind == DEPTH:
        data = market.depth(hub.exchange.engine)
    else:
        data = hub.current_tick(channel, now)
    await hub.committer.durable_shielded()
    answer = _reply("rep", channel.name, cb_id, now)
    answer["data"] = data
    conn.send(answer)


def _reply(event_rep: str, channel: str, cb_id: Any, now: int) -> dict[str, Any]:
    reply: dict[str, Any] = {"event_rep": event_rep, "channel": channel}
    if cb_id is not None:
        reply["cb_id"] = cb_id
    reply["status"] = "ok"
    reply["ts"] = now
    return reply


def _page_size(params: Params) -> int:
    for name in ("pageSize", "top"):  # some of the family's clients send top
        size = params.integer(name, minimum=1, maximum=MAX_PAGE)
        if size is not None:
            return size
    return DEFAULT_PAGE


def _end_ms(params: Params, now: int) -> int:
    """``endIdx`` (UNIX seconds) as milliseconds: the last second included; now if absent."""
    end = params.integer("endIdx", minimum=0)
    return now if end is None else min(end * 1000 + 999, now)
