"""The planner's statistics of the two tables that grow with every scan. PostgreSQL keeps a
cached generic plan until a table's statistics change, and its autovacuum looks at most once
a minute: after a large intake into an empty or small queue, a plan made for small tables
(read them whole, sort) would stay for that minute. The server looks every few seconds and
analyses a table once a tenth of it (at least 1,000 rows) changed, which also makes every
session plan its statements again. SQLite needs none of this: its plans do not depend on
statistics (tests/integration/test_plans.py plans it with and without)."""

from __future__ import annotations

from mainframe.store.engine.database import Database
from mainframe.store.engine.statements import statement

# How much of a table may change before its statistics are taken again. A steady loop at
# batch 1 still reaches a tenth of `scans` between two checks (a scan changes three of its
# rows); a half, tried, left the batch-10 loop on plans of older statistics, writing a fifth
# more WAL a scan (docs/performance.md, *The server's own analyses*).
CHANGED_SHARE = 0.1
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
        params = {"at_least": CHANGED_AT_LEAST, "share": CHANGED_SHARE}
        async with self.db.single() as tx:
            stale = [str(row["relname"]) for row in await tx.rows(STALE_TABLES, params)]
            for table in stale:
                await tx.run(ANALYZE[table])
        return stale
