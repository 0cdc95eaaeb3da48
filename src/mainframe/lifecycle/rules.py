"""The scan lifecycle as pure functions: what a result does, why a result is stale,
why a scan is dead-lettered. No database, no web framework, no clock."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    QUARANTINED = "QUARANTINED"
    QUEUED = "QUEUED"
    PENDING = "PENDING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"


TERMINAL = frozenset({Status.FINISHED, Status.FAILED})
LIVE = (Status.QUARANTINED, Status.QUEUED, Status.PENDING)


class DeadLetterReason(StrEnum):
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    LEASE_EXPIRED = "lease_expired"
    INTERRUPT_EXPIRED = "interrupt_expired"
    ENDPOINT_REVOKED = "endpoint_revoked"


class AttemptOutcome(StrEnum):
    FINISHED = "finished"
    FAILED = "failed"
    LEASE_EXPIRED = "lease_expired"
    INTERRUPT_EXPIRED = "interrupt_expired"
    ENDPOINT_REVOKED = "endpoint_revoked"


class StaleCode(StrEnum):
    ALREADY_TERMINAL = "already_terminal"
    NOT_LEASE_HOLDER = "not_lease_holder"
    STALE_ASSIGNMENT = "stale_assignment"
    # The assignment's attempt was closed by a result with other content (lifecycle/reports.py).
    RESULT_CONFLICT = "result_conflict"


# A plain, non-retryable failure is recorded with this reason; it is not a dead letter.
PLAIN_FAILURE_REASON = "failed"


@dataclass(frozen=True, slots=True)
class Settlement:
    """Where a scan goes when its current attempt closes with a worker's outcome."""

    status: Status
    attempt_outcome: AttemptOutcome
    dead_letter_reason: DeadLetterReason | None
    fail_reason: str | None


def settle(*, outcome: str, retryable: bool, attempt: int, max_attempts: int) -> Settlement:
    """Decide the next status for a result on `attempt` under a budget of `max_attempts`."""
    if outcome == "finished":
        return Settlement(Status.FINISHED, AttemptOutcome.FINISHED, None, None)
    if not retryable:
        return Settlement(Status.FAILED, AttemptOutcome.FAILED, None, PLAIN_FAILURE_REASON)
    if attempt >= max_attempts:
        reason = DeadLetterReason.ATTEMPTS_EXHAUSTED
        return Settlement(Status.FAILED, AttemptOutcome.FAILED, reason, reason.value)
    return Settlement(Status.QUEUED, AttemptOutcome.FAILED, None, None)


def lapse_outcome(*, waiting: bool) -> AttemptOutcome:
    """How an attempt whose lease (or wait) lapsed is closed."""
    return AttemptOutcome.INTERRUPT_EXPIRED if waiting else AttemptOutcome.LEASE_EXPIRED


def lapse_dead_letter_reason(*, waiting: bool) -> DeadLetterReason:
    """Why a lapsed scan at the cap is dead-lettered."""
    return DeadLetterReason.INTERRUPT_EXPIRED if waiting else DeadLetterReason.LEASE_EXPIRED


class EchoError(ValueError):
    """A result echoed one assignment field without the other; `missing` names the other."""

    def __init__(self, missing: str) -> None:
        super().__init__("attempt and assignment_id must be sent together, or both omitted")
        self.missing = missing


def require_echo_pair(attempt: int | None, assignment_id: str | None) -> bool:
    """True when both fields are echoed, False when neither is; one alone is an error."""
    if (attempt is None) != (assignment_id is None):
        raise EchoError("assignment_id" if assignment_id is None else "attempt")
    return attempt is not None


@dataclass(frozen=True, slots=True)
class Holding:
    """The parts of a scan row that decide whether a result belongs to its current attempt."""

    status: Status
    attempt_count: int
    assignment_id: str | None
    worker: str | None


def diagnose_stale(
    holding: Holding, *, worker: str, attempt: int | None, assignment_id: str | None
) -> StaleCode | None:
    """Why a result (or heartbeat, wait, resume) does not belong to the current attempt.

    The first match wins: terminal, then holder, then the echoed assignment. `attempt=None`
    with `assignment_id=None` is the rollout form, valid only for attempt 1.
    """
    if holding.status in TERMINAL:
        return StaleCode.ALREADY_TERMINAL
    if holding.status is not Status.PENDING:
        return StaleCode.STALE_ASSIGNMENT
    if holding.worker != worker:
        return StaleCode.NOT_LEASE_HOLDER
    if attempt is None and assignment_id is None:
        return None if holding.attempt_count == 1 else StaleCode.STALE_ASSIGNMENT
    if attempt != holding.attempt_count or assignment_id != holding.assignment_id:
        return StaleCode.STALE_ASSIGNMENT
    return None


STALE_DETAIL = {
    StaleCode.ALREADY_TERMINAL: "the scan is already FINISHED or FAILED; nothing was changed",
    StaleCode.NOT_LEASE_HOLDER: "another worker holds the current assignment of this scan",
    StaleCode.STALE_ASSIGNMENT: (
        "attempt or assignment_id do not match the scan's current assignment "
        "(it was reassigned, reaped, or is not leased)"
    ),
    StaleCode.RESULT_CONFLICT: (
        "a different result already closed this assignment; nothing was changed"
    ),
}


class QueueState(StrEnum):
    QUEUED = "queued"
    PAUSED = "paused"
    SCHEDULED = "scheduled"
    PENDING = "pending"
    RETRYABLE = "retryable"
    EXHAUSTED = "exhausted"
    QUARANTINED = "quarantined"


def queue_state(
    *,
    status: Status,
    queue_paused: bool,
    lease_expires_at: int | None,
    available_at: int | None,
    attempt_count: int,
    now: int,
    max_attempts: int,
) -> QueueState | None:
    """The `packages_queue{state}` a live scan counts under; None for a terminal scan.

    A QUEUED scan is `paused` while its queue is paused, due or not, and while it is still parked
    (no `available_at`: a resume gives due times back chunk by chunk, and one cut short leaves the
    rest parked until the queue is resumed again); no poll leases it. The store counts the same
    states in SQL (`store/operator/fleet_snapshot.py`); a test holds the two equal."""
    if status is Status.QUEUED:
        if queue_paused or available_at is None:
            return QueueState.PAUSED
        return QueueState.QUEUED if available_at <= now else QueueState.SCHEDULED
    if status is Status.QUARANTINED:
        return QueueState.QUARANTINED
    if status is not Status.PENDING:
        return None
    if lease_expires_at is not None and lease_expires_at >= now:
        return QueueState.PENDING
    return QueueState.EXHAUSTED if attempt_count >= max_attempts else QueueState.RETRYABLE
