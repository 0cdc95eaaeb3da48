"""The job poll and the sweeper. A poll is one statement that checks the worker's token and
leases its endpoint's oldest due QUEUED scans. Only when a lapse may be due (a known lease
ran out, or a second has passed since the last look, for leases granted by other processes)
does it first reap the endpoint's lapsed leases: budget spent → dead letter; budget left →
back to QUEUED after a retry backoff. The sweeper reaps every endpoint the same way, so
nothing waits for a poll. Every deadline is compared with `mf_now()`, the database's clock.

Rows are claimed with FOR UPDATE SKIP LOCKED on PostgreSQL; on SQLite BEGIN IMMEDIATE
already serialises writers."""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from mainframe.clock import Clock
from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.causes import Cause, cause_of, named
from mainframe.lifecycle.elsewhere import ASKING_US
from mainframe.lifecycle.rules import lapse_dead_letter_reason, lapse_outcome
from mainframe.lifecycle.scans import (
    AttemptFailed,
    Event,
    FinalAttempt,
    Job,
    LeasesGranted,
    ScanDeadLettered,
    ScanReady,
    ScanRef,
    increments,
    job_of,
    scan_from_row,
)
from mainframe.store.accounts.authentication import EndpointNames, Presented, Principal, worker_of
from mainframe.store.engine.database import Database, Row, Tx, record, transact
from mainframe.store.engine.statements import statement
from mainframe.store.work.budget import Budget
from mainframe.store.work.coalesce import Coalescer, by_runs

# How long a process trusts that no lease of an endpoint has lapsed without looking: leases
# granted by other server processes are only seen by looking.
PROBE_INTERVAL_US = 1_000_000

BUMP = statement("bump_totals")
NAME_CAUSE = statement("name_cause")
LEASE = statement("lease")
# Polls that met, from any workers (Leasing._run_together).
LEASE_TOGETHER = statement("lease_together")
POLL_OVERHEAD = 100  # a poll's item in LEASE_TOGETHER, generously
LAPSED_OF_ENDPOINT = statement("lapsed_of_endpoint")
LAPSED_ANYWHERE = statement("lapsed_anywhere")
CLOSE_LAPSED = statement("close_lapsed_attempt")
DEAD_LETTER_LAPSED = statement("dead_letter_lapsed")
REQUEUE_LAPSED = statement("requeue_lapsed")

Caller = Presented | Principal


@dataclass(frozen=True, slots=True)
class Lapsed:
    """A PENDING scan whose lease (or wait) ran out, as it was before we touched it."""

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
    assignment_id: str
    wait_reason: str | None
    attempt_base: int
    now: int  # the clock the lapse was judged by

    @classmethod
    def of(cls, row: Row) -> Lapsed:
        """A lapse from a row of LAPSED_OF_ENDPOINT or LAPSED_ANYWHERE, by column name."""
        return record(cls, row)

    @property
    def seq(self) -> int:
        return self.attempt_base + self.attempt_count

    @property
    def waiting(self) -> bool:
        return self.wait_reason is not None

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


