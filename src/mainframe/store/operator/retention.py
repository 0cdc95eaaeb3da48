"""Retention: the rows past their retention (lifecycle/retention.py), counted and pruned in
small batches. A batch is one transaction of at most `limit` rows of one kind, so it holds
SQLite's write lock for milliseconds; the sweeper (sweeper.py) and `mainframe db prune`
repeat it with a pause between batches. Each batch reports what it removed as a
`RowsPruned` event, counted and logged after commit (effects.py).

Each kind is found through an index over its end time (migration 0016), oldest first, and
"past its retention" is judged by `mf_now()` as leasing judges a lease: the SQL twin of
`lifecycle.retention.is_due` (tests/integration/test_sql_twins.py). A scan's attempts go in
the transaction that removes it, by key.
The outcome totals (`scan_totals`) are never touched: the reconciled
`packages_scan_outcomes` is unchanged by pruning. What a batch removed is added, per endpoint
and outcome, to `pruned_scans` in the same transaction (`NOTE_PRUNED`, its only writer), so
the board's and the overview's counts of what exists now are the totals less it."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from mainframe.lifecycle.events import RowsPruned
from mainframe.lifecycle.retention import PruneKind, RetentionPolicy, pruned_counts
from mainframe.store.engine.database import Database, Sql, Tx, first

# Scans past their retention, oldest first, through the kind's partial index. PostgreSQL
# locks them and skips those another transaction holds (a redrive, a second pruner).
DUE_FINISHED = Sql(
    "due_finished_scans",
    """
    SELECT id FROM scans
    WHERE status = 'FINISHED' AND finished_at <= mf_now() - :kept
    ORDER BY finished_at LIMIT :limit
    """,
    """
    SELECT id FROM scans
    WHERE status = 'FINISHED' AND finished_at <= mf_now() - :kept
    ORDER BY finished_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """,
)
DUE_FAILED = Sql(
    "due_failed_scans",
    """
    SELECT id FROM scans
    WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - :kept
    ORDER BY finished_at LIMIT :limit
    """,
    """
    SELECT id FROM scans
    WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - :kept
    ORDER BY finished_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """,
)
# A dead letter is FAILED with dead_lettered_at set; a redrive clears it, so a redriven scan
# is never found here.
DUE_DEAD_LETTERS = Sql(
    "due_dead_letters",
    """
    SELECT id FROM scans
    WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
      AND dead_lettered_at <= mf_now() - :kept
    ORDER BY dead_lettered_at LIMIT :limit
    """,
    """
    SELECT id FROM scans
    WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
      AND dead_lettered_at <= mf_now() - :kept
    ORDER BY dead_lettered_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """,
)
# The batch's attempts by the attempts' primary key (scan_id, seq), then its scans by theirs.
PRUNE_ATTEMPTS = Sql(
    "prune_attempts",
    "DELETE FROM attempts WHERE scan_id IN (SELECT value FROM json_each(:ids))",
    """
    DELETE FROM attempts WHERE scan_id IN (
        SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
    )
    """,
)
# Each removed scan's endpoint, for the pruned counts.
PRUNE_SCANS = Sql(
    "prune_scans",
    "DELETE FROM scans WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING endpoint_id",
    """
    DELETE FROM scans WHERE id IN (
        SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
    ) RETURNING endpoint_id
    """,
)
# What a batch removed, added to its endpoints' pruned counts (one row per endpoint and
# outcome, made by the first prune that removes one).
NOTE_PRUNED = Sql(
    "note_pruned_scans",
    """
    INSERT INTO pruned_scans (endpoint_id, outcome, count) VALUES (:endpoint, :outcome, :n)
    ON CONFLICT (endpoint_id, outcome) DO UPDATE SET count = pruned_scans.count + excluded.count
    """,
)
# The other kinds have no children: one statement each, through ix_audit_at,
# ix_delivery_counts_minute and ix_board_sessions_expires. PostgreSQL is handed the batch's
# keys as an array (`= ANY(ARRAY(…))`), so it deletes them by key whatever its statistics
# guess of the table, never by hashing all of it.
PRUNE_AUDIT = Sql(
    "prune_audit",
    """
    DELETE FROM audit WHERE id IN (
        SELECT id FROM audit WHERE at <= mf_now() - :kept ORDER BY at LIMIT :limit
    )
    """,
    """
    DELETE FROM audit WHERE id = ANY(ARRAY(
        SELECT id FROM audit WHERE at <= mf_now() - :kept ORDER BY at LIMIT :limit
    ))
    """,
)
# A minute ends 60 s after it starts (lifecycle.retention.delivery_minute_is_due). The
# table's key is two columns: PostgreSQL finds the batch's rows by their ctid instead (a
# row the dispatcher updated meanwhile has moved and waits for the next batch).
PRUNE_DELIVERY_COUNTS = Sql(
    "prune_delivery_counts",
    """
    DELETE FROM delivery_counts WHERE (endpoint_id, minute_us) IN (
        SELECT endpoint_id, minute_us FROM delivery_counts
        WHERE minute_us <= mf_now() - :kept - 60000000 ORDER BY minute_us LIMIT :limit
    )
    """,
    """
    DELETE FROM delivery_counts WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM delivery_counts
        WHERE minute_us <= mf_now() - :kept - 60000000 ORDER BY minute_us LIMIT :limit
    ))
    """,
)
PRUNE_BOARD_SESSIONS = Sql(
    "prune_board_sessions",
    """
    DELETE FROM board_sessions WHERE session_hash IN (
        SELECT session_hash FROM board_sessions
        WHERE expires_at <= mf_now() - :kept ORDER BY expires_at LIMIT :limit
    )
    """,
    """
    DELETE FROM board_sessions WHERE session_hash = ANY(ARRAY(
        SELECT session_hash FROM board_sessions
        WHERE expires_at <= mf_now() - :kept ORDER BY expires_at LIMIT :limit
    ))
    """,
)
# What a pass would remove, for `mainframe db prune --dry-run`: the due scans of a kind with
# their attempts, and the due rows of each other kind, through the same indexes.
COUNT_FINISHED = Sql(
    "count_due_finished_scans",
    """
    SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
    FROM scans
    WHERE scans.status = 'FINISHED' AND scans.finished_at <= mf_now() - :kept
    """,
)
COUNT_FAILED = Sql(
    "count_due_failed_scans",
    """
    SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
    FROM scans
    WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NULL
      AND scans.finished_at <= mf_now() - :kept
    """,
)
COUNT_DEAD_LETTERS = Sql(
    "count_due_dead_letters",
    """
    SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
    FROM scans
    WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NOT NULL
      AND scans.dead_lettered_at <= mf_now() - :kept
    """,
)
COUNT_AUDIT = Sql("count_due_audit", "SELECT count(*), 0 FROM audit WHERE at <= mf_now() - :kept")
COUNT_DELIVERY_COUNTS = Sql(
    "count_due_delivery_counts",
    "SELECT count(*), 0 FROM delivery_counts WHERE minute_us <= mf_now() - :kept - 60000000",
)
COUNT_BOARD_SESSIONS = Sql(
    "count_due_board_sessions",
    "SELECT count(*), 0 FROM board_sessions WHERE expires_at <= mf_now() - :kept",
)

DUE_SCANS = {
    PruneKind.FINISHED: DUE_FINISHED,
    PruneKind.FAILED: DUE_FAILED,
    PruneKind.DEAD_LETTERED: DUE_DEAD_LETTERS,
}
PRUNE_ROWS = {
    PruneKind.AUDIT: PRUNE_AUDIT,
    PruneKind.DELIVERY_COUNTS: PRUNE_DELIVERY_COUNTS,
    PruneKind.BOARD_SESSIONS: PRUNE_BOARD_SESSIONS,
}
COUNTS = {
    PruneKind.FINISHED: COUNT_FINISHED,
    PruneKind.FAILED: COUNT_FAILED,
    PruneKind.DEAD_LETTERED: COUNT_DEAD_LETTERS,
    PruneKind.AUDIT: COUNT_AUDIT,
    PruneKind.DELIVERY_COUNTS: COUNT_DELIVERY_COUNTS,
    PruneKind.BOARD_SESSIONS: COUNT_BOARD_SESSIONS,
}


@dataclass(frozen=True, slots=True)
class Due:
    """What a pass would remove of one kind now: rows, and with scans their attempts."""

    kind: PruneKind
    count: int
    attempts: int = 0


class Retention:
    """Counts and prunes the rows past the store's retention policy."""

    def __init__(self, db: Database, policy: RetentionPolicy) -> None:
        self.db = db
        self.policy = policy

    async def due(self) -> list[Due]:
        """Per kind with a retention, what is past it now (a read: nothing changes)."""
        found = []
        async with self.db.read() as tx:
            for kind in self.policy.pruned():
                row = await first(tx, COUNTS[kind], {"kept": self.policy.kept(kind)})
                assert row is not None
                count, attempts = row
                found.append(Due(kind, int(count), int(attempts or 0)))
        return found

    async def prune(self, kind: PruneKind, *, limit: int) -> RowsPruned:
        """Remove at most `limit` rows of `kind` past their retention, oldest first, in one
        transaction (nothing for a kind kept forever); what went is also published."""
        kept = self.policy.kept(kind)
        if kept is None:
            return RowsPruned(kind, 0)
        params = {"kept": kept, "limit": limit}
        async with self.db.write() as tx:
            if kind in DUE_SCANS:
                pruned = await _prune_scans(tx, kind, params)
            else:
                pruned = RowsPruned(kind, await tx.run(PRUNE_ROWS[kind], params))
            if pruned.count:
                tx.events.append(pruned)
        return pruned


async def _prune_scans(tx: Tx, kind: PruneKind, params: dict[str, int]) -> RowsPruned:
    ids = [int(scan_id) for (scan_id,) in await tx.rows(DUE_SCANS[kind], params)]
    if not ids:
        return RowsPruned(kind, 0)
    batch = {"ids": orjson.dumps(ids).decode()}
    attempts = await tx.run(PRUNE_ATTEMPTS, batch)
    removed = [int(endpoint_id) for (endpoint_id,) in await tx.rows(PRUNE_SCANS, batch)]
    await tx.many(NOTE_PRUNED, pruned_counts(kind, removed))
    return RowsPruned(kind, len(removed), attempts)
