"""Terminal outcome totals, as the metrics reconciliation and `mainframe stats` read them:
a few dozen rows however large the scans table grows. They are kept in the same transaction
as the transitions that end scans (store/work/closing.py::BUMP) and count every scan that ended,
pruned or not; the owner's overview subtracts what was pruned (store/operator/overview.py)."""

from __future__ import annotations

from mainframe.lifecycle.scans import SHARDS
from mainframe.store.engine.database import Tx
from mainframe.store.engine.statements import statement

OUTCOMES = ("finished", "failed", "dead_lettered")
INSERT_ZERO = statement("insert_zero_total")
TOTALS = statement("outcome_totals")


async def create_rows(tx: Tx, endpoint_id: int) -> None:
    """Zeroed totals for a new endpoint, so every later write is a plain UPDATE."""
    await tx.many(
        INSERT_ZERO,
        [
            {"endpoint": endpoint_id, "outcome": outcome, "shard": n}
            for outcome in OUTCOMES
            for n in range(SHARDS)
        ],
    )


async def read(tx: Tx) -> dict[str, int]:
    """Totals over every endpoint, by outcome."""
    found = {row["outcome"]: int(row["total"] or 0) for row in await tx.rows(TOTALS)}
    return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}
