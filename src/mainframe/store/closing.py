"""Closing an attempt, as statements and plain rows: the compare-and-set on the current
assignment (`holder_where`, the SQL twin of `lifecycle.rules.diagnose_stale`), the settle
update in its three shapes (one statement per result; on PostgreSQL also one statement for a
lone result with its history and total, and one for a whole batch), and what a closed row
says to the worker, the history and the domain events."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from mainframe.lifecycle.events import (
    AttemptFailed,
    Event,
    FinalAttempt,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanReady,
    ScanRef,
)
from mainframe.lifecycle.rules import TERMINAL, Settlement, Status
from mainframe.store.sql import Sql


@dataclass(frozen=True, slots=True)
class Report:
    """What a worker (or operator) says about the current attempt."""

    outcome: str
    retryable: bool
    attempt: int | None
    assignment_id: str | None
    summary: str | None
    artifact: str | None
    result: str | None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Closed:
    """What a worker learns about the scan whose attempt it closed."""

    scan_id: int
    status: Status
    attempt: int
    available_at: int | None
    finished_at: int | None
    dead_lettered_at: int | None
    fail_reason: str | None


def holder_where(*, echoed: bool, with_worker: bool) -> str:
    """The compare-and-set on the current assignment; `diagnose_stale` says why it missed."""
    terms = ["id = :scan", "endpoint_id = :endpoint", "status = 'PENDING'"]
    if with_worker:
        terms.append("worker = :worker")
    if echoed:
        terms += ["attempt_count = :attempt", "assignment_id = :assignment"]
    else:
        terms.append("attempt_count = 1")  # rollout form: the first assignment only
    return " AND ".join(terms)


_CLOSED = (
    "id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker, "
    "leased_at, attempt_count, attempt_base, assignment_id, status, finished_at, "
    "dead_lettered_at, fail_reason, available_at"
)
_SETTLE = (
    "status = :status, updated_at = :now, lease_expires_at = NULL, wait_reason = NULL, "
    "fail_reason = :fail_reason, finished_at = :finished_at, "
    "dead_lettered_at = :dead_lettered_at, result = :result, available_at = :available_at"
)
_HISTORY_COLUMNS = (
    "scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at, outcome, summary, artifact"
)
INSERT_HISTORY = Sql(
    "insert_attempt",
    f"INSERT INTO attempts ({_HISTORY_COLUMNS}) VALUES (:scan, :seq, :attempt, :assignment, "
    ":worker, :leased_at, :now, :outcome, :summary, :artifact)",
)
DIAGNOSE = Sql(
    "diagnose_refusal",
    "SELECT status, attempt_count, assignment_id, worker FROM scans "
    "WHERE id = :scan AND endpoint_id = :endpoint",
)


@functools.cache
def close_sql(*, echoed: bool, with_worker: bool, one_trip: bool = False) -> Sql:
    """Close the named attempt. A worker's echoed result on PostgreSQL (the hot path) carries
    its history row and outcome total in the same statement, one round trip; every other form
    leaves both to the caller (two more cheap statements)."""
    where = holder_where(echoed=echoed, with_worker=with_worker)
    update = f"UPDATE scans SET {_SETTLE} WHERE {where}"
    if not (echoed and with_worker and one_trip):
        return Sql(f"close_attempt_{echoed}_{with_worker}", f"{update} RETURNING {_CLOSED}")
    pg = (
        f"WITH closed AS ({update} RETURNING {_CLOSED}), "
        f"history AS (INSERT INTO attempts ({_HISTORY_COLUMNS}) "
        "SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, "
        "leased_at, :now, :outcome, :summary, :artifact FROM closed), "
        "total AS (UPDATE scan_totals SET count = count + 1 WHERE endpoint_id = :endpoint "
        "AND outcome = :total AND shard = :shard AND EXISTS (SELECT 1 FROM closed)) "
        f"SELECT {_CLOSED} FROM closed"
    )
    return Sql("close_attempt_hot", f"{update} RETURNING {_CLOSED}", pg)


_BATCH_INPUT = (
    "SELECT * FROM unnest(CAST(:scans AS bigint[]), CAST(:attempts AS integer[]), "
    "CAST(:assignments AS text[]), CAST(:statuses AS text[]), CAST(:fail_reasons AS text[]), "
    "CAST(:finished AS bigint[]), CAST(:dead AS bigint[]), CAST(:results AS text[]), "
    "CAST(:available AS bigint[]), CAST(:outcomes AS text[]), CAST(:summaries AS text[]), "
    "CAST(:artifacts AS text[])) AS i(scan, attempt, assignment, status, fail_reason, "
    "finished_at, dead_lettered_at, result, available_at, outcome, summary, artifact)"
)
_SCANS_CLOSED = ", ".join(f"scans.{name.strip()}" for name in _CLOSED.split(","))
# PostgreSQL only: a whole batch of echoed results in one statement, history rows and outcome
# totals included. Each input row is the compare-and-set of holder_where for one scan.
CLOSE_BATCH = Sql(
    "close_batch",
    "-- PostgreSQL only",
    f"WITH i AS ({_BATCH_INPUT}), closed AS (UPDATE scans SET status = i.status, "
    "updated_at = :now, lease_expires_at = NULL, wait_reason = NULL, "
    "fail_reason = i.fail_reason, finished_at = i.finished_at, "
    "dead_lettered_at = i.dead_lettered_at, result = i.result, available_at = i.available_at "
    "FROM i WHERE scans.id = i.scan AND scans.endpoint_id = :endpoint "
    "AND scans.status = 'PENDING' AND scans.worker = :worker "
    "AND scans.attempt_count = i.attempt AND scans.assignment_id = i.assignment "
    f"RETURNING {_SCANS_CLOSED}, i.outcome, i.summary, i.artifact), "
    f"history AS (INSERT INTO attempts ({_HISTORY_COLUMNS}) "
    "SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, leased_at, "
    ":now, outcome, summary, artifact FROM closed), "
    "total AS (UPDATE scan_totals SET count = scan_totals.count + c.n FROM (SELECT CASE "
    "WHEN status = 'FINISHED' THEN 'finished' WHEN dead_lettered_at IS NOT NULL "
    "THEN 'dead_lettered' ELSE 'failed' END AS outcome, count(*) AS n FROM closed "
    "WHERE status IN ('FINISHED', 'FAILED') GROUP BY 1) AS c "
    "WHERE scan_totals.endpoint_id = :endpoint AND scan_totals.outcome = c.outcome "
    "AND scan_totals.shard = :shard) "
    f"SELECT {_CLOSED} FROM closed",
)


def batch_params(entries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """CLOSE_BATCH's arrays from per-result settle parameters (see `settle_params`)."""
    columns = {
        "scans": "scan",
        "attempts": "attempt",
        "assignments": "assignment",
        "statuses": "status",
        "fail_reasons": "fail_reason",
        "finished": "finished_at",
        "dead": "dead_lettered_at",
        "results": "result",
        "available": "available_at",
        "outcomes": "outcome",
        "summaries": "summary",
        "artifacts": "artifact",
    }
    return {array: [entry[key] for entry in entries] for array, key in columns.items()}


