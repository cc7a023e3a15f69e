"""Request signing for the open API (shared by the client and the server).

Signed message = ``X-CH-TS`` + upper-case method + requestPath + body, where requestPath is the
URL path without its gateway prefix, followed by ``?`` and the raw query string when there is one.
The signature is the lower-case hex HMAC-SHA256 of that message keyed with the API secret.

Pure functions, stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = [
    "GATEWAY_PREFIXES",
    "request_path_for_signing",
    "sign",
    "signature_payload",
    "verify",
]

GATEWAY_PREFIXES: tuple[str, ...] = ("/spot/open", "/futures/open")

_HEX_DIGEST_LEN = 64


def request_path_for_signing(url_path: str, raw_query: str) -> str:
    """Return the requestPath to sign: gateway prefix stripped, raw query appended verbatim."""
    path = url_path
    for prefix in GATEWAY_PREFIXES:
        # Strip on a segment boundary only: "/spot/openx" is not the gateway.
        if path == prefix or path.startswith(prefix + "/"):
            path = path[len(prefix) :]
            break
    if raw_query:
        return f"{path}?{raw_query}"
    return path


def signature_payload(ts: str, method: str, request_path: str, body: bytes | str) -> bytes:
    """Return the bytes to sign: ts + METHOD + requestPath + body (body empty for GET)."""
    body_bytes = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    head = f"{ts}{method.upper()}{request_path}".encode()
    return head + body_bytes


def sign(secret: str, payload: bytes) -> str:
    """Return the lower-case hex HMAC-SHA256 of ``payload`` keyed with ``secret``."""
    return hmac.new(secret.encode("utf-8"), payload, hashlib.sha256).hexdigest()


def verify(secret: str, payload: bytes, signature: str) -> bool:
    """Check ``signature`` case-insensitively in constant time; never raises."""
    try:
        if not isinstance(signature, str):
            return False
        try:
            given = signature.encode("ascii")
        except UnicodeEncodeError:
            return False
        if len(given) != _HEX_DIGEST_LEN:
            return False
        expected = sign(secret, payload).encode("ascii")
        return hmac.compare_digest(expected, given.lower())
    except Exception:
        return False
