"""Domain events: what a committed transition changed, for metrics, logs and hooks."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.retention import PruneKind
from mainframe.lifecycle.rules import DeadLetterReason, StaleCode


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
class StaleResultRejected:
    endpoint: str
    scan_id: int
    worker: str
    code: StaleCode
    attempt: int | None


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
