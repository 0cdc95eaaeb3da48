"""A scan and its attempts as plain data: the scan as the store last wrote it, which the
rules of a close (lifecycle/reports.py) read and the shells show, and a job, the assignment
a worker holds. Records are read from a statement's columns by name (`SCAN_COLUMNS`), so a
column added to a statement shifts no reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mainframe.lifecycle.events import ScanRef
from mainframe.lifecycle.rules import Status


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


# Every column of `scans`, in the order each statement that reads a whole scan lists them
# (written out in its text; tests/unit/test_store_sql.py holds them to this order).
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


SCAN_INDEX = {column: n for n, column in enumerate(SCAN_COLUMNS)}


def scan_value(row: Sequence[Any], column: str) -> Any:
    """One column of a row that lists a whole scan (SCAN_COLUMNS), by its name."""
    return row[SCAN_INDEX[column]]


def scan_from_row(row: Sequence[Any], endpoint: str) -> ScanRecord:
    """A ScanRecord from the first len(SCAN_COLUMNS) values of a row, in that order."""
    (
        id_, endpoint_id, queue, name, version, kind, payload, status, verified, source,
        worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
        created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
        attempt_base, available_at, redriven_at, redrive_count,
    ) = row[: len(SCAN_COLUMNS)]  # fmt: skip
    return ScanRecord(
        id=id_,
        endpoint_id=endpoint_id,
        endpoint=endpoint,
        queue=queue,
        name=name,
        version=version,
        kind=kind,
        payload=payload,
        status=Status(status),
        verified=bool(verified),
        source=source,
        worker=worker,
        attempt_count=attempt_count,
        assignment_id=assignment_id,
        leased_at=leased_at,
        lease_expires_at=lease_expires_at,
        wait_reason=wait_reason,
        created_at=created_at,
        updated_at=updated_at,
        finished_at=finished_at,
        dead_lettered_at=dead_lettered_at,
        fail_reason=fail_reason,
        result=result,
        attempt_base=attempt_base,
        available_at=available_at,
        redriven_at=redriven_at,
        redrive_count=redrive_count or 0,
    )


def attempt_from_row(row: Sequence[Any]) -> AttemptRecord:
    """An AttemptRecord from a row of seq, attempt, worker, leased_at, closed_at, outcome,
    summary, artifact."""
    seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact = row[:8]
    return AttemptRecord(seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact)
