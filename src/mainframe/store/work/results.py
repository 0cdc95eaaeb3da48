"""Results: a worker closes its current attempt, one result or a batch, and may take its
next jobs in the same transaction (complete-and-fetch). Each close is a compare-and-set on
the current assignment (the SQL twin of `lifecycle.rules.diagnose_stale`), so a stale
worker can never change a scan; only a refused result reads the scan again, to say why.

A result the worker sends again because it never saw the answer (same scan, attempt and
assignment id) is a replay: its attempt's row kept the answer and the jobs leased with it,
so it is answered as before, those jobs included while their leases are live, and nothing
is leased twice.

How the closes run on each database (one statement on PostgreSQL, steps on SQLite) is
`closes.py`'s, chosen once where the store is built."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.events import StaleResultRejected
from mainframe.lifecycle.reports import (
    Closed,
    Plan,
    Report,
    closed_of,
    plan,
    settlement_events,
)
from mainframe.lifecycle.scans import Job, ScanRecord, job_of, scan_from_row
from mainframe.store.accounts.authentication import EndpointNames, Principal
from mainframe.store.engine.database import Database, Row, Tx
from mainframe.store.engine.errors import ResultConflict, StoreError
from mainframe.store.work import replays
from mainframe.store.work.budget import Budget
from mainframe.store.work.closes import Closes, Sender
from mainframe.store.work.leasing import Caller, Leasing
from mainframe.store.work.refusals import refusal


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One entry of a batch: the closed scan, or the error the single route would raise."""

    scan_id: int
    closed: Closed | None
    error: StoreError | None


@dataclass(frozen=True, slots=True)
class Completion:
    """Results closed (each alone) and the jobs leased with them (complete-and-fetch)."""

    outcomes: list[ItemOutcome]
    jobs: list[Job]


class Results:
    def __init__(
        self,
        db: Database,
        budget: Budget,
        retry: RetryPolicy,
        leasing: Leasing,
        names: EndpointNames,
        rng: random.Random,
        closes: Closes,
    ) -> None:
        self.db = db
        self.closes = closes
        self.budget = budget
        self.retry = retry
        self.leasing = leasing
        self.names = names
        self.rng = rng

    async def report(self, caller: Caller, scan_id: int, report: Report) -> Closed:
        """Close the worker's current attempt with its result."""
        outcome = (await self.complete(caller, [(scan_id, report)])).outcomes[0]
        if outcome.error is not None:
            raise outcome.error
        assert outcome.closed is not None
        return outcome.closed

    async def report_many(
        self, caller: Caller, items: Sequence[tuple[int, Report]]
    ) -> list[ItemOutcome]:
        """Apply independent results in one transaction; each succeeds or fails alone."""
        return (await self.complete(caller, items)).outcomes

    async def complete(
        self, caller: Caller, items: Sequence[tuple[int, Report]], *, fetch: int = 0
    ) -> Completion:
        """Close each result alone and lease up to `fetch` next jobs in the same transaction
        (only when a result closed and none was a replay)."""
        plans = [self._plan(scan_id, report) for scan_id, report in items]
        async with self.db.single() as tx:
            sender = Sender(tx, caller)
            closed_rows, leased_rows = await self.closes.close(sender, plans, fetch)
            jobs = await self.leasing.leased(tx, leased_rows) if leased_rows else []
            closes = {scan.id: scan for scan in [await self._scan(tx, row) for row in closed_rows]}
            await self.closes.recorded(tx, plans, closes, leased_rows)
            outcomes, replayed = await self._answers(sender, plans, closes)
            await self.closes.counted(tx)
            jobs += await self._replayed_jobs(sender, replayed)
        return Completion(outcomes, jobs)

    def _plan(self, scan_id: int, report: Report) -> Plan:
        return plan(
            scan_id,
            report,
            max_attempts=self.budget.max_attempts,
            retry=self.retry,
            draw=self.rng.random(),
        )

    async def _scan(self, tx: Tx, row: Row) -> ScanRecord:
        return scan_from_row(row, await self.names.of(tx, row["endpoint_id"]))

    async def _answers(
        self, sender: Sender, plans: list[Plan], closes: dict[int, ScanRecord]
    ) -> tuple[list[ItemOutcome], list[str]]:
        """Each item's answer — its close (with its events), its replayed answer, or why it was
        refused — and the assignments the replayed answers leased."""
        closed_here = set(closes)
        outcomes: list[ItemOutcome] = []
        replayed: list[str] = []
        for p in plans:
            scan = closes.pop(p.scan_id, None)
            if scan is not None:
                sender.tx.events.extend(settlement_events(scan, p))
                outcomes.append(ItemOutcome(p.scan_id, closed_of(scan), None))
            elif p.scan_id in closed_here:
                # The same scan twice in one request: the first closed it; this one is stale.
                outcomes.append(ItemOutcome(p.scan_id, None, await _refusal(sender, p)))
            else:
                outcome, leased_with = await self._unclosed(sender, p)
                outcomes.append(outcome)
                replayed += leased_with
        return outcomes, replayed

    async def _unclosed(self, sender: Sender, p: Plan) -> tuple[ItemOutcome, list[str]]:
        """A result whose close missed: a replay of an accepted one, a conflict with it, or a
        refusal."""
        answers = await sender.answers()
        try:
            found = await answers.answer(p.scan_id, p.assignment, p.digest)
        except ResultConflict as conflict:
            sender.tx.events.append(_rejected(answers.worker, p, conflict))
            return ItemOutcome(p.scan_id, None, conflict), []
        if found is not None:
            closed, leased_with = found
            return ItemOutcome(p.scan_id, closed, None), leased_with
        return ItemOutcome(p.scan_id, None, await _refusal(sender, p)), []

    async def _replayed_jobs(self, sender: Sender, assignments: list[str]) -> list[Job]:
        """The jobs leased with replayed answers that this worker still holds, unexpired."""
        if not assignments:
            return []
        rows = await replays.still_leased(sender.tx, await sender.worker(), assignments)
        return [job_of(await self._scan(sender.tx, row)) for row in rows]


async def _refusal(sender: Sender, p: Plan) -> StoreError:
    attempt, assignment = p.report.attempt, p.report.assignment_id
    worker = await sender.worker()
    return await refusal(sender.tx, worker, p.scan_id, attempt=attempt, assignment_id=assignment)


def _rejected(worker: Principal, p: Plan, conflict: ResultConflict) -> StaleResultRejected:
    assert worker.endpoint is not None
    return StaleResultRejected(
        worker.endpoint, p.scan_id, worker.name, conflict.stale_code, p.report.attempt
    )
