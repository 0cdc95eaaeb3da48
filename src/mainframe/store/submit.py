"""Intake: new scans, resubmissions of a live key, and quarantine release."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from mainframe.lifecycle.events import Event, ScanReady
from mainframe.lifecycle.rules import LIVE, Status
from mainframe.store.records import ScanRecord, scan_from_row
from mainframe.store.schema import scans


@dataclass(frozen=True, slots=True)
class Submission:
    endpoint_id: int
    endpoint: str
    queue: str
    name: str
    version: str
    kind: str
    payload: str | None
    verified: bool
    quarantined: bool
    source: str | None


def _live(conn: Connection, sub: Submission) -> ScanRecord | None:
    row = conn.execute(
        select(scans)
        .where(
            scans.c.endpoint_id == sub.endpoint_id,
            scans.c.name == sub.name,
            scans.c.version == sub.version,
            scans.c.kind == sub.kind,
            scans.c.status.in_([status.value for status in LIVE]),
        )
        .with_for_update()
    ).first()
    return None if row is None else scan_from_row(row, sub.endpoint)


def submit(conn: Connection, sub: Submission, *, now: int) -> tuple[ScanRecord, bool, list[Event]]:
    """Insert a scan, or return the live one with the same key; (scan, created, events)."""
    existing = _live(conn, sub)
    if existing is not None:
        return _resubmitted(conn, existing, sub, now=now)
    status = Status.QUARANTINED if sub.quarantined else Status.QUEUED
    try:
        with conn.begin_nested():
            row = conn.execute(
                insert(scans)
                .values(
                    endpoint_id=sub.endpoint_id,
                    queue=sub.queue,
                    name=sub.name,
                    version=sub.version,
                    kind=sub.kind,
                    payload=sub.payload,
                    status=status.value,
                    verified=sub.verified,
                    source=sub.source,
                    created_at=now,
                    updated_at=now,
                    attempt_count=0,
                    attempt_base=0,
                )
                .returning(*scans.c)
            ).one()
    except IntegrityError:
        # Another submitter inserted the same live key between our read and our insert.
        raced = _live(conn, sub)
        if raced is None:
            raise
        return _resubmitted(conn, raced, sub, now=now)
    scan = scan_from_row(row, sub.endpoint)
    events: list[Event] = [ScanReady(scan.ref())] if status is Status.QUEUED else []
    return scan, True, events


def _resubmitted(
    conn: Connection, existing: ScanRecord, sub: Submission, *, now: int
) -> tuple[ScanRecord, bool, list[Event]]:
    if sub.verified and existing.status is Status.QUARANTINED:
        promoted = _move_out_of_quarantine(
            conn, existing, now=now, verified=True, source=sub.source
        )
        return promoted, False, [ScanReady(promoted.ref())]
    return existing, False, []


def _move_out_of_quarantine(
    conn: Connection, scan: ScanRecord, *, now: int, verified: bool, source: str | None
) -> ScanRecord:
    values: dict[str, object] = {"status": Status.QUEUED.value, "updated_at": now}
    if verified:
        values |= {"verified": True, "source": source}
    row = conn.execute(
        update(scans)
        .where(scans.c.id == scan.id, scans.c.status == Status.QUARANTINED.value)
        .values(**values)
        .returning(*scans.c)
    ).one()
    return scan_from_row(row, scan.endpoint)


def release(conn: Connection, scan: ScanRecord, *, now: int) -> ScanRecord | None:
    """An operator lets a quarantined scan into QUEUED; it stays unverified (not announced)."""
    if scan.status is not Status.QUARANTINED:
        return None
    return _move_out_of_quarantine(conn, scan, now=now, verified=False, source=None)
