"""Webhook delivery counts per endpoint per minute: written by the hook dispatcher, read in
closed windows by the stats API that the watcher polls."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, select, update

from mainframe.store import accounts
from mainframe.store.schema import delivery_counts
from mainframe.store.uow import UnitOfWork

MINUTE_US = 60_000_000


@dataclass(frozen=True, slots=True)
class DeliveryTotals:
    attempts: int
    failures: int


def minute_of(instant_us: int) -> int:
    return instant_us - instant_us % MINUTE_US


def record(conn: Connection, *, endpoint_id: int, at_us: int, attempts: int, failures: int) -> None:
    """Add delivery outcomes to the minute containing `at_us`."""
    minute = minute_of(at_us)
    bumped = conn.execute(
        update(delivery_counts)
        .where(delivery_counts.c.endpoint_id == endpoint_id, delivery_counts.c.minute_us == minute)
        .values(
            attempts=delivery_counts.c.attempts + attempts,
            failures=delivery_counts.c.failures + failures,
        )
    )
    if bumped.rowcount == 0:
        conn.execute(
            insert(delivery_counts).values(
                endpoint_id=endpoint_id, minute_us=minute, attempts=attempts, failures=failures
            )
        )


def window_totals(
    conn: Connection, *, endpoint_ids: list[int], start_us: int, end_us: int
) -> DeliveryTotals:
    """Sums over the minutes in [start, end) of the given endpoints."""
    if not endpoint_ids:
        return DeliveryTotals(0, 0)
    row = conn.execute(
        select(func.sum(delivery_counts.c.attempts), func.sum(delivery_counts.c.failures)).where(
            delivery_counts.c.endpoint_id.in_(endpoint_ids),
            delivery_counts.c.minute_us >= start_us,
            delivery_counts.c.minute_us < end_us,
        )
    ).one()
    return DeliveryTotals(int(row[0] or 0), int(row[1] or 0))


class Deliveries:
    """Webhook delivery counts: added by the dispatcher, summed for the stats API."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def record(self, endpoint_id: int, *, at_us: int, attempts: int, failures: int) -> None:
        with self.uow.write() as tx:
            record(
                tx.conn, endpoint_id=endpoint_id, at_us=at_us, attempts=attempts, failures=failures
            )

    def totals(self, owner_id: int, *, start_us: int, end_us: int) -> DeliveryTotals:
        """Delivery attempts and failures of the owner's endpoints in [start, end)."""
        with self.uow.read() as tx:
            owned = list(accounts.owned_endpoints(tx.conn, owner_id))
            return window_totals(tx.conn, endpoint_ids=owned, start_us=start_us, end_us=end_us)
