"""What a store operation can refuse, in the lifecycle's words; the API maps them to HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.clock import rfc3339
from mainframe.lifecycle.rules import STALE_DETAIL, StaleCode


class StoreError(Exception):
    code = "error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(StoreError):
    code = "not_found"


class Unauthorized(StoreError):
    code = "unauthorized"


class Conflict(StoreError):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class Stale(Conflict):
    def __init__(self, code: StaleCode) -> None:
        super().__init__(code.value, STALE_DETAIL[code])
        self.stale_code = code


@dataclass(frozen=True, slots=True)
class Accepted:
    """The result that closed an assignment: its attempt's outcome, where it sent the scan,
    and when it was accepted."""

    outcome: str
    status: str
    fail_reason: str | None
    accepted_at: int


class ResultConflict(Stale):
    """The same assignment with other content than the accepted result (409)."""

    def __init__(self, accepted: Accepted) -> None:
        super().__init__(StaleCode.RESULT_CONFLICT)
        self.accepted = accepted
        settled = accepted.status + (f", {accepted.fail_reason}" if accepted.fail_reason else "")
        self.detail = (
            f"a different result closed this assignment: outcome {accepted.outcome}"
            f" (scan {settled}), accepted at {rfc3339(accepted.accepted_at)};"
            " nothing was changed"
        )


class Invalid(StoreError):
    code = "invalid_request"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field


class Unavailable(StoreError):
    """The database cannot serve the call now (locked, or unreachable); try again shortly."""

    def __init__(self, code: str, detail: str, *, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.code = code
        self.retry_after = retry_after


class ReadOnly(Unavailable):
    """The database host takes no writes (a standby, or a primary being failed over)."""

    def __init__(self) -> None:
        super().__init__(
            "database_unavailable",
            "the database host is read-only (a standby, or a failover in progress); try again",
            retry_after=2,
        )
