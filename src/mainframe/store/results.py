"""Writes against an assignment: results (single and batch), heartbeats, waits and resumes,
and the operator's fail. Each is a compare-and-set on the current assignment (`holder_where`,
the SQL twin of `lifecycle.rules.diagnose_stale`), so a stale worker can never change a scan;
only a refused write reads the row again, to say why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.events import (
    Event,
    ScanFailed,
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
from mainframe.store.closing import (
    CLOSE_BATCH,
    DIAGNOSE,
    FAIL_UNLEASED,
    INSERT_HISTORY,
    Closed,
    ClosedRow,
    Report,
    batch_params,
    close_sql,
    settle_params,
    settlement_events,
    total_outcome,
    touch_sql,
)
from mainframe.store.errors import Conflict, NotFound, Stale, StoreError, Unauthorized
from mainframe.store.leasing import LapseWatch
from mainframe.store.records import Principal, ScanRecord
from mainframe.store.uow import Tx, UnitOfWork


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One entry of a batch: the closed scan, or the error the single route would raise."""

    scan_id: int
    closed: Closed | None
    error: StoreError | None


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
        # Rows are taken in scan order, so two batches never wait on each other in a cycle.
        order = sorted(range(len(items)), key=lambda i: items[i][0])
        # A lone echoed result is one statement on PostgreSQL (history and total inside it).
        one_trip = len(items) == 1 and items[0][1].attempt is not None and not self.uow.sqlite
        with self.uow.single() if one_trip else self.uow.write() as tx:
            pending = _Pending(one_trip=one_trip)
            settled = self._close_set(tx, holder, items, order, now)
            done: dict[int, ItemOutcome] = {}
            for index in order:
                scan_id, report = items[index]
                if index in settled:
                    closed = settled[index]
                else:
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

    def _settling(
        self, holder: _Holder, scan_id: int, report: Report, now: int
    ) -> tuple[Settlement, dict[str, Any]]:
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
        params = settle_params(settlement, report, now, now + delay)
        params |= {
            "scan": scan_id,
            "endpoint": holder.endpoint_id,
            "worker": holder.worker,
            "attempt": report.attempt,
            "assignment": report.assignment_id,
            "total": total_outcome(settlement),
            "shard": self.uow.rng.randrange(totals.SHARDS),
        }
        return settlement, params

    def _close_set(
        self,
        tx: Tx,
        holder: _Holder,
        items: Sequence[tuple[int, Report]],
        order: list[int],
        now: int,
    ) -> dict[int, Closed | None]:
        """On PostgreSQL, close a batch's echoed results in one statement; every index it
        covers maps to its closed scan, or None when the compare-and-set missed."""
        if self.uow.sqlite or len(items) < 2:
            return {}
        firsts: dict[int, int] = {}
        for index in order:
            scan_id, report = items[index]
            if report.attempt is not None and scan_id not in firsts:
                firsts[scan_id] = index
        if not firsts:
            return {}
        plans = {
            index: self._settling(holder, items[index][0], items[index][1], now)
            for index in firsts.values()
        }
        arrays = batch_params([plans[index][1] for index in firsts.values()])
        shard = self.uow.rng.randrange(totals.SHARDS)
        params = arrays | {
            "now": now,
            "endpoint": holder.endpoint_id,
            "worker": holder.worker,
            "shard": shard,
        }
        rows = {row[0]: ClosedRow(*row) for row in tx.rows(CLOSE_BATCH, params)}
        settled: dict[int, Closed | None] = {}
        for scan_id, index in firsts.items():
            row = rows.get(scan_id)
            if row is None:
                settled[index] = None
                continue
            settlement = plans[index][0]
            ref = row.ref(holder.endpoint)
            tx.events.extend(settlement_events(ref, row, settlement, items[index][1], now))
            settled[index] = row.public()
        return settled

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
        settlement, params = self._settling(holder, scan_id, report, now)
        echoed, with_worker = report.attempt is not None, holder.worker is not None
        one_trip = pending.one_trip and echoed and with_worker
        row = tx.first(close_sql(echoed=echoed, with_worker=with_worker, one_trip=one_trip), params)
        if row is None:
            return None
        closed = ClosedRow(*row)
        events = settlement_events(closed.ref(holder.endpoint), closed, settlement, report, now)
        tx.events.extend(events)
        if not one_trip:
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


def worker_endpoint(principal: Principal) -> tuple[int, str]:
    if principal.endpoint_id is None or principal.endpoint is None:
        raise Unauthorized("a worker token is required")
    return principal.endpoint_id, principal.endpoint
