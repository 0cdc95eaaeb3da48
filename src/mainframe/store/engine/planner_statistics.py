"""The planner's statistics of the two tables that grow with every scan. PostgreSQL keeps a
cached generic plan until a table's statistics change, and its autovacuum looks at most once
a minute: after a large intake into an empty or small queue, a plan made for small tables
(read them whole, sort) would stay for that minute. The server looks every few seconds and
analyses a table whose shape moved, which also makes every session plan its statements
again. SQLite needs none of this: its plans do not depend on statistics
(tests/integration/test_plans.py plans it with and without)."""

from __future__ import annotations

from mainframe.store.engine.database import Database
from mainframe.store.engine.statements import statement

# What the planner's plans follow is the tables' shape: their size, and how their rows fall
# across the statuses. A table is analysed when its size moved by a fifth of what the planner
# knows, or once as many rows changed as it holds. A queue rewrites its rows without changing
# its shape (a scan changes three rows of `scans`), and an analysis of `scans` costs about
# 130 ms and makes every session plan again (docs/performance.md, *The server's own analyses*).
SIZE_MOVED = 0.2
TURNOVER = 1.0
CHANGED_AT_LEAST = 1_000

STALE_TABLES = statement("stale_tables")
ANALYZE_SCANS = statement("analyze_scans")
ANALYZE_ATTEMPTS = statement("analyze_attempts")
ANALYZE = {"scans": ANALYZE_SCANS, "attempts": ANALYZE_ATTEMPTS}


class PlannerStatistics:
    """Keeps the planner's statistics of `scans` and `attempts` current on PostgreSQL."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # SQLite's plans do not follow statistics: nothing to keep there, decided once.
        self.keeps = db.dialect == "postgresql"

    async def refresh(self) -> list[str]:
        """Analyse the tables that changed enough since they were last analysed; their names."""
        if not self.keeps:
            return []
        params = {"at_least": CHANGED_AT_LEAST, "moved": SIZE_MOVED, "turnover": TURNOVER}
        async with self.db.single() as tx:
            stale = [str(row["relname"]) for row in await tx.rows(STALE_TABLES, params)]
            for table in stale:
                await tx.run(ANALYZE[table])
        return stale
