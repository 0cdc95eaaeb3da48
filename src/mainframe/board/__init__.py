"""The operator's board at /board: server-rendered pages over the store, every asset shipped
in this package, no script. `install` adds it to the server's application."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from mainframe.board import actions, pages
from mainframe.board.auth import CsrfRefused, SignInNeeded
from mainframe.board.render import page

STATIC = Path(__file__).parent / "static"


async def _sign_in(_request: Request, _exc: Exception) -> Response:
    return RedirectResponse("/board/sign-in", status_code=303)


async def _csrf(request: Request, _exc: Exception) -> Response:
    message = "This form is missing its security token, or it is stale. Reload and try again."
    return page(request, "error.html", {"session": None, "message": message}, status=403)


def install(app: FastAPI) -> None:
    app.mount("/board/static", StaticFiles(directory=STATIC), name="board-static")
    app.include_router(pages.router)
    app.include_router(actions.router)
    app.add_exception_handler(SignInNeeded, _sign_in)
    app.add_exception_handler(CsrfRefused, _csrf)
