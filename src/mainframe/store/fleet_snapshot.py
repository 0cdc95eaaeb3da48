"""A snapshot of the whole fleet: live scans by queue state, outcome totals and the oldest due
scan, for the metrics reconciliation and `mainframe stats`.

Every query walks a partial index over live scans or the outcome totals, never the
finished history, so its cost follows the backlog rather than the size of the table. The
live states are judged by `mf_now()`, the database's clock, as leasing judges them."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.rules import QueueState
from mainframe.store import totals
from mainframe.store.database import Sql, Tx, first, value

# The SQL twin of lifecycle.rules.queue_state for QUEUED rows (tests hold them equal).
QUEUED_STATES = Sql(
    "queued_states",
    """
    SELECT count(*), SUM(CASE WHEN available_at > mf_now() THEN 1 ELSE 0 END), mf_now()
    FROM scans WHERE status = 'QUEUED'
    """,
)
# The SQL twin of lifecycle.rules.queue_state for PENDING rows.
PENDING_STATES = Sql(
    "pending_states",
    """
    SELECT count(*),
           SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count < :max_attempts
                    THEN 1 ELSE 0 END),
           SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count >= :max_attempts
                    THEN 1 ELSE 0 END)
    FROM scans WHERE status = 'PENDING'
    """,
)
QUARANTINED_COUNT = Sql(
    "quarantined_count", "SELECT count(*) FROM scans WHERE status = 'QUARANTINED'"
)
# One probe of ix_scans_queued per endpoint: its first row is the earliest available_at.
OLDEST_DUE = Sql(
    "oldest_due",
    """
    SELECT MIN(head.available_at) FROM (
        SELECT (SELECT scans.available_at FROM scans
                WHERE scans.endpoint_id = endpoints.id AND scans.status = 'QUEUED'
                ORDER BY scans.available_at, scans.id LIMIT 1) AS available_at
        FROM endpoints
    ) AS head
    WHERE head.available_at <= mf_now()
    """,
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Terminal outcomes (non-overlapping), live scans by queue state, the oldest backlog."""

    taken_at: int
    outcomes: dict[str, int]
    queue: dict[QueueState, int]
    oldest_due_at: int | None  # when the longest-waiting due scan became due


async def snapshot(tx: Tx, *, max_attempts: int) -> Snapshot:
    queued = await first(tx, QUEUED_STATES)
    pending = await first(tx, PENDING_STATES, {"max_attempts": max_attempts})
    assert queued is not None and pending is not None
    waiting, lapsed, spent = int(queued[1] or 0), int(pending[1] or 0), int(pending[2] or 0)
    queue = {
        QueueState.QUEUED: int(queued[0]) - waiting,
        QueueState.SCHEDULED: waiting,
        QueueState.QUARANTINED: int(await value(tx, QUARANTINED_COUNT) or 0),
        QueueState.PENDING: int(pending[0]) - lapsed - spent,
        QueueState.RETRYABLE: lapsed,
        QueueState.EXHAUSTED: spent,
    }
    oldest = await value(tx, OLDEST_DUE)
    return Snapshot(int(queued[2]), await totals.read(tx), queue, oldest)
