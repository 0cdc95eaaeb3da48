"""Writes against an assignment: results (single and batch), heartbeats, waits and resumes,
and the operator's fail. Each is a compare-and-set on the current assignment (`holder_where`,
the SQL twin of `lifecycle.rules.diagnose_stale`), so a stale worker can never change a scan;
only a refused write reads the row again, to say why."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.events import (
    AttemptFailed,
    Event,
    FinalAttempt,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanReady,
    ScanRef,
    StaleResultRejected,
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
from mainframe.store import accounts, queries, totals
from mainframe.store.budget import Budget
from mainframe.store.errors import Conflict, NotFound, Stale, StoreError, Unauthorized
from mainframe.store.leasing import LapseWatch
from mainframe.store.records import Principal, ScanRecord
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx, UnitOfWork


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


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One entry of a batch: the closed scan, or the error the single route would raise."""

    scan_id: int
    closed: Closed | None
    error: StoreError | None


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


class Results:
    def __init__(
        self, uow: UnitOfWork, budget: Budget, retry: RetryPolicy, lapses: LapseWatch
    ) -> None:
        self.uow = uow
        self.budget = budget
        self.retry = retry
        self.lapses = lapses

    def report(self, principal: Principal, scan_id: int, report: Report) -> Closed:
        """Close the worker's current attempt with its result."""
        outcome = self.report_many(principal, [(scan_id, report)])[0]
        if outcome.error is not None:
            raise outcome.error
        assert outcome.closed is not None
        return outcome.closed

    def report_many(
        self, principal: Principal, items: Sequence[tuple[int, Report]]
    ) -> list[ItemOutcome]:
        """Apply independent results in one transaction; each succeeds or fails alone."""
        endpoint_id, endpoint = worker_endpoint(principal)
        holder = _Holder(principal.name, endpoint_id, endpoint)
        now = self.uow.now()
        # Rows are taken in scan order, so two batches never wait on each other in a cycle;
        # a lone result may fold its history and total into one statement (`one_trip`).
        order = sorted(range(len(items)), key=lambda i: items[i][0])
        done: dict[int, ItemOutcome] = {}
        with self.uow.write() as tx:
            pending = _Pending(one_trip=len(items) == 1)
            for index in order:
                scan_id, report = items[index]
                closed = self._close(tx, holder, scan_id, report, now, pending)
                if closed is None:
                    error = self._refusal(tx, principal, scan_id, report)
                    done[index] = ItemOutcome(scan_id, None, error)
                else:
                    done[index] = ItemOutcome(scan_id, closed, None)
            pending.write(tx, self.uow)
            out = [done[index] for index in range(len(items))]
            # Credentials are cached by the API; a revoked endpoint shows up as refusals.
            refused = any(item.error is not None for item in out)
            if refused and accounts.endpoint_is_revoked(tx, endpoint_id):
                raise Unauthorized("this worker's endpoint is revoked")
        return out

    def _close(
        self,
        tx: Tx,
        holder: _Holder,
        scan_id: int,
        report: Report,
        now: int,
        pending: _Pending,
    ) -> Closed | None:
        """Close the attempt `report` names if `worker` (None: the operator) still holds it."""
        attempt = report.attempt if report.attempt is not None else 1
        settlement = settle(
            outcome=report.outcome,
            retryable=report.retryable,
            attempt=attempt,
            max_attempts=self.budget.max_attempts,
        )
        delay = retry_delay_us(
            self.retry, attempt=attempt, draw=self.uow.rng.random(), requested=report.retry_after
        )
        params = _settle_params(settlement, report, now, now + delay)
        worker = holder.worker
        params |= {
            "scan": scan_id,
            "endpoint": holder.endpoint_id,
            "worker": worker,
            "attempt": report.attempt,
            "assignment": report.assignment_id,
            "total": _total_outcome(settlement),
            "shard": self.uow.rng.randrange(totals.SHARDS),
        }
        one_trip = pending.one_trip and tx.dialect == "postgresql"
        echoed, with_worker = report.attempt is not None, worker is not None
        sql = close_sql(echoed=echoed, with_worker=with_worker, one_trip=one_trip)
        row = tx.first(sql, params)
        if row is None:
            return None
        closed = _ClosedRow(*row)
        events = _settlement_events(closed.ref(holder.endpoint), closed, settlement, report, now)
        tx.events.extend(events)
        if not (one_trip and echoed and with_worker):
            pending.history.append(closed.history(params))
            pending.uncounted.extend(events)
        return closed.public()

    def _refusal(self, tx: Tx, principal: Principal, scan_id: int, report: Report) -> StoreError:
        endpoint_id, endpoint = worker_endpoint(principal)
        row = tx.first(DIAGNOSE, {"scan": scan_id, "endpoint": endpoint_id})
        if row is None:
            return NotFound(f"no scan {scan_id} for this endpoint")
        holding = Holding(Status(row[0]), row[1], row[2], row[3])
        code = diagnose_stale(
            holding,
            worker=principal.name,
            attempt=report.attempt,
            assignment_id=report.assignment_id,
        )
        # The compare-and-set missed, so something differs even when the rule sees none:
        # a concurrent writer moved the row between the two statements.
        code = code or StaleCode.STALE_ASSIGNMENT
        tx.events.append(
            StaleResultRejected(endpoint, scan_id, principal.name, code, report.attempt)
        )
        return Stale(code)

    def heartbeat(
        self, principal: Principal, scan_id: int, *, attempt: int | None, assignment_id: str | None
    ) -> int:
        """Extend the current lease (a wait keeps its own deadline); return the new deadline."""
        until = self.uow.now() + self.budget.job_timeout_us
        return self._touch(
            "heartbeat", principal, scan_id, attempt, assignment_id, {"until": until}
        )

    def wait(
        self,
        principal: Principal,
        scan_id: int,
        *,
        attempt: int | None,
        assignment_id: str | None,
        seconds: float,
        reason: str,
    ) -> int:
        """Park the scan for at most `seconds`; it is reclaimed if neither resume nor result
        arrives in time."""
        until = self.uow.now() + round(seconds * 1_000_000)
        values = {"until": until, "reason": reason}
        deadline = self._touch("wait", principal, scan_id, attempt, assignment_id, values)
        assert principal.endpoint_id is not None
        self.lapses.note(principal.endpoint_id, deadline)
        return deadline

    def resume(
        self, principal: Principal, scan_id: int, *, attempt: int | None, assignment_id: str | None
    ) -> int:
        """End a wait: the scan is back under an ordinary lease."""
        until = self.uow.now() + self.budget.job_timeout_us
        return self._touch("resume", principal, scan_id, attempt, assignment_id, {"until": until})

    def _touch(
        self,
        kind: str,
        principal: Principal,
        scan_id: int,
        attempt: int | None,
        assignment_id: str | None,
        values: dict[str, object],
    ) -> int:
        endpoint_id, _ = worker_endpoint(principal)
        params = values | {
            "scan": scan_id,
            "endpoint": endpoint_id,
            "worker": principal.name,
            "attempt": attempt,
            "assignment": assignment_id,
            "now": self.uow.now(),
        }
        report = Report("touch", True, attempt, assignment_id, None, None, None)
        with self.uow.write() as tx:
            row = tx.first(touch_sql(kind, echoed=attempt is not None), params)
            if row is not None:
                return int(row[0])
            error = self._refusal(tx, principal, scan_id, report)
            if accounts.endpoint_is_revoked(tx, endpoint_id):
                raise Unauthorized("this worker's endpoint is revoked")
        raise error

    def operator_fail(
        self, owner_id: int, scan_id: int, *, retryable: bool, summary: str | None
    ) -> ScanRecord:
        """Fail the current attempt as its worker would; an unleased scan fails plainly."""
        now = self.uow.now()
        with self.uow.write() as tx:
            scan = queries.owned_scan(tx.conn, owner_id, scan_id)
            if scan.status in TERMINAL:
                raise Stale(StaleCode.ALREADY_TERMINAL)
            if scan.status is Status.PENDING:
                report = Report(
                    "failed", retryable, scan.attempt_count, scan.assignment_id, summary, None, None
                )
                pending = _Pending()
                holder = _Holder(None, scan.endpoint_id, scan.endpoint)
                if self._close(tx, holder, scan.id, report, now, pending) is None:
                    raise Stale(StaleCode.STALE_ASSIGNMENT)
                pending.write(tx, self.uow)
            elif retryable:
                raise Conflict(
                    "not_leased",
                    "the scan has no current attempt to fail; "
                    "send retryable=false to fail it for good",
                )
            else:
                self._fail_unleased(tx, scan, now)
            return queries.owned_scan(tx.conn, owner_id, scan_id)

    def _fail_unleased(self, tx: Tx, scan: ScanRecord, now: int) -> None:
        """An operator's plain failure of a scan nobody holds (QUEUED or QUARANTINED)."""
        row = tx.first(FAIL_UNLEASED, {"scan": scan.id, "now": now})
        if row is None:
            raise Stale(StaleCode.STALE_ASSIGNMENT)
        event = ScanFailed(scan.ref(), scan.attempt_count)
        tx.events.append(event)
        totals.record(tx, [event], rng=self.uow.rng)


