"""The one error a request can end in: an HTTP status, a stable code, a one-line message.

The service layer raises it; the HTTP layer (``servers.http``) renders every one as
``{"error": {"code", "message"}}`` plus its extra fields. It holds no aiohttp object, so the
service layer does not depend on the HTTP layer.
"""

from __future__ import annotations

from typing import Any


class HttpError(Exception):
    """An error answer: HTTP status, stable code, one-line message, optional extra fields."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": {"code": self.code, "message": self.message}}
        out.update(self.extra)
        return out
