"""The job poll and the sweeper. A poll is one statement: lease the endpoint's oldest due
QUEUED scans. Only when a lapse may be due (a known lease ran out, or a second has passed
since the last look, for leases granted by other processes) does it first reap the
endpoint's lapsed leases: budget spent → dead letter; budget left → back to QUEUED after a
retry backoff. The sweeper reaps every endpoint the same way, so nothing waits for a poll.

Rows are claimed with FOR UPDATE SKIP LOCKED on PostgreSQL; on SQLite BEGIN IMMEDIATE
already serialises writers."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from mainframe.lifecycle.backoff import RetryPolicy, retry_delay_us
from mainframe.lifecycle.events import (
    AttemptFailed,
    Event,
    FinalAttempt,
    LeasesGranted,
    ScanDeadLettered,
    ScanReady,
    ScanRef,
)
from mainframe.lifecycle.rules import lapse_dead_letter_reason, lapse_outcome
from mainframe.store import accounts, totals
from mainframe.store.budget import Budget
from mainframe.store.errors import Unauthorized
from mainframe.store.records import Job, Principal
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx, UnitOfWork

# How long a process trusts that no lease of an endpoint has lapsed without looking: leases
# granted by other server processes are only seen by looking.
PROBE_INTERVAL_US = 1_000_000

_ASSIGN = (
    "status = 'PENDING', attempt_count = attempt_count + 1, "
    "assignment_id = :prefix || CAST(scans.id AS TEXT), worker = :worker, leased_at = :now, "
    "lease_expires_at = :expires, wait_reason = NULL, updated_at = :now"
)
_JOB = (
    "scans.id, scans.name, scans.version, scans.kind, scans.queue, scans.payload, "
    "scans.attempt_count, scans.assignment_id, scans.lease_expires_at"
)
# Walks ix_scans_queued (endpoint_id, available_at, id) WHERE status = 'QUEUED' in due order
# and stops after :limit rows; the literal status is what lets both planners use it.
_DUE = (
    "SELECT id FROM scans WHERE endpoint_id = :endpoint AND status = 'QUEUED' "
    "AND available_at <= :now ORDER BY available_at, id LIMIT :limit"
)
LEASE_DUE = Sql(
    "lease_due",
    f"UPDATE scans SET {_ASSIGN} WHERE id IN ({_DUE}) RETURNING {_JOB}",
    f"WITH due AS ({_DUE} FOR UPDATE SKIP LOCKED) "
    f"UPDATE scans SET {_ASSIGN} FROM due WHERE scans.id = due.id RETURNING {_JOB}",
)
_LAPSED_COLUMNS = (
    "id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker, "
    "leased_at, attempt_count, assignment_id, wait_reason, attempt_base"
)
# ix_scans_pending_lease (endpoint_id, lease_expires_at) and ix_scans_lease_due
# (lease_expires_at), both WHERE status = 'PENDING'.
_LAPSED = (
    f"SELECT {_LAPSED_COLUMNS} FROM scans WHERE status = 'PENDING' "
    "AND lease_expires_at < :now {endpoint} ORDER BY lease_expires_at LIMIT :limit"
)
LAPSED_OF_ENDPOINT = Sql(
    "lapsed_of_endpoint",
    _LAPSED.format(endpoint="AND endpoint_id = :endpoint"),
    _LAPSED.format(endpoint="AND endpoint_id = :endpoint") + " FOR UPDATE SKIP LOCKED",
)
LAPSED_ANYWHERE = Sql(
    "lapsed_anywhere",
    _LAPSED.format(endpoint=""),
    _LAPSED.format(endpoint="") + " FOR UPDATE SKIP LOCKED",
)
CLOSE_LAPSED = Sql(
    "close_lapsed_attempt",
    "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, "
    "closed_at, outcome, summary, artifact) VALUES (:scan, :seq, :attempt, :assignment, "
    ":worker, :leased_at, :now, :outcome, :summary, NULL)",
)
DEAD_LETTER_LAPSED = Sql(
    "dead_letter_lapsed",
    "UPDATE scans SET status = 'FAILED', dead_lettered_at = :now, finished_at = :now, "
    "updated_at = :now, fail_reason = :reason, lease_expires_at = NULL, wait_reason = NULL "
    "WHERE id = :scan AND status = 'PENDING'",
)
REQUEUE_LAPSED = Sql(
    "requeue_lapsed",
    "UPDATE scans SET status = 'QUEUED', available_at = :available, updated_at = :now, "
    "lease_expires_at = NULL, wait_reason = NULL WHERE id = :scan AND status = 'PENDING'",
)
ENDPOINT_NAMES = Sql("endpoint_names", "SELECT id, name FROM endpoints")


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

    @property
    def seq(self) -> int:
        return self.attempt_base + self.attempt_count

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
    """When each endpoint's next lapse may be due, as far as this process knows."""

    def __init__(self) -> None:
        self._due: dict[int, int] = {}

    def due(self, endpoint_id: int, now: int) -> bool:
        return self._due.get(endpoint_id, 0) <= now

    def note(self, endpoint_id: int, deadline: int) -> None:
        """A lease or wait of this endpoint ends at `deadline`."""
        self._due[endpoint_id] = min(self._due.get(endpoint_id, deadline), deadline)

    def looked(self, endpoint_id: int, now: int, *, more: bool) -> None:
        self._due[endpoint_id] = now if more else now + PROBE_INTERVAL_US


