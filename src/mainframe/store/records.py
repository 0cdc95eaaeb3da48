"""Plain records the store hands out; nothing outside the store sees a SQL row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mainframe.lifecycle.events import ScanRef
from mainframe.lifecycle.rules import Status


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a token speaks for: an owner, or a worker or source of one endpoint."""

    role: str  # owner | worker | source
    name: str
    owner_id: int | None
    endpoint_id: int | None
    endpoint: str | None


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    id: int
    name: str
    owner_id: int
    open_intake: bool
    revoked_at: int | None


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


# Every column of `scans`, in the order fixed SQL selects them (`SELECT {SCAN_SELECT}`).
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
)
SCAN_SELECT = ", ".join(SCAN_COLUMNS)


def scan_from_values(values: tuple[Any, ...], endpoint: str) -> ScanRecord:
    """Build a ScanRecord from a driver row of SCAN_COLUMNS."""
    return scan_from_mapping(dict(zip(SCAN_COLUMNS, values, strict=True)), endpoint)


def scan_from_row(row: Any, endpoint: str) -> ScanRecord:
    """Build a ScanRecord from a SQLAlchemy row carrying every column of `scans`."""
    return scan_from_mapping(row._mapping, endpoint)


def scan_from_mapping(m: Any, endpoint: str) -> ScanRecord:
    return ScanRecord(
        id=m["id"],
        endpoint_id=m["endpoint_id"],
        endpoint=endpoint,
        queue=m["queue"],
        name=m["name"],
        version=m["version"],
        kind=m["kind"],
        payload=m["payload"],
        status=Status(m["status"]),
        verified=bool(m["verified"]),
        source=m["source"],
        worker=m["worker"],
        attempt_count=m["attempt_count"],
        assignment_id=m["assignment_id"],
        leased_at=m["leased_at"],
        lease_expires_at=m["lease_expires_at"],
        wait_reason=m["wait_reason"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        finished_at=m["finished_at"],
        dead_lettered_at=m["dead_lettered_at"],
        fail_reason=m["fail_reason"],
        result=m["result"],
        attempt_base=m["attempt_base"],
        available_at=m["available_at"],
        # Fixed hot SQL selects SCAN_COLUMNS only; the redrive bookkeeping comes with select(scans).
        redriven_at=m.get("redriven_at"),
        redrive_count=m.get("redrive_count") or 0,
    )