class LapseWatch:
    """When each endpoint's next lapse may be due, as far as this process knows, by the
    database's clock (estimated from this process's clock and the last stamp it saw)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._due: dict[int, int] = {}
        self._offset = 0  # database clock minus this process's clock
        # Which endpoint a token leases from, learnt from answers: a hint for when to reap.
        self.endpoint_of: dict[str, int] = {}

    def now(self) -> int:
        return self.clock.now_us() + self._offset

    def saw(self, stamp: int) -> None:
        """A stamp the database just wrote, to follow its clock."""
        self._offset = stamp - self.clock.now_us()

    def due(self, endpoint_id: int) -> bool:
        return self._due.get(endpoint_id, 0) <= self.now()

    def note(self, endpoint_id: int, deadline: int) -> None:
        """A lease or wait of this endpoint ends at `deadline`."""
        self._due[endpoint_id] = min(self._due.get(endpoint_id, deadline), deadline)

    def looked(self, endpoint_id: int, *, more: bool) -> None:
        now = self.now()
        self._due[endpoint_id] = now if more else now + PROBE_INTERVAL_US


def lease_terms(budget: Budget) -> dict[str, object]:
    """What every lease statement binds besides who asks (one fresh assignment prefix per
    statement)."""
    return {
        "prefix": secrets.token_hex(8) + "-",
        "timeout": budget.job_timeout_us,
        "elsewhere": budget.elsewhere_us,
        "asking": ASKING_US,
    }


def lease_params(caller: Caller, batch: int, budget: Budget) -> dict[str, object]:
    """The parameters of LEASE."""
    return {"digest": caller.digest, "limit": batch} | lease_terms(budget)


@dataclass(frozen=True, slots=True)
class Poll:
    """A job poll, as it goes with the others that met it (LEASE_TOGETHER)."""

    caller: Caller
    batch: int

    def ask(self, req: int) -> dict[str, object]:
        """Its request in LEASE_TOGETHER, as request `req` of the statement."""
        return {"req": req, "digest": self.caller.digest, "wants": self.batch}

    def weight(self) -> int:
        """Its item's text in a statement: a token digest and two numbers, never near the
        bound, so the polls that met go as one."""
        return POLL_OVERHEAD


class Leasing:
    def __init__(
        self,
        db: Database,
        budget: Budget,
        retry: RetryPolicy,
        lapses: LapseWatch,
        names: EndpointNames,
        rng: random.Random,
    ) -> None:
        self.db = db
        self.budget = budget
        self.retry = retry
        self.lapses = lapses
        self.names = names
        self.rng = rng
        # PostgreSQL: polls that meet at the database go as one statement and one commit
        # (docs/performance.md, *Polls and results together*); SQLite's run in process.
        self._together: Coalescer[str, Poll, list[Job] | None] | None = (
            Coalescer(self._run_together) if db.dialect == "postgresql" else None
        )

    async def lease(self, caller: Caller, batch: int) -> list[Job]:
        """The job poll: reap this endpoint's lapsed leases if one may be due, then lease up
        to `batch` due scans, oldest first."""
        endpoint_id = self.lapses.endpoint_of.get(caller.digest)
        if endpoint_id is None or self.lapses.due(endpoint_id):
            its_endpoint, jobs = await transact(
                self.db, lambda tx: self._reap_and_lease(tx, caller, batch)
            )
            self.lapses.endpoint_of[caller.digest] = its_endpoint
            return jobs
        # Nothing to reap: the poll is one statement and needs no transaction around it.
        if self._together is not None and batch >= 1:
            met = await self._together("polls", Poll(caller, batch))
            if met is not None:
                return met
        return await self._alone(caller, batch)

    async def _reap_and_lease(self, tx: Tx, caller: Caller, batch: int) -> tuple[int, list[Job]]:
        """The caller's endpoint, once its lapsed leases are reaped, and the caller's jobs."""
        worker = await worker_of(tx, caller)
        assert worker.endpoint_id is not None
        await self.reap_endpoint(tx, worker.endpoint_id)
        return worker.endpoint_id, await self.lease_in(tx, caller, batch)

    async def _alone(self, caller: Caller, batch: int) -> list[Job]:
        """A poll in a statement of its own (LEASE)."""
        async with self.db.single() as tx:
            jobs = await self.lease_in(tx, caller, batch)
            if not jobs:
                await worker_of(tx, caller)  # an empty queue, or a token gone since
        return jobs

    async def _run_together(self, _: str, polls: list[Poll]) -> list[list[Job] | None]:
        """The polls that met, in one statement: each one's jobs, or None for a poll whose
        token was refused (answered alone, to say why). A poll that met none goes alone."""
        return await by_runs(polls, Poll.weight, self._poll_alone, self._together_in_one)

    async def _poll_alone(self, poll: Poll) -> list[Job] | None:
        return await self._alone(poll.caller, poll.batch)

    async def _together_in_one(self, polls: list[Poll]) -> list[list[Job] | None]:
        asks = orjson.dumps([poll.ask(req) for req, poll in enumerate(polls)]).decode()
        async with self.db.single() as tx:
            rows = await tx.rows(LEASE_TOGETHER, {"asks": asks} | lease_terms(self.budget))
            asked: dict[int, list[Row]] = {}
            for row in rows:
                found = asked.setdefault(row["asked"], [])
                if row["id"] is not None:
                    found.append(row)
            return [
                await self.leased(tx, asked[req]) if req in asked else None
                for req in range(len(polls))
            ]

    async def lease_in(self, tx: Tx, caller: Caller, batch: int) -> list[Job]:
        """Lease up to `batch` due scans inside an open transaction (no reaping)."""
        if batch < 1:
            return []
        rows = await tx.rows(LEASE, lease_params(caller, batch, self.budget))
        return await self.leased(tx, rows)

    async def leased(self, tx: Tx, rows: Sequence[Row]) -> list[Job]:
        """Jobs from rows a lease statement returned, with their event and lapse notes."""
        if not rows:
            return []
        endpoint_id = rows[0]["endpoint_id"]
        scans = [scan_from_row(row, await self.names.of(tx, endpoint_id)) for row in rows]
        retries = sum(1 for scan in scans if scan.attempt_count > 1)
        tx.events.append(LeasesGranted(scans[0].endpoint, len(scans), retries))
        first = scans[0]
        assert first.leased_at is not None and first.lease_expires_at is not None
        self.lapses.saw(first.leased_at)
        self.lapses.note(endpoint_id, first.lease_expires_at)
        return sorted((job_of(scan) for scan in scans), key=lambda job: job.scan_id)

    async def reap_endpoint(self, tx: Tx, endpoint_id: int) -> None:
        """Reap one endpoint's lapsed leases (at most the per-poll bound)."""
        params = {"endpoint": endpoint_id, "limit": self.budget.reap_per_poll}
        found = await self._reap(tx, await tx.rows(LAPSED_OF_ENDPOINT, params))
        self.lapses.looked(endpoint_id, more=found >= self.budget.reap_per_poll)

    async def sweep(self, *, limit: int = 500) -> int:
        """Reap lapsed leases of every endpoint, oldest lapse first; return how many."""

        async def reap(tx: Tx) -> int:
            return await self._reap(tx, await tx.rows(LAPSED_ANYWHERE, {"limit": limit}))

        return await transact(self.db, reap)

    async def _reap(self, tx: Tx, rows: Sequence[Row]) -> int:
        lapsed = [Lapsed.of(row) for row in rows]
        if not lapsed:
            return 0
        names = {x.endpoint_id: await self.names.of(tx, x.endpoint_id) for x in lapsed}
        spent = [x for x in lapsed if x.attempt_count >= self.budget.max_attempts]
        again = [x for x in lapsed if x.attempt_count < self.budget.max_attempts]
        await tx.many(CLOSE_LAPSED, [_closed_attempt(x) for x in lapsed])
        await tx.many(NAME_CAUSE, named(_lapse_cause(x) for x in lapsed))
        dead = await self._dead_letter(tx, spent, names)
        await tx.many(BUMP, increments(dead, tx.spread))
        tx.events.extend(dead)
        tx.events.extend(await self._requeue(tx, again, names))
        return len(lapsed)

    async def _dead_letter(
        self, tx: Tx, spent: Sequence[Lapsed], names: dict[int, str]
    ) -> list[Event]:
        events: list[Event] = []
        for x in spent:
            reason = lapse_dead_letter_reason(waiting=x.waiting)
            final = FinalAttempt(
                x.seq, lapse_outcome(waiting=x.waiting).value, x.wait_reason, None, x.now
            )
            events.append(
                ScanDeadLettered(
                    x.ref(names[x.endpoint_id]),
                    reason,
                    x.attempt_count,
                    x.worker,
                    x.leased_at,
                    x.now,
                    final,
                )
            )
        updates = [
            {
                "scan": x.id,
                "reason": lapse_dead_letter_reason(waiting=x.waiting).value,
                "cause": _lapse_cause(x).key,
            }
            for x in spent
        ]
        await tx.many(DEAD_LETTER_LAPSED, updates)
        return events

    async def _requeue(self, tx: Tx, again: Sequence[Lapsed], names: dict[int, str]) -> list[Event]:
        events: list[Event] = []
        updates = []
        for x in again:
            delay = retry_delay_us(self.retry, attempt=x.attempt_count, draw=self.rng.random())
            updates.append({"scan": x.id, "delay": delay})
            ref = x.ref(names[x.endpoint_id])
            outcome = lapse_outcome(waiting=x.waiting).value
            events += [
                AttemptFailed(ref, x.attempt_count, outcome, x.worker),
                ScanReady(ref, x.attempt_count, x.now + delay),
            ]
        await tx.many(REQUEUE_LAPSED, updates)
        return events


def _closed_attempt(x: Lapsed) -> dict[str, object]:
    return {
        "scan": x.id,
        "seq": x.seq,
        "attempt": x.attempt_count,
        "assignment": x.assignment_id,
        "worker": x.worker,
        "leased_at": x.leased_at,
        "outcome": lapse_outcome(waiting=x.waiting).value,
        "summary": x.wait_reason,
        "cause": _lapse_cause(x).key,
    }


def _lapse_cause(x: Lapsed) -> Cause:
    return cause_of(lapse_outcome(waiting=x.waiting).value, x.wait_reason)
