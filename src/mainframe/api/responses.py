"""The one error body shape, {"error": CODE, "detail": ...}, sent as the shells' JSON reply
(`web.py::JSON`, orjson)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import Send

from mainframe.web import JSON

__all__ = ["JSON", "error", "send_error"]


def error(
    status: int,
    code: str,
    detail: Any,
    headers: dict[str, str] | None = None,
    fields: dict[str, Any] | None = None,
) -> JSON:
    """The error body; `fields` adds what a particular refusal says beside its detail."""
    body = {"error": code, "detail": detail} | (fields or {})
    return JSON(body, status_code=status, headers=headers)


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
