"""A store refusal as every shell reports it: the HTTP status, and the contract's error body
(a 422 names the field, as a request validation failure does)."""

from __future__ import annotations

from typing import cast

from mainframe.clock import rfc3339
from mainframe.contract.schemas import AcceptedResult, ErrorBody, Outcome
from mainframe.store import (
    Conflict,
    Invalid,
    NotFound,
    ResultConflict,
    StoreError,
    Unauthorized,
    Unavailable,
)

STATUS_OF: dict[type[StoreError], int] = {
    NotFound: 404,
    Unauthorized: 401,
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
