"""The database's view of the fleet, for the metrics reconciliation and `mainframe stats`.

Every query walks a partial index over live scans or the outcome totals, never the
finished history, so its cost follows the backlog rather than the size of the table."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, case, func, select

from mainframe.lifecycle.rules import QueueState, Status
from mainframe.store import totals
from mainframe.store.schema import endpoints, scans


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Terminal outcomes (non-overlapping), live scans by queue state, the oldest backlog."""

    taken_at: int
    outcomes: dict[str, int]
    queue: dict[QueueState, int]
    oldest_queued_created_at: int | None


def _count(conn: Connection, status: Status) -> int:
    query = select(func.count()).select_from(scans).where(scans.c.status == status.value)
    return int(conn.scalar(query) or 0)


def _pending(conn: Connection, *, now: int, max_attempts: int) -> dict[QueueState, int]:
    lapsed = scans.c.lease_expires_at < now
    spent = scans.c.attempt_count >= max_attempts
    row = conn.execute(
        select(
            func.count(),
            func.sum(case((lapsed & ~spent, 1), else_=0)),
            func.sum(case((lapsed & spent, 1), else_=0)),
        ).where(scans.c.status == Status.PENDING.value)
    ).one()
    total, retryable, exhausted = int(row[0]), int(row[1] or 0), int(row[2] or 0)
    return {
        QueueState.PENDING: total - retryable - exhausted,
        QueueState.RETRYABLE: retryable,
        QueueState.EXHAUSTED: exhausted,
    }


def _oldest_queued(conn: Connection) -> int | None:
    # One probe of ix_scans_queued per endpoint (see migration 0003 for why not ORDER BY id).
    head = (
        select(scans.c.created_at)
        .where(scans.c.endpoint_id == endpoints.c.id, scans.c.status == Status.QUEUED.value)
        .order_by(scans.c.created_at, scans.c.id)
        .limit(1)
        .correlate(endpoints)
        .scalar_subquery()
    )
    rows = conn.execute(select(head).select_from(endpoints))
    found = [row[0] for row in rows if row[0] is not None]
    return min(found) if found else None


def snapshot(conn: Connection, *, now: int, max_attempts: int) -> Snapshot:
    queue = {
        QueueState.QUEUED: _count(conn, Status.QUEUED),
        QueueState.QUARANTINED: _count(conn, Status.QUARANTINED),
        **_pending(conn, now=now, max_attempts=max_attempts),
    }
    return Snapshot(now, totals.read(conn), queue, _oldest_queued(conn))
