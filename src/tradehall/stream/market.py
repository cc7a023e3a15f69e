"""The market-data endpoints: ``sub``, ``unsub`` and ``req`` on the family's channels."""

from __future__ import annotations

from typing import Any

from tradehall.api.errors import ApiError
from tradehall.codes import Code
from tradehall.stream.connection import Connection, params_of
from tradehall.stream.fanout import FUTURES, SPOT
from tradehall.stream.frames import BadMessage, reply, shown_event


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
                await _req(conn, kind, params)
            else:
                raise BadMessage(
                    Code.UNSUPPORTED,
                    f"unknown event {shown_event(event)}; expected sub, unsub or req",
                )
        except (BadMessage, ApiError) as exc:
            extra: dict[str, Any] = {}
            if isinstance(params.get("channel"), str):
                extra["channel"] = params["channel"]
            if cb_id is not None:
                extra["cb_id"] = cb_id
            conn.error(exc.code, exc.msg, **extra)

    return handle


async def _sub(conn: Connection, kind: str, params: dict[str, Any], cb_id: Any) -> None:
    fanout = conn.hub
    sub = conn.subscriber
    limit = conn.settings.max_subscriptions
    if params.get("channel") not in sub.channels and len(sub.channels) >= limit:
        raise BadMessage(Code.BAD_PARAM, f"too many subscriptions: at most {limit} per connection")

    def opened(name: str, frame: bytes | None) -> None:
        fanout.subscribe(sub, name)
        conn.send(reply("subed", name, cb_id, fanout.clock()))
        if frame is not None:
            sub.offer(frame)

    await fanout.open(kind, params, opened)


def _unsub(conn: Connection, params: dict[str, Any], cb_id: Any) -> None:
    name = params.get("channel")
    if not isinstance(name, str) or not conn.hub.unsubscribe(conn.subscriber, name):
        raise BadMessage(Code.BAD_PARAM, f"not subscribed to {name!r}")
    conn.send(reply("unsubed", name, cb_id, conn.hub.clock()))


async def _req(conn: Connection, kind: str, params: dict[str, Any]) -> None:
    conn.subscriber.offer(await conn.hub.history(kind, params))
