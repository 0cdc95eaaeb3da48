"""The last line of defence: an exception no handler claimed becomes one JSON 500 and one log
line with the traceback inside it, and goes no further.

Starlette's outermost middleware re-raises every exception after answering, so uvicorn logs
it a second time (a plain-text traceback over many lines) and drops the keep-alive
connection. Caught here, inside that middleware, the request ends normally."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mainframe.api.responses import send_error
from mainframe.logs import get_logger

UNEXPECTED = "unexpected server error; it has been logged"


class Contain:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = ended = False

        async def tracking(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            get_logger().error(
                "unhandled_error", path=scope.get("path"), method=scope["method"], exc_info=exc
            )
            if started:  # part of a response went out; all that is left is to end it
                if not ended:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send_error(send, 500, "internal_error", UNEXPECTED)
