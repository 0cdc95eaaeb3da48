"""Results: a worker closes its current attempt, one result or a batch, and may take its
next jobs in the same transaction (complete-and-fetch). Each close is a compare-and-set on
the current assignment (the SQL twin of `lifecycle.rules.diagnose_stale`), so a stale
worker can never change a scan; only a refused result reads the scan again, to say why.

A result the worker sends again because it never saw the answer (same scan, attempt and
assignment id) is a replay: its attempt's row kept the answer and the jobs leased with it,
so it is answered as before, those jobs included while their leases are live, and nothing
is leased twice.

On PostgreSQL the whole request is one statement (COMPLETE): the token check, the closes,
their history rows and outcome totals, and the next leases. SQLite runs the same steps as
statements of one transaction, inline (microseconds each)."""

from __future__ import annotations

import random
import secrets
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

import orjson

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.causes import named
from mainframe.lifecycle.elsewhere import ASKING_US
from mainframe.lifecycle.events import StaleResultRejected
from mainframe.lifecycle.outcomes import increments, shard_of
from mainframe.lifecycle.reports import (
    Closed,
    Plan,
    Report,
    closed_of,
    history_row,
    plan,
    settlement_events,
)
from mainframe.lifecycle.scans import Job, ScanRecord, job_of, scan_from_row, scan_value
from mainframe.store.accounts.authentication import EndpointNames, Principal, worker_of
from mainframe.store.engine.database import Database, Row, Sql, Tx
from mainframe.store.engine.errors import ResultConflict, StoreError
from mainframe.store.work import replays
from mainframe.store.work.budget import Budget
from mainframe.store.work.closing import BUMP, INSERT_HISTORY, NAME_CAUSE
from mainframe.store.work.leasing import ELSEWHERE, LEASE, Caller, Leasing, lease_params
from mainframe.store.work.refusals import refusal
from mainframe.store.work.replays import Answers

