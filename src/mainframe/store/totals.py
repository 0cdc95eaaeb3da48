"""Terminal outcome totals, kept in the same transaction as the transitions that end scans,
so the metrics reconciliation reads a few dozen rows however large the scans table grows."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

from sqlalchemy import Connection, func, insert, select

from mainframe.lifecycle.events import (
    EndpointRevoked,
    Event,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanRedriven,
)
from mainframe.store.schema import scan_totals
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx

OUTCOMES = ("finished", "failed", "dead_lettered")
# Rows per (endpoint, outcome); writers pick one at random so concurrent commits on
# PostgreSQL seldom queue on the same row lock. Must match migration 0003.
SHARDS = 8


BUMP = Sql(
    "bump_totals",
    "UPDATE scan_totals SET count = count + :n "
    "WHERE endpoint_id = :endpoint AND outcome = :outcome AND shard = :shard",
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
            case ScanRedriven():
                # No longer a dead letter; whatever ends it next is counted then.
                counts[event.scan.endpoint_id, "dead_lettered"] -= 1
            case _:
                pass
    return counts


def record(tx: Tx, events: Iterable[Event], *, rng: random.Random) -> None:
    """Add the outcomes of this transaction's events to the totals, in the same transaction."""
    bumps = [
        {"endpoint": endpoint_id, "outcome": outcome, "shard": rng.randrange(SHARDS), "n": n}
        for (endpoint_id, outcome), n in sorted(tally(events).items())
        if n
    ]
    # Sorted, so two transactions never take the same rows in opposite orders.
    tx.many(BUMP, bumps)


def read(conn: Connection) -> dict[str, int]:
    """Totals over every endpoint, by outcome."""
    rows = conn.execute(
        select(scan_totals.c.outcome, func.sum(scan_totals.c.count)).group_by(scan_totals.c.outcome)
    )
    found = {outcome: int(total or 0) for outcome, total in rows}
    return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}


def dead_letters_of(conn: Connection, endpoint_ids: Iterable[int]) -> dict[int, int]:
    """Dead letters now held by each endpoint: a sum over its shards, never a scan count."""
    ids = list(endpoint_ids)
    if not ids:
        return {}
    rows = conn.execute(
        select(scan_totals.c.endpoint_id, func.sum(scan_totals.c.count))
        .where(scan_totals.c.endpoint_id.in_(ids), scan_totals.c.outcome == "dead_lettered")
        .group_by(scan_totals.c.endpoint_id)
    )
    found = {int(endpoint_id): int(total or 0) for endpoint_id, total in rows}
    return {endpoint_id: found.get(endpoint_id, 0) for endpoint_id in ids}


def of_endpoints(conn: Connection, endpoint_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Each endpoint's totals by outcome."""
    ids = list(endpoint_ids)
    out = {endpoint_id: dict.fromkeys(OUTCOMES, 0) for endpoint_id in ids}
    if not ids:
        return out
    rows = conn.execute(
        select(scan_totals.c.endpoint_id, scan_totals.c.outcome, func.sum(scan_totals.c.count))
        .where(scan_totals.c.endpoint_id.in_(ids))
        .group_by(scan_totals.c.endpoint_id, scan_totals.c.outcome)
    )
    for endpoint_id, outcome, total in rows:
        out[int(endpoint_id)][outcome] = int(total or 0)
    return out
