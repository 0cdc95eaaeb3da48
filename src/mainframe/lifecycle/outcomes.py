"""The outcome totals a transaction's events change: how many scans they ended, by endpoint
and outcome, as increments of the totals' rows. Each (endpoint, outcome) is kept in SHARDS
rows (migration 0010 creates them) and a transaction adds to the row of its database
session, so concurrent commits on PostgreSQL seldom queue on one row lock. Pure: the store
runs the increments (store/work/closing.py::BUMP) in the transaction that ended the scans."""

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

# Rows per (endpoint, outcome). Must match migration 0010.
SHARDS = 32


def shard_of(session: int) -> int:
    """The totals row a transaction of this database session adds to."""
    return session % SHARDS


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


def increments(events: Iterable[Event], session: int) -> list[dict[str, int | str]]:
    """The totals rows to add to, and by how much, for a transaction's events; sorted, so
    two transactions never take the same rows in opposite orders."""
    shard = shard_of(session)
    return [
        {"endpoint": endpoint_id, "outcome": outcome, "shard": shard, "n": n}
        for (endpoint_id, outcome), n in sorted(tally(events).items())
        if n
    ]
