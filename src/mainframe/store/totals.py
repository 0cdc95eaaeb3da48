"""Terminal outcome totals, kept in the same transaction as the transitions that end scans,
so the metrics reconciliation reads a few dozen rows however large the scans table grows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mainframe.lifecycle.events import (
    EndpointRevoked,
    Event,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanRedriven,
)
from mainframe.store.database import Tx
from mainframe.store.sql import Sql

OUTCOMES = ("finished", "failed", "dead_lettered")
# Rows per (endpoint, outcome). A transaction writes the row of its database session, so
# concurrent commits on PostgreSQL (one session per connection) seldom queue on the same
# row lock. Must match migration 0010.
SHARDS = 32

BUMP = Sql(
    "bump_totals",
    """
    UPDATE scan_totals SET count = count + :n
    WHERE endpoint_id = :endpoint AND outcome = :outcome AND shard = :shard
    """,
)
INSERT_ZERO = Sql(
    "insert_zero_total",
    """
    INSERT INTO scan_totals (endpoint_id, outcome, shard, count)
    VALUES (:endpoint, :outcome, :shard, 0)
    """,
)
TOTALS = Sql(
    "outcome_totals",
    "SELECT outcome, SUM(count) FROM scan_totals GROUP BY outcome",
)
ENDPOINT_TOTALS = Sql(
    "endpoint_outcome_totals",
    """
    SELECT scan_totals.endpoint_id, scan_totals.outcome, SUM(scan_totals.count)
    FROM scan_totals JOIN endpoints ON endpoints.id = scan_totals.endpoint_id
    WHERE endpoints.owner_id = :owner
    GROUP BY scan_totals.endpoint_id, scan_totals.outcome
    """,
)


def shard(tx: Tx) -> int:
    """The totals row this transaction adds to."""
    return tx.session % SHARDS


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


def tally(events: Iterable[Event]) -> Counter[tuple[int, str]]:
    """How many scans each event batch ended, by (endpoint id, outcome)."""
    counts: Counter[tuple[int, str]] = Counter()
    for event in events:
        match event:
            case ScanFinished():
                counts[event.scan.endpoint_id, "finished"] += 1
            case ScanFailed():
                counts[event.scan.endpoint_id, "failed"] += 1
            case ScanDeadLettered():
                counts[event.scan.endpoint_id, "dead_lettered"] += 1
            case EndpointRevoked():
                counts[event.endpoint_id, "dead_lettered"] += event.dead_lettered
            case ScanRedriven():
                # No longer a dead letter; whatever ends it next is counted then.
                counts[event.scan.endpoint_id, "dead_lettered"] -= 1
            case _:
                pass
    return counts


async def record(tx: Tx, events: Iterable[Event]) -> None:
    """Add the outcomes of this transaction's events to the totals, in the same transaction."""
    bumps = [
        {"endpoint": endpoint_id, "outcome": outcome, "shard": shard(tx), "n": n}
        for (endpoint_id, outcome), n in sorted(tally(events).items())
        if n
    ]
    # Sorted, so two transactions never take the same rows in opposite orders.
    await tx.many(BUMP, bumps)


async def read(tx: Tx) -> dict[str, int]:
    """Totals over every endpoint, by outcome."""
    found = {row[0]: int(row[1] or 0) for row in await tx.rows(TOTALS)}
    return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}


async def of_owner(tx: Tx, owner_id: int) -> dict[int, dict[str, int]]:
    """Each of the owner's endpoints' totals by outcome (endpoints without rows absent)."""
    out: dict[int, dict[str, int]] = {}
    for endpoint_id, outcome, total in await tx.rows(ENDPOINT_TOTALS, {"owner": owner_id}):
        out.setdefault(int(endpoint_id), dict.fromkeys(OUTCOMES, 0))[outcome] = int(total or 0)
    return out
