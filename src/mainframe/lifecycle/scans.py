"""A scan as plain data and what its committed transitions produce: the scan and its
attempts as the store last wrote them, the job a worker holds, the domain events (for
metrics, logs and hooks), and what a close writes and answers (its history row, what the
worker is told, the answer given again to a replayed result, and the outcome totals its
events change). Records are read from a statement's columns by name (`SCAN_COLUMNS`), so a
column added to a statement, or listed in another order, shifts no reader. Pure: the store
runs what these build (store/work/results.py for a worker, store/work/interventions.py for
an operator)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from mainframe.lifecycle.rules import (
    TERMINAL,
    DeadLetterReason,
    Plan,
    PruneKind,
    StaleResultRejected,
    Status,
)


# Domain events: what a committed transition changed.
@dataclass(frozen=True, slots=True)
class ScanRef:
    """The identifiers every announcement about a scan carries."""

    scan_id: int
    endpoint_id: int
    endpoint: str
    queue: str
    name: str
    version: str
    kind: str
    verified: bool
    source: str | None
    created_at: int


@dataclass(frozen=True, slots=True)
class ScanReady:
    """A scan became claimable (now, or at `available_at` when a retry waits out its backoff)."""

    scan: ScanRef
    attempt_count: int
    available_at: int


@dataclass(frozen=True, slots=True)
class LeasesGranted:
    endpoint: str
    count: int
    reassigned: int


@dataclass(frozen=True, slots=True)
class ScanFinished:
    scan: ScanRef
    attempt: int
    worker: str | None = None  # who finished it (the workers' activity counts)


@dataclass(frozen=True, slots=True)
class AttemptFailed:
    """A closed attempt that sent the scan back to QUEUED (not a failed scan)."""

    scan: ScanRef
    attempt: int
    outcome: str
    worker: str | None = None  # whose attempt it was


@dataclass(frozen=True, slots=True)
class ScanFailed:
    """A plain, non-retryable failure: FAILED but not a dead letter."""

    scan: ScanRef
    attempt: int
    worker: str | None = None  # whose attempt it was (None: an operator failed it unleased)


@dataclass(frozen=True, slots=True)
class FinalAttempt:
    seq: int
    outcome: str
    summary: str | None
    artifact: str | None
    at: int


@dataclass(frozen=True, slots=True)
class ScanDeadLettered:
    scan: ScanRef
    reason: DeadLetterReason
    attempt_count: int
    prior_worker: str | None
    leased_at: int | None
    dead_lettered_at: int
    final_attempt: FinalAttempt | None


@dataclass(frozen=True, slots=True)
class EndpointRevoked:
    endpoint_id: int
    endpoint: str
    dead_lettered: int


@dataclass(frozen=True, slots=True)
class QueuePaused:
    """An operator stopped the leasing of one queue of an endpoint."""

    endpoint: str
    queue: str
    by: str


@dataclass(frozen=True, slots=True)
class QueueResumed:
    endpoint: str
    queue: str
    by: str


@dataclass(frozen=True, slots=True)
class ScanRedriven:
    """An operator put a dead letter back in the queue with a fresh attempt budget."""

    scan: ScanRef


@dataclass(frozen=True, slots=True)
class ScansRedriven:
    """One redrive request finished: how many scans it requeued, under which audit row."""

    owner_id: int
    audit_id: int
    redriven: int
    skipped: int
    by: str  # "ids" | "filter"


@dataclass(frozen=True, slots=True)
class RowsPruned:
    """One pruning batch: `count` rows of `kind` past their retention removed, and with scans
    the `attempts` that went with them (lifecycle/retention.py)."""

    kind: PruneKind
    count: int
    attempts: int = 0


Event = (
    ScanReady
    | LeasesGranted
    | ScanFinished
    | AttemptFailed
    | ScanFailed
    | ScanDeadLettered
    | StaleResultRejected
    | EndpointRevoked
    | ScanRedriven
    | ScansRedriven
    | QueuePaused
    | QueueResumed
    | RowsPruned
)


# A scan and its attempts as plain data.
@dataclass(frozen=True, slots=True)
class AttemptRecord:
    seq: int
    attempt: int
    worker: str | None
    leased_at: int | None
    closed_at: int | None
    outcome: str | None
    summary: str | None
    artifact: str | None


@dataclass(frozen=True, slots=True)
class ScanRecord:
    id: int
    endpoint_id: int
    endpoint: str
    queue: str
    name: str
    version: str
    kind: str
    payload: str | None
    status: Status
    verified: bool
    source: str | None
    worker: str | None
    attempt_count: int
    assignment_id: str | None
    leased_at: int | None
    lease_expires_at: int | None
    wait_reason: str | None
    created_at: int
    updated_at: int
    finished_at: int | None
    dead_lettered_at: int | None
    fail_reason: str | None
    result: str | None
    attempt_base: int
    available_at: int | None
    redriven_at: int | None = None
    redrive_count: int = 0
    attempts: tuple[AttemptRecord, ...] = ()

    def ref(self) -> ScanRef:
        return ScanRef(
            self.id,
            self.endpoint_id,
            self.endpoint,
            self.queue,
            self.name,
            self.version,
            self.kind,
            self.verified,
            self.source,
            self.created_at,
        )


@dataclass(frozen=True, slots=True)
class Job:
    """One assignment handed to a worker by a job poll."""

    scan_id: int
    name: str
    version: str
    kind: str
    queue: str
    payload: str | None
    attempt: int
    assignment_id: str
    lease_expires_at: int


def job_of(scan: ScanRecord) -> Job:
    """The job a leased scan is for its worker."""
    assert scan.assignment_id is not None and scan.lease_expires_at is not None
    return Job(
        scan.id,
        scan.name,
        scan.version,
        scan.kind,
        scan.queue,
        scan.payload,
        scan.attempt_count,
        scan.assignment_id,
        scan.lease_expires_at,
    )


class Columns(Protocol):
    """A row of a statement's result, read by column name (the store's `Row`)."""

    def __getitem__(self, column: str, /) -> Any: ...


# Every column of `scans`: what a statement that reads a whole scan returns, by these names.
SCAN_COLUMNS = (
    "id",
    "endpoint_id",
    "queue",
    "name",
    "version",
    "kind",
    "payload",
    "status",
    "verified",
    "source",
    "worker",
    "attempt_count",
    "assignment_id",
    "leased_at",
    "lease_expires_at",
    "wait_reason",
    "created_at",
    "updated_at",
    "finished_at",
    "dead_lettered_at",
    "fail_reason",
    "result",
    "attempt_base",
    "available_at",
    "redriven_at",
    "redrive_count",
)


def scan_from_row(row: Columns, endpoint: str) -> ScanRecord:
    """A ScanRecord from a row that holds every column of SCAN_COLUMNS, by name."""
    return ScanRecord(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        endpoint=endpoint,
        queue=row["queue"],
        name=row["name"],
        version=row["version"],
        kind=row["kind"],
        payload=row["payload"],
        status=Status(row["status"]),
        verified=bool(row["verified"]),
        source=row["source"],
        worker=row["worker"],
        attempt_count=row["attempt_count"],
        assignment_id=row["assignment_id"],
        leased_at=row["leased_at"],
        lease_expires_at=row["lease_expires_at"],
        wait_reason=row["wait_reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        dead_lettered_at=row["dead_lettered_at"],
        fail_reason=row["fail_reason"],
        result=row["result"],
        attempt_base=row["attempt_base"],
        available_at=row["available_at"],
        redriven_at=row["redriven_at"],
        redrive_count=row["redrive_count"] or 0,
    )


def attempt_from_row(row: Columns) -> AttemptRecord:
    """An AttemptRecord from a row of an attempt's columns, by name."""
    return AttemptRecord(
        row["seq"],
        row["attempt"],
        row["worker"],
        row["leased_at"],
        row["closed_at"],
        row["outcome"],
        row["summary"],
        row["artifact"],
    )


