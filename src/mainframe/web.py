"""What the HTTP shells (api/, board/, dragonfly/) share about a request, below them so none
imports another: the runtime that serves it, the bearer token as the store checks it
(FastAPI's `HTTPBearer` reads the header and names the scheme in the OpenAPI document), a
reply rendered from its contract model, and a store refusal as every shell answers it: its
status, its headers and the contract's error body (a 422 names the field, as a request
validation failure does)."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.responses import Response

from mainframe.clock import rfc3339
from mainframe.contract.schemas import AcceptedResult, ErrorBody, Outcome
from mainframe.store import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Presented,
    ResultConflict,
    StoreError,
    Unauthorized,
    Unavailable,
    digest,
)
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


STATUS_OF: dict[type[StoreError], int] = {
    NotFound: 404,
    Unauthorized: 401,
    Forbidden: 403,
    Conflict: 409,
    Invalid: 422,
    Unavailable: 503,
}


def status_of(exc: StoreError) -> int:
    for kind, status in STATUS_OF.items():
        if isinstance(exc, kind):
            return status
    return 400


def refusal(exc: StoreError) -> tuple[int, ErrorBody]:
    """The status and the error body of `exc`; a result conflict names the accepted result,
    so a worker can tell what was recorded."""
    if isinstance(exc, Invalid):
        return 422, ErrorBody(error=exc.code, detail=[{"field": exc.field, "message": exc.detail}])
    accepted = None
    if isinstance(exc, ResultConflict):
        found = exc.accepted
        accepted = AcceptedResult(
            outcome=cast(Outcome, found.outcome),
            status=found.status,
            fail_reason=found.fail_reason,
            accepted_at=rfc3339(found.accepted_at),
        )
    return status_of(exc), ErrorBody(error=exc.code, detail=exc.detail, accepted=accepted)


def refused(exc: StoreError) -> Reply:
    """The reply to a store refusal: its status and error body, a 401's challenge and a
    503's `Retry-After`."""
    status, body = refusal(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, Unavailable):
        headers = {"Retry-After": str(exc.retry_after)}
    return Reply(body, status_code=status, headers=headers)
