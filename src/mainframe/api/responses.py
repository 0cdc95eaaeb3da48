"""The one error body shape, {"error": CODE, "detail": ...}: as a reply of a route or an
exception handler (`ErrorBody`), and straight onto ASGI for the middleware that answers
before the app."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import Send

from mainframe.contract.schemas import ErrorBody
from mainframe.web import Reply

__all__ = ["REFUSALS", "REFUSED", "Reply", "error", "send_error"]

# What a route may refuse with, each in the one error body.
REFUSED = (400, 401, 404, 409, 413, 422, 503)
# The same as FastAPI's `responses=` of a route.
REFUSALS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in REFUSED}


def error(status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> Reply:
    """The error body as a reply."""
    return Reply(ErrorBody(error=code, detail=detail), status_code=status, headers=headers)


async def send_error(
    send: Send, status: int, code: str, detail: Any, *, close: bool = False
) -> None:
    """The error body straight onto an ASGI `send`, for middleware that answers before (or
    instead of) the app."""
    body = orjson.dumps({"error": code, "detail": detail})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
