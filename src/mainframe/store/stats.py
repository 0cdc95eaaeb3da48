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
    oldest_due_at: int | None  # when the longest-waiting due scan became due


def _count(conn: Connection, status: Status) -> int:
    query = select(func.count()).select_from(scans).where(scans.c.status == status.value)
    return int(conn.scalar(query) or 0)


def _queued(conn: Connection, *, now: int) -> dict[QueueState, int]:
    # The SQL twin of lifecycle.rules.queue_state for QUEUED rows (tests hold them equal).
    scheduled = scans.c.available_at > now
    row = conn.execute(
        select(func.count(), func.sum(case((scheduled, 1), else_=0))).where(
            scans.c.status == Status.QUEUED.value
        )
    ).one()
    total, waiting = int(row[0]), int(row[1] or 0)
    return {QueueState.QUEUED: total - waiting, QueueState.SCHEDULED: waiting}


def _pending(conn: Connection, *, now: int, max_attempts: int) -> dict[QueueState, int]:
    # The SQL twin of lifecycle.rules.queue_state for PENDING rows.
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


def _oldest_due(conn: Connection, *, now: int) -> int | None:
    # One probe of ix_scans_queued per endpoint: its first row is the earliest available_at.
    head = (
        select(scans.c.available_at)
        .where(scans.c.endpoint_id == endpoints.c.id, scans.c.status == Status.QUEUED.value)
        .order_by(scans.c.available_at, scans.c.id)
        .limit(1)
        .correlate(endpoints)
        .scalar_subquery()
    )
    rows = conn.execute(select(head).select_from(endpoints))
    found = [row[0] for row in rows if row[0] is not None and row[0] <= now]
    return min(found) if found else None


def snapshot(conn: Connection, *, now: int, max_attempts: int) -> Snapshot:
    queue = {
        **_queued(conn, now=now),
        QueueState.QUARANTINED: _count(conn, Status.QUARANTINED),
        **_pending(conn, now=now, max_attempts=max_attempts),
    }
    return Snapshot(now, totals.read(conn), queue, _oldest_due(conn, now=now))