@functools.cache
def touch_sql(kind: str, *, echoed: bool) -> Sql:
    """Heartbeat, wait or resume as one compare-and-set on the holder's row."""
    values = {
        # A heartbeat during a wait leaves the wait's own deadline alone.
        "heartbeat": "lease_expires_at = CASE WHEN wait_reason IS NULL THEN :until "
        "ELSE lease_expires_at END",
        "wait": "lease_expires_at = :until, wait_reason = :reason",
        "resume": "lease_expires_at = :until, wait_reason = NULL",
    }[kind]
    where = holder_where(echoed=echoed, with_worker=True)
    return Sql(
        f"{kind}_{echoed}",
        f"UPDATE scans SET updated_at = :now, {values} WHERE {where} RETURNING lease_expires_at",
    )


FAIL_UNLEASED = Sql(
    "fail_unleased",
    "UPDATE scans SET status = 'FAILED', fail_reason = 'failed', finished_at = :now, "
    "updated_at = :now, result = NULL, available_at = NULL "
    "WHERE id = :scan AND status IN ('QUEUED', 'QUARANTINED') RETURNING id",
)


@dataclass(frozen=True, slots=True)
class ClosedRow:
    id: int
    endpoint_id: int
    queue: str
    name: str
    version: str
    kind: str
    verified: bool
    source: str | None
    created_at: int
    worker: str | None
    leased_at: int | None
    attempt_count: int
    attempt_base: int
    assignment_id: str
    status: str
    finished_at: int | None
    dead_lettered_at: int | None
    fail_reason: str | None
    available_at: int | None

    def ref(self, endpoint: str) -> ScanRef:
        return ScanRef(
            self.id,
            self.endpoint_id,
            endpoint,
            self.queue,
            self.name,
            self.version,
            self.kind,
            bool(self.verified),
            self.source,
            self.created_at,
        )

    def history(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "scan": self.id,
            "seq": self.attempt_base + self.attempt_count,
            "attempt": self.attempt_count,
            "assignment": self.assignment_id,
            "worker": self.worker,
            "leased_at": self.leased_at,
            "now": params["now"],
            "outcome": params["outcome"],
            "summary": params["summary"],
            "artifact": params["artifact"],
        }

    def public(self) -> Closed:
        return Closed(
            self.id,
            Status(self.status),
            self.attempt_count,
            self.available_at,
            self.finished_at,
            self.dead_lettered_at,
            self.fail_reason,
        )


