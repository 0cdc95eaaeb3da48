"""Results: a worker closes its current attempt, one result or a batch, and may take its
next jobs in the same transaction (complete-and-fetch). Each close is a compare-and-set on
the current assignment (the SQL twin of `lifecycle.rules.diagnose_stale`), so a stale
worker can never change a scan; only a refused result reads the scan again, to say why.

A result the worker sends again because it never saw the answer (same scan, attempt and
assignment id) is a replay: its attempt's row kept the answer and the jobs leased with it,
so it is answered as before, those jobs included while their leases are live, and nothing
is leased twice.

How the closes run on each database is chosen once where the store is built
(`for_dialect`): on PostgreSQL the whole request is one statement (COMPLETE: the token check,
the closes, their history rows and outcome totals, and the next leases); SQLite runs the same
steps as statements of one transaction, inline (microseconds each)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.causes import named
from mainframe.lifecycle.rules import (
    Holding,
    Plan,
    Report,
    StaleCode,
    StaleResultRejected,
    Status,
    diagnose_stale,
    is_replay,
    plan,
)
from mainframe.lifecycle.scans import (
    Closed,
    Job,
    ScanRecord,
    closed_of,
    history_row,
    increments,
    job_of,
    replayed,
    scan_from_row,
    settlement_events,
    shard_of,
)
from mainframe.store.accounts.authentication import EndpointNames, Principal, worker_of
from mainframe.store.engine.database import (
    Accepted,
    Database,
    NotFound,
    ResultConflict,
    Row,
    Stale,
    StoreError,
    Tx,
    first,
)
from mainframe.store.engine.statements import statement
from mainframe.store.work.budget import Budget
from mainframe.store.work.coalesce import Coalescer, by_runs
from mainframe.store.work.leasing import (
    LEASE,
    Caller,
    Leasing,
    lease_params,
    lease_terms,
)

BUMP = statement("bump_totals")
INSERT_HISTORY = statement("insert_attempt")
NAME_CAUSE = statement("name_cause")
COMPLETE = statement("complete")
# The same for a request of one result, its fields as parameters: a smaller plan to start.
COMPLETE_ONE = statement("complete_one")
CLOSE_RESULTS = statement("close_results")
# Requests of finished results that met, from any workers (Results._together_in_one).
COMPLETE_TOGETHER = statement("complete_together")
# An item's text beside its result, summary and artifact (ids, digests, JSON punctuation),
# generously.
RESULT_OVERHEAD = 300
# The fields of a finished result that COMPLETE_TOGETHER reads from each item.
TOGETHER_FIELDS = ("scan", "attempt", "assignment", "result", "outcome", "summary", "artifact",
                   "result_digest")  # fmt: skip


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


class Closes(Protocol):
    """A request's closes and next leases, then what the closes leave to write."""

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        """The closed rows and the leased rows of the request."""
        ...

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        """Each closed attempt's history row and the causes met."""
        ...

    async def counted(self, tx: Tx) -> None:
        """The outcome totals of what the request ended (its events)."""
        ...


