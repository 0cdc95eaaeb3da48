"""Closing an attempt: a worker's result, an operator's fail, and the lease-holder checks
shared by heartbeats, waits and resumes. Each write is a compare-and-set on the current
assignment, so a stale worker can never change a scan."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    insert,
    select,
    update,
)

from mainframe.lifecycle.events import (
    AttemptFailed,
    Event,
    FinalAttempt,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanReady,
)
from mainframe.lifecycle.rules import (
    TERMINAL,
    Holding,
    Settlement,
    StaleCode,
    Status,
    diagnose_stale,
    settle,
)
from mainframe.store.records import ScanRecord, scan_from_row
from mainframe.store.schema import attempts, scans


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


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a write against an assignment did nothing: 'not_found' or a StaleCode."""

    code: StaleCode | None  # None means not found (or another endpoint's scan)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who claims to hold which assignment of a scan; `worker=None` is the operator."""

    scan_id: int
    endpoint_id: int
    worker: str | None
    attempt: int | None
    assignment_id: str | None

    @property
    def where(self) -> ColumnElement[bool]:
        return holder_where(echoed=self.attempt is not None, with_worker=self.worker is not None)

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"h_scan": self.scan_id, "h_endpoint": self.endpoint_id}
        if self.worker is not None:
            params["h_worker"] = self.worker
        if self.attempt is not None:
            params |= {"h_attempt": self.attempt, "h_assignment": self.assignment_id}
        return params


@functools.cache
def holder_where(*, echoed: bool, with_worker: bool) -> ColumnElement[bool]:
    # Built once per shape with bind parameters, so SQLAlchemy's cache key is memoised.
    terms = [
        scans.c.id == bindparam("h_scan", type_=BigInteger),
        scans.c.endpoint_id == bindparam("h_endpoint", type_=BigInteger),
        scans.c.status == Status.PENDING.value,
    ]
    if with_worker:
        terms.append(scans.c.worker == bindparam("h_worker", type_=String))
    if echoed:
        terms += [
            scans.c.attempt_count == bindparam("h_attempt", type_=Integer),
            scans.c.assignment_id == bindparam("h_assignment", type_=String),
        ]
    else:
        terms.append(scans.c.attempt_count == 1)  # rollout form: first assignment only
    return and_(*terms)


_SETTLE_VALUES: dict[str, Any] = {
    "status": bindparam("s_status", type_=String),
    "updated_at": bindparam("s_now", type_=BigInteger),
    "lease_expires_at": None,
    "wait_reason": None,
    "fail_reason": bindparam("s_fail_reason", type_=String),
    "finished_at": bindparam("s_finished_at", type_=BigInteger),
    "dead_lettered_at": bindparam("s_dead_lettered_at", type_=BigInteger),
    "result": bindparam("s_result", type_=Text),
}
_INSERT_ATTEMPT = insert(attempts)


@functools.cache
def _close_statement(*, echoed: bool, with_worker: bool) -> Any:
    where = holder_where(echoed=echoed, with_worker=with_worker)
    return update(scans).where(where).values(**_SETTLE_VALUES).returning(*scans.c)


def diagnose(
    conn: Connection,
    *,
    scan_id: int,
    endpoint_id: int,
    worker: str,
    attempt: int | None,
    assignment_id: str | None,
) -> Rejected:
    """Explain, after a compare-and-set matched nothing, why the write was refused."""
    row = conn.execute(
        select(scans.c.status, scans.c.attempt_count, scans.c.assignment_id, scans.c.worker).where(
            scans.c.id == scan_id, scans.c.endpoint_id == endpoint_id
        )
    ).first()
    if row is None:
        return Rejected(None)
    holding = Holding(Status(row.status), row.attempt_count, row.assignment_id, row.worker)
    code = diagnose_stale(holding, worker=worker, attempt=attempt, assignment_id=assignment_id)
    # A concurrent writer moved the row between our update and this read.
    return Rejected(code or StaleCode.STALE_ASSIGNMENT)


