"""A store refusal as every shell reports it: the HTTP status, and the contract's error body
(a 422 names the field, as a request validation failure does)."""

from __future__ import annotations

from typing import Any

from mainframe.clock import rfc3339
from mainframe.store import Conflict, Invalid, NotFound, StoreError, Unauthorized, Unavailable
from mainframe.store.errors import ResultConflict

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


def store_error_body(exc: StoreError) -> tuple[int, str, Any]:
    """The status, error code and detail of an ErrorBody for `exc`."""
    if isinstance(exc, Invalid):
        return 422, exc.code, [{"field": exc.field, "message": exc.detail}]
    return status_of(exc), exc.code, exc.detail


def refusal_fields(exc: StoreError) -> dict[str, Any]:
    """Fields a refusal's body carries beside `error` and `detail`: for a result conflict,
    the accepted result (AcceptedResult), so a worker can tell what was recorded."""
    if not isinstance(exc, ResultConflict):
        return {}
    accepted = exc.accepted
    return {
        "accepted": {
            "outcome": accepted.outcome,
            "status": accepted.status,
            "fail_reason": accepted.fail_reason,
            "accepted_at": rfc3339(accepted.accepted_at),
        }
    }