class InOneStatement:
    """PostgreSQL: COMPLETE does everything, history and totals included."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        tx = sender.tx
        firsts = _firsts(plans)
        params = {"digest": sender.caller.digest, "fetch": fetch} | _terms(self.budget, tx)
        if len(firsts) == 1:
            rows = await tx.rows(COMPLETE_ONE, params | firsts[0].values())
        else:
            rows = await tx.rows(COMPLETE, params | {"items": _items(firsts)})
        # Each row says what was done to its scan (`done`: 'closed' or 'leased') beside the scan.
        closed = [row for row in rows if row["done"] == "closed"]
        return closed, [row for row in rows if row["done"] == "leased"]

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        await _name_causes(tx, plans, closes)

    async def counted(self, tx: Tx) -> None:
        return None


class InSteps:
    """SQLite: COMPLETE's closes and next leases as statements of one transaction, then the
    history once the rows are records, and the totals once the answers made the events."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        tx, worker = sender.tx, await sender.worker()
        params = {
            "items": _items(_firsts(plans)),
            "endpoint": worker.endpoint_id,
            "worker": worker.name,
        }
        closed = {row["id"]: row for row in await tx.rows(CLOSE_RESULTS, params)}
        leased: list[Row] = []
        if closed and fetch > 0 and not await _any_replay(sender, plans, closed):
            leased = await tx.rows(LEASE, lease_params(sender.caller, fetch, self.budget))
        return list(closed.values()), leased

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        nexts = ",".join(row["assignment_id"] for row in leased) or None
        firsts = {p.scan_id: p for p in reversed(plans)}
        await tx.many(
            INSERT_HISTORY,
            [history_row(scan, firsts[scan_id], nexts) for scan_id, scan in closes.items()],
        )
        await _name_causes(tx, plans, closes)

    async def counted(self, tx: Tx) -> None:
        await tx.many(BUMP, increments(tx.events, tx.spread))


def for_dialect(dialect: str, budget: Budget) -> Closes:
    """The closes of `dialect`, chosen once where the store is built."""
    return InOneStatement(budget) if dialect == "postgresql" else InSteps(budget)


async def _any_replay(sender: Sender, plans: list[Plan], closed: Container[int]) -> bool:
    for p in plans:
        if p.scan_id in closed:
            continue
        if await (await sender.answers()).row(p.scan_id, p.assignment):
            return True
    return False


def _terms(budget: Budget, tx: Tx) -> dict[str, Any]:
    """What every result statement of PostgreSQL binds besides its results: the next leases'
    terms and the totals row of this session, as every other close picks it."""
    return lease_terms(budget) | {"shard": shard_of(tx.spread)}


async def _name_causes(tx: Tx, plans: list[Plan], closed: Container[int]) -> None:
    """The causes of the closed attempts that failed, each named the first time it is met."""
    failures = [p.cause for p in _firsts(plans) if p.scan_id in closed and p.cause]
    if failures:  # a finished scan names no cause
        await tx.many(NAME_CAUSE, named(failures))


def _firsts(plans: list[Plan]) -> list[Plan]:
    """A request's closes: the first result per scan (a scan named again in the same request
    is the same result twice, refused as stale when answered)."""
    firsts = {p.scan_id: p for p in reversed(plans)}
    return [p for p in plans if firsts[p.scan_id] is p]


def _items(plans: list[Plan]) -> str:
    """The JSON items of a request's closes."""
    return orjson.dumps([p.values() for p in plans]).decode()


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


@dataclass(frozen=True, slots=True)
class Ask:
    """A request of finished results, as it goes with the others that met it."""

    caller: Caller
    plans: list[Plan]
    fetch: int

    def weight(self) -> int:
        """Its items' text in a statement (their results, summaries and artifacts, and the
        rest)."""
        return sum(_weight(p.report) for p in self.plans)

    def ask(self, req: int) -> dict[str, Any]:
        """Its request in COMPLETE_TOGETHER, as request `req` of the statement."""
        return {"req": req, "digest": self.caller.digest, "wants": self.fetch}

    def items(self, req: int) -> list[dict[str, Any]]:
        """Its results' items in COMPLETE_TOGETHER."""
        values = [p.values() for p in self.plans]
        return [{name: v[name] for name in TOGETHER_FIELDS} | {"req": req} for v in values]


def _weight(report: Report) -> int:
    texts = (report.result, report.summary, report.artifact)
    return sum(len(text or "") for text in texts) + RESULT_OVERHEAD


