"""Everything the sync and async clients share that is not I/O.

Building a request (URL, raw query, body bytes, headers, signature), decoding a response, and
one factory per endpoint describing the call (method, path, parameters, whether it is signed).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import httpx2

from tradehall.client.errors import ApiError
from tradehall.client.signing import request_path_for_signing, sign, signature_payload

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
SPOT = "/spot/open/sapi/v1"
SPOT_V2 = "/spot/open/sapi/v2"
SPOT_V3 = "/spot/open/sapi/v3"
MARGIN = SPOT + "/margin"
FUTURES = "/futures/open/fapi/v1"
FUTURES_MARKET = "/fapi/v1"
"""The futures market-data address of ``ticker`` and ``index`` (also under FUTURES)."""
MARKET_KLINE = "/v1/spot/market/kline"
SANDBOX = "/sandbox/v1"
"""The self-service accounts' endpoints (extension; served with ``[sandbox] self_service``)."""
"""The live venues' candle address (their public host; tradehall's server root)."""

UNKNOWN_ERROR = -1000

Number = str | int | Decimal
"""A price, volume or amount: sent as given, a Decimal as its plain string form."""
OrderId = str | int
"""An order ID: sent as a string."""
Limit = int | str
"""A page size: the seed gives some as integers and some as strings; the server takes both."""


# --- values -----------------------------------------------------------------------------------


def plain_decimal(value: Decimal) -> str:
    """Return ``value`` in plain notation (``1E+2`` -> ``100``), keeping its given decimals."""
    return format(value, "f")


