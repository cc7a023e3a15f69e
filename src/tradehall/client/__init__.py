"""HTTP clients for tradehall's open API (spot, margin) and its local admin API."""

from tradehall.client.admin import AdminClient
from tradehall.client.aio import AsyncClient
from tradehall.client.errors import ApiError
from tradehall.client.signing import (
    GATEWAY_PREFIXES,
    request_path_for_signing,
    sign,
    signature_payload,
    verify,
)
from tradehall.client.sync import Client

__all__ = [
    "GATEWAY_PREFIXES",
    "AdminClient",
    "ApiError",
    "AsyncClient",
    "Client",
    "request_path_for_signing",
    "sign",
    "signature_payload",
    "verify",
]