# PostgreSQL: the token, every close of the batch (its JSON items), their history rows with
# the answer each was given, the outcome totals, and up to :fetch next leases (only when
# something closed and nothing was a replay), in one statement. Rows: 'closed' and
# 'leased', each with the scan as the statement left it (no payload or result for a close).
# The closes are found by primary key only, whatever the statistics say: `scans.id = item.scan`
# is repeated as `= ANY(ARRAY(...))`, an index condition on the key (PostgreSQL guesses 100
# rows for a set-returning function and would rather hash every PENDING scan than probe the
# key 100 times), and the endpoint is compared as `endpoint_id + 0`, which no index serves
# (statistics taken before a large intake made ux_scans_live_key, every live scan of the
# endpoint, look cheaper; tests/integration/test_plans.py holds both). The replay check is a
# key lookup of uq_attempts_assignment the same way (an assignment id names its scan, so the
# two lists cannot pair wrongly), never a read of the attempt history; and so are the next
# leases (a generic plan takes `LIMIT :fetch` for a tenth of the queue, see leasing.py).
COMPLETE = Sql(
    "complete",
    "-- PostgreSQL only: SQLite runs CLOSE_RESULTS, LEASE and INSERT_HISTORY in steps.",
    """
    WITH who AS (
        SELECT tokens.principal, tokens.endpoint_id
        FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
        WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
          AND endpoints.revoked_at IS NULL
    ), item AS (
        SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS item(
            scan bigint, attempt integer, assignment text, status text, fail_reason text,
            terminal boolean, dead boolean, result text, delay bigint, outcome text,
            summary text, artifact text, result_digest text, cause text, pattern text,
            grouping_version integer)
    ), closed AS (
        UPDATE scans SET status = item.status, updated_at = mf_now(),
            lease_expires_at = NULL, wait_reason = NULL, fail_reason = item.fail_reason,
            finished_at = CASE WHEN item.terminal THEN mf_now() END,
            dead_lettered_at = CASE WHEN item.dead THEN mf_now() END,
            cause = CASE WHEN item.dead THEN item.cause END,
            result = item.result,
            available_at = CASE WHEN item.terminal THEN NULL ELSE mf_now() + item.delay END
        FROM item, who
        WHERE scans.id = item.scan AND scans.id = ANY(ARRAY(SELECT item.scan FROM item))
          AND scans.endpoint_id + 0 = who.endpoint_id
          AND scans.status = 'PENDING' AND scans.worker = who.principal
          AND scans.attempt_count = COALESCE(item.attempt, 1)
          AND (item.assignment IS NULL OR scans.assignment_id = item.assignment)
        RETURNING scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version,
                  scans.kind, scans.status, scans.verified, scans.source, scans.worker,
                  scans.attempt_count, scans.assignment_id, scans.leased_at,
                  scans.lease_expires_at, scans.wait_reason, scans.created_at,
                  scans.updated_at, scans.finished_at, scans.dead_lettered_at,
                  scans.fail_reason, scans.attempt_base, scans.available_at,
                  scans.redriven_at, scans.redrive_count,
                  item.outcome, item.summary, item.artifact, item.result_digest,
                  item.cause AS attempt_cause
    ), named AS (
        INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
        SELECT DISTINCT item.cause, item.pattern, mf_now(), item.grouping_version FROM item
        WHERE item.cause IS NOT NULL AND EXISTS (SELECT 1 FROM closed)
        ON CONFLICT (cause) DO NOTHING
    ), replay AS (
        SELECT attempts.scan_id FROM attempts
        WHERE attempts.scan_id = ANY(ARRAY(SELECT item.scan FROM item))
          AND attempts.assignment_id = ANY(ARRAY(SELECT item.assignment FROM item))
    ), due AS (
        SELECT scans.id FROM scans
        WHERE scans.endpoint_id = (SELECT endpoint_id FROM who) AND scans.status = 'QUEUED'
          AND scans.available_at <= mf_now()
          AND scans.queue NOT IN (
              SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
          )"""
    + ELSEWHERE
    + """
          AND EXISTS (SELECT 1 FROM closed) AND NOT EXISTS (SELECT 1 FROM replay)
        ORDER BY scans.available_at, scans.id LIMIT :fetch
        FOR UPDATE SKIP LOCKED
    ), leased AS (
        UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
            assignment_id = :prefix || CAST(scans.id AS text),
            worker = (SELECT principal FROM who), leased_at = mf_now(),
            lease_expires_at = mf_now() + :timeout, wait_reason = NULL, updated_at = mf_now()
        FROM due WHERE scans.id = due.id AND scans.id = ANY(ARRAY(SELECT due.id FROM due))
        RETURNING scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version,
                  scans.kind, scans.payload, scans.status, scans.verified, scans.source,
                  scans.worker, scans.attempt_count, scans.assignment_id, scans.leased_at,
                  scans.lease_expires_at, scans.wait_reason, scans.created_at,
                  scans.updated_at, scans.finished_at, scans.dead_lettered_at,
                  scans.fail_reason, scans.result, scans.attempt_base, scans.available_at,
                  scans.redriven_at, scans.redrive_count
    ), history AS (
        INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at,
                              closed_at, outcome, summary, artifact, settled_status,
                              settled_available_at, settled_fail_reason, next_assignments,
                              result_digest, cause)
        SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker,
               leased_at, mf_now(), outcome, summary, artifact, status, available_at,
               fail_reason, (SELECT string_agg(assignment_id, ',') FROM leased),
               result_digest, attempt_cause
        FROM closed
    ), total AS (
        UPDATE scan_totals SET count = scan_totals.count + ended.n
        FROM (
            SELECT CASE WHEN status = 'FINISHED' THEN 'finished'
                        WHEN dead_lettered_at IS NOT NULL THEN 'dead_lettered'
                        ELSE 'failed' END AS outcome,
                   count(*) AS n
            FROM closed WHERE status IN ('FINISHED', 'FAILED') GROUP BY 1
        ) AS ended
        WHERE scan_totals.endpoint_id = (SELECT endpoint_id FROM who)
          AND scan_totals.outcome = ended.outcome AND scan_totals.shard = :shard
    )
    SELECT 'closed', id, endpoint_id, queue, name, version, kind, NULL, status, verified,
           source, worker, attempt_count, assignment_id, leased_at, lease_expires_at,
           wait_reason, created_at, updated_at, finished_at, dead_lettered_at, fail_reason,
           NULL, attempt_base, available_at, redriven_at, redrive_count
    FROM closed
    UNION ALL
    SELECT 'leased', id, endpoint_id, queue, name, version, kind, payload, status, verified,
           source, worker, attempt_count, assignment_id, leased_at, lease_expires_at,
           wait_reason, created_at, updated_at, finished_at, dead_lettered_at, fail_reason,
           result, attempt_base, available_at, redriven_at, redrive_count
    FROM leased
    """,
)
# SQLite: every close of the request in one statement (its JSON items, the first per scan),
# each the compare-and-set of `lifecycle.rules.diagnose_stale` on the worker's current
# assignment; a result without attempt and assignment id (the rollout form) closes attempt 1
# only. PostgreSQL does this inside COMPLETE. `+scans.endpoint_id` keeps SQLite from walking
# the endpoint's leases through ix_scans_pending_lease: each item finds its scan by key.
CLOSE_RESULTS = Sql(
    "close_results",
    """
    UPDATE scans SET status = item.value ->> '$.status', updated_at = mf_now(),
        lease_expires_at = NULL, wait_reason = NULL,
        fail_reason = item.value ->> '$.fail_reason',
        finished_at = CASE WHEN item.value ->> '$.terminal' THEN mf_now() END,
        dead_lettered_at = CASE WHEN item.value ->> '$.dead' THEN mf_now() END,
        cause = CASE WHEN item.value ->> '$.dead' THEN item.value ->> '$.cause' END,
        result = item.value ->> '$.result',
        available_at = CASE WHEN item.value ->> '$.terminal' THEN NULL
                            ELSE mf_now() + (item.value ->> '$.delay') END
    FROM json_each(:items) AS item
    WHERE scans.id = item.value ->> '$.scan' AND +scans.endpoint_id = :endpoint
      AND scans.status = 'PENDING' AND scans.worker = :worker
      AND scans.attempt_count = COALESCE(item.value ->> '$.attempt', 1)
      AND (item.value ->> '$.assignment' IS NULL
           OR scans.assignment_id = item.value ->> '$.assignment')
    RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
              worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
              created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
              attempt_base, available_at, redriven_at, redrive_count
    """,
    "-- SQLite only: PostgreSQL closes results inside COMPLETE.",
)


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
    ) -> None:
        self.db = db
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
            if tx.dialect == "postgresql":
                closed_rows, leased_rows = await self._in_one_statement(tx, caller, plans, fetch)
            else:
                closed_rows, leased_rows = await self._in_steps(sender, plans, fetch)
            jobs = await self.leasing.leased(tx, leased_rows) if leased_rows else []
            closes = {scan.id: scan for scan in [await self._scan(tx, row) for row in closed_rows]}
            if tx.dialect == "sqlite":  # COMPLETE writes the history itself on PostgreSQL
                await _write_history(tx, plans, closes, leased_rows)
            outcomes, replayed = await self._answers(sender, plans, closes)
            if tx.dialect == "sqlite":  # and bumps the totals
                await tx.many(BUMP, increments(tx.events, tx.session))
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
        return scan_from_row(row, await self.names.of(tx, scan_value(row, "endpoint_id")))

    async def _in_one_statement(
        self, tx: Tx, caller: Caller, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        """PostgreSQL: the whole request as COMPLETE; its closed rows and leased rows."""
        params = {
            "digest": caller.digest,
            "items": _items(plans),
            "fetch": fetch,
            "prefix": secrets.token_hex(8) + "-",
            "timeout": self.budget.job_timeout_us,
            "elsewhere": self.budget.elsewhere_us,
            "asking": ASKING_US,
            # The totals row of this session, as every other close picks it.
            "shard": shard_of(tx.session),
        }
        rows = await tx.rows(COMPLETE, params)
        # Each row is its kind ('closed' or 'leased') and then the scan's columns.
        closed = [row[1:] for row in rows if row[0] == "closed"]
        return closed, [row[1:] for row in rows if row[0] == "leased"]

    async def _in_steps(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        """SQLite: COMPLETE's closes and next leases as statements of one transaction (the
        history follows in `_write_history`, once the rows are records)."""
        tx, worker = sender.tx, await sender.worker()
        params = {"items": _items(plans), "endpoint": worker.endpoint_id, "worker": worker.name}
        closed = {scan_value(row, "id"): row for row in await tx.rows(CLOSE_RESULTS, params)}
        leased: list[Row] = []
        if closed and fetch > 0 and not await self._any_replay(sender, plans, closed):
            leased = await tx.rows(LEASE, lease_params(sender.caller, fetch, self.budget))
        return list(closed.values()), leased

    async def _any_replay(self, sender: Sender, plans: list[Plan], closed: Container[int]) -> bool:
        for p in plans:
            if p.scan_id in closed:
                continue
            if await (await sender.answers()).row(p.scan_id, p.assignment):
                return True
        return False

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


async def _write_history(
    tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
) -> None:
    """SQLite: each closed attempt's history row, with the assignments leased beside it,
    and the causes met (COMPLETE writes both on PostgreSQL)."""
    nexts = ",".join(scan_value(row, "assignment_id") for row in leased) or None
    firsts = {p.scan_id: p for p in reversed(plans)}
    await tx.many(
        INSERT_HISTORY,
        [history_row(scan, firsts[scan_id], nexts) for scan_id, scan in closes.items()],
    )
    await tx.many(NAME_CAUSE, named(firsts[scan_id].cause for scan_id in closes))


class Sender:
    """The worker behind one request's token, authenticated at most once and only when the
    request needs it (a refusal, a replay, SQLite's steps), and its accepted results, each
    looked up at most once."""

    def __init__(self, tx: Tx, caller: Caller) -> None:
        self.tx = tx
        self.caller = caller
        self._worker: Principal | None = None
        self._answers: Answers | None = None

    async def worker(self) -> Principal:
        if self._worker is None:
            self._worker = await worker_of(self.tx, self.caller)
        return self._worker

    async def answers(self) -> Answers:
        if self._answers is None:
            self._answers = Answers(self.tx, await self.worker())
        return self._answers


async def _refusal(sender: Sender, p: Plan) -> StoreError:
    attempt, assignment = p.report.attempt, p.report.assignment_id
    worker = await sender.worker()
    return await refusal(sender.tx, worker, p.scan_id, attempt=attempt, assignment_id=assignment)


def _rejected(worker: Principal, p: Plan, conflict: ResultConflict) -> StaleResultRejected:
    assert worker.endpoint is not None
    return StaleResultRejected(
        worker.endpoint, p.scan_id, worker.name, conflict.stale_code, p.report.attempt
    )


def _items(plans: list[Plan]) -> str:
    """The JSON items of a request's closes: the first result per scan (a scan named again in
    the same request is the same result twice, refused as stale when answered)."""
    firsts = {p.scan_id: p for p in reversed(plans)}
    return orjson.dumps([p.values() for p in plans if firsts[p.scan_id] is p]).decode()
