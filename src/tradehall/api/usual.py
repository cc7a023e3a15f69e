"""Spot placements in their usual form, read at once (issue 26, docs/performance.md).

A placement (``POST /order``) is most of a busy venue's requests. When every parameter is in
the form a bot sends (symbol / side / type / timeInForce as text the handler takes, volume and
price as plain decimal text, a valid or absent newClientOrderId), it is read here in one pass
instead of through ``OrderRequest``'s rules: by ``api.spot.create_order`` in one process, and
by a gateway (``cluster.prepared``), which sends the engine what it read. Anything else (a JSON
number, a parameter the handler would refuse or has to think about, more decimal places than
the pair allows, an unknown symbol) is left to the handler, so every refusal keeps its code,
message and order of checks. Both readings make the same engine command (a property test
holds them equal, answers and state).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tradehall.api.params import CLIENT_ID, SYMBOL, plain_decimal
from tradehall.api.reading import usual_choice
from tradehall.engine.commands import PlaceOrder
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import BUY, GTC, LIMIT, TIME_IN_FORCE
from tradehall.units import POW10

_SIDES = frozenset(("BUY", "SELL"))
_TYPES = frozenset(("LIMIT", "MARKET"))
_TIME_IN_FORCE = frozenset(TIME_IN_FORCE)
_symbol = SYMBOL.fullmatch
_client_id = CLIENT_ID.fullmatch

MAX_DIGITS = 2**63 - 1
"""The largest digits read at once (what MessagePack carries to the engine; the handler reads
bigger ones, e.g. ``"1.00000000000000000000"``)."""

UsualPlace = tuple[str, str, str, int, int, int, int, str, str]
"""(symbol, side, type, volume digits, their places, price digits, their places,
timeInForce or "", newClientOrderId or ""): the fields of a ``cluster.protocol.Place``
after its envelope, in its order."""


def _digits(value: Any) -> tuple[int, int] | None:
    """Plain decimal text as ``Params.units`` reads it at once, as its digits and their
    places after the point, if the digits fit in ``MAX_DIGITS``."""
    plain = plain_decimal(value)
    return plain if plain is not None and plain[0] <= MAX_DIGITS else None


def read_usual_place(data: Mapping[str, Any]) -> UsualPlace | None:
    """The placement with parameters ``data``, or None when one of them is not in its usual
    form (the handler reads it then)."""
    symbol = data.get("symbol")
    if type(symbol) is not str or not _symbol(symbol):
        return None
    side = usual_choice(data.get("side"), _SIDES)
    order_type = usual_choice(data.get("type"), _TYPES)
    if side is None or order_type is None:
        return None
    tif = data.get("timeInForce")
    if tif is not None and (tif := usual_choice(tif, _TIME_IN_FORCE)) is None:
        return None
    client_id = data.get("newClientOrderId")
    if client_id is None:
        client_id = ""
    elif type(client_id) is not str or (client_id and not _client_id(client_id)):
        return None
    volume = _digits(data.get("volume"))
    if volume is None:
        return None
    price = price_places = 0
    if order_type == LIMIT:
        given = _digits(data.get("price"))
        if given is None:
            return None
        price, price_places = given
    return (
        symbol.upper(),
        side,
        order_type,
        volume[0],
        volume[1],
        price,
        price_places,
        tif or "",
        client_id,
    )


def usual_order(
    pairs: Mapping[str, PairSpec],
    symbol: str,
    side: str,
    order_type: str,
    volume: int,
    places: int,
    price: int,
    price_places: int,
    time_in_force: str,
    client_id: str,
    now: int,
    account: int,
) -> tuple[PairSpec, PlaceOrder] | None:
    """The engine command of a placement read at once (what ``api.spot.place_command``
    builds; ``price`` is 0 for a MARKET, which reads none), or None when the handler must
    answer it (an unknown symbol, more decimal places than the pair allows)."""
    pair = pairs.get(symbol)
    if pair is None:
        return None
    qty = quote_qty = 0
    if order_type == LIMIT:
        decimals = pair.quantity_precision
        if places > decimals or price_places > pair.price_precision:
            return None
        price *= POW10[pair.price_precision - price_places]
        qty = volume * POW10[decimals - places]
    elif side == BUY:
        if places > pair.price_precision:
            return None
        quote_qty = volume * POW10[pair.quote_decimals - places]
    else:
        decimals = pair.quantity_precision
        if places > decimals:
            return None
        qty = volume * POW10[decimals - places]
    command = PlaceOrder(
        now,
        account,
        pair.symbol,
        side,
        order_type,
        price,
        qty,
        quote_qty,
        time_in_force or GTC,
        client_id,
    )
    return pair, command
