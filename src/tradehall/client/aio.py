"""Asynchronous client for the spot and margin open API (same methods as ``Client``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

import httpx2

from tradehall.client import _requests as r
from tradehall.client._requests import MARGIN, SPOT, Number, OrderId

__all__ = ["AsyncClient"]


class AsyncClient:
    """Async spot and margin client; raises ApiError on error responses.

    Pass ``http`` to reuse an existing ``httpx2.AsyncClient``; it is then not closed by
    ``close()``, and ``timeout`` only applies to the client created here.
    """

    def __init__(
        self,
        base_url: str = r.DEFAULT_BASE_URL,
        api_key: str | None = None,
        secret: str | None = None,
        *,
        http: httpx2.AsyncClient | None = None,
        timeout: float = 10.0,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._builder = r.RequestBuilder(base_url, api_key, secret, clock)
        self._owns_http = http is None
        self._http = http if http is not None else httpx2.AsyncClient(timeout=timeout)

    # --- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- low level ----------------------------------------------------------------------------

    async def request(
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
    ) -> httpx2.Response:
        """Send one request (``path`` is the full URL path) and return the raw response."""
        p = self._builder.prepare(
            method,
            path,
            params=params,
            body=body,
            raw_body=raw_body,
            signed=signed,
            headers=headers,
            ts=ts,
        )
        return await self._http.request(p.method, p.url, content=p.content, headers=p.headers)

    async def _call(self, call: r.Call) -> Any:
        response = await self.request(
            call.method, call.path, params=call.params, body=call.body, signed=call.signed
        )
        return r.decode_response(response)

    # --- spot market data ---------------------------------------------------------------------

    async def ping(self) -> Any:
        """GET /ping."""
        return await self._call(r.public("/ping"))

    async def server_time(self) -> Any:
        """GET /time."""
        return await self._call(r.public("/time"))

    async def symbols(self) -> Any:
        """GET /symbols."""
        return await self._call(r.public("/symbols"))

    async def depth(self, symbol: str, limit: int | None = None) -> Any:
        """GET /depth."""
        return await self._call(r.public("/depth", {"symbol": symbol, "limit": limit}))

    async def ticker(self, symbol: str) -> Any:
        """GET /ticker."""
        return await self._call(r.public("/ticker", {"symbol": symbol}))

    async def trades(self, symbol: str, limit: int | None = None) -> Any:
        """GET /trades."""
        return await self._call(r.public("/trades", {"symbol": symbol, "limit": limit}))

    async def klines(self, symbol: str, interval: str, limit: int | None = None) -> Any:
        """GET /klines."""
        params = {"symbol": symbol, "interval": interval, "limit": limit}
        return await self._call(r.public("/klines", params))

    # --- spot trading -------------------------------------------------------------------------

    async def create_order(
        self,
        symbol: str,
        side: str,
        type: str,
        volume: Number,
        price: Number | None = None,
        *,
        client_order_id: str | None = None,
        time_in_force: str | None = None,
        recv_window: int | str | None = None,
    ) -> Any:
        """POST /order."""
        body = r.order_body(
            symbol, side, type, volume, price, client_order_id, time_in_force, recv_window
        )
        return await self._call(r.signed_post(SPOT, "/order", body))

    async def test_order(
        self,
        symbol: str,
        side: str,
        type: str,
        volume: Number,
        price: Number | None = None,
        *,
        client_order_id: str | None = None,
        time_in_force: str | None = None,
        recv_window: int | str | None = None,
    ) -> Any:
        """POST /order/test (validates without executing)."""
        body = r.order_body(
            symbol, side, type, volume, price, client_order_id, time_in_force, recv_window
        )
        return await self._call(r.signed_post(SPOT, "/order/test", body))

    async def batch_orders(self, symbol: str, orders: list[dict[str, Any]]) -> Any:
        """POST /batchOrders."""
        return await self._call(
            r.signed_post(SPOT, "/batchOrders", {"symbol": symbol, "orders": orders})
        )

    async def get_order(
        self, symbol: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """GET /order."""
        return await self._call(r.get_order(SPOT, symbol, order_id, client_order_id))

    async def cancel_order(
        self, symbol: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """POST /cancel."""
        return await self._call(r.cancel_order(SPOT, symbol, order_id, client_order_id))

    async def batch_cancel(self, symbol: str, order_ids: list[OrderId]) -> Any:
        """POST /batchCancel."""
        body = {"symbol": symbol, "orderIds": order_ids}
        return await self._call(r.signed_post(SPOT, "/batchCancel", body))

    async def open_orders(self, symbol: str, limit: int | None = None) -> Any:
        """GET /openOrders."""
        return await self._call(r.open_orders(SPOT, symbol, limit))

    async def my_trades(
        self, symbol: str, limit: int | None = None, from_id: int | None = None
    ) -> Any:
        """GET /myTrades."""
        return await self._call(r.my_trades(SPOT, symbol, limit, from_id))

    async def account(self) -> Any:
        """GET /account."""
        return await self._call(r.signed_get(SPOT, "/account"))

    # --- margin -------------------------------------------------------------------------------

    async def margin_create_order(
        self,
        symbol: str,
        side: str,
        type: str,
        volume: Number,
        price: Number | None = None,
        *,
        client_order_id: str | None = None,
        time_in_force: str | None = None,
        recv_window: int | str | None = None,
    ) -> Any:
        """POST /margin/order."""
        body = r.order_body(
            symbol, side, type, volume, price, client_order_id, time_in_force, recv_window
        )
        return await self._call(r.signed_post(MARGIN, "/order", body))

    async def margin_get_order(
        self, symbol: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """GET /margin/order."""
        return await self._call(r.get_order(MARGIN, symbol, order_id, client_order_id))

    async def margin_cancel_order(
        self, symbol: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """POST /margin/cancel."""
        return await self._call(r.cancel_order(MARGIN, symbol, order_id, client_order_id))

    async def margin_open_orders(self, symbol: str, limit: int | None = None) -> Any:
        """GET /margin/openOrders."""
        return await self._call(r.open_orders(MARGIN, symbol, limit))

    async def margin_my_trades(
        self, symbol: str, limit: int | None = None, from_id: int | None = None
    ) -> Any:
        """GET /margin/myTrades."""
        return await self._call(r.my_trades(MARGIN, symbol, limit, from_id))
