"""Spot placements a gateway reads for the engine (issue 26, docs/performance.md).

A placement (``POST /order``) is most of a busy venue's writes, and reading its parameters
through the endpoint's handler (``api.spot.create_order``) cost the engine process about a
third of its time per placement. A gateway worker reads them instead: when every parameter
is in its usual form (``api.usual``, the reading the handler itself starts with), it sends a
``Place`` with the parameters as read, and the engine only scales the numbers to the pair's
units, checks the key, applies and answers. Anything else (a JSON number, a parameter the
handler would refuse or has to think about) goes as a ``Forwarded`` request, as before, so
every refusal keeps its code, message and order of checks: the engine, too, sends a
``Place`` it cannot place at once (an unknown symbol, more decimal places than the pair
allows, a key it refuses) through the handler, as a ``Forwarded`` rebuilt from it
(``as_forwarded``).

The engine answers a placement it placed with the order's figures (``Placed``), not its JSON:
the gateway renders it (``render_placed``), byte for byte what the handler would answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tradehall.api.http import encoded
from tradehall.api.usual import read_usual_place, usual_order
from tradehall.api.wire import OrderCreated, orig_units
from tradehall.cluster.protocol import Forwarded, Place, Placed
from tradehall.engine.commands import PlaceOrder
from tradehall.engine.markets import PairSpec
from tradehall.engine.orders import OrderState
from tradehall.units import format_units


def prepare_place(
    data: Mapping[str, Any], command_id: str, path: str, api_key: str, ip: str, request_id: str
) -> Place | None:
    """The placement with parameters ``data`` as a ``Place`` (read by
    ``api.usual.read_usual_place``), or None when one of them is not in its usual form (the
    handler reads it then)."""
    usual = read_usual_place(data)
    if usual is None:
        return None
    return Place(command_id, path, api_key, ip, request_id, *usual)


def place_order(
    pairs: Mapping[str, PairSpec], place: Place, now: int, account: int
) -> tuple[PairSpec, PlaceOrder] | None:
    """The engine command of ``place`` (``api.usual.usual_order``), or None when the handler
    must answer it (an unknown symbol, more decimal places than allowed)."""
    return usual_order(
        pairs,
        place.symbol,
        place.side,
        place.order_type,
        place.volume,
        place.volume_places,
        place.price,
        place.price_places,
        place.time_in_force,
        place.client_id,
        now,
        account,
    )


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
