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

from mainframe.lifecycle.retention import RetentionPolicy, pruned_counts
from mainframe.lifecycle.rules import PruneKind
from mainframe.lifecycle.scans import RowsPruned
from mainframe.store.engine.database import Database, Tx, first, transact
from mainframe.store.engine.statements import statement

DUE_FINISHED = statement("due_finished_scans")
DUE_FAILED = statement("due_failed_scans")
DUE_DEAD_LETTERS = statement("due_dead_letters")
PRUNE_ATTEMPTS = statement("prune_attempts")
PRUNE_SCANS = statement("prune_scans")
NOTE_PRUNED = statement("note_pruned_scans")
PRUNE_AUDIT = statement("prune_audit")
PRUNE_DELIVERY_COUNTS = statement("prune_delivery_counts")
PRUNE_BOARD_SESSIONS = statement("prune_board_sessions")
COUNT_FINISHED = statement("count_due_finished_scans")
COUNT_FAILED = statement("count_due_failed_scans")
COUNT_DEAD_LETTERS = statement("count_due_dead_letters")
COUNT_AUDIT = statement("count_due_audit")
COUNT_DELIVERY_COUNTS = statement("count_due_delivery_counts")
COUNT_BOARD_SESSIONS = statement("count_due_board_sessions")

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
                found.append(Due(kind, int(row["due"]), int(row["attempts"] or 0)))
        return found

    async def prune(self, kind: PruneKind, *, limit: int) -> RowsPruned:
        """Remove at most `limit` rows of `kind` past their retention, oldest first, in one
        transaction (nothing for a kind kept forever); what went is also published."""
        kept = self.policy.kept(kind)
        if kept is None:
            return RowsPruned(kind, 0)
        params = {"kept": kept, "limit": limit}

        async def prune(tx: Tx) -> RowsPruned:
            if kind in DUE_SCANS:
                pruned = await _prune_scans(tx, kind, params)
            else:
                pruned = RowsPruned(kind, await tx.run(PRUNE_ROWS[kind], params))
            if pruned.count:
                tx.events.append(pruned)
            return pruned

        return await transact(self.db, prune)


async def _prune_scans(tx: Tx, kind: PruneKind, params: dict[str, int]) -> RowsPruned:
    ids = [int(row["id"]) for row in await tx.rows(DUE_SCANS[kind], params)]
    if not ids:
        return RowsPruned(kind, 0)
    batch = {"ids": orjson.dumps(ids).decode()}
    attempts = await tx.run(PRUNE_ATTEMPTS, batch)
    removed = [int(row["endpoint_id"]) for row in await tx.rows(PRUNE_SCANS, batch)]
    await tx.many(NOTE_PRUNED, pruned_counts(kind, removed))
    return RowsPruned(kind, len(removed), attempts)