DEAD_LETTER_REASONS = frozenset(reason.value for reason in DeadLetterReason)


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


# The digest an operator's close stores: a worker's result never equals it, so a worker
# that reports on an attempt an operator failed gets a conflict, not the operator's answer.
OPERATOR_CLOSE = "operator"


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


# Rows per (endpoint, outcome). Must match migration 0010.
SHARDS = 32


def shard_of(spread: int) -> int:
    """The totals row a transaction adds to, by the number its store transaction drew."""
    return spread % SHARDS


def tally(events: Iterable[Event]) -> Counter[tuple[int, str]]:
    """How many scans each event batch ended, by (endpoint id, outcome)."""
    counts: Counter[tuple[int, str]] = Counter()
    for event in events:
        match event:
            case ScanFinished():
                counts[event.scan.endpoint_id, "finished"] += 1
            case ScanFailed():
                counts[event.scan.endpoint_id, "failed"] += 1
            case ScanDeadLettered():
                counts[event.scan.endpoint_id, "dead_lettered"] += 1
            case EndpointRevoked():
                counts[event.endpoint_id, "dead_lettered"] += event.dead_lettered
            case ScanRedriven():
                # No longer a dead letter; whatever ends it next is counted then.
                counts[event.scan.endpoint_id, "dead_lettered"] -= 1
            case _:
                pass
    return counts


def increments(events: Iterable[Event], spread: int) -> list[dict[str, int | str]]:
    """The totals rows to add to, and by how much, for a transaction's events; sorted, so
    two transactions never take the same rows in opposite orders."""
    shard = shard_of(spread)
    return [
        {"endpoint": endpoint_id, "outcome": outcome, "shard": shard, "n": n}
        for (endpoint_id, outcome), n in sorted(tally(events).items())
        if n
    ]