FAIL_UNLEASED = Sql(
    "fail_unleased",
    "UPDATE scans SET status = 'FAILED', fail_reason = 'failed', finished_at = :now, "
    "updated_at = :now, result = NULL, available_at = NULL "
    "WHERE id = :scan AND status IN ('QUEUED', 'QUARANTINED') RETURNING id",
)


@dataclass(frozen=True, slots=True)
class _Holder:
    """Who claims the assignment: a worker of an endpoint, or (worker None) its operator."""

    worker: str | None
    endpoint_id: int
    endpoint: str


@dataclass
class _Pending:
    """History rows and outcome events a transaction still has to write (batched)."""

    one_trip: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    uncounted: list[Event] = field(default_factory=list)

    def write(self, tx: Tx, uow: UnitOfWork) -> None:
        tx.many(INSERT_HISTORY, self.history)
        totals.record(tx, self.uncounted, rng=uow.rng)


@dataclass(frozen=True, slots=True)
class _ClosedRow:
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


def _total_outcome(settlement: Settlement) -> str:
    """The scan_totals row this settlement adds to ('' for none: the scan goes round again)."""
    if settlement.status is Status.FINISHED:
        return "finished"
    if settlement.status is Status.QUEUED:
        return ""
    return "dead_lettered" if settlement.dead_letter_reason is not None else "failed"


def _settle_params(
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


def _settlement_events(
    ref: ScanRef, closed: _ClosedRow, settlement: Settlement, report: Report, now: int
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


def worker_endpoint(principal: Principal) -> tuple[int, str]:
    if principal.endpoint_id is None or principal.endpoint is None:
        raise Unauthorized("a worker token is required")
    return principal.endpoint_id, principal.endpoint
