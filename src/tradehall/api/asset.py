"""The family's transfers between the spot and the futures account, in its own shapes:
``POST /sapi/v1/asset/transfer`` and ``POST /sapi/v1/asset/transferQuery``. tradehall's own
``/fapi/v1/tradehall/transfer`` and the admin API move the same funds and are recorded alike."""

from __future__ import annotations

from typing import Any

from starlette.routing import Route

from tradehall import operations as ops
from tradehall.api import spot, wire
from tradehall.api.errors import ApiError
from tradehall.api.http import Call, endpoint
from tradehall.api.reading import Reading, reading
from tradehall.api.requests import AssetTransferRequest, TransferQueryRequest
from tradehall.codes import Code
from tradehall.engine.futures_model import AccountTransfer
from tradehall.units import format_units

PREFIX = spot.PREFIX + "/asset"
SPOT_ACCOUNT: wire.AccountName = "EXCHANGE"
FUTURES_ACCOUNT: wire.AccountName = "FUTURE"


def _direction(req: Reading, *, required: bool) -> bool | None:
    """True for EXCHANGE -> FUTURE, False for FUTURE -> EXCHANGE, None when neither account
    is named (and not ``required``)."""
    source: str | None = req.value("fromAccount")
    if source is None and required:
        raise req.missing("fromAccount")
    target: str | None = req.value("toAccount")
    if target is None and required:
        raise req.missing("toAccount")
    if source is None and target is None:
        return None
    if source == target or source is None or target is None:
        raise ApiError(
            Code.BAD_PARAM,
            "fromAccount and toAccount must be EXCHANGE (spot) and FUTURE (futures), one each",
        )
    return target == FUTURES_ACCOUNT


async def transfer(call: Call) -> Any:
    req = reading(call.params, AssetTransferRequest)
    coin: str | None = req.value("coinSymbol")
    amount: str | None = req.value("amount")
    assert coin is not None and amount is not None
    into_futures = _direction(req, required=True)
    assert into_futures is not None
    record = ops.move_funds(call.exchange, call.user, coin, amount, into_futures, call.now)
    await call.durable()
    return wire.TransferAnswer(data=wire.TransferId(str(record.id)))


async def transfer_query(call: Call) -> Any:
    req = reading(call.params, TransferQueryRequest)
    page: int = req.value("page")
    limit: int = req.value("limit")
    transfer_id: int | None = req.value("transferId")
    coin: str | None = req.value("coinSymbol")
    asset = coin.upper() if coin is not None and coin.isascii() else coin
    into_futures = _direction(req, required=transfer_id is None)
    start, end = spot.time_window(req, call.now)
    await call.durable()
    store = call.exchange.store
    if transfer_id is not None:
        found = await call.state.read(store.account_transfer, call.user, transfer_id)
        records = [found] if found is not None and _matches(found, asset, into_futures) else []
        records = records if page == 1 else []
    else:
        records = await call.state.read(
            store.account_transfers,
            call.user,
            asset,
            into_futures,
            start,
            end,
            (page - 1) * limit,
            limit,
        )
    return wire.TransferQueryAnswer(data=wire.TransferList([_record(call, r) for r in records]))


def _matches(record: AccountTransfer, asset: str | None, into_futures: bool | None) -> bool:
    return asset in (None, record.asset) and into_futures in (None, record.into_futures)


def _record(call: Call, record: AccountTransfer) -> wire.TransferRecord:
    decimals = call.exchange.config.markets.assets[record.asset].decimals
    source, target = (
        (SPOT_ACCOUNT, FUTURES_ACCOUNT) if record.into_futures else (FUTURES_ACCOUNT, SPOT_ACCOUNT)
    )
    return wire.TransferRecord(
        str(record.id),
        source,
        target,
        record.asset,
        record.time,
        format_units(record.amount, decimals),
        "SUCCESS",
    )


def routes() -> list[Route]:
    return [
        Route(
            PREFIX + path,
            endpoint(fn, name=f"POST {PREFIX}{path}", signed=True, trade=trade),
            methods=["POST"],
        )
        for path, fn, trade in (
            ("/transfer", transfer, True),
            ("/transferQuery", transfer_query, False),
        )
    ]
