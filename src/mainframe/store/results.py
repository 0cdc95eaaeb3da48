"""Closing an attempt: a worker's result, an operator's fail, and the lease-holder checks
shared by heartbeats, waits and resumes. Each write is a compare-and-set on the current
assignment, so a stale worker can never change a scan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, insert, select, update

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
    Holding,
    Settlement,
    StaleCode,
    Status,
    diagnose_stale,
    settle,
)
from mainframe.store.records import ScanRecord, scan_from_row
from mainframe.store.schema import attempts, scans


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


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a write against an assignment did nothing: 'not_found' or a StaleCode."""

    code: StaleCode | None  # None means not found (or another endpoint's scan)


def holder_condition(
    *,
    scan_id: int,
    endpoint_id: int,
    worker: str | None,
    attempt: int | None,
    assignment_id: str | None,
) -> ColumnElement[bool]:
    """Rows where the given worker holds the given assignment of a PENDING scan."""
    terms = [
        scans.c.id == scan_id,
        scans.c.endpoint_id == endpoint_id,
        scans.c.status == Status.PENDING.value,
    ]
    if worker is not None:
        terms.append(scans.c.worker == worker)
    if attempt is None:
        terms.append(scans.c.attempt_count == 1)  # rollout form: first assignment only
    else:
        terms += [scans.c.attempt_count == attempt, scans.c.assignment_id == assignment_id]
    return and_(*terms)


def diagnose(
    conn: Connection,
    *,
    scan_id: int,
    endpoint_id: int,
    worker: str,
    attempt: int | None,
    assignment_id: str | None,
) -> Rejected:
    """Explain, after a compare-and-set matched nothing, why the write was refused."""
    row = conn.execute(
        select(scans.c.status, scans.c.attempt_count, scans.c.assignment_id, scans.c.worker).where(
            scans.c.id == scan_id, scans.c.endpoint_id == endpoint_id
        )
    ).first()
    if row is None:
        return Rejected(None)
    holding = Holding(Status(row.status), row.attempt_count, row.assignment_id, row.worker)
    code = diagnose_stale(holding, worker=worker, attempt=attempt, assignment_id=assignment_id)
    # A concurrent writer moved the row between our update and this read.
    return Rejected(code or StaleCode.STALE_ASSIGNMENT)


def _settle_values(settlement: Settlement, report: Report, now: int) -> dict[str, Any]:
    terminal = settlement.status in TERMINAL
    values: dict[str, Any] = {
        "status": settlement.status.value,
        "updated_at": now,
        "lease_expires_at": None,
        "wait_reason": None,
        "fail_reason": settlement.fail_reason,
    }
    if terminal:
        values["finished_at"] = now
        values["result"] = report.result
    if settlement.dead_letter_reason is not None:
        values["dead_lettered_at"] = now
    return values


def close_attempt(
    conn: Connection,
    *,
    where: ColumnElement[bool],
    report: Report,
    endpoint: str,
    now: int,
    max_attempts: int,
) -> tuple[ScanRecord, list[Event]] | None:
    """Apply a report to the row matching `where`; None when no row matched."""
    attempt = report.attempt if report.attempt is not None else 1
    settlement = settle(
        outcome=report.outcome,
        retryable=report.retryable,
        attempt=attempt,
        max_attempts=max_attempts,
    )
    statement = (
        update(scans)
        .where(where)
        .values(**_settle_values(settlement, report, now))
        .returning(*scans.c)
    )
    row = conn.execute(statement).first()
    if row is None:
        return None
    scan = scan_from_row(row, endpoint)
    seq = scan.attempt_base + scan.attempt_count
    conn.execute(
        insert(attempts).values(
            scan_id=scan.id,
            seq=seq,
            attempt=scan.attempt_count,
            assignment_id=scan.assignment_id,
            worker=scan.worker,
            leased_at=scan.leased_at,
            closed_at=now,
            outcome=settlement.attempt_outcome.value,
            summary=report.summary,
            artifact=report.artifact,
        )
    )
    return scan, _settlement_events(scan, settlement, report, now, seq)


def _settlement_events(
    scan: ScanRecord, settlement: Settlement, report: Report, now: int, seq: int
) -> list[Event]:
    ref = scan.ref()
    if settlement.status is Status.FINISHED:
        return [ScanFinished(ref, scan.attempt_count)]
    if settlement.status is Status.QUEUED:
        return [
            AttemptFailed(ref, scan.attempt_count, settlement.attempt_outcome.value),
            ScanReady(ref),
        ]
    if settlement.dead_letter_reason is None:
        return [ScanFailed(ref, scan.attempt_count)]
    final = FinalAttempt(
        seq, settlement.attempt_outcome.value, report.summary, report.artifact, now
    )
    return [
        ScanDeadLettered(
            ref,
            settlement.dead_letter_reason,
            scan.attempt_count,
            scan.worker,
            scan.leased_at,
            now,
            final,
        )
    ]


def fail_unleased(
    conn: Connection, *, scan_id: int, endpoint: str, summary: str | None, now: int
) -> ScanRecord | None:
    """An operator's plain failure of a scan nobody holds (QUEUED or QUARANTINED)."""
    statement = (
        update(scans)
        .where(
            scans.c.id == scan_id,
            scans.c.status.in_((Status.QUEUED.value, Status.QUARANTINED.value)),
        )
        .values(
            status=Status.FAILED.value,
            fail_reason="failed",
            finished_at=now,
            updated_at=now,
            result=None,
        )
        .returning(*scans.c)
    )
    row = conn.execute(statement).first()
    del summary  # an unleased scan has no attempt to carry the summary
    return None if row is None else scan_from_row(row, endpoint)
