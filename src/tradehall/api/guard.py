"""What every HTTP answer carries (the security headers) and which ``Host`` headers the server
answers (``[server] allowed_hosts``), applied by the app in front of every route."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import Message, Scope, Send

ANY_HOST = "*"

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    # Signed and admin answers are one user's data; public ones are live market data, stale
    # at once: no answer of the API is worth a cached copy. The pages set their own.
    (b"cache-control", b"no-store"),
)


def secured(send: Send) -> Send:
    """``send``, adding to the answer's start whichever security header it does not set."""

    async def send_secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}
            headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
            message = {**message, "headers": headers}
        await send(message)

    return send_secured


class HostRule:
    """The ``Host`` names served: exact names, ``*.example.com`` for any subdomain of
    example.com, or ``*`` for any (the default); loopback names always. The port is not part
    of the rule. Matching
    is Starlette's ``TrustedHostMiddleware``'s, run inside the app so that the API's fixed
    paths keep their direct dispatch and a refusal is the catalogue's JSON error."""

    def __init__(self, allowed: Sequence[str] = (ANY_HOST,)) -> None:
        self.any = ANY_HOST in allowed
        self.exact = frozenset(h.lower() for h in allowed if not h.startswith("*"))
        self.suffixes = tuple(h[1:].lower() for h in allowed if h.startswith("*."))

    def allows(self, scope: Scope) -> bool:
        """Every ``Host`` header the request sent (one, normally) names a host served."""
        if self.any:
            return True
        hosts = hosts_of(scope) or [""]
        return all(self._allows(host) for host in hosts)

    def _allows(self, host: str) -> bool:
        return (
            host in self.exact
            or (bool(host) and host.endswith(self.suffixes))
            or is_loopback_name(host)
        )


def is_loopback_name(host: str) -> bool:
    """``localhost`` or a loopback address (``127.0.0.1``, ``[::1]``): always answered, so the
    operator's commands reach their server; no DNS-rebinding page can be served under them."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def hosts_of(scope: Scope) -> list[str]:
    """The request's ``Host`` headers without their ports, lower-case."""
    return [_name(value) for name, value in scope.get("headers", ()) if name == b"host"]


def host_of(scope: Scope) -> str:
    """The first ``Host`` header without its port, lower-case ("" when absent)."""
    hosts = hosts_of(scope)
    return hosts[0] if hosts else ""


def _name(raw: bytes) -> str:
    text = raw.decode("latin-1").strip().lower()
    if text.startswith("["):  # [::1]:8080
        return text[: text.find("]") + 1] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text
