"""A scan and its attempts as plain data: the scan as the store last wrote it, which the
rules of a close (lifecycle/reports.py) read and the shells show, and a job, the assignment
a worker holds. Records are read from a statement's columns by name (`SCAN_COLUMNS`), so a
column added to a statement, or listed in another order, shifts no reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

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
