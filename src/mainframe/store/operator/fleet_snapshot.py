"""A snapshot of the whole fleet: live scans by queue state, outcome totals and the oldest due
scan, for the metrics reconciliation and `mainframe stats`.

Every query walks a partial index over live scans or the outcome totals, never the
finished history, so its cost follows the backlog rather than the size of the table. The
live states are judged by `mf_now()`, the database's clock, as leasing judges them."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.rules import QueueState
from mainframe.store.accounts import totals
from mainframe.store.engine.database import Sql, Tx, first, value

# The SQL twin of lifecycle.rules.queue_state for QUEUED rows (tests hold them equal), in one
# statement so that its counts are of one moment: every QUEUED scan by due time, and the
# parked ones (available_at NULL), through ix_scans_queued; then the paused queues' unparked
# ones (a retry or a lapse sent them back after the pause, or the pause has not parked them
# yet) by due time, per paused queue from its endpoint's unparked part of
# ix_scans_queued (the parked rows sort apart, NULL), each row's queue read from the table.
# Nothing more when no queue is paused; never a paused queue's parked backlog. On PostgreSQL
# the LATERAL keeps that walk per paused queue: a generic plan would rather hash every
# endpoint's unparked backlog.
QUEUED_STATES = Sql(
    "queued_states",
    """
    SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting, mf_now()
    FROM (
        SELECT count(*) AS total, SUM(CASE WHEN available_at > mf_now() THEN 1 ELSE 0 END)
               AS waiting, SUM(CASE WHEN available_at IS NULL THEN 1 ELSE 0 END) AS parked
        FROM scans WHERE status = 'QUEUED'
    ) AS queued CROSS JOIN (
        SELECT count(*) AS unparked,
               SUM(CASE WHEN scans.available_at > mf_now() THEN 1 ELSE 0 END) AS waiting
        FROM paused_queues CROSS JOIN scans
        WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
          AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
    ) AS held
    """,
    """
    SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting, mf_now()
    FROM (
        SELECT count(*) AS total, SUM(CASE WHEN available_at > mf_now() THEN 1 ELSE 0 END)
               AS waiting, SUM(CASE WHEN available_at IS NULL THEN 1 ELSE 0 END) AS parked
        FROM scans WHERE status = 'QUEUED'
    ) AS queued CROSS JOIN (
        SELECT SUM(one.unparked) AS unparked, SUM(one.waiting) AS waiting
        FROM paused_queues CROSS JOIN LATERAL (
            SELECT count(*) AS unparked,
                   SUM(CASE WHEN scans.available_at > mf_now() THEN 1 ELSE 0 END) AS waiting
            FROM scans
            WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
              AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
        ) AS one
    ) AS held
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
# The oldest scan a poll could lease: per endpoint, the first due row of ix_scans_queued
# outside the endpoint's paused queues. The walk starts after the parked rows (NULL, never
# due) and steps over only the unparked due scans of paused queues ahead of it, as a poll's
# own walk does; each row's queue is read from the table.
OLDEST_DUE = Sql(
    "oldest_due",
    """
    SELECT MIN(head.available_at) FROM (
        SELECT (SELECT scans.available_at FROM scans
                WHERE scans.endpoint_id = endpoints.id AND scans.status = 'QUEUED'
                  AND scans.available_at <= mf_now()
                  AND scans.queue NOT IN (
                      SELECT paused_queues.queue FROM paused_queues
                      WHERE paused_queues.endpoint_id = endpoints.id
                  )
                ORDER BY scans.available_at, scans.id LIMIT 1) AS available_at
        FROM endpoints
    ) AS head
    """,
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Terminal outcomes (non-overlapping), live scans by queue state, the oldest backlog."""

    taken_at: int
    outcomes: dict[str, int]
    queue: dict[QueueState, int]
    oldest_due_at: int | None  # when the longest-waiting scan a poll could lease became due


async def snapshot(tx: Tx, *, max_attempts: int) -> Snapshot:
    queued = await first(tx, QUEUED_STATES)
    pending = await first(tx, PENDING_STATES, {"max_attempts": max_attempts})
    assert queued is not None and pending is not None
    total, waiting, parked, unparked, held_waiting = (int(n or 0) for n in queued[:5])
    lapsed, spent = int(pending[1] or 0), int(pending[2] or 0)
    # A paused queue's unparked scans are counted once, as paused, whether due or waiting.
    paused, scheduled = parked + unparked, waiting - held_waiting
    queue = {
        QueueState.QUEUED: total - paused - scheduled,
        QueueState.PAUSED: paused,
        QueueState.SCHEDULED: scheduled,
        QueueState.QUARANTINED: int(await value(tx, QUARANTINED_COUNT) or 0),
        QueueState.PENDING: int(pending[0]) - lapsed - spent,
        QueueState.RETRYABLE: lapsed,
        QueueState.EXHAUSTED: spent,
    }
    oldest = await value(tx, OLDEST_DUE)
    return Snapshot(int(queued[5]), await totals.read(tx), queue, oldest)
