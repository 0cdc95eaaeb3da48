"""The scan lifecycle's rules as pure functions over plain data: the statuses and reasons,
what a result does to a scan (`settle`, and a worker's report planned into its close before
any statement runs: `plan`), why a write against an assignment is stale (`diagnose_stale`,
and the rejection it records), and which state a live scan counts under (`queue_state`).
No database, no web framework, no clock.

A result for an assignment that already closed is a replay when it is the same request sent
again because its answer was lost: it gets the first answer. The same assignment with other
content is a conflict (409 `result_conflict`), never answered as if it had been accepted.
Content is compared by a digest of the result as it means (`result_digest`): the fields a
worker sends, with the defaults filled in and fields that do not apply left out, and the
free-form `result` as JSON with sorted keys."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.causes import Cause, cause_of


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


class PruneKind(StrEnum):
    """What pruning removes, each a bounded metric label value."""

    FINISHED = "finished"
    FAILED = "failed"  # plainly failed: FAILED, not dead-lettered
    DEAD_LETTERED = "dead_lettered"
    ATTEMPTS = "attempts"  # no retention of their own: they go with their scan
    AUDIT = "audit"
    DELIVERY_COUNTS = "delivery_counts"
    BOARD_SESSIONS = "board_sessions"


# A plain, non-retryable failure is recorded with this reason; it is not a dead letter.
PLAIN_FAILURE_REASON = "failed"


@dataclass(frozen=True, slots=True)
class Settlement:
    """Where a scan goes when its current attempt closes with a worker's outcome."""

    status: Status
    attempt_outcome: AttemptOutcome
    dead_letter_reason: DeadLetterReason | None
    fail_reason: str | None

    @property
    def counted_as(self) -> str | None:
        """The outcome total the close adds to (as `scans.tally` counts its events), or None
        for a scan that goes round again."""
        if self.status is Status.FINISHED:
            return "finished"
        if self.status is not Status.FAILED:
            return None
        return "dead_lettered" if self.dead_letter_reason is not None else "failed"


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


@dataclass(frozen=True, slots=True)
class StaleResultRejected:
    endpoint: str
    scan_id: int
    worker: str
    code: StaleCode
    attempt: int | None


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


@dataclass(frozen=True, slots=True)
class Report:
    """What a worker (or operator) says about the current attempt."""

    outcome: str
    retryable: bool
    attempt: int | None
    assignment_id: str | None
    summary: str | None
    artifact: str | None
    result: str | None
    retry_after: float | None = None

    def digest(self) -> str:
        """The digest of what the result says, to tell a replay from a conflict."""
        return result_digest(
            outcome=self.outcome,
            retryable=self.retryable,
            summary=self.summary,
            artifact=self.artifact,
            result=self.result,
            retry_after=self.retry_after,
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """A report decided before any statement runs: where the scan goes and what is written."""

    scan_id: int
    report: Report
    settlement: Settlement
    delay_us: int  # how long a retry waits before it is due
    digest: str  # of the report's content (lifecycle/reports.py), kept with the close
    cause: Cause | None  # why the attempt failed (lifecycle/causes.py); None when it finished

    @property
    def assignment(self) -> str | None:
        return self.report.assignment_id

    @property
    def terminal(self) -> bool:
        return self.settlement.status in TERMINAL

    def values(self) -> dict[str, Any]:
        """The close's parameters (also the fields of one item of COMPLETE's JSON input)."""
        return {
            "scan": self.scan_id,
            "attempt": self.report.attempt,
            "assignment": self.report.assignment_id,
            "status": self.settlement.status.value,
            "fail_reason": self.settlement.fail_reason,
            "terminal": self.terminal,
            "dead": self.settlement.dead_letter_reason is not None,
            # A scan that goes round again keeps no result; a terminal one keeps it.
            "result": self.report.result if self.terminal else None,
            "delay": self.delay_us,
            "outcome": self.settlement.attempt_outcome.value,
            "summary": self.report.summary,
            "artifact": self.report.artifact,
            "result_digest": self.digest,
            "cause": self.cause.key if self.cause else None,
            "pattern": self.cause.pattern if self.cause else None,
            "grouping_version": self.cause.grouping_version if self.cause else None,
            "ended": self.settlement.counted_as,
        }


def plan(
    scan_id: int, report: Report, *, max_attempts: int, retry: RetryPolicy, draw: float
) -> Plan:
    """Settle a report by the lifecycle's rules; `draw` is the retry backoff's jitter."""
    attempt = report.attempt if report.attempt is not None else 1
    settlement = settle(
        outcome=report.outcome,
        retryable=report.retryable,
        attempt=attempt,
        max_attempts=max_attempts,
    )
    # Only a scan that goes round again waits; a terminal one has no next attempt to delay.
    delay = (
        retry_delay_us(retry, attempt=attempt, draw=draw, requested=report.retry_after)
        if settlement.status not in TERMINAL
        else 0
    )
    failed = settlement.attempt_outcome is not AttemptOutcome.FINISHED
    cause = cause_of(settlement.attempt_outcome.value, report.summary) if failed else None
    return Plan(scan_id, report, settlement, delay, report.digest(), cause)


# Bumped if what the digest covers ever changes, so that old and new digests never compare
# equal by accident (a stored digest of another version is treated as unknown).
DIGEST_VERSION = "r1"


def result_digest(
    *,
    outcome: str,
    retryable: bool,
    summary: str | None,
    artifact: str | None,
    result: str | None,
    retry_after: float | None,
) -> str:
    """The digest of a result's content; `result` is its JSON text (None when absent)."""
    failed = outcome != "finished"
    normalised: list[Any] = [
        outcome,
        retryable if failed else None,  # a success is never retried, whatever it says
        summary,
        artifact,
        _canonical(result),
        # Only a retryable failure waits; a float prints the same for the same value.
        float(retry_after) if failed and retryable and retry_after is not None else None,
    ]
    body = orjson.dumps(normalised)
    # 128 bits say "the same content" as well as 256 do, in half the bytes of every attempt.
    return f"{DIGEST_VERSION}:{hashlib.blake2b(body, digest_size=16).hexdigest()}"


def _canonical(result: str | None) -> str | None:
    if result is None:
        return None
    return orjson.dumps(orjson.loads(result), option=orjson.OPT_SORT_KEYS).decode()


def is_replay(accepted: str | None, digest: str) -> bool:
    """Whether a result with `digest` repeats the one accepted with digest `accepted`.

    An attempt closed before digests were kept (None) cannot be compared: it is answered as
    a replay, as it was before, rather than refusing a worker's honest resend."""
    return accepted is None or accepted == digest
