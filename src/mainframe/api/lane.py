"""The hot routes' lane: a worker's poll, results, heartbeats, waits and resumes, and a
source's intake, served straight from ASGI, without FastAPI's router, handler and
exception layer, which cost more per request than the statement behind them.

The lane calls the very endpoint functions FastAPI has registered (they read their token,
parameters and body themselves with web.py), answers their refusals with
the same handlers, and names the same route template for the request metrics, so the
contract and the OpenAPI document are those of the routes in jobs.py and scans.py. Anything
the lane does not serve (another method, another path) goes on to FastAPI unchanged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi.routing import APIRoute, APIRouter
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mainframe.api.errors import refusal

Endpoint = Callable[[Request], Awaitable[Response]]

# The templates of the routes the lane serves, all POST.
HOT = (
    "/api/v1/jobs",
    "/api/v1/jobs/results",
    "/api/v1/jobs/{scan_id}/result",
    "/api/v1/jobs/{scan_id}/heartbeat",
    "/api/v1/jobs/{scan_id}/wait",
    "/api/v1/jobs/{scan_id}/resume",
    "/api/v1/scans",
    "/api/v1/scans/batch",
)


class HotLane:
    """Serves the hot routes' POSTs itself and hands everything else to FastAPI."""

    def __init__(self, app: ASGIApp, *, routes: list[APIRoute]) -> None:
        self.app = app
        self.exact = {route.path: route for route in routes if not route.param_convertors}
        self.templated = [route for route in routes if route.param_convertors]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._match(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        route, params = found
        scope["route"] = route  # the template the request metrics are filed under
        scope["path_params"] = params
        request = Request(scope, receive)
        endpoint: Endpoint = route.endpoint
        try:
            response = await endpoint(request)
        except Exception as exc:
            answer = await refusal(request, exc)
            if answer is None:
                raise
            response = answer
        await response(scope, receive, send)

    def _match(self, scope: Scope) -> tuple[APIRoute, dict[str, str]] | None:
        if scope["method"] != "POST":
            return None
        path = scope["path"]
        route = self.exact.get(path)
        if route is not None:
            return route, {}
        for candidate in self.templated:
            # The pattern Starlette compiled for the route's own template.
            match = candidate.path_regex.match(path)
            if match is not None:
                return candidate, match.groupdict()
        return None


def lane_routes(*routers: APIRouter) -> list[APIRoute]:
    """The routers' POST routes of the hot templates."""
    found = [
        route
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and route.path in HOT and "POST" in (route.methods or ())
    ]
    assert len(found) == len(HOT), "every hot route is registered"
    return found
