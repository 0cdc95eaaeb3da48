"""The owners' reads: one scan with its history, keyset-paged listings, and the fleet snapshot
behind the metrics and `mainframe stats`. Reads run in deferred (read-only) transactions."""

from __future__ import annotations

from mainframe.lifecycle.rules import Status
from mainframe.store import accounts, overview, queries, stats
from mainframe.store.budget import Budget
from mainframe.store.records import ScanRecord
from mainframe.store.uow import UnitOfWork


class Listings:
    def __init__(self, uow: UnitOfWork, budget: Budget) -> None:
        self.uow = uow
        self.budget = budget

    def get_scan(self, owner_id: int, scan_id: int) -> ScanRecord:
        with self.uow.read() as tx:
            return queries.owned_scan(tx.conn, owner_id, scan_id)

    def list_scans(
        self,
        owner_id: int,
        *,
        status: Status | None,
        queue: str | None,
        endpoint: str | None,
        before_id: int | None,
        limit: int,
        dead_letters_only: bool = False,
        plain_failures_only: bool = False,
        q: str | None = None,
    ) -> list[ScanRecord]:
        with self.uow.read() as tx:
            owned = accounts.owned_endpoints(tx.conn, owner_id)
            if endpoint is not None:
                owned = {k: v for k, v in owned.items() if v == endpoint}
            return queries.list_scans(
                tx.conn,
                endpoints=owned,
                status=status.value if status else None,
                queue=queue,
                before_id=before_id,
                limit=limit,
                dead_letters_only=dead_letters_only,
                plain_failures_only=plain_failures_only,
                q=q,
            )

    def snapshot(self) -> stats.Snapshot:
        """Outcome totals and live scans by queue state, as the database sees them now."""
        with self.uow.read() as tx:
            return stats.snapshot(
                tx.conn, now=self.uow.now(), max_attempts=self.budget.max_attempts
            )

    def overview(self, owner_id: int) -> overview.Overview:
        """Per endpoint: scans by status, the oldest due scan, hook health; and the totals."""
        with self.uow.read() as tx:
            return overview.overview(tx.conn, owner_id, now=self.uow.now())
