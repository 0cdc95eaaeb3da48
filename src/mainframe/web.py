"""What the HTTP shells (api/, dragonfly/) share about a request and its reply: the bearer
token a request presents, and the response class every JSON reply is sent with. It sits below
the shells, so neither imports the other to get them."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import HTTPConnection
from starlette.responses import Response

from mainframe.store import Presented
from mainframe.store.authentication import digest

_BEARER = "bearer "


class JSON(Response):
    """A reply rendered by orjson, which writes stored JSON text (`orjson.Fragment`) as is."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def bearer(request: HTTPConnection) -> Presented | None:
    """The token of an `Authorization: Bearer` header as its digest (the store checks it), or
    None when the request sends no such header."""
    header = request.headers.get("authorization", "")
    if header[: len(_BEARER)].lower() != _BEARER:
        return None
    return Presented(digest(header[len(_BEARER) :].strip()))
