"""Client-side error type."""

from __future__ import annotations

__all__ = ["ApiError"]


class ApiError(Exception):
    """An error response: HTTP status plus the ``{"code", "msg"}`` body (-1000 if absent)."""

    status: int
    code: int
    msg: str

    def __init__(self, status: int, code: int, msg: str) -> None:
        super().__init__(status, code, msg)
        self.status = status
        self.code = code
        self.msg = msg

    def __str__(self) -> str:
        return f"HTTP {self.status}, code {self.code}: {self.msg}"
