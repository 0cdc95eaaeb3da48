"""The edge of every request, its outermost layers, before any route: its duration by route
template (never the raw path, which holds ids), a NUL in its path or query refused before any
parser, the last line of defence for an exception no handler claimed (`RequestEdge`), and its
body bounded before anything reads it (`BodyLimit`, 413).

An exception no handler claimed becomes one JSON 500 and one log line with the traceback
inside it, and goes no further: Starlette's own outermost middleware re-raises it after
answering, so uvicorn would log it a second time (a plain-text traceback over many lines) and
drop the keep-alive connection. One layer does both, as both follow the response's start and
end."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mainframe.api.responses import send_error
from mainframe.logs import get_logger, neutralize
from mainframe.metrics import Metrics

UNEXPECTED = "unexpected server error; it has been logged"
NUL = "must not contain a NUL character"
BOARD = "/board"
# A body declared over the bound is read and discarded up to this size before the 413, so a
# client that sends it without `Expect: 100-continue` reads the answer instead of a reset.
DRAIN_BYTES = 64 * 1024 * 1024


def nul_field(scope: Scope) -> str | None:
    """Where a request's path or query string holds a NUL, if it does. Every route but the
    board's refuses it here, before any parser: PostgreSQL cannot store or compare text with
    a NUL in it, and SQLite would store it. The board checks its own input and answers every
    refusal with its own page."""
    if scope["path"].startswith(BOARD):
        return None
    if "\x00" in scope["path"]:
        return "path"
    query: bytes = scope.get("query_string", b"")
    if b"%00" not in query and b"\x00" not in query:
        return None
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if "\x00" in value and "\x00" not in name:
            return f"query.{name}"
    return "query"


METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestEdge:
    """Times each request, refuses a NUL, answers an unclaimed exception with one 500, and
    logs each request when asked."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, access_log: bool = False) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log  # one `request` log line per request (MAINFRAME_ACCESS_LOG)
        # Histogram children by (template, method, status): labels() costs a lookup of its
        # own on every call, and the label sets are bounded by the routes.
        self._children: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None
        ended = False

        async def recording_send(message: Message) -> None:
            nonlocal status, ended
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            refused = nul_field(scope)
            if refused is not None:
                status = 422
                detail = [{"field": refused, "message": NUL}]
                await send_error(send, 422, "invalid_request", detail)
                return
            await self.app(scope, receive, recording_send)
        except Exception as exc:
            get_logger().error(
                "unhandled_error", path=scope.get("path"), method=scope["method"], exc_info=exc
            )
            if status is None:
                await send_error(send, 500, "internal_error", UNEXPECTED)
            elif not ended:  # part of a response went out; all that is left is to end it
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            seconds = time.perf_counter() - started
            self._child(scope, status or 500).observe(seconds)
            if self.access_log:
                self._log(scope, status or 500, seconds)

    def _log(self, scope: Scope, status: int, seconds: float) -> None:
        client = scope.get("client")
        get_logger().info(
            "request",
            method=neutralize(scope["method"], limit=16),
            path=neutralize(scope["path"]),
            status=status,
            seconds=round(seconds, 6),
            client=client[0] if client else None,
        )

    def _child(self, scope: Scope, status: int) -> Any:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        # Any token is a method to HTTP; labels stay bounded.
        method = scope["method"] if scope["method"] in METHODS else "OTHER"
        key = (template, method, status)
        child = self._children.get(key)
        if child is None:
            child = self.metrics.http_duration.labels(template, method, str(status))
            self._children[key] = child
        return child


class BodyLimit:
    """Answers 413 to a request whose body is over the bound, declared or sent."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.max_bytes:
                if declared.isdigit() and int(declared) <= DRAIN_BYTES:
                    await _drain(receive)
                await self._refuse(send)
                return
            # The server stops reading at Content-Length, so the declared size is the bound.
            await self.app(scope, receive, send)
            return
        buffered = await self._read_bounded(receive)
        if buffered is None:
            await self._refuse(send)
            return
        await self.app(scope, _replay(buffered, receive), send)

    async def _read_bounded(self, receive: Receive) -> list[Message] | None:
        # A chunked body has no declared size: read it whole, up to the bound, then replay it.
        messages: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return messages

    async def _refuse(self, send: Send) -> None:
        detail = f"request bodies are limited to {self.max_bytes} bytes"
        await send_error(send, 413, "body_too_large", detail, close=True)


async def _drain(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
