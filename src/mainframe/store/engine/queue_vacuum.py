"""The head of the queue kept clean on PostgreSQL. Every lease rewrites a queued scan's row,
and the entry the old version leaves in ix_scans_queued stays until a vacuum removes it: each
poll walks every such entry before the first due scan, so a poll's cost grows with the leases
since the last vacuum (at 7,000 scans a second, a thousand index pages after 30 s). Autovacuum
looks at most once a minute and waits for a fifth of the table to be dead, so the server
vacuums `scans` itself once enough row versions are dead (docs/performance.md, *The head of
the queue*). SQLite removes an index entry with its row and needs none of this."""

from __future__ import annotations

from mainframe.store.engine.database import Database
from mainframe.store.engine.statements import statement

# Dead row versions that make a vacuum due: at least this many, and this share of the live
# rows (a vacuum reads every index of the table whole, so a large table waits for more).
DEAD_AT_LEAST = 10_000
DEAD_SHARE = 0.01

QUEUE_DEAD_ROWS = statement("queue_dead_rows")
VACUUM_SCANS = statement("vacuum_scans")


class QueueVacuum:
    """Vacuums `scans` when its dead row versions pass the threshold (PostgreSQL only)."""

    def __init__(
        self, db: Database, *, at_least: int = DEAD_AT_LEAST, share: float = DEAD_SHARE
    ) -> None:
        self.db = db
        self.keeps = db.dialect == "postgresql"
        self.params = {"at_least": at_least, "share": share}

    async def refresh(self) -> bool:
        """Vacuum `scans` if enough of it is dead; whether it did."""
        if not self.keeps:
            return False
        # Lasting: a vacuum of a large table may take longer than a request's deadline, and
        # one cut short at the deadline would be work thrown away.
        async with self.db.single(lasting=True) as tx:
            if not await tx.rows(QUEUE_DEAD_ROWS, self.params):
                return False
            await tx.run(VACUUM_SCANS)
        return True
