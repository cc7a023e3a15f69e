"""Authentication of signed requests: a pure function of the request and the known keys.

Order of checks (first failure wins): headers present, key known and active, timestamp well
formed and inside the window, signature valid, caller's IP allowed, permission sufficient.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from tradehall.api.errors import ApiError
from tradehall.client.signing import request_path_for_signing, signature_payload, verify
from tradehall.codes import Code
from tradehall.exchange import ApiKey

DEFAULT_RECV_WINDOW = 5000
MAX_RECV_WINDOW = 60000
MAX_AHEAD_MS = 1000
"""The seed's rule: ``ts < serverTime + 1000``. The default of ``max_clock_ahead_ms``."""


def authenticate(
    *,
    api_key: str | None,
    ts_text: str | None,
    signature: str | None,
    method: str,
    path: str,
    raw_query: str,
    body: bytes,
    now_ms: int,
    recv_window: int,
    find_key: Callable[[str], ApiKey | None],
    client_ip: str | None,
    trade: bool,
    max_ahead_ms: int = MAX_AHEAD_MS,
) -> ApiKey:
    """``api_key``, ``ts_text`` and ``signature`` are the X-CH-APIKEY, X-CH-TS and X-CH-SIGN
    headers (latin-1 text, None when absent). ``max_ahead_ms``: how far ahead of ``now_ms``
    the timestamp may be (exclusive; ``[server] max_clock_ahead_ms``)."""
    if not api_key:
        raise ApiError(Code.APIKEY_MISSING, "X-CH-APIKEY header is missing")
    if not ts_text:
        raise ApiError(Code.TS_MISSING, "X-CH-TS header is missing")
    if not signature:
        raise ApiError(Code.SIGN_MISSING, "X-CH-SIGN header is missing")
    key = find_key(api_key)
    if key is None or key.row.revoked is not None:
        raise ApiError(Code.BAD_KEY, "invalid API key", status=401)
    if not (ts_text.isascii() and ts_text.isdigit()) or len(ts_text) > 16:
        raise ApiError(Code.TIMESTAMP_WINDOW, "X-CH-TS must be UNIX time in milliseconds")
    ts = int(ts_text)
    if ts >= now_ms + max_ahead_ms:
        raise ApiError(
            Code.TIMESTAMP_WINDOW,
            f"timestamp {ts} is {ts - now_ms} ms ahead of the server time {now_ms}: it must be"
            f" less than {max_ahead_ms} ms ahead (check the client's clock; recvWindow"
            " bounds only how old a timestamp may be)",
        )
    if now_ms - ts > recv_window:
        raise ApiError(
            Code.TIMESTAMP_WINDOW,
            f"timestamp {ts} is outside the recvWindow"
            f" (server time {now_ms}, window {recv_window} ms)",
        )
    if not signed_over(key.row.secret, ts_text, method, path, raw_query, body, signature):
        raise ApiError(Code.BAD_SIGNATURE, "signature for this request is not valid")
    if key.networks and not ip_allowed(client_ip, key):
        raise ApiError(Code.BAD_KEY, "this API key is not allowed from your IP", status=403)
    if trade and key.row.read_only:
        raise ApiError(Code.BAD_KEY, "this API key has no trade permission", status=403)
    return key


def signed_over(
    secret: str, ts_text: str, method: str, path: str, raw_query: str, body: bytes, signature: str
) -> bool:
    request_path = request_path_for_signing(path, raw_query)
    if verify(secret, signature_payload(ts_text, method, request_path, body), signature):
        return True
    # A client that always writes "?" before its query signs "/path?" when the query is empty.
    # The server cannot tell whether that "?" was sent (the query string is empty either way),
    # so a request without a query may be signed with or without it.
    return not raw_query and verify(
        secret, signature_payload(ts_text, method, request_path + "?", body), signature
    )


def ip_allowed(client_ip: str | None, key: ApiKey) -> bool:
    if client_ip is None:
        return False
    try:
        address = ipaddress.ip_address(client_ip)
    except ValueError:
        return False
    return any(address in network for network in key.networks)
