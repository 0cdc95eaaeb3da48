"""What every close of an attempt writes beside the scan: its history row
(`INSERT_HISTORY`), its cause's name (`name_causes`) and the outcome totals
(`count_outcomes`, also for a revocation's dead letters and a redrive that reopens one). The
close itself is planned by lifecycle/reports.py and run by results.py (a worker's),
leasing.py (a lapse's) and interventions.py (an operator's)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mainframe.lifecycle.causes import Cause
from mainframe.lifecycle.events import (
    EndpointRevoked,
    Event,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanRedriven,
)
from mainframe.lifecycle.reports import Plan
from mainframe.lifecycle.scans import ScanRecord
from mainframe.store.database import Sql, Tx

INSERT_HISTORY = Sql(
    "insert_attempt",
    """
    INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                          outcome, summary, artifact, settled_status, settled_available_at,
                          settled_fail_reason, next_assignments, result_digest, cause)
    VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
            :summary, :artifact, :settled_status, :settled_available_at,
            :settled_fail_reason, :next_assignments, :result_digest, :cause)
    """,
)


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
# A cause's pattern under its key, the first time any attempt fails of it.
NAME_CAUSE = Sql(
    "name_cause",
    """
    INSERT INTO causes (cause, pattern, first_seen_at) VALUES (:cause, :pattern, mf_now())
    ON CONFLICT (cause) DO NOTHING
    """,
)


def history(
    scan: ScanRecord, p: Plan, nexts: str | None, digest: str | None = None
) -> dict[str, object]:
    """The attempt's history row from the scan as its close left it, with the answer its
    result was given and the digest of its content (for a replay); `digest` replaces the
    report's own (an operator's close)."""
    return {
        "scan": scan.id,
        "seq": scan.attempt_base + scan.attempt_count,
        "attempt": scan.attempt_count,
        "assignment": scan.assignment_id,
        "worker": scan.worker,
        "leased_at": scan.leased_at,
        "outcome": p.settlement.attempt_outcome.value,
        "summary": p.report.summary,
        "artifact": p.report.artifact,
        "settled_status": scan.status.value,
        "settled_available_at": scan.available_at,
        "settled_fail_reason": scan.fail_reason,
        "next_assignments": nexts,
        "result_digest": digest or p.digest,
        "cause": p.cause.key if p.cause else None,
    }


def shard(tx: Tx) -> int:
    """The totals row this transaction adds to."""
    return tx.session % SHARDS


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


async def count_outcomes(tx: Tx, events: Iterable[Event]) -> None:
    """Add the outcomes of this transaction's events to the totals, in the same transaction."""
    bumps = [
        {"endpoint": endpoint_id, "outcome": outcome, "shard": shard(tx), "n": n}
        for (endpoint_id, outcome), n in sorted(tally(events).items())
        if n
    ]
    # Sorted, so two transactions never take the same rows in opposite orders.
    await tx.many(BUMP, bumps)


async def name_causes(tx: Tx, causes: Iterable[Cause | None]) -> None:
    """Keep the pattern of every cause met in this transaction (once per key)."""
    distinct = {cause.key: cause for cause in causes if cause is not None}
    params = [{"cause": c.key, "pattern": c.pattern} for c in distinct.values()]
    await tx.many(NAME_CAUSE, params)
