"""Every refusal becomes a 4xx with a body that says what is wrong; nothing becomes a 500
without being logged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from mainframe.api.responses import error
from mainframe.logs import get_logger
from mainframe.store import StoreError
from mainframe.web import Reply, refused

UNPARSABLE = "There was an error parsing the body"


async def _store_error(_request: Request, exc: Exception) -> Reply:
    assert isinstance(exc, StoreError)
    return refused(exc)


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


async def _validation_error(request: Request, exc: Exception) -> Reply:
    assert isinstance(exc, RequestValidationError)
    literal = _documented(request, request.scope["path"])
    if literal and request.method not in literal:
        # GET /api/v1/scans/batch reached GET /scans/{scan_id} and failed on "batch"; the path
        # the client named is in the document and does not take this method.
        return error(405, "method_not_allowed", "Method Not Allowed", {"Allow": ", ".join(literal)})
    problems = list(exc.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        return error(400, "invalid_json", "the request body is not valid JSON")
    detail = [
        {"field": _field(p.get("loc", ())), "message": p.get("msg", "invalid")} for p in problems
    ]
    return error(422, "invalid_request", detail)


async def _http_error(request: Request, exc: Exception) -> Reply:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400 and exc.detail == UNPARSABLE:
        # FastAPI's answer to a body its JSON parser gave up on (nesting past its depth).
        return error(
            400, "invalid_json", "the request body is not valid JSON, or is nested too deeply"
        )
    code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}.get(
        exc.status_code, "http_error"
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed(request) or headers["Allow"]
    return error(exc.status_code, code, exc.detail, headers or None)


def _allowed(request: Request) -> str | None:
    """Every method the OpenAPI document gives the path of the route the router matched.
    The router's own 405 names that route's methods only, and a path served by two routes
    (GET and POST /api/v1/scans) allows the methods of both; a route outside the document
    keeps its own."""
    methods = _documented(request, getattr(request.scope.get("route"), "path", None))
    return ", ".join(methods) if methods else None


def _documented(request: Request, template: str | None) -> list[str]:
    """The methods the OpenAPI document has for `template`, a key of its paths."""
    return sorted(method.upper() for method in request.app.openapi()["paths"].get(template, {}))


async def _unexpected(request: Request, exc: Exception) -> Reply:
    get_logger().error("unhandled_error", path=request.url.path, exc_info=exc)
    return error(500, "internal_error", "unexpected server error; it has been logged")


# The refusals a route may raise, each with its answer; anything else is the last 500 of
# `api/edge.py`.
REFUSALS: list[tuple[type[Exception], Callable[[Request, Exception], Awaitable[Reply]]]] = [
    (StoreError, _store_error),
    (RequestValidationError, _validation_error),
    (HTTPException, _http_error),
]


async def answer(request: Request, exc: Exception) -> Reply:
    """The answer to a refusal a hot route raised, by the handler the app's exception layer
    has for it under /api (`install`); an exception no handler claims goes on."""
    for kind, handler in REFUSALS:
        if isinstance(exc, kind):
            return await handler(request, exc)
    raise exc


def install(app: FastAPI) -> None:
    for kind, handler in REFUSALS:
        app.add_exception_handler(kind, handler)
    app.add_exception_handler(Exception, _unexpected)
