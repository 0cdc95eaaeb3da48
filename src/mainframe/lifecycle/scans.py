"""A scan and its attempts as plain data: the scan as the store last wrote it, which the
rules of a close (lifecycle/reports.py) read and the shells show."""

from __future__ import annotations

from dataclasses import dataclass

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