def total_outcome(settlement: Settlement) -> str:
    """The scan_totals row this settlement adds to ('' for none: the scan goes round again)."""
    if settlement.status is Status.FINISHED:
        return "finished"
    if settlement.status is Status.QUEUED:
        return ""
    return "dead_lettered" if settlement.dead_letter_reason is not None else "failed"


def settle_params(
    settlement: Settlement, report: Report, now: int, available_at: int
) -> dict[str, Any]:
    terminal = settlement.status in TERMINAL
    return {
        "status": settlement.status.value,
        "now": now,
        "fail_reason": settlement.fail_reason,
        # A scan that goes round again has neither yet; a terminal one gets both now.
        "finished_at": now if terminal else None,
        "result": report.result if terminal else None,
        "dead_lettered_at": now if settlement.dead_letter_reason is not None else None,
        "available_at": None if terminal else available_at,
        "outcome": settlement.attempt_outcome.value,
        "summary": report.summary,
        "artifact": report.artifact,
    }


def settlement_events(
    ref: ScanRef, closed: ClosedRow, settlement: Settlement, report: Report, now: int
) -> list[Event]:
    if settlement.status is Status.FINISHED:
        return [ScanFinished(ref, closed.attempt_count)]
    if settlement.status is Status.QUEUED:
        assert closed.available_at is not None
        return [
            AttemptFailed(ref, closed.attempt_count, settlement.attempt_outcome.value),
            ScanReady(ref, closed.attempt_count, closed.available_at),
        ]
    if settlement.dead_letter_reason is None:
        return [ScanFailed(ref, closed.attempt_count)]
    seq = closed.attempt_base + closed.attempt_count
    final = FinalAttempt(
        seq, settlement.attempt_outcome.value, report.summary, report.artifact, now
    )
    return [
        ScanDeadLettered(
            ref,
            settlement.dead_letter_reason,
            closed.attempt_count,
            closed.worker,
            closed.leased_at,
            now,
            final,
        )
    ]
