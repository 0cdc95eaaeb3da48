"""Bound request bodies before anything reads them: oversized requests get 413."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mainframe.api.responses import send_error

# A body declared over the bound is read and discarded up to this size before the 413, so a
# client that sends it without `Expect: 100-continue` reads the answer instead of a reset.
DRAIN_BYTES = 64 * 1024 * 1024


class BodyLimit:
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