def _goes_together(plans: Sequence[Plan]) -> bool:
    """Whether a request may go with others: finished results of scans it names once each
    (the worker loop's common case, with no cause to name and one total to add to)."""
    finished = all(p.settlement.status is Status.FINISHED for p in plans)
    return bool(plans) and finished and len({p.scan_id for p in plans}) == len(plans)


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
        # PostgreSQL: finished results that meet at the database go as one statement and one
        # commit (docs/performance.md, *Polls and results together*); SQLite's steps run in process.
        self._together: Coalescer[str, Ask, Completion | None] | None = (
            Coalescer(self._run_together) if db.dialect == "postgresql" else None
        )

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
        if self._together is not None and _goes_together(plans):
            met = await self._together("results", Ask(caller, plans, fetch))
            if met is not None:
                return met
        return await self._alone(caller, plans, fetch)

    async def _alone(self, caller: Caller, plans: list[Plan], fetch: int) -> Completion:
        """A request in a transaction of its own: its closes, their answers (a replay's, a
        refusal's) and its next jobs."""
        async with self.db.single() as tx:
            sender = Sender(tx, caller)
            closed_rows, leased_rows = await self.closes.close(sender, plans, fetch)
            jobs = await self.leasing.leased(tx, leased_rows) if leased_rows else []
            closes = {scan.id: scan for scan in [await self._scan(tx, row) for row in closed_rows]}
            # A request that closed nothing (refused, replayed) writes no history and no totals.
            closed_any = bool(closes)
            if closed_any:
                await self.closes.recorded(tx, plans, closes, leased_rows)
            outcomes, replayed = await self._answers(sender, plans, closes)
            if closed_any:
                await self.closes.counted(tx)
            jobs += await self._replayed_jobs(sender, replayed)
        return Completion(outcomes, jobs)

    async def _run_together(self, _: str, asks: list[Ask]) -> list[Completion | None]:
        """The requests that met, in one statement: each one's closes and next jobs, or None
        for a request some result of which did not close there (answered alone, as `_alone`
        answers it). A request that met none goes alone."""
        return await by_runs(asks, Ask.weight, self._ask_alone, self._together_in_one)

    async def _ask_alone(self, ask: Ask) -> Completion:
        return await self._alone(ask.caller, ask.plans, ask.fetch)

    async def _together_in_one(self, asks: list[Ask]) -> list[Completion | None]:
        items = [item for req, ask in enumerate(asks) for item in ask.items(req)]
        params = {
            "asks": orjson.dumps([ask.ask(req) for req, ask in enumerate(asks)]).decode(),
            "items": orjson.dumps(items).decode(),
        }
        async with self.db.single() as tx:
            rows = await tx.rows(COMPLETE_TOGETHER, params | _terms(self.budget, tx))
            done: defaultdict[tuple[str, int], list[Row]] = defaultdict(list)
            for row in rows:
                done[row["done"], row["req"]].append(row)
            return [
                await self._met(tx, ask, done["closed", req], done["leased", req])
                for req, ask in enumerate(asks)
            ]

    async def _met(
        self, tx: Tx, ask: Ask, closed: Sequence[Row], leased: Sequence[Row]
    ) -> Completion | None:
        """A request's answer from its rows; None when some result of it did not close (it
        is answered alone, its closes here then replays, with the jobs leased with them)."""
        scans = {row["id"]: await self._scan(tx, row) for row in closed}
        for p in ask.plans:
            if p.scan_id in scans:
                tx.events.extend(settlement_events(scans[p.scan_id], p))
        # Its closes and leases are announced here even when it is answered alone: there
        # they are replays, which announce nothing.
        jobs = await self.leasing.leased(tx, leased)
        if len(scans) < len(ask.plans):
            return None
        outcomes = [ItemOutcome(p.scan_id, closed_of(scans[p.scan_id]), None) for p in ask.plans]
        return Completion(outcomes, jobs)

    def _plan(self, scan_id: int, report: Report) -> Plan:
        attempts, draw = self.budget.max_attempts, self.rng.random()
        return plan(scan_id, report, max_attempts=attempts, retry=self.retry, draw=draw)

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
        rows = await still_leased(sender.tx, await sender.worker(), assignments)
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


