"""Error responses: ``{"code": <negative int>, "msg": "..."}`` with the contract's HTTP status."""

from __future__ import annotations

import msgspec
from starlette.responses import Response

from tradehall.codes import Code

_STATUS: dict[int, int] = {
    Code.APIKEY_MISSING: 401,
    Code.TS_MISSING: 401,
    Code.SIGN_MISSING: 401,
    Code.BAD_SIGNATURE: 401,
    Code.TIMESTAMP_WINDOW: 401,
    Code.TOO_MANY_REQUESTS: 429,
    Code.UNKNOWN: 500,
    Code.INTERNAL: 500,
    Code.SHUTTING_DOWN: 503,
}


class ApiError(Exception):
    def __init__(
        self,
        code: Code,
        msg: str,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.status = status if status is not None else _STATUS.get(code, 400)
        self.headers = headers


def error_response(
    code: int, msg: str, status: int, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        msgspec.json.encode({"code": int(code), "msg": msg}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
