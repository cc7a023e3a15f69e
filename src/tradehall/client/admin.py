"""Synchronous client for the server's local admin API (``/admin/v1``, bearer token)."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx2

from tradehall.client import _requests as r
from tradehall.client._requests import Number

__all__ = ["AdminClient"]

ADMIN = "/admin/v1"


class AdminClient:
    """Admin client; every request carries ``Authorization: Bearer <token>``.

    Pass ``http`` to reuse an existing ``httpx2.Client``; it is then not closed by ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx2.Client | None = None,
        timeout: float = 10.0,
        agent: str | None = None,
    ) -> None:
        self.base_url = base_url
        self._token = token
        self._agent = agent
        """Sent as ``X-Tradehall-Agent``: what the admin audit trail records this caller as."""
        self._owns_http = http is None
        self._http = http if http is not None else httpx2.Client(timeout=timeout)

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx2.Response:
        """Send one request (``path`` is the full URL path) and return the raw response."""
        _, url = r.join_url(self.base_url, path, params)
        content = b"" if body is None else r.json_bytes(body)
        built = {"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"}
        if self._agent:
            built["X-Tradehall-Agent"] = self._agent
        return self._http.request(
            method.upper(), url, content=content, headers=r.merge_headers(built, headers)
        )

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return r.decode_response(self.request("GET", ADMIN + path, params=params))

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        return r.decode_response(self.request("POST", ADMIN + path, body=r.compact(body)))

    def create_user(self, name: str | None = None) -> Any:
        """POST /admin/v1/users."""
        return self._post("/users", {"name": name})

    def list_users(self) -> Any:
        """GET /admin/v1/users."""
        return self._get("/users")

    def create_key(
        self, user_id: int, *, read_only: bool = False, ips: list[str] | None = None
    ) -> Any:
        """POST /admin/v1/keys."""
        return self._post("/keys", {"userId": user_id, "readOnly": read_only, "ips": ips})

    def list_keys(self) -> Any:
        """GET /admin/v1/keys (no secrets)."""
        return self._get("/keys")

    def revoke_key(self, api_key: str) -> Any:
        """POST /admin/v1/keys/revoke."""
        return self._post("/keys/revoke", {"apiKey": api_key})

    def deposit(self, user_id: int, asset: str, amount: Number, tx_id: str | None = None) -> Any:
        """POST /admin/v1/deposit."""
        body = {"userId": user_id, "asset": asset, "amount": amount, "txId": tx_id}
        return self._post("/deposit", body)

    def withdraw(self, user_id: int, asset: str, amount: Number, tx_id: str | None = None) -> Any:
        """POST /admin/v1/withdraw."""
        body = {"userId": user_id, "asset": asset, "amount": amount, "txId": tx_id}
        return self._post("/withdraw", body)

    def fund(
        self,
        account: str,
        asset: str,
        amount: Number,
        tx_id: str | None = None,
        *,
        withdraw: bool = False,
    ) -> Any:
        """Deposit into (or withdraw from) the lending ``pool`` or the ``insurance`` fund."""
        path = "/system/withdraw" if withdraw else "/system/deposit"
        body = {"account": account, "asset": asset, "amount": amount, "txId": tx_id}
        return self._post(path, body)

    def system(self) -> Any:
        """GET /admin/v1/system: balances of the fee account, lending pool and insurance fund."""
        return self._get("/system")

    def margin_transfer(
        self, user_id: int, symbol: str, asset: str, amount: Number, source: str, target: str
    ) -> Any:
        """POST /admin/v1/margin/transfer: between a user's spot and margin accounts."""
        body = {"userId": user_id, "symbol": symbol, "asset": asset, "amount": amount}
        return self._post("/margin/transfer", {**body, "from": source, "to": target})

    def margin_account(self, user_id: int, symbol: str) -> Any:
        """GET /admin/v1/margin/account."""
        return self._get("/margin/account", {"userId": user_id, "symbol": symbol})

    def futures_transfer(
        self, user_id: int, asset: str, amount: Number, source: str, target: str
    ) -> Any:
        """POST /admin/v1/futures/transfer: between a user's spot and futures accounts
        (``source``/``target``: ``spot`` and ``futures``)."""
        body = {"userId": user_id, "asset": asset, "amount": amount}
        return self._post("/futures/transfer", {**body, "from": source, "to": target})

    def set_index_price(self, contract: str, price: Number, feed: str | None = None) -> Any:
        """POST /admin/v1/futures/index-price: the operator's index price of a contract (the
        index at once), or with ``feed`` one price of that named feed."""
        body: dict[str, Any] = {"contract": contract, "price": price}
        if feed is not None:
            body["feed"] = feed
        return self._post("/futures/index-price", body)

    def index_sources(self, contract: str) -> Any:
        """GET /admin/v1/futures/index: index, mark, price band and each index source."""
        return self._get("/futures/index", {"contract": contract})

    def balances(self, user_id: int) -> Any:
        """GET /admin/v1/balances?userId=."""
        return self._get("/balances", {"userId": user_id})

    def markets(self) -> Any:
        """GET /admin/v1/markets: assets, spot pairs and futures contracts."""
        return self._get("/markets")

    def audit(self) -> Any:
        """GET /admin/v1/audit."""
        return self._get("/audit")

    def storage(self) -> Any:
        """GET /admin/v1/storage: rows and bytes per table, the store's space, the retention."""
        return self._get("/storage")

    def admin_log(self, limit: int = 100, before: int | None = None) -> Any:
        """GET /admin/v1/admin-log: the admin audit trail, newest first."""
        return self._get("/admin-log", r.compact({"limit": limit, "before": before}))

    def gateways(self) -> Any:
        """GET /admin/v1/gateways: the gateway workers the engine heard from lately."""
        return self._get("/gateways")

    def status(self) -> Any:
        """GET /admin/v1/status."""
        return self._get("/status")

    def activity(self) -> Any:
        """GET /admin/v1/activity: open orders per market, request and error totals and
        rates, the latest errors."""
        return self._get("/activity")

    def sim_status(self) -> Any:
        """The market simulation: markets, participants, injected faults."""
        return self._get("/sim")

    def sim_start(self) -> Any:
        return self._post("/sim/start", {})

    def sim_stop(self) -> Any:
        return self._post("/sim/stop", {})

    def funding_now(self, contract: str | None = None) -> Any:
        """Settle funding now on ``contract`` (every contract when None)."""
        return self._post(
            "/futures/funding-now", {} if contract is None else {"contract": contract}
        )

    def interest_now(self, hours: int = 1) -> Any:
        """Charge ``hours`` hours of margin interest on every debt now."""
        return self._post("/margin/interest-now", {"hours": hours})

    def reset_account(self, user_id: int) -> Any:
        """Cancel the user's orders, close its positions at the mark, restore its starting
        balances."""
        return self._post("/accounts/reset", {"userId": user_id})
