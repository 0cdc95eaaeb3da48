"""Webhook delivery counts per endpoint per minute: written by the hook dispatcher, read in
closed windows by the stats API that the watcher polls. The minute an attempt counts in is
taken from `mf_now()`, so every server process of a fleet files it under the same minute."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.store.engine.database import Database, first, value
from mainframe.store.engine.statements import statement

MINUTE_US = 60_000_000

RECORD_MINUTE = statement("record_delivery_minute")
WINDOW_TOTALS = statement("delivery_window_totals")
NOW = statement("delivery_clock")


@dataclass(frozen=True, slots=True)
class DeliveryTotals:
    attempts: int
    failures: int


def minute_of(instant_us: int) -> int:
    return instant_us - instant_us % MINUTE_US


class Deliveries:
    """Webhook delivery counts: added by the dispatcher, summed for the stats API."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def record(self, endpoint_id: int, *, attempts: int, failures: int) -> None:
        """Add delivery outcomes to the current minute of the database's clock."""
        params = {"endpoint": endpoint_id, "attempts": attempts, "failures": failures}
        async with self.db.single() as tx:
            await tx.run(RECORD_MINUTE, params)

    async def totals(self, owner_id: int, *, start_us: int, end_us: int) -> DeliveryTotals:
        """Delivery attempts and failures of the owner's endpoints in [start, end)."""
        params = {"owner": owner_id, "start": start_us, "end": end_us}
        async with self.db.read() as tx:
            row = await first(tx, WINDOW_TOTALS, params)
        assert row is not None
        return DeliveryTotals(int(row["attempts"] or 0), int(row["failures"] or 0))

    async def now(self) -> int:
        """The database's clock, which decides whether a window has closed."""
        async with self.db.read() as tx:
            return int(await value(tx, NOW))
