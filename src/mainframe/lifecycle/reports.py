"""A close decided before any statement runs: what a worker (or operator) reports about the
current attempt, the plan it becomes by the lifecycle's rules (where the scan goes, the
values the close writes, the cause of a failure), what a closed scan tells the worker, the
domain events a close produces, and the answer given again to a replayed result. Pure: the
store runs the plan (store/work/results.py for a worker, store/work/interventions.py for an
operator).

A result for an assignment that already closed is a replay when it is the same request sent
again because its answer was lost: it gets the first answer. The same assignment with other
content is a conflict (409 `result_conflict`), never answered as if it had been accepted.
Content is compared by a digest of the result as it means (`result_digest`): the fields a
worker sends, with the defaults filled in and fields that do not apply left out, and the
free-form `result` as JSON with sorted keys."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.causes import Cause, cause_of
from mainframe.lifecycle.events import (
    AttemptFailed,
    Event,
    FinalAttempt,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanReady,
)
from mainframe.lifecycle.rules import (
    TERMINAL,
    AttemptOutcome,
    DeadLetterReason,
    Settlement,
    Status,
    settle,
)
from mainframe.lifecycle.scans import ScanRecord

DEAD_LETTER_REASONS = frozenset(reason.value for reason in DeadLetterReason)


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
class Closed:
    """What a worker learns about the scan whose attempt it closed."""

    scan_id: int
    status: Status
    attempt: int
    available_at: int | None
    finished_at: int | None
    dead_lettered_at: int | None
    fail_reason: str | None


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
    delay = retry_delay_us(retry, attempt=attempt, draw=draw, requested=report.retry_after)
    failed = settlement.attempt_outcome is not AttemptOutcome.FINISHED
    cause = cause_of(settlement.attempt_outcome.value, report.summary) if failed else None
    return Plan(scan_id, report, settlement, delay, report.digest(), cause)


def closed_of(scan: ScanRecord) -> Closed:
    """What the worker is told about a scan its result just closed."""
    return Closed(
        scan.id,
        scan.status,
        scan.attempt_count,
        scan.available_at,
        scan.finished_at,
        scan.dead_lettered_at,
        scan.fail_reason,
    )


def replayed(
    *, scan_id: int, attempt: int, closed_at: int, status: str, available_at: int | None,
    fail_reason: str | None,
) -> Closed:  # fmt: skip
    """The answer a result got when it closed its attempt, rebuilt from the attempt's row."""
    settled = Status(status)
    terminal = settled in TERMINAL
    dead = fail_reason in DEAD_LETTER_REASONS
    return Closed(
        scan_id,
        settled,
        attempt,
        available_at,
        closed_at if terminal else None,
        closed_at if dead else None,
        fail_reason,
    )


def settlement_events(scan: ScanRecord, p: Plan) -> list[Event]:
    """The domain events of a scan that `p` closed (`scan` as the close left it)."""
    ref, settlement = scan.ref(), p.settlement
    if settlement.status is Status.FINISHED:
        return [ScanFinished(ref, scan.attempt_count, scan.worker)]
    if settlement.status is Status.QUEUED:
        assert scan.available_at is not None
        return [
            AttemptFailed(ref, scan.attempt_count, settlement.attempt_outcome.value, scan.worker),
            ScanReady(ref, scan.attempt_count, scan.available_at),
        ]
    if settlement.dead_letter_reason is None:
        return [ScanFailed(ref, scan.attempt_count, scan.worker)]
    assert scan.finished_at is not None
    final = FinalAttempt(
        scan.attempt_base + scan.attempt_count,
        settlement.attempt_outcome.value,
        p.report.summary,
        p.report.artifact,
        scan.finished_at,
    )
    return [
        ScanDeadLettered(
            ref,
            settlement.dead_letter_reason,
            scan.attempt_count,
            scan.worker,
            scan.leased_at,
            scan.finished_at,
            final,
        )
    ]


def history_row(
    scan: ScanRecord, p: Plan, nexts: str | None, digest: str | None = None
) -> dict[str, object]:
    """The attempt's history row from the scan as its close left it, with the answer its
    result was given and the digest of its content (for a replay); `digest` replaces the
    report's own (an operator's close)."""
    return {
        "scan": scan.id,
        "seq": scan.attempt_base + scan.attempt_count,
        "attempt": scan.attempt_count,
        "assignment": scan.assignment_id,
        "worker": scan.worker,
        "leased_at": scan.leased_at,
        "outcome": p.settlement.attempt_outcome.value,
        "summary": p.report.summary,
        "artifact": p.report.artifact,
        "settled_status": scan.status.value,
        "settled_available_at": scan.available_at,
        "settled_fail_reason": scan.fail_reason,
        "next_assignments": nexts,
        "result_digest": digest or p.digest,
        "cause": p.cause.key if p.cause else None,
    }


# Bumped if what the digest covers ever changes, so that old and new digests never compare
# equal by accident (a stored digest of another version is treated as unknown).
DIGEST_VERSION = "r1"
# The digest an operator's close stores: a worker's result never equals it, so a worker
# that reports on an attempt an operator failed gets a conflict, not the operator's answer.
OPERATOR_CLOSE = "operator"


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