class Leasing:
    def __init__(
        self, uow: UnitOfWork, budget: Budget, retry: RetryPolicy, lapses: LapseWatch
    ) -> None:
        self.uow = uow
        self.budget = budget
        self.retry = retry
        self.lapses = lapses

    def lease(self, principal: Principal, batch: int) -> list[Job]:
        """The job poll: reap this endpoint's lapsed leases if one may be due, then lease up
        to `batch` due scans, oldest first."""
        assert principal.endpoint_id is not None and principal.endpoint is not None
        endpoint_id, now = principal.endpoint_id, self.uow.now()
        expires = now + self.budget.job_timeout_us
        due = self.lapses.due(endpoint_id, now)
        # Without reaping, the poll is one statement and needs no transaction around it.
        with self.uow.write() if due else self.uow.single() as tx:
            if due:
                found = self._reap(tx, LAPSED_OF_ENDPOINT, {"endpoint": endpoint_id}, now)
                self.lapses.looked(endpoint_id, now, more=found >= self.budget.reap_per_poll)
            params = {
                "prefix": secrets.token_hex(8) + "-",
                "worker": principal.name,
                "now": now,
                "expires": expires,
                "endpoint": endpoint_id,
                "limit": batch,
            }
            rows = tx.rows(LEASE_DUE, params)
            if rows:
                retries = sum(1 for row in rows if row[6] > 1)
                tx.events.append(LeasesGranted(principal.endpoint, len(rows), retries))
            elif accounts.endpoint_is_revoked(tx, endpoint_id):
                raise Unauthorized("this worker's endpoint is revoked")
        if rows:
            self.lapses.note(endpoint_id, expires)
        return sorted((Job(*row) for row in rows), key=lambda job: job.scan_id)

    def sweep(self, *, limit: int = 500) -> int:
        """Reap lapsed leases of every endpoint, oldest lapse first; return how many."""
        now = self.uow.now()
        with self.uow.write() as tx:
            return self._reap(tx, LAPSED_ANYWHERE, {}, now, limit=limit)

    def _reap(
        self, tx: Tx, sql: Sql, params: dict[str, int], now: int, *, limit: int | None = None
    ) -> int:
        rows = tx.rows(sql, params | {"now": now, "limit": limit or self.budget.reap_per_poll})
        lapsed = [Lapsed(*row) for row in rows]
        if not lapsed:
            return 0
        names = {row[0]: row[1] for row in tx.rows(ENDPOINT_NAMES, {})}
        spent = [x for x in lapsed if x.attempt_count >= self.budget.max_attempts]
        again = [x for x in lapsed if x.attempt_count < self.budget.max_attempts]
        tx.many(CLOSE_LAPSED, [_closed_attempt(x, now) for x in lapsed])
        dead = self._dead_letter(tx, spent, now, names)
        totals.record(tx, dead, rng=self.uow.rng)
        tx.events.extend(dead)
        tx.events.extend(self._requeue(tx, again, now, names))
        return len(lapsed)

    def _dead_letter(
        self, tx: Tx, spent: Sequence[Lapsed], now: int, names: dict[int, str]
    ) -> list[Event]:
        events: list[Event] = []
        updates = []
        for x in spent:
            waiting = x.wait_reason is not None
            reason = lapse_dead_letter_reason(waiting=waiting)
            updates.append({"scan": x.id, "now": now, "reason": reason.value})
            final = FinalAttempt(
                x.seq, lapse_outcome(waiting=waiting).value, x.wait_reason, None, now
            )
            events.append(
                ScanDeadLettered(
                    x.ref(names[x.endpoint_id]),
                    reason,
                    x.attempt_count,
                    x.worker,
                    x.leased_at,
                    now,
                    final,
                )
            )
        tx.many(DEAD_LETTER_LAPSED, updates)
        return events

    def _requeue(
        self, tx: Tx, again: Sequence[Lapsed], now: int, names: dict[int, str]
    ) -> list[Event]:
        events: list[Event] = []
        updates = []
        for x in again:
            delay = retry_delay_us(self.retry, attempt=x.attempt_count, draw=self.uow.rng.random())
            updates.append({"scan": x.id, "now": now, "available": now + delay})
            ref = x.ref(names[x.endpoint_id])
            outcome = lapse_outcome(waiting=x.wait_reason is not None).value
            events += [
                AttemptFailed(ref, x.attempt_count, outcome),
                ScanReady(ref, x.attempt_count, now + delay),
            ]
        tx.many(REQUEUE_LAPSED, updates)
        return events


def _closed_attempt(x: Lapsed, now: int) -> dict[str, object]:
    return {
        "scan": x.id,
        "seq": x.seq,
        "attempt": x.attempt_count,
        "assignment": x.assignment_id,
        "worker": x.worker,
        "leased_at": x.leased_at,
        "now": now,
        "outcome": lapse_outcome(waiting=x.wait_reason is not None).value,
        "summary": x.wait_reason,
    }
