"""Every refusal becomes a 4xx with a body that says what is wrong; nothing becomes a 500
without being logged."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import RouteContext, iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import Match

from mainframe.api.responses import JSON, error
from mainframe.logs import get_logger
from mainframe.shapes.refusals import refusal_fields, store_error_body
from mainframe.store import StoreError, Unavailable
from mainframe.web import BadJson, BodyInvalid

UNPARSABLE = "There was an error parsing the body"


async def _store_error(_request: Request, exc: Exception) -> JSON:
    assert isinstance(exc, StoreError)
    status, code, detail = store_error_body(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, Unavailable):
        headers = {"Retry-After": str(exc.retry_after)}
    return error(status, code, detail, headers, refusal_fields(exc))


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


async def _validation_error(request: Request, exc: Exception) -> JSON:
    assert isinstance(exc, RequestValidationError)
    allowed = _allowed(request)
    if allowed and request.method not in allowed:
        # GET /api/v1/scans/batch reached /scans/{scan_id} and failed on "batch"; the path
        # the client named exists and does not take this method.
        return error(405, "method_not_allowed", "Method Not Allowed", {"Allow": ", ".join(allowed)})
    problems = list(exc.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        return error(400, "invalid_json", "the request body is not valid JSON")
    detail = [
        {"field": _field(p.get("loc", ())), "message": p.get("msg", "invalid")} for p in problems
    ]
    return error(422, "invalid_request", detail)


async def _http_error(request: Request, exc: Exception) -> JSON:
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
    allowed = _allowed(request) if exc.status_code == 405 else []
    if allowed:  # else a route kept out of the document: the Allow its router named
        headers["Allow"] = ", ".join(allowed)
    return error(exc.status_code, code, exc.detail, headers or None)


def _allowed(request: Request) -> list[str]:
    """The methods of every route serving the request's path, as the router matches it."""
    # Starlette's 405 names only the first route whose path matched; a path served by several
    # routes (GET and POST /api/v1/scans) allows the methods of all of them.
    # `iter_route_contexts` flattens FastAPI's included routers into each route with its
    # prefix, as the OpenAPI document is made from them. The scope is the path and method
    # alone: a Mount the request went through has rewritten the request's own root_path.
    scope = {"type": "http", "path": request.scope["path"], "method": request.method}
    serving = [route for route in iter_route_contexts(request.app.routes) if _serves(route, scope)]
    # A literal path (/api/v1/scans/batch) is not its templated neighbour's (/scans/{scan_id}).
    literal = [route for route in serving if not route.param_convertors]
    return sorted({method for route in literal or serving for method in route.methods or ()})


def _serves(route: RouteContext, scope: dict[str, Any]) -> bool:
    # PARTIAL: the path matched and the method did not. A route without methods (a Mount)
    # answers for itself and names no Allow of its own here.
    match, _ = route.matches(scope)
    return bool(route.methods) and match is not Match.NONE


async def _unexpected(request: Request, exc: Exception) -> JSON:
    get_logger().error("unhandled_error", path=request.url.path, exc_info=exc)
    return error(500, "internal_error", "unexpected server error; it has been logged")


async def _bad_json(_request: Request, _exc: Exception) -> JSON:
    return error(400, "invalid_json", "the request body is not valid JSON")


async def _body_invalid(_request: Request, exc: Exception) -> JSON:
    assert isinstance(exc, BodyInvalid)
    return error(422, "invalid_request", exc.detail)


_REFUSALS = (
    (BadJson, _bad_json),
    (BodyInvalid, _body_invalid),
    (StoreError, _store_error),
)


async def refusal(request: Request, exc: Exception) -> JSON | None:
    """The answer to a refusal a route raised (a store error, a body that is not JSON or is
    invalid), or None for an exception no handler claims."""
    for kind, handler in _REFUSALS:
        if isinstance(exc, kind):
            return await handler(request, exc)
    return None


def install(app: FastAPI) -> None:
    for kind, handler in _REFUSALS:
        app.add_exception_handler(kind, handler)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
