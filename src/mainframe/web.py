"""What the HTTP shells (api/, board/, dragonfly/) share about a request, below them so none
imports another: the runtime that serves it, the bearer token as the store checks it
(FastAPI's `HTTPBearer` reads the header and names the scheme in the OpenAPI document), and
a reply rendered from its contract model."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.responses import Response

from mainframe.store import Presented, digest
from mainframe.wiring import Runtime


async def runtime(request: Request) -> Runtime:
    """The FastAPI dependency every shell's routes take the runtime from."""
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a hop
    # that cost more than the rest of a request.
    found: Runtime = request.app.state.runtime
    return found


RuntimeDep = Annotated[Runtime, Depends(runtime)]
bearer_scheme = HTTPBearer(auto_error=False, description="An owner, worker or source token.")
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


class Reply(Response):
    """A reply rendered from its contract model, for a route that answers with a status or
    headers of its own (an error, a 201 or a 200); a route's `response_model` renders the
    rest the same way."""

    media_type = "application/json"

    def render(self, content: BaseModel) -> bytes:
        return content.__pydantic_serializer__.to_json(content)


def presented(credentials: HTTPAuthorizationCredentials) -> Presented:
    """A bearer token as its digest: the store checks it in the statement that uses it."""
    return Presented(digest(credentials.credentials))
