"""The private streams: spot (and margin) at ``/spotws_user/userData/ws``, futures at
``/position_order/ws``. The first message authenticates:

    {"event": "sub", "params": {"apiKey": KEY, "ts": "<ms>", "sign": HMAC}}

where ``sign`` is the hex HMAC-SHA256, keyed with the secret, of ``ts + "GET" + path`` (the
path of the stream, e.g. ``/spotws_user/userData/ws``), checked as a signed REST request is
(time window with ``[server] max_clock_ahead_ms``, replay, the key's IP allow-list). From
then on the account's own events are pushed, and nobody else's."""

from __future__ import annotations

from typing import Any

from tradehall.api.auth import DEFAULT_RECV_WINDOW, authenticate
from tradehall.api.errors import ApiError
from tradehall.api.replay import ReplayGuard, check_replay
from tradehall.codes import Code
from tradehall.stream.connection import Connection, params_of
from tradehall.stream.frames import BadMessage, shown_event

CHANNEL = "user"


def private_handler(kind: str, path: str, replay: ReplayGuard, max_ahead_ms: int) -> Any:
    async def handle(conn: Connection, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event != "sub":
            raise BadMessage(Code.UNSUPPORTED, f"unknown event {shown_event(event)}; expected sub")
        if conn.subscriber.user is not None:
            raise BadMessage(Code.BAD_PARAM, "this connection is already authenticated")
        params = params_of(message)
        fields = {**message, **params}  # the fields may come at the top level or in params
        hub = conn.hub
        now = hub.clock()
        client = conn.websocket.client
        try:
            key = authenticate(
                api_key=_text(fields.get("apiKey")),
                ts_text=_text(fields.get("ts")),
                signature=_text(fields.get("sign")),
                method="GET",
                path=path,
                raw_query="",
                body=b"",
                now_ms=now,
                recv_window=DEFAULT_RECV_WINDOW,
                find_key=hub.find_key,
                client_ip=client.host if client is not None else None,
                trade=False,
                max_ahead_ms=max_ahead_ms,
            )
            signature = _text(fields.get("sign"))
            assert signature is not None
            await check_replay(replay, signature, int(str(fields["ts"])), DEFAULT_RECV_WINDOW, now)
        except ApiError as exc:
            conn.error(exc.code, _auth_message(exc.msg), channel=CHANNEL)
            return

        def confirmed() -> None:
            hub.add_private(conn.subscriber, kind, key.user_id, key.row.api_key)
            reply = {"event_rep": "subed", "channel": CHANNEL, "status": "ok", "ts": now}
            if "cb_id" in params:
                reply["cb_id"] = params["cb_id"]
            conn.send(reply)

        try:
            valid = await hub.confirm(kind, key, confirmed)
        except (ApiError, BadMessage) as exc:  # the engine process is not reachable
            conn.error(exc.code, exc.msg, channel=CHANNEL)
            return
        if not valid:
            conn.error(Code.BAD_KEY, "invalid API key", channel=CHANNEL)

    return handle


def _text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return str(value)
    return None


def _auth_message(msg: str) -> str:
    """REST's messages name the X-CH-* headers; here the fields are apiKey, ts and sign."""
    return (
        msg.replace("X-CH-APIKEY header", "apiKey")
        .replace("X-CH-TS header", "ts")
        .replace("X-CH-SIGN header", "sign")
        .replace("X-CH-TS", "ts")
    )