def _json_default(value: object) -> Any:
    if isinstance(value, Decimal):
        return plain_decimal(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_bytes(body: Any) -> bytes:
    """Serialize ``body`` once to compact JSON bytes (Decimal -> plain string)."""
    return json.dumps(body, separators=(",", ":"), default=_json_default).encode("utf-8")


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return plain_decimal(value)
    return str(value)


def query_string(params: Mapping[str, Any] | None) -> str:
    """urlencode ``params`` in insertion order; None omitted, lists/tuples repeat the key."""
    if not params:
        return ""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            pairs.extend((key, _query_value(item)) for item in value if item is not None)
        else:
            pairs.append((key, _query_value(value)))
    return urlencode(pairs)


def compact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Drop None values, keeping order."""
    return {key: value for key, value in mapping.items() if value is not None}


def merge_headers(base: dict[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    """Overlay ``extra`` on ``base``; a header name in ``extra`` replaces any-case duplicates."""
    if not extra:
        return base
    replaced = {name.lower() for name in extra}
    merged = {k: v for k, v in base.items() if k.lower() not in replaced}
    merged.update(extra)
    return merged


def wall_clock_ms() -> int:
    """Current UNIX time in milliseconds."""
    return time.time_ns() // 1_000_000


RequestKey = tuple[str, str, bytes]
"""What a signature covers besides the timestamp: method, signed path and query, body."""
FORGET_AFTER = 4096
"""Requests remembered before the ones signed before this millisecond are dropped."""


class SigningClock:
    """Timestamps to sign with: the wall clock, except that a request identical to one already
    signed with that millisecond (or a later one) gets the next millisecond up, since the
    server accepts a signature once. Different requests share milliseconds freely, so a burst
    of them never runs ahead of the clock. Safe from any thread."""

    def __init__(self) -> None:
        self._last: dict[RequestKey, int] = {}
        self._lock = threading.Lock()

    def stamp(self, request: RequestKey) -> int:
        now = wall_clock_ms()
        with self._lock:
            last = self._last.get(request)
            ts = now if last is None or last < now else last + 1
            self._last[request] = ts
            if len(self._last) > FORGET_AFTER:  # an earlier stamp cannot collide with ``now``
                self._last = {key: when for key, when in self._last.items() if when >= now}
        return ts


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One API call as the endpoint methods describe it."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    signed: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request ready to send: ``content`` is exactly the signed body bytes."""

    method: str
    url: httpx2.URL
    content: bytes
    headers: dict[str, str]


def join_url(base_url: str, path: str, params: Mapping[str, Any] | None) -> tuple[str, httpx2.URL]:
    """Return (path without query, full URL); ``path`` may already carry a raw query."""
    bare_path, _, raw_query = path.partition("?")
    extra = query_string(params)
    query = "&".join(q for q in (raw_query, extra) if q)
    full = base_url.rstrip("/") + bare_path + (f"?{query}" if query else "")
    return bare_path, httpx2.URL(full)


class RequestBuilder:
    """Builds (and signs) requests for one base URL and one API key."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        secret: str | None,
        clock: Callable[[], int] | None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self._secret = secret
        self.clock: Callable[[], int] = clock if clock is not None else wall_clock_ms
        self._stamps = SigningClock() if clock is None else None
        """With the wall clock, identical requests within a millisecond get distinct stamps;
        a clock the caller gives is used as it is."""

    def prepare(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        raw_body: bytes | None = None,
        signed: bool = True,
        headers: Mapping[str, str] | None = None,
        ts: int | None = None,
    ) -> Prepared:
        """Build the URL, body bytes and headers once; sign exactly what will be sent."""
        if body is not None and raw_body is not None:
            raise ValueError("pass body or raw_body, not both")
        method = method.upper()
        bare_path, url = join_url(self.base_url, path, params)
        if raw_body is not None:
            content = bytes(raw_body)
        elif body is not None:
            content = json_bytes(body)
        else:
            content = b""
        built: dict[str, str] = {"Content-Type": "application/json"}
        if signed:
            if self.api_key is None or self._secret is None:
                raise ValueError("a signed request needs api_key and secret")
            # The query exactly as httpx2 will put it on the wire.
            raw_query = url.query.decode("ascii")
            signed_path = request_path_for_signing(bare_path, raw_query)
            if ts is None:
                stamps = self._stamps
                ts = stamps.stamp((method, signed_path, content)) if stamps else self.clock()
            ts_text = str(ts)
            payload = signature_payload(ts_text, method, signed_path, content)
            built["X-CH-APIKEY"] = self.api_key
            built["X-CH-TS"] = ts_text
            built["X-CH-SIGN"] = sign(self._secret, payload)
        return Prepared(method, url, content, merge_headers(built, headers))


# --- responses --------------------------------------------------------------------------------

_NOT_JSON = object()


def error_from(status: int, data: Any, text: str) -> ApiError:
    """Build the ApiError for a response body (decoded ``data``, raw ``text``)."""
    if isinstance(data, dict):
        code = data.get("code")
        msg = data.get("msg")
        if isinstance(code, int) and not isinstance(code, bool):
            return ApiError(status, code, msg if isinstance(msg, str) else text)
    return ApiError(status, UNKNOWN_ERROR, text)


def decode_response(response: httpx2.Response) -> Any:
    """Return the decoded JSON, or raise ApiError (status >= 400, a ``code`` key, or not JSON)."""
    try:
        data: Any = json.loads(response.content)
    except ValueError:
        data = _NOT_JSON
    status = response.status_code
    # The family's asset answers wrap their data in {"code": "0", "msg": "SUCCESS", ...}.
    failed = isinstance(data, dict) and "code" in data and data["code"] != "0"
    if status >= 400 or data is _NOT_JSON or failed:
        raise error_from(status, data, response.text)
    return data


# --- endpoints --------------------------------------------------------------------------------


def order_body(
    symbol: str,
    side: str,
    type: str,
    volume: Number,
    price: Number | None,
    client_order_id: str | None,
    time_in_force: str | None,
    recv_window: int | str | None,
) -> dict[str, Any]:
    """Body of a spot/margin order creation, Nones omitted."""
    return compact(
        {
            "symbol": symbol,
            "side": side,
            "type": type,
            "volume": volume,
            "price": price,
            "newClientOrderId": client_order_id,
            "timeInForce": time_in_force,
            "recvWindow": recv_window,
        }
    )


def _order_ref(
    symbol: str, order_id: OrderId | None, client_order_id: str | None
) -> dict[str, Any]:
    return compact(
        {
            "orderId": None if order_id is None else str(order_id),
            "newClientOrderId": client_order_id,
            "symbol": symbol,
        }
    )


def public(path: str, params: Mapping[str, Any] | None = None) -> Call:
    """An unsigned spot GET."""
    return Call("GET", SPOT + path, params=params)


def market_kline(symbol: str, scale_type: str, limit: Limit | None) -> Call:
    """The live venues' unsigned candle read."""
    params = {"symbol": symbol, "scaleType": scale_type, "limit": limit}
    return Call("GET", MARKET_KLINE, params=params)


def signed_get(prefix: str, path: str, params: Mapping[str, Any] | None = None) -> Call:
    """A signed GET under ``prefix``."""
    return Call("GET", prefix + path, params=params, signed=True)


def signed_post(prefix: str, path: str, body: Any) -> Call:
    """A signed POST under ``prefix``."""
    return Call("POST", prefix + path, body=body, signed=True)


def get_order(prefix: str, symbol: str, order_id: OrderId | None, cid: str | None) -> Call:
    """GET /order by orderId and/or newClientOrderId."""
    return signed_get(prefix, "/order", _order_ref(symbol, order_id, cid))


def cancel_order(prefix: str, symbol: str, order_id: OrderId | None, cid: str | None) -> Call:
    """POST /cancel by orderId and/or newClientOrderId."""
    return signed_post(prefix, "/cancel", _order_ref(symbol, order_id, cid))


def open_orders(prefix: str, symbol: str, limit: Limit | None) -> Call:
    """GET /openOrders."""
    return signed_get(prefix, "/openOrders", {"symbol": symbol, "limit": limit})


def my_trades(prefix: str, symbol: str, limit: Limit | None, from_id: int | None) -> Call:
    """GET /myTrades."""
    return signed_get(prefix, "/myTrades", {"symbol": symbol, "limit": limit, "fromId": from_id})


def on_spot_version(path: str, version: str) -> str:
    """``path`` moved from /sapi/v1 to the family's ``version`` (``v1`` or ``v2``) address."""
    if version not in ("v1", "v2"):
        raise ValueError(f"spot_version must be 'v1' or 'v2', not {version!r}")
    if version == "v2" and path.startswith(SPOT + "/"):
        return SPOT_V2 + path[len(SPOT) :]
    return path


def tickers(symbols: Sequence[str] | None) -> Call:
    """GET /sapi/v2/ticker without ``symbol``: every pair's ticker, or those in ``symbols``."""
    params = None if symbols is None else {"symbols": ",".join(symbols)}
    return Call("GET", SPOT_V2 + "/ticker", params=params)


def v3_history(
    path: str, symbol: str | None, limit: Limit | None, start: int | None, end: int | None
) -> Call:
    """GET /sapi/v3/historyOrders or /sapi/v3/myTrades."""
    params = {"symbol": symbol, "limit": limit, "startTime": start, "endTime": end}
    return signed_get(SPOT_V3, path, params)


def asset_transfer(coin: str, amount: Number, from_account: str, to_account: str) -> Call:
    """POST /asset/transfer: between the spot (EXCHANGE) and the futures (FUTURE) account."""
    body = {"coinSymbol": coin, "amount": amount, "fromAccount": from_account}
    return signed_post(SPOT, "/asset/transfer", {**body, "toAccount": to_account})


def asset_transfer_query(filters: Mapping[str, Any]) -> Call:
    """POST /asset/transferQuery; ``filters`` by their Python names, Nones omitted."""
    names = {
        "transfer_id": "transferId",
        "coin": "coinSymbol",
        "from_account": "fromAccount",
        "to_account": "toAccount",
        "start_time": "startTime",
        "end_time": "endTime",
        "page": "page",
        "limit": "limit",
    }
    body = compact({names[key]: value for key, value in filters.items()})
    if "transferId" in body:
        body["transferId"] = str(body["transferId"])
    return signed_post(SPOT, "/asset/transferQuery", body)


# --- futures ----------------------------------------------------------------------------------


def futures_public(path: str, params: Mapping[str, Any] | None = None) -> Call:
    """An unsigned futures GET."""
    return Call("GET", FUTURES + path, params=params)


def futures_order_body(
    contract: str,
    side: str,
    type: str,
    open: str,
    volume: Number,
    price: Number | None,
    position_type: int | None,
    client_order_id: str | None,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """Body of a futures order or conditional order, Nones omitted."""
    return compact(
        {
            "contractName": contract,
            "side": side,
            "type": type,
            "open": open,
            "volume": volume,
            "price": price,
            "positionType": position_type,
            "clientOrderId": client_order_id,
            **extra,
        }
    )


def futures_order_ref(
    contract: str, order_id: OrderId | None, client_order_id: str | None
) -> dict[str, Any]:
    return compact(
        {
            "contractName": contract,
            "orderId": None if order_id is None else str(order_id),
            "clientOrderId": client_order_id,
        }
    )


def futures_history(
    path: str, contract: str | None, limit: Limit | None, from_id: int | None
) -> Call:
    """POST /orderHistorical or /profitHistorical."""
    body = compact({"contractName": contract, "limit": limit, "fromId": from_id})
    return signed_post(FUTURES, path, body)
