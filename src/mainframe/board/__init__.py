"""The operator's board at /board: server-rendered pages over the store, every asset shipped
in this package, no script. `install` adds it to the server's application; every refusal
under /board is the board's own HTML page, never the API's JSON."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from mainframe.board import actions, credentials, pages
from mainframe.board.auth import BOARD_PATH, SESSION_COOKIE, CsrfRefused, SignInNeeded
from mainframe.board.render import page
from mainframe.store import StoreError, Unavailable
from mainframe.web import status_of

STATIC = Path(__file__).parent / "static"
Handler = Callable[[Request, Exception], Awaitable[Response]]
Fallback = Callable[[Request, Any], Response | Awaitable[Response]]


async def _sign_in(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInNeeded)
    query = "" if exc.next_path == BOARD_PATH else "?" + urlencode({"next": exc.next_path})
    return RedirectResponse("/board/sign-in" + query, status_code=303)


async def _csrf(request: Request, _exc: Exception) -> Response:
    message = "This form is missing its security token, or it is stale. Reload and try again."
    return await _error_page(request, 403, message)


def _on_board(path: str) -> bool:
    return path == BOARD_PATH or path.startswith(BOARD_PATH + "/")


def _explain(exc: Exception) -> tuple[int, str, dict[str, str]]:
    """The status, the operator's sentence and the headers of a refusal under /board."""
    if isinstance(exc, RequestValidationError):
        fields = ", ".join(".".join(str(p) for p in e.get("loc", ())[1:]) for e in exc.errors())
        return 422, f"This address or form has a part the board cannot use ({fields}).", {}
    if isinstance(exc, HTTPException):
        messages = {404: "There is no such page on the board.",
                    405: "This page does not take that kind of request."}  # fmt: skip
        status = exc.status_code
        phrases = {s.value: s.phrase for s in HTTPStatus}
        return status, messages.get(status, phrases.get(status, "")), dict(exc.headers or {})
    if isinstance(exc, Unavailable):
        text = "The database is busy; try again in a moment."
        return 503, text, {"Retry-After": str(exc.retry_after)}
    if isinstance(exc, StoreError):
        return status_of(exc), f"Not possible: {exc.detail}.", {}
    # RequestEdge, the outermost layer, logs it with its traceback once.
    return 500, "Something went wrong on the server; it has been logged.", {}


async def _error_page(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    session = None
    secret = request.cookies.get(SESSION_COOKIE)
    runtime = getattr(request.app.state, "runtime", None)
    if secret and runtime is not None and status != 503:
        try:
            session = await runtime.store.sessions.find(secret)
        except StoreError:
            session = None  # the page still renders, without the signed-in header
    context = {"session": session, "message": message}
    response = page(request, "error.html", context, status=status)
    response.headers.update(headers or {})
    return response


def _html_under_board(fallback: Fallback | None) -> Handler:
    """A handler that answers under /board with the board's page, elsewhere as before."""

    async def handler(request: Request, exc: Exception) -> Response:
        if _on_board(request.url.path):
            status, message, headers = _explain(exc)
            return await _error_page(request, status, message, headers)
        if fallback is None:
            raise exc
        answer = fallback(request, exc)
        return await answer if inspect.isawaitable(answer) else answer

    return handler


def install(app: FastAPI) -> None:
    """Mount the board's routes and assets, after the API's error handlers are installed."""
    app.mount("/board/static", StaticFiles(directory=STATIC), name="board-static")
    app.include_router(pages.router)
    app.include_router(credentials.router)
    app.include_router(actions.router)
    app.add_exception_handler(SignInNeeded, _sign_in)
    app.add_exception_handler(CsrfRefused, _csrf)
    for kind in (HTTPException, RequestValidationError, StoreError, Exception):
        app.add_exception_handler(kind, _html_under_board(app.exception_handlers.get(kind)))
