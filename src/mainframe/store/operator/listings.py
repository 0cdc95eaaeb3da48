"""`Listings`, the read-only capability over scans: it opens the read transaction and calls
the statements of `queries.py` (an owner's scans), `overview.py` (the board's cards) and
`fleet_snapshot.py` (the metrics' snapshot); it holds no SQL of its own."""

from __future__ import annotations

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import ScanRecord
from mainframe.store.engine.database import Database
from mainframe.store.operator import fleet_snapshot, overview
from mainframe.store.work import queries
from mainframe.store.work.budget import Budget


class Listings:
    def __init__(self, db: Database, budget: Budget) -> None:
        self.db = db
        self.budget = budget

    async def get_scan(self, owner_id: int, scan_id: int) -> ScanRecord:
        async with self.db.read() as tx:
            return await queries.owned_scan(tx, owner_id, scan_id)

    async def list_scans(
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
        dead = True if dead_letters_only else False if plain_failures_only else None
        async with self.db.read() as tx:
            return await queries.list_scans(
                tx,
                owner_id,
                endpoint=endpoint,
                status=status.value if status else None,
                queue=queue,
                before_id=before_id,
                limit=limit,
                dead=dead,
                q=q,
            )

    async def scan_page(
        self,
        owner_id: int,
        f: queries.ListingFilter,
        *,
        before_id: int | None,
        newer_than: int | None,
        limit: int,
    ) -> queries.ScanPage:
        """A page of the owner's scans newest first, older than `before_id` or just newer
        than `newer_than`."""
        async with self.db.read() as tx:
            return await queries.scan_page(
                tx, owner_id, f, before_id=before_id, newer_than=newer_than, limit=limit
            )

    async def count_scans(
        self, owner_id: int, filters: list[queries.ListingFilter], *, cap: int
    ) -> list[int]:
        """How many scans each filter matches, each counted up to `cap`, in one read."""
        async with self.db.read() as tx:
            return [await queries.count_scans(tx, owner_id, f, cap=cap) for f in filters]

    async def snapshot(self) -> fleet_snapshot.Snapshot:
        """Outcome totals and live scans by queue state, as the database sees them now."""
        async with self.db.read() as tx:
            return await fleet_snapshot.snapshot(tx, max_attempts=self.budget.max_attempts)

    async def overview(self, owner_id: int) -> overview.Overview:
        """Per endpoint: scans by status, the oldest due scan, hook health; and the totals."""
        async with self.db.read() as tx:
            return await overview.overview(tx, owner_id)
