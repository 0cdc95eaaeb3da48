"""Read paths for owners: one scan with its attempt history, and keyset-paged listings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import Connection, select

from mainframe.lifecycle.rules import Status
from mainframe.store import accounts, search
from mainframe.store.errors import NotFound
from mainframe.store.records import AttemptRecord, ScanRecord, scan_from_row
from mainframe.store.schema import attempts, scans


def owned_scan(conn: Connection, owner_id: int, scan_id: int) -> ScanRecord:
    """The scan with its history if one of the owner's endpoints holds it; NotFound if not."""
    found = scan_by_id(conn, scan_id, endpoints=accounts.owned_endpoints(conn, owner_id))
    if found is None:
        raise NotFound(f"no scan {scan_id}")
    return found


def scan_by_id(conn: Connection, scan_id: int, *, endpoints: dict[int, str]) -> ScanRecord | None:
    """The scan if it belongs to one of `endpoints`, with its attempt history."""
    if not endpoints:
        return None
    row = conn.execute(
        select(scans).where(scans.c.id == scan_id, scans.c.endpoint_id.in_(endpoints))
    ).first()
    if row is None:
        return None
    scan = scan_from_row(row, endpoints[row.endpoint_id])
    history = [
        AttemptRecord(
            r.seq, r.attempt, r.worker, r.leased_at, r.closed_at, r.outcome, r.summary, r.artifact
        )
        for r in conn.execute(
            select(attempts).where(attempts.c.scan_id == scan_id).order_by(attempts.c.seq)
        )
    ]
    if scan.status is Status.PENDING and scan.assignment_id is not None:
        history.append(_open_attempt(scan))
    return _with_attempts(scan, history)


def _open_attempt(scan: ScanRecord) -> AttemptRecord:
    return AttemptRecord(
        scan.attempt_base + scan.attempt_count,
        scan.attempt_count,
        scan.worker,
        scan.leased_at,
        None,
        None,
        scan.wait_reason,
        None,
    )


def _with_attempts(scan: ScanRecord, history: Sequence[AttemptRecord]) -> ScanRecord:
    return replace(scan, attempts=tuple(history))


def list_scans(
    conn: Connection,
    *,
    endpoints: dict[int, str],
    status: str | None,
    queue: str | None,
    before_id: int | None,
    limit: int,
    dead_letters_only: bool = False,
    plain_failures_only: bool = False,
    q: str | None = None,
) -> list[ScanRecord]:
    """Newest first, `limit` rows older than `before_id`, over the given endpoints."""
    if not endpoints:
        return []
    query = select(scans).where(scans.c.endpoint_id.in_(endpoints))
    if status is not None:
        query = query.where(scans.c.status == status)
    if queue is not None:
        query = query.where(scans.c.queue == queue)
    if dead_letters_only:
        query = query.where(scans.c.dead_lettered_at.is_not(None))
    if plain_failures_only:
        query = query.where(scans.c.dead_lettered_at.is_(None))
    if q:
        query = query.where(search.matches(q))
    if before_id is not None:
        query = query.where(scans.c.id < before_id)
    rows = conn.execute(query.order_by(scans.c.id.desc()).limit(limit))
    return [scan_from_row(row, endpoints[row.endpoint_id]) for row in rows]
