"""Terminal outcome totals, kept in the same transaction as the transitions that end scans,
so the metrics reconciliation reads a few dozen rows however large the scans table grows."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    bindparam,
    func,
    insert,
    select,
    update,
)

from mainframe.lifecycle.events import (
    EndpointRevoked,
    Event,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
)
from mainframe.store.schema import scan_totals

OUTCOMES = ("finished", "failed", "dead_lettered")
# Rows per (endpoint, outcome); writers pick one at random so concurrent commits on
# PostgreSQL seldom queue on the same row lock. Must match migration 0003.
SHARDS = 8


_BUMP = (
    update(scan_totals)
    .where(
        scan_totals.c.endpoint_id == bindparam("t_endpoint", type_=BigInteger),
        scan_totals.c.outcome == bindparam("t_outcome", type_=String),
        scan_totals.c.shard == bindparam("t_shard", type_=Integer),
    )
    .values(count=scan_totals.c.count + bindparam("t_n", type_=BigInteger))
)


def create_rows(conn: Connection, endpoint_id: int) -> None:
    """Zeroed totals for a new endpoint, so every later write is a plain UPDATE."""
    conn.execute(
        insert(scan_totals),
        [
            {"endpoint_id": endpoint_id, "outcome": outcome, "shard": shard, "count": 0}
            for outcome in OUTCOMES
            for shard in range(SHARDS)
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
            case _:
                pass
    return counts


def record(conn: Connection, events: Iterable[Event], *, rng: random.Random) -> None:
    """Add the outcomes of this transaction's events to the totals."""
    for (endpoint_id, outcome), n in sorted(tally(events).items()):
        if n == 0:
            continue
        bumped = conn.execute(
            _BUMP,
            {
                "t_endpoint": endpoint_id,
                "t_outcome": outcome,
                "t_shard": rng.randrange(SHARDS),
                "t_n": n,
            },
        )
        if bumped.rowcount == 0:
            raise RuntimeError(f"scan_totals rows missing for endpoint {endpoint_id}")


def read(conn: Connection) -> dict[str, int]:
    """Totals over every endpoint, by outcome."""
    rows = conn.execute(
        select(scan_totals.c.outcome, func.sum(scan_totals.c.count)).group_by(scan_totals.c.outcome)
    )
    found = {outcome: int(total or 0) for outcome, total in rows}
    return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}
