"""Asynchronous client for the spot, margin and futures open API (same methods as ``Client``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import httpx2

from tradehall.client import _requests as r
from tradehall.client._requests import FUTURES, MARGIN, SANDBOX, SPOT, Limit, Number, OrderId

__all__ = ["AsyncClient"]


class AsyncClient:
    """Async spot, margin and futures client; raises ApiError on error responses.

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
        spot_version: str = "v1",
    ) -> None:
        r.on_spot_version(SPOT, spot_version)  # refuses an unknown version now
        self._spot_version = spot_version
        """``v2`` sends every spot and margin call to the family's /sapi/v2 address."""
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
        path = r.on_spot_version(call.path, self._spot_version)
        response = await self.request(
            call.method, path, params=call.params, body=call.body, signed=call.signed
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

    async def depth(self, symbol: str, limit: Limit | None = None) -> Any:
        """GET /depth."""
        return await self._call(r.public("/depth", {"symbol": symbol, "limit": limit}))

    async def ticker(self, symbol: str) -> Any:
        """GET /ticker."""
        return await self._call(r.public("/ticker", {"symbol": symbol}))

    async def trades(self, symbol: str, limit: Limit | None = None) -> Any:
        """GET /trades."""
        return await self._call(r.public("/trades", {"symbol": symbol, "limit": limit}))

    async def klines(self, symbol: str, interval: str, limit: Limit | None = None) -> Any:
        """GET /klines."""
        params = {"symbol": symbol, "interval": interval, "limit": limit}
        return await self._call(r.public("/klines", params))

    async def market_kline(self, symbol: str, scale_type: str, limit: Limit | None = None) -> Any:
        """GET /v1/spot/market/kline: the candles in the live venues' shape,
        ``{"code": "0", "msg": "SUCCESS", "data": {"data": [bars]}}``."""
        return await self._call(r.market_kline(symbol, scale_type, limit))

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

    async def batch_cancel(self, symbol: str, order_ids: Sequence[OrderId]) -> Any:
        """POST /batchCancel."""
        body = {"symbol": symbol, "orderIds": list(order_ids)}
        return await self._call(r.signed_post(SPOT, "/batchCancel", body))

    async def open_orders(self, symbol: str, limit: Limit | None = None) -> Any:
        """GET /openOrders."""
        return await self._call(r.open_orders(SPOT, symbol, limit))

    async def my_trades(
        self, symbol: str, limit: Limit | None = None, from_id: int | None = None
    ) -> Any:
        """GET /myTrades."""
        return await self._call(r.my_trades(SPOT, symbol, limit, from_id))

    async def asset_transfer(
        self, coin: str, amount: Number, from_account: str, to_account: str
    ) -> Any:
        """POST /asset/transfer (``EXCHANGE`` spot, ``FUTURE`` futures); ``data.transferId``."""
        return await self._call(r.asset_transfer(coin, amount, from_account, to_account))

    async def asset_transfer_query(
        self,
        *,
        transfer_id: int | str | None = None,
        coin: str | None = None,
        from_account: str | None = None,
        to_account: str | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
        page: int | None = None,
        limit: Limit | None = None,
    ) -> Any:
        """POST /asset/transferQuery: ``data.list``, newest first."""
        filters = dict(
            transfer_id=transfer_id,
            coin=coin,
            from_account=from_account,
            to_account=to_account,
            start_time=start_time,
            end_time=end_time,
            page=page,
            limit=limit,
        )
        return await self._call(r.asset_transfer_query(filters))

    async def tickers(self, symbols: Sequence[str] | None = None) -> Any:
        """GET /sapi/v2/ticker: every pair's ticker with its best bid and ask (or those of
        ``symbols``)."""
        return await self._call(r.tickers(symbols))

    async def ticker_v2(self, symbol: str) -> Any:
        """GET /sapi/v2/ticker?symbol=: one pair's ticker with its best bid and ask."""
        return await self._call(r.Call("GET", r.SPOT_V2 + "/ticker", params={"symbol": symbol}))

    async def history_orders(
        self,
        symbol: str | None = None,
        limit: Limit | None = None,
        *,
        start_time: int | None = None,
        end_time: int | None = None,
    ) -> Any:
        """GET /sapi/v3/historyOrders: open and ended orders in a time window."""
        return await self._call(r.v3_history("/historyOrders", symbol, limit, start_time, end_time))

    async def my_trades_v3(
        self,
        symbol: str | None = None,
        limit: Limit | None = None,
        *,
        start_time: int | None = None,
        end_time: int | None = None,
    ) -> Any:
        """GET /sapi/v3/myTrades: trades in a time window."""
        return await self._call(r.v3_history("/myTrades", symbol, limit, start_time, end_time))

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

    async def margin_open_orders(self, symbol: str, limit: Limit | None = None) -> Any:
        """GET /margin/openOrders."""
        return await self._call(r.open_orders(MARGIN, symbol, limit))

    async def margin_my_trades(
        self, symbol: str, limit: Limit | None = None, from_id: int | None = None
    ) -> Any:
        """GET /margin/myTrades."""
        return await self._call(r.my_trades(MARGIN, symbol, limit, from_id))

    # --- futures ------------------------------------------------------------------------------

    async def futures_ping(self) -> Any:
        """GET /futures/open/fapi/v1/ping."""
        return await self._call(r.futures_public("/ping"))

    async def futures_server_time(self) -> Any:
        """GET /futures/open/fapi/v1/time."""
        return await self._call(r.futures_public("/time"))

    async def futures_contracts(self) -> Any:
        """GET /futures/open/fapi/v1/contracts."""
        return await self._call(r.futures_public("/contracts"))

    async def futures_depth(self, contract: str, limit: Limit | None = None) -> Any:
        """GET /futures/open/fapi/v1/depth."""
        return await self._call(
            r.futures_public("/depth", {"contractName": contract, "limit": limit})
        )

    async def futures_ticker(self, contract: str) -> Any:
        """GET /fapi/v1/ticker (the futures market address)."""
        params = {"contractName": contract}
        return await self._call(r.Call("GET", r.FUTURES_MARKET + "/ticker", params=params))

    async def futures_index(self, contract: str) -> Any:
        """GET /fapi/v1/index (the futures market address)."""
        params = {"contractName": contract}
        return await self._call(r.Call("GET", r.FUTURES_MARKET + "/index", params=params))

    async def futures_ticker_all(self) -> Any:
        """GET /futures/open/fapi/v1/ticker_all (extension)."""
        return await self._call(r.futures_public("/ticker_all"))

    async def futures_klines(self, contract: str, interval: str, limit: Limit | None = None) -> Any:
        """GET /futures/open/fapi/v1/klines."""
        params = {"contractName": contract, "interval": interval, "limit": limit}
        return await self._call(r.futures_public("/klines", params))

    async def futures_create_order(
        self,
        contract: str,
        side: str,
        type: str,
        open: str,
        volume: Number,
        price: Number | None = None,
        *,
        position_type: int | None = None,
        client_order_id: str | None = None,
        time_in_force: str | None = None,
        order_unit: int | None = None,
        recv_window: int | str | None = None,
    ) -> Any:
        """POST /futures/open/fapi/v1/order. ``volume`` counts what ``order_unit`` says (1 the
        contract's coin, 2 contracts, 3 the value: a MARKET OPEN only); without it, contracts,
        or the value of a MARKET OPEN order in the quote currency."""
        extra = r.compact(
            {"timeInForce": time_in_force, "orderUnit": order_unit, "recvWindow": recv_window}
        )
        body = r.futures_order_body(
            contract, side, type, open, volume, price, position_type, client_order_id, extra
        )
        return await self._call(r.signed_post(FUTURES, "/order", body))

    async def futures_condition_order(
        self,
        contract: str,
        side: str,
        type: str,
        open: str,
        volume: Number,
        trigger_type: int,
        trigger_price: Number,
        price: Number | None = None,
        *,
        position_type: int | None = None,
        client_order_id: str | None = None,
        order_unit: int | None = None,
        recv_window: int | str | None = None,
    ) -> Any:
        """POST /futures/open/fapi/v1/conditionOrder (``volume`` and ``order_unit`` as for
        ``futures_create_order``)."""
        extra = r.compact(
            {
                "triggerType": trigger_type,
                "triggerPrice": trigger_price,
                "orderUnit": order_unit,
                "recvWindow": recv_window,
            }
        )
        body = r.futures_order_body(
            contract, side, type, open, volume, price, position_type, client_order_id, extra
        )
        return await self._call(r.signed_post(FUTURES, "/conditionOrder", body))

    async def futures_get_order(
        self, contract: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """GET /futures/open/fapi/v1/order."""
        params = r.futures_order_ref(contract, order_id, client_order_id)
        return await self._call(r.signed_get(FUTURES, "/order", params))

    async def futures_cancel_order(
        self, contract: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """POST /futures/open/fapi/v1/cancel."""
        body = r.futures_order_ref(contract, order_id, client_order_id)
        return await self._call(r.signed_post(FUTURES, "/cancel", body))

    async def futures_cancel_trigger_order(
        self, contract: str, order_id: OrderId | None = None, *, client_order_id: str | None = None
    ) -> Any:
        """POST /futures/open/fapi/v1/cancel_trigger_order: a waiting conditional order."""
        body = r.futures_order_ref(contract, order_id, client_order_id)
        return await self._call(r.signed_post(FUTURES, "/cancel_trigger_order", body))

    async def futures_trigger_order_list(
        self, contract: str | None = None, page: int | None = None, limit: Limit | None = None
    ) -> Any:
        """POST /futures/open/fapi/v1/trigger_order_list: ``data.trigOrderList``, ``count``."""
        body = r.compact({"contractName": contract, "page": page, "limit": limit})
        return await self._call(r.signed_post(FUTURES, "/trigger_order_list", body))

    async def futures_positions(self, contract: str | None = None) -> Any:
        """GET /futures/open/fapi/v1/positions: open positions (of one contract, or all)."""
        return await self._call(r.signed_get(FUTURES, "/positions", {"contractName": contract}))

    async def futures_edit_position_model(self, contract: str, model: int) -> Any:
        """POST /futures/open/fapi/v1/edit_user_position_model (2 two-way; 1, net, refused)."""
        body = {"contractName": contract, "positionModel": model}
        return await self._call(r.signed_post(FUTURES, "/edit_user_position_model", body))

    async def futures_cancel_all(self, contract: str | None = None) -> Any:
        """POST /futures/open/fapi/v1/cancel_all (extension)."""
        body = r.compact({"contractName": contract})
        return await self._call(r.signed_post(FUTURES, "/cancel_all", body))

    async def futures_open_orders(self, contract: str | None = None) -> Any:
        """GET /futures/open/fapi/v1/openOrders."""
        return await self._call(r.signed_get(FUTURES, "/openOrders", {"contractName": contract}))

    async def futures_order_history(
        self, contract: str | None = None, limit: Limit | None = None, from_id: int | None = None
    ) -> Any:
        """POST /futures/open/fapi/v1/orderHistorical."""
        return await self._call(r.futures_history("/orderHistorical", contract, limit, from_id))

    async def futures_profit_history(
        self, contract: str | None = None, limit: Limit | None = None, from_id: int | None = None
    ) -> Any:
        """POST /futures/open/fapi/v1/profitHistorical."""
        return await self._call(r.futures_history("/profitHistorical", contract, limit, from_id))

    async def futures_my_trades(
        self, contract: str | None = None, limit: Limit | None = None, from_id: int | None = None
    ) -> Any:
        """GET /futures/open/fapi/v1/myTrades (no contract: every contract's trades)."""
        params = {"contractName": contract, "limit": limit, "fromId": from_id}
        return await self._call(r.signed_get(FUTURES, "/myTrades", params))

    async def futures_account(self) -> Any:
        """GET /futures/open/fapi/v1/account."""
        return await self._call(r.signed_get(FUTURES, "/account"))

    async def futures_edit_lever(self, contract: str, level: int) -> Any:
        """POST /futures/open/fapi/v1/edit_lever (extension)."""
        body = {"contractName": contract, "nowLevel": level}
        return await self._call(r.signed_post(FUTURES, "/edit_lever", body))

    async def futures_edit_margin_model(self, contract: str, model: int) -> Any:
        """POST /futures/open/fapi/v1/edit_user_margin_model (extension; 1 cross, 2 isolated)."""
        body = {"contractName": contract, "positionModel": model}
        return await self._call(r.signed_post(FUTURES, "/edit_user_margin_model", body))

    async def futures_edit_position_margin(self, position_id: int, amount: Number) -> Any:
        """POST /futures/open/fapi/v1/edit_position_margin (extension; negative takes out)."""
        body = {"positionId": position_id, "amount": amount}
        return await self._call(r.signed_post(FUTURES, "/edit_position_margin", body))

    async def futures_transfer(self, asset: str, amount: Number, source: str, target: str) -> Any:
        """POST /futures/open/fapi/v1/tradehall/transfer (extension): spot <-> futures."""
        body = {"asset": asset, "amount": amount, "from": source, "to": target}
        return await self._call(r.signed_post(FUTURES, "/tradehall/transfer", body))

    # --- self-service accounts (extension, ``[sandbox] self_service``) ------------------------

    async def sandbox_info(self) -> Any:
        """GET /sandbox/v1/info: a new account's funds and limits."""
        return await self._call(r.Call("GET", SANDBOX + "/info"))

    async def sandbox_create_account(self) -> Any:
        """POST /sandbox/v1/accounts (public): a new account and its key; the secret is in
        this answer only."""
        return await self._call(r.Call("POST", SANDBOX + "/accounts", body={}))

    async def sandbox_faucet(self) -> Any:
        """POST /sandbox/v1/faucet: top this key's account up to its starting balances."""
        return await self._call(r.signed_post(SANDBOX, "/faucet", {}))

    async def sandbox_reset(self) -> Any:
        """POST /sandbox/v1/account/reset: this key's account back to its start."""
        return await self._call(r.signed_post(SANDBOX, "/account/reset", {}))
