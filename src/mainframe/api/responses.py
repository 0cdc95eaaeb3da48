"""Fast JSON responses (orjson) and the one error body shape: {"error": CODE, "detail": ...}."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error(status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> JSON:
    return JSON({"error": code, "detail": detail}, status_code=status, headers=headers)