def _settle_params(settlement: Settlement, report: Report, now: int) -> dict[str, Any]:
    terminal = settlement.status in TERMINAL
    dead = settlement.dead_letter_reason is not None
    return {
        "s_status": settlement.status.value,
        "s_now": now,
        "s_fail_reason": settlement.fail_reason,
        # A scan that goes round again has neither yet; a terminal one gets both now.
        "s_finished_at": now if terminal else None,
        "s_result": report.result if terminal else None,
        "s_dead_lettered_at": now if dead else None,
    }


def close_attempt(
    conn: Connection,
    *,
    holder: Holder,
    report: Report,
    endpoint: str,
    now: int,
    max_attempts: int,
    history: list[dict[str, Any]] | None = None,
) -> tuple[ScanRecord, list[Event]] | None:
    """Apply a report to the attempt `holder` names; None when it no longer holds it.

    The closed attempt's history row is written at once, or appended to `history` for the
    caller to write with `write_history` (one statement for a whole batch)."""
    attempt = report.attempt if report.attempt is not None else 1
    settlement = settle(
        outcome=report.outcome,
        retryable=report.retryable,
        attempt=attempt,
        max_attempts=max_attempts,
    )
    statement = _close_statement(
        echoed=holder.attempt is not None, with_worker=holder.worker is not None
    )
    row = conn.execute(statement, holder.params | _settle_params(settlement, report, now)).first()
    if row is None:
        return None
    scan = scan_from_row(row, endpoint)
    seq = scan.attempt_base + scan.attempt_count
    closed = {
        "scan_id": scan.id,
        "seq": seq,
        "attempt": scan.attempt_count,
        "assignment_id": scan.assignment_id,
        "worker": scan.worker,
        "leased_at": scan.leased_at,
        "closed_at": now,
        "outcome": settlement.attempt_outcome.value,
        "summary": report.summary,
        "artifact": report.artifact,
    }
    if history is None:
        write_history(conn, [closed])
    else:
        history.append(closed)
    return scan, _settlement_events(scan, settlement, report, now, seq)


def write_history(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert closed attempts' history rows (executemany for a batch)."""
    if rows:
        conn.execute(_INSERT_ATTEMPT, rows)


def _settlement_events(
    scan: ScanRecord, settlement: Settlement, report: Report, now: int, seq: int
) -> list[Event]:
    ref = scan.ref()
    if settlement.status is Status.FINISHED:
        return [ScanFinished(ref, scan.attempt_count)]
    if settlement.status is Status.QUEUED:
        return [
            AttemptFailed(ref, scan.attempt_count, settlement.attempt_outcome.value),
            ScanReady(ref),
        ]
    if settlement.dead_letter_reason is None:
        return [ScanFailed(ref, scan.attempt_count)]
    final = FinalAttempt(
        seq, settlement.attempt_outcome.value, report.summary, report.artifact, now
    )
    return [
        ScanDeadLettered(
            ref,
            settlement.dead_letter_reason,
            scan.attempt_count,
            scan.worker,
            scan.leased_at,
            now,
            final,
        )
    ]


def fail_unleased(
    conn: Connection, *, scan_id: int, endpoint: str, summary: str | None, now: int
) -> ScanRecord | None:
    """An operator's plain failure of a scan nobody holds (QUEUED or QUARANTINED)."""
    statement = (
        update(scans)
        .where(
            scans.c.id == scan_id,
            scans.c.status.in_((Status.QUEUED.value, Status.QUARANTINED.value)),
        )
        .values(
            status=Status.FAILED.value,
            fail_reason="failed",
            finished_at=now,
            updated_at=now,
            result=None,
        )
        .returning(*scans.c)
    )
    row = conn.execute(statement).first()
    del summary  # an unleased scan has no attempt to carry the summary
    return None if row is None else scan_from_row(row, endpoint)