# Replays: a worker that never saw the answer to an accepted result sends it again (same scan,
# attempt and assignment id, same content). The attempt's history row kept the answer it was
# given, the assignments leased with it (migration 0009) and the digest of its content
# (migration 0015), so the replay is answered as the first time, with those jobs this worker
# still holds, unexpired, and nothing is leased twice. The same assignment with other content is
# refused as a conflict (`lifecycle/reports.py`).
ANSWERED = statement("replayed_result")
LEASED_WITH = statement("replayed_jobs")


class Answers:
    """The accepted results of one worker's request, each looked up at most once: SQLite asks
    before it leases next jobs (none after a replay), and every dialect when it answers."""

    def __init__(self, tx: Tx, worker: Principal) -> None:
        self.tx = tx
        self.worker = worker
        self._rows: dict[tuple[int, str | None], Row | None] = {}

    async def row(self, scan_id: int, assignment_id: str | None) -> Row | None:
        """The history row that kept the answer to this assignment's result, if any."""
        key = (scan_id, assignment_id)
        if key not in self._rows:
            params = {
                "scan": scan_id,
                "assignment": assignment_id,
                "worker": self.worker.name,
                "endpoint": self.worker.endpoint_id,
            }
            self._rows[key] = await first(self.tx, ANSWERED, params)
        return self._rows[key]

    async def answer(
        self, scan_id: int, assignment_id: str | None, digest: str
    ) -> tuple[Closed, list[str]] | None:
        """The first answer to this result and the assignments leased with it; None when it
        was never accepted. ResultConflict when the accepted result said something else."""
        row = await self.row(scan_id, assignment_id)
        if row is None:
            return None
        status, fail_reason, closed_at = (
            row["settled_status"], row["settled_fail_reason"], row["closed_at"]
        )  # fmt: skip
        if not is_replay(row["result_digest"], digest):
            raise ResultConflict(Accepted(row["outcome"], status, fail_reason, closed_at))
        closed = replayed(
            scan_id=scan_id, attempt=row["attempt"], closed_at=closed_at, status=status,
            available_at=row["settled_available_at"], fail_reason=fail_reason,
        )  # fmt: skip
        return closed, [a for a in (row["next_assignments"] or "").split(",") if a]


async def still_leased(tx: Tx, worker: Principal, assignments: Sequence[str]) -> list[Row]:
    """The scans of `assignments` this worker still holds under them, unexpired."""
    # An assignment id ends with its scan's id (leasing.py mints them).
    wanted = {int(a.rpartition("-")[2]): a for a in assignments}
    if not wanted:
        return []
    params = {"ids": orjson.dumps(sorted(wanted)).decode(), "worker": worker.name}
    rows = await tx.rows(LEASED_WITH, params)
    return [row for row in rows if wanted.get(row["id"]) == row["assignment_id"]]


# Why a write against an assignment was refused: a result, heartbeat, wait or resume whose
# compare-and-set missed reads the scan again, says why in the lifecycle's words
# (`lifecycle.rules.diagnose_stale`), and records the rejection, counted once it commits.
DIAGNOSE = statement("diagnose_refusal")


async def refusal(
    tx: Tx, worker: Principal, scan_id: int, *, attempt: int | None, assignment_id: str | None
) -> StoreError:
    """NotFound, or the stale code the rule names, with its rejection event on `tx`."""
    assert worker.endpoint_id is not None and worker.endpoint is not None
    found = await first(tx, DIAGNOSE, {"scan": scan_id, "endpoint": worker.endpoint_id})
    if found is None:
        return NotFound(f"no scan {scan_id} for this endpoint")
    holding = Holding(
        Status(found["status"]), found["attempt_count"], found["assignment_id"], found["worker"]
    )
    code = diagnose_stale(holding, worker=worker.name, attempt=attempt, assignment_id=assignment_id)
    # The compare-and-set missed, so something differs even when the rule sees none: a
    # concurrent writer moved the row between the two statements.
    code = code or StaleCode.STALE_ASSIGNMENT
    tx.events.append(StaleResultRejected(worker.endpoint, scan_id, worker.name, code, attempt))
    return Stale(code)
