"""Writes against an assignment: results (single and batch), heartbeats, waits and resumes,
plus the operator's fail and the revocation cascade."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Connection, Text, bindparam, case, update

from mainframe.lifecycle.events import Event, StaleResultRejected
from mainframe.lifecycle.rules import TERMINAL, StaleCode, Status
from mainframe.store import accounts, results
from mainframe.store.base import StoreBase
from mainframe.store.errors import Conflict, NotFound, Stale, StoreError, Unauthorized
from mainframe.store.records import Principal, ScanRecord
from mainframe.store.results import Report
from mainframe.store.revoke import revoke_endpoint
from mainframe.store.schema import scans


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One entry of a batch: the scan on success, or the error it would have raised."""

    scan_id: int
    scan: ScanRecord | None
    error: StoreError | None


class Reporting(StoreBase):
    def report(self, principal: Principal, scan_id: int, report: Report) -> ScanRecord:
        """Close the worker's current attempt with its result."""
        outcome = self.report_many(principal, [(scan_id, report)])[0]
        if outcome.error is not None:
            raise outcome.error
        assert outcome.scan is not None
        return outcome.scan

    def report_many(
        self, principal: Principal, items: Sequence[tuple[int, Report]]
    ) -> list[ItemOutcome]:
        """Apply independent results in one transaction; each succeeds or fails alone."""
        endpoint_id, endpoint = _worker_endpoint(principal)
        now = self.now()
        out: list[ItemOutcome] = []
        history: list[dict[str, Any]] = []
        with self.transaction() as (conn, events):
            for scan_id, report in items:
                closed = self._close(
                    conn, scan_id, endpoint_id, endpoint, principal.name, report, now, history
                )
                if closed is not None:
                    events.extend(closed[1])
                    out.append(ItemOutcome(scan_id, closed[0], None))
                    continue
                rejected = self._reject(
                    conn, principal, scan_id, report.attempt, report.assignment_id, events
                )
                out.append(ItemOutcome(scan_id, None, rejected))
            results.write_history(conn, history)
        return self._revoked_check(principal, out)

    def _close(
        self,
        conn: Connection,
        scan_id: int,
        endpoint_id: int,
        endpoint: str,
        worker: str | None,
        report: Report,
        now: int,
        history: list[dict[str, Any]] | None = None,
    ) -> tuple[ScanRecord, list[Event]] | None:
        """Close the attempt `report` names, if `worker` (None: anyone) still holds it."""
        holder = results.Holder(scan_id, endpoint_id, worker, report.attempt, report.assignment_id)
        return results.close_attempt(
            conn,
            holder=holder,
            report=report,
            endpoint=endpoint,
            now=now,
            max_attempts=self.budget.max_attempts,
            history=history,
        )

    def _reject(
        self,
        conn: Connection,
        principal: Principal,
        scan_id: int,
        attempt: int | None,
        assignment_id: str | None,
        events: list[Event],
    ) -> StoreError:
        endpoint_id, endpoint = _worker_endpoint(principal)
        found = results.diagnose(
            conn,
            scan_id=scan_id,
            endpoint_id=endpoint_id,
            worker=principal.name,
            attempt=attempt,
            assignment_id=assignment_id,
        )
        if found.code is None:
            return NotFound(f"no scan {scan_id} for this endpoint")
        events.append(StaleResultRejected(endpoint, scan_id, principal.name, found.code, attempt))
        return Stale(found.code)

    def _revoked_check(self, principal: Principal, out: list[ItemOutcome]) -> list[ItemOutcome]:
        # Credentials are cached by the API; a revoked endpoint shows up as refused writes.
        if any(item.error is not None for item in out):
            assert principal.endpoint_id is not None
            if self.endpoint_is_revoked(principal.endpoint_id):
                raise Unauthorized("this worker's endpoint is revoked")
        return out

    def heartbeat(
        self,
        principal: Principal,
        scan_id: int,
        *,
        attempt: int | None,
        assignment_id: str | None,
    ) -> int:
        """Extend the current lease (a wait keeps its own deadline); return the new deadline."""
        until = self.now() + self.budget.job_timeout_us
        return self._touch(
            "heartbeat", principal, scan_id, attempt, assignment_id, {"t_until": until}
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
        until = self.now() + round(seconds * 1_000_000)
        return self._touch(
            "wait",
            principal,
            scan_id,
            attempt,
            assignment_id,
            {"t_until": until, "t_reason": reason},
        )

    def resume(
        self,
        principal: Principal,
        scan_id: int,
        *,
        attempt: int | None,
        assignment_id: str | None,
    ) -> int:
        """End a wait: the scan is back under an ordinary lease."""
        until = self.now() + self.budget.job_timeout_us
        return self._touch("resume", principal, scan_id, attempt, assignment_id, {"t_until": until})

    def _touch(
        self,
        kind: str,
        principal: Principal,
        scan_id: int,
        attempt: int | None,
        assignment_id: str | None,
        values: dict[str, object],
    ) -> int:
        endpoint_id, _ = _worker_endpoint(principal)
        error: StoreError | None = None
        with self.transaction() as (conn, events):
            holder = results.Holder(scan_id, endpoint_id, principal.name, attempt, assignment_id)
            statement = _touch_statement(kind, echoed=attempt is not None)
            params = holder.params | {"t_now": self.now()} | values
            deadline = conn.execute(statement, params).scalar()
            if deadline is None:
                error = self._reject(conn, principal, scan_id, attempt, assignment_id, events)
        if error is not None:
            self._revoked_check(principal, [ItemOutcome(scan_id, None, error)])
            raise error
        assert deadline is not None
        return int(deadline)

    def operator_fail(
        self, owner_id: int, scan_id: int, *, retryable: bool, summary: str | None
    ) -> ScanRecord:
        """Fail the current attempt as its worker would; an unleased scan fails plainly."""
        with self.transaction() as (conn, events):
            scan = self._owned_scan(conn, owner_id, scan_id)
            if scan.status in TERMINAL:
                raise Stale(StaleCode.ALREADY_TERMINAL)
            if scan.status is Status.PENDING:
                report = Report(
                    "failed", retryable, scan.attempt_count, scan.assignment_id, summary, None, None
                )
                endpoint_id = _endpoint_id(conn, scan)
                closed = self._close(
                    conn, scan.id, endpoint_id, scan.endpoint, None, report, self.now()
                )
                if closed is None:
                    raise Stale(StaleCode.STALE_ASSIGNMENT)
                events.extend(closed[1])
                return closed[0]
            if retryable:
                raise Conflict(
                    "not_leased",
                    "the scan has no current attempt to fail; "
                    "send retryable=false to fail it for good",
                )
            failed = results.fail_unleased(
                conn, scan_id=scan.id, endpoint=scan.endpoint, summary=summary, now=self.now()
            )
            if failed is None:
                raise Stale(StaleCode.STALE_ASSIGNMENT)
            return failed

    def revoke(self, owner_id: int, endpoint: str) -> int:
        """The silent cascade; returns how many scans it dead-lettered."""
        with self.transaction() as (conn, events):
            found = accounts.endpoint_by_name(conn, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is already revoked")
            event = revoke_endpoint(conn, endpoint_id=found.id, endpoint=endpoint, now=self.now())
            events.append(event)
        return event.dead_lettered


def _worker_endpoint(principal: Principal) -> tuple[int, str]:
    if principal.endpoint_id is None or principal.endpoint is None:
        raise Unauthorized("a worker token is required")
    return principal.endpoint_id, principal.endpoint


def _endpoint_id(conn: Connection, scan: ScanRecord) -> int:
    found = accounts.endpoint_by_name(conn, scan.endpoint)
    assert found is not None
    return found.id


@functools.cache
def _touch_statement(kind: str, *, echoed: bool) -> Any:
    """Heartbeat, wait or resume as one prebuilt compare-and-set on the holder's row."""
    until = bindparam("t_until", type_=BigInteger)
    shapes: dict[str, dict[str, Any]] = {
        # A heartbeat during a wait leaves the wait's own deadline alone.
        "heartbeat": {
            "lease_expires_at": case(
                (scans.c.wait_reason.is_(None), until), else_=scans.c.lease_expires_at
            )
        },
        "wait": {"lease_expires_at": until, "wait_reason": bindparam("t_reason", type_=Text)},
        "resume": {"lease_expires_at": until, "wait_reason": None},
    }
    values = shapes[kind]
    where = results.holder_where(echoed=echoed, with_worker=True)
    return (
        update(scans)
        .where(where)
        .values(updated_at=bindparam("t_now", type_=BigInteger), **values)
        .returning(scans.c.lease_expires_at)
    )
