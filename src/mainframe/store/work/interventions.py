"""An operator's intervention on one scan: failing its current attempt as its worker would
(a compare-and-set on the assignment the operator saw, the same settlement, history row and
events as a worker's close), or failing for good a scan nobody holds."""

from __future__ import annotations

import random

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.causes import named
from mainframe.lifecycle.rules import TERMINAL, Report, StaleCode, Status, plan
from mainframe.lifecycle.scans import (
    OPERATOR_CLOSE,
    ScanFailed,
    ScanRecord,
    history_row,
    increments,
    scan_from_row,
    settlement_events,
)
from mainframe.store.engine.database import Conflict, Database, Stale, Tx, first, transact
from mainframe.store.engine.statements import statement
from mainframe.store.work import queries
from mainframe.store.work.budget import Budget

BUMP = statement("bump_totals")
INSERT_HISTORY = statement("insert_attempt")
NAME_CAUSE = statement("name_cause")
CLOSE_AS_OPERATOR = statement("close_as_operator")
FAIL_UNLEASED = statement("fail_unleased")


class Interventions:
    def __init__(
        self, db: Database, budget: Budget, retry: RetryPolicy, rng: random.Random
    ) -> None:
        self.db = db
        self.budget = budget
        self.retry = retry
        self.rng = rng

    async def fail(
        self, owner_id: int, scan_id: int, *, retryable: bool, summary: str | None
    ) -> ScanRecord:
        """Fail the current attempt as its worker would; an unleased scan fails plainly."""

        async def fail(tx: Tx) -> ScanRecord:
            scan = await queries.owned_scan(tx, owner_id, scan_id)
            if scan.status in TERMINAL:
                raise Stale(StaleCode.ALREADY_TERMINAL)
            if scan.status is Status.PENDING:
                await self._operator_close(tx, scan, retryable=retryable, summary=summary)
            elif retryable:
                raise Conflict(
                    "not_leased",
                    "the scan has no current attempt to fail; "
                    "send retryable=false to fail it for good",
                )
            else:
                await self._fail_unleased(tx, scan)
            return await queries.owned_scan(tx, owner_id, scan_id)

        return await transact(self.db, fail)

    async def _operator_close(
        self, tx: Tx, scan: ScanRecord, *, retryable: bool, summary: str | None
    ) -> None:
        report = Report(
            "failed", retryable, scan.attempt_count, scan.assignment_id, summary, None, None
        )
        p = plan(
            scan.id,
            report,
            max_attempts=self.budget.max_attempts,
            retry=self.retry,
            draw=self.rng.random(),
        )
        row = await first(tx, CLOSE_AS_OPERATOR, p.values())
        if row is None:
            raise Stale(StaleCode.STALE_ASSIGNMENT)
        closed = scan_from_row(row, scan.endpoint)
        await tx.many(INSERT_HISTORY, [history_row(closed, p, None, OPERATOR_CLOSE)])
        await tx.many(NAME_CAUSE, named([p.cause]))
        events = settlement_events(closed, p)
        tx.events.extend(events)
        await tx.many(BUMP, increments(events, tx.spread))

    async def _fail_unleased(self, tx: Tx, scan: ScanRecord) -> None:
        """An operator's plain failure of a scan nobody holds (QUEUED or QUARANTINED)."""
        if await first(tx, FAIL_UNLEASED, {"scan": scan.id}) is None:
            raise Stale(StaleCode.STALE_ASSIGNMENT)
        event = ScanFailed(scan.ref(), scan.attempt_count)
        tx.events.append(event)
        await tx.many(BUMP, increments([event], tx.spread))
