"""Spot placements a gateway reads for the engine (issue 26, docs/performance.md).

A placement (``POST /order``) is most of a busy venue's writes, and reading its parameters
through the endpoint's handler (``api.spot.create_order``) cost the engine process about a
third of its time per placement. A gateway worker reads them instead: when every parameter
is in its usual form (text the handler would take as it is), it sends a ``Place`` with the
parameters as read, and the engine only scales the numbers to the pair's units, checks the
key, applies and answers. Anything else (a JSON number, a parameter the handler would refuse
or has to think about) goes as a ``Forwarded`` request, as before, so every refusal keeps its
code, message and order of checks: the engine, too, sends a ``Place`` it cannot place at
once (an unknown symbol, more decimal places than the pair allows, a key it refuses) through
the handler, as a ``Forwarded`` rebuilt from it (``as_forwarded``).

The engine answers a placement it placed with the order's figures (``Placed``), not its JSON:
the gateway renders it (``render_placed``), byte for byte what the handler would answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tradehall.api.http import encoded
from tradehall.api.params import CLIENT_ID, SYMBOL, plain_decimal
from tradehall.api.reading import usual_choice
from tradehall.api.wire import OrderCreated, orig_units
from tradehall.cluster.protocol import Forwarded, Place, Placed
from tradehall.engine.commands import PlaceOrder
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import BUY, GTC, LIMIT, TIME_IN_FORCE, OrderState
from tradehall.units import POW10, format_units

_SIDES = frozenset(("BUY", "SELL"))
_TYPES = frozenset(("LIMIT", "MARKET"))
_TIME_IN_FORCE = frozenset(TIME_IN_FORCE)
_symbol = SYMBOL.fullmatch
_client_id = CLIENT_ID.fullmatch


_MAX_DIGITS = 2**63 - 1
"""The largest digits a ``Place`` carries (MessagePack's integers end at 64 bits): beyond it
(``"1.00000000000000000000"``, say), the handler reads the number."""


def _digits(value: Any) -> tuple[int, int] | None:
    """Plain decimal text as ``Params.units`` reads it at once, as its digits and their
    places after the point, if the digits fit in a ``Place``."""
    plain = plain_decimal(value)
    return plain if plain is not None and plain[0] <= _MAX_DIGITS else None


def prepare_place(
    data: Mapping[str, Any], command_id: str, path: str, api_key: str, ip: str, request_id: str
) -> Place | None:
    """The placement with parameters ``data`` as a ``Place``, or None when one of them is
    not in its usual form (the handler reads it then)."""
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
    price = (0, 0)
    if order_type == LIMIT:
        given = _digits(data.get("price"))
        if given is None:
            return None
        price = given
    return Place(
        command_id,
        path,
        api_key,
        ip,
        request_id,
        symbol.upper(),
        side,
        order_type,
        *volume,
        *price,
        tif or "",
        client_id,
    )


def place_order(
    pairs: Mapping[str, PairSpec], place: Place, now: int, account: int
) -> tuple[PairSpec, PlaceOrder] | None:
    """The engine command of ``place`` (what ``api.spot.place_command`` builds), or None
    when the handler must answer it (an unknown symbol, more decimal places than allowed)."""
    pair = pairs.get(place.symbol)
    if pair is None:
        return None
    price = qty = quote_qty = 0
    volume, places = place.volume, place.volume_places
    if place.order_type == LIMIT:
        price_places = place.price_places
        decimals = pair.quantity_precision
        if places > decimals or price_places > pair.price_precision:
            return None
        price = place.price * POW10[pair.price_precision - price_places]
        qty = volume * POW10[decimals - places]
    elif place.side == BUY:
        decimals = pair.price_precision
        if places > decimals:
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
        place.side,
        place.order_type,
        price,
        qty,
        quote_qty,
        place.time_in_force or GTC,
        place.client_id,
    )
    return pair, command


def as_forwarded(place: Place) -> Forwarded:
    """``place`` as the request it was read from (its numbers' text without leading zeros:
    the handler reads them to the same values, and refuses them alike)."""
    params = {
        "symbol": place.symbol,
        "side": place.side,
        "type": place.order_type,
        "volume": format_units(place.volume, place.volume_places),
    }
    if place.price:
        params["price"] = format_units(place.price, place.price_places)
    if place.time_in_force:
        params["timeInForce"] = place.time_in_force
    if place.client_id:
        params["newClientOrderId"] = place.client_id
    return Forwarded(
        place.id, "POST", place.path, params, place.api_key, place.ip, place.request_id
    )


def placed(pair: PairSpec, order: OrderState) -> tuple[int, int, str, int, int, int, int, int, int]:
    """The engine's answer to a ``Place`` it placed as ``order``: what
    ``api.wire.order_created`` shows of it, in units (a ``Placed`` as MessagePack writes it,
    without making one)."""
    orig, orig_decimals = orig_units(pair, order)
    price_decimals = pair.price_precision
    quantity_decimals = pair.quantity_precision
    return (
        order.id,
        order.time,
        order.status,
        order.price,
        price_decimals,
        orig,
        orig_decimals,
        order.filled,
        quantity_decimals,
    )


def render_placed(place: Place, answer: Placed) -> bytes:
    """The JSON answer to the placement ``place``, placed as ``answer`` says."""
    order_id = str(answer.order_id)
    return encoded(
        OrderCreated(
            place.symbol,
            order_id,
            order_id,
            place.client_id,
            str(answer.time),
            format_units(answer.price, answer.price_decimals),
            format_units(answer.orig, answer.orig_decimals),
            format_units(answer.executed, answer.quantity_decimals),
            answer.status,  # type: ignore[arg-type]  # the engine's order status
            place.order_type,  # type: ignore[arg-type]  # LIMIT or MARKET, as read
            place.side,  # type: ignore[arg-type]  # BUY or SELL, as read
        )
    )
