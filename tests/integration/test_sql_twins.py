"""The pure lifecycle rules and their SQL twins agree on every database.

`lifecycle.rules.queue_state` names the state a live scan counts under (a paused queue's
scans, parked or sent back after the pause, are `paused`), and `fleet_snapshot.snapshot`
counts the same states in SQL, judged by `mf_now()`, with the oldest due time over the scans
the rule calls `queued`;
`lifecycle.rules.diagnose_stale` says why a report misses the current assignment, and the
compare-and-set the server runs to close a result (COMPLETE on PostgreSQL, CLOSE_RESULTS on
SQLite) or to touch a lease (HEARTBEAT, WAIT, RESUME) must miss exactly then, refusing with
the rule's code; and pruning (`store/operator/retention.py`) removes exactly the scans and delivery
minutes `lifecycle.retention` finds past their retention. Hypothesis draws rows around the
boundaries (equal times, the attempt cap, the rollout form); each is written directly,
judged through the store on the fake clock that pins the database's clock, and removed
before the next example."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, insert, text

from mainframe.clock import FakeClock
from mainframe.lifecycle.retention import (
    DELIVERY_MINUTE_US,
    SCAN_KINDS,
    PruneKind,
    RetentionPolicy,
    delivery_minute_is_due,
    scan_is_due,
)
from mainframe.lifecycle.rules import Holding, QueueState, Status, diagnose_stale, queue_state
from mainframe.store import Presented, Report, Stale
from mainframe.store.accounts.authentication import digest
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.database import Database
from mainframe.store.engine.schema import delivery_counts, paused_queues, scans
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator import fleet_snapshot
from tests.integration.conftest import MAX_ATTEMPTS, blocking_store

NOW = 1_750_000_000_000_000  # the fake clock, and so `mf_now()` on both databases
# Each example writes, judges and removes its rows on a real database: a few dozen examples
# find the boundaries (the strategies stay near them) without slowing a loaded machine.
EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@dataclass(frozen=True)
class Row:
    status: Status
    lease_expires_at: int | None
    available_at: int | None
    attempt_count: int
    worker: str | None = "w1"
    assignment_id: str | None = None
    endpoint: int = 0  # which of the two endpoints holds it
    queue: str = "default"


@dataclass
class Twins:
    """A store on the database at NOW, an engine beside it, and its workers' tokens."""

    store: Any  # a Blocking proxy of the Store (tests/blocking.py)
    engine: Engine
    endpoint_id: int
    tokens: dict[str, Presented]  # by worker name
    other_endpoint_id: int

    def insert(
        self, rows: list[Row], paused: frozenset[tuple[int, str]] = frozenset()
    ) -> list[int]:
        """Write the rows as scans (of the endpoint, or the other), and the paused queues
        named by (endpoint, queue), committed; the scans' ids."""
        with self.engine.begin() as conn:
            for endpoint, queue in sorted(paused):
                conn.execute(
                    insert(paused_queues).values(
                        endpoint_id=self._endpoint(endpoint), queue=queue, paused_at=NOW - 1_000,
                        paused_by="ops",
                    )
                )  # fmt: skip
            return [
                conn.execute(
                    insert(scans).values(**self._values(number, row)).returning(scans.c.id)
                ).scalar_one()
                for number, row in enumerate(rows, start=1)
            ]

    def _endpoint(self, index: int) -> int:
        return self.other_endpoint_id if index else self.endpoint_id

    def _values(self, number: int, row: Row) -> dict[str, object]:
        return {
            "endpoint_id": self._endpoint(row.endpoint),
            "queue": row.queue,
            "name": f"pkg{number}",
            "version": "1.0",
            "kind": "scan",
            "status": row.status.value,
            "verified": True,
            "worker": row.worker,
            "created_at": NOW - 1_000,
            "updated_at": NOW - 1_000,
            "attempt_count": row.attempt_count,
            "assignment_id": row.assignment_id,
            "lease_expires_at": row.lease_expires_at,
            "available_at": row.available_at,
        }

    def clear(self) -> None:
        """Remove every scan and attempt an example left (closes write history rows)."""
        with self.engine.begin() as conn:
            conn.execute(text("DELETE FROM attempts"))
            conn.execute(text("DELETE FROM scans"))
            conn.execute(text("DELETE FROM paused_queues"))


@pytest.fixture
def twins(database_url: str, loop: BlockingPortal) -> Iterator[Twins]:
    """One endpoint with workers w1 and w2, on a store whose clock (the database's) is NOW."""
    store = blocking_store(database_url, loop, FakeClock(NOW))
    store.owners.create_owner("alice")
    endpoint = store.owners.create_endpoint(
        store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
    )
    secrets = {
        worker: store.owners.create_token(
            OPERATOR, "pypi", role="worker", principal=worker, origin="cli"
        )[1]
        for worker in ("w1", "w2")
    }
    tokens = {worker: Presented(digest(secret)) for worker, secret in secrets.items()}
    other = store.owners.create_endpoint(
        store.owners.owner_id("alice"), "npm", open_intake=False, origin="cli"
    )
    engine = create_store_engine(database_url)
    yield Twins(store, engine, endpoint.id, tokens, other.id)
    engine.dispose()
    store.close()


# Times one microsecond either side of now, and now itself, where `<` and `<=` part ways.
_near = st.integers(min_value=-2, max_value=2).map(lambda d: NOW + d)


QUEUES = ("default", "held")


@st.composite
def live_rows(draw: st.DrawFn) -> Row:
    """A scan in any status, most often one of the two whose state turns on a boundary
    (a due time, a lapse, the attempt cap), its timestamps as the store keeps them: a QUEUED
    scan has `available_at` unless a pause parked it, a PENDING one always has a lease
    expiry; in either endpoint and queue, so some stand in a paused queue."""
    status = draw(st.sampled_from([Status.QUEUED, Status.PENDING]) | st.sampled_from(list(Status)))
    lease = draw(_near) if status is Status.PENDING else draw(st.none() | _near)
    available = draw(_near | st.none()) if status is Status.QUEUED else draw(st.none() | _near)
    cap = st.sampled_from([MAX_ATTEMPTS - 1, MAX_ATTEMPTS])
    attempts = draw(cap | st.integers(min_value=0, max_value=MAX_ATTEMPTS + 1))
    where = {"endpoint": draw(st.sampled_from([0, 1])), "queue": draw(st.sampled_from(QUEUES))}
    return Row(status, lease, available, attempts, **where)


# Which (endpoint, queue) pairs are paused: none, some or all.
paused_sets = st.frozensets(st.tuples(st.sampled_from([0, 1]), st.sampled_from(QUEUES)))


def _states(rows: list[Row], paused: frozenset[tuple[int, str]]) -> list[QueueState | None]:
    return [
        queue_state(
            status=row.status,
            queue_paused=(row.endpoint, row.queue) in paused,
            lease_expires_at=row.lease_expires_at,
            available_at=row.available_at,
            attempt_count=row.attempt_count,
            now=NOW,
            max_attempts=MAX_ATTEMPTS,
        )
        for row in rows
    ]


def _expected_queue(states: list[QueueState | None]) -> dict[QueueState, int]:
    counted = Counter(state for state in states if state is not None)
    return {state: counted.get(state, 0) for state in QueueState}


async def _snapshot(db: Database) -> fleet_snapshot.Snapshot:
    async with db.read() as tx:
        return await fleet_snapshot.snapshot(tx, max_attempts=MAX_ATTEMPTS)


@EXAMPLES
@given(rows=st.lists(live_rows(), max_size=12), paused=paused_sets)
def test_the_metrics_count_each_scan_where_the_rule_puts_it(
    twins: Twins, rows: list[Row], paused: frozenset[tuple[int, str]]
) -> None:
    twins.insert(rows, paused)
    try:
        found = twins.store.run(_snapshot, twins.store.target.db)
    finally:
        twins.clear()
    assert found.taken_at == NOW
    states = _states(rows, paused)
    assert found.queue == _expected_queue(states)
    # The oldest due time is over the scans a poll could lease: those the rule calls queued.
    due = [
        row.available_at
        for row, state in zip(rows, states, strict=True)
        if state is QueueState.QUEUED and row.available_at is not None
    ]
    assert found.oldest_due_at == (min(due) if due else None)


_ASSIGNMENTS = st.sampled_from(["a-1", "a-2"])


@dataclass(frozen=True)
class Reported:
    """A scan as a report may find it, and the report: its worker and what it echoes (the
    attempt with the assignment, or neither: the rollout form)."""

    row: Row
    worker: str
    echo: tuple[int, str] | None


# How a report's echo stands to the scan's assignment, each drawn as often.
_ECHOES = ("rollout", "exact", "other attempt", "other assignment", "both other")


@st.composite
def reports(draw: st.DrawFn) -> Reported:
    """Mostly near misses: the scan is often PENDING and held by the reporting worker, and
    the echo matches it, or misses it in one field, or in both, or is the rollout form. The
    scan is as the store keeps it: a PENDING one always has an assignment."""
    worker = draw(st.sampled_from(["w1", "w2"]))
    status = draw(st.just(Status.PENDING) | st.sampled_from(list(Status)))
    holder = draw(st.just(worker) | st.sampled_from([None, "w1", "w2"]))
    count = draw(st.integers(min_value=0, max_value=MAX_ATTEMPTS))
    assignment = draw(_ASSIGNMENTS if status is Status.PENDING else st.none() | _ASSIGNMENTS)
    current = assignment or "a-1"
    other = "a-2" if current == "a-1" else "a-1"
    missed = draw(st.integers(min_value=0, max_value=MAX_ATTEMPTS).filter(lambda n: n != count))
    echo = {
        "rollout": None,
        "exact": (count, current),
        "other attempt": (missed, current),
        "other assignment": (count, other),
        "both other": (missed, other),
    }[draw(st.sampled_from(_ECHOES))]
    row = Row(status, NOW + 1_000_000, NOW, count, holder, assignment)
    return Reported(row, worker, echo)


def _act(twins: Twins, action: str, scan_id: int, drawn: Reported) -> str | None:
    """Run the worker's statement as the server does; None when it took, else the code of
    its refusal."""
    attempt, assignment = drawn.echo if drawn.echo is not None else (None, None)
    caller = twins.tokens[drawn.worker]
    if action == "result":
        report = Report("finished", False, attempt, assignment, None, None, "{}")
        [outcome] = twins.store.results.complete(caller, [(scan_id, report)]).outcomes
        if outcome.error is None:
            return None
        assert isinstance(outcome.error, Stale), outcome.error
        return str(outcome.error.code)
    touch = getattr(twins.store.assignments, action)
    extra = {"seconds": 60.0, "reason": "sandbox"} if action == "wait" else {}
    try:
        touch(caller, scan_id, attempt=attempt, assignment_id=assignment, **extra)
    except Stale as refused:
        return str(refused.code)
    return None


# A result (COMPLETE on PostgreSQL, CLOSE_RESULTS on SQLite) and each touch of a lease.
@pytest.mark.parametrize("action", ["result", "heartbeat", "wait", "resume"])
@EXAMPLES
@given(drawn=reports())
def test_the_compare_and_set_takes_exactly_when_the_rule_names_no_reason(
    twins: Twins, action: str, drawn: Reported
) -> None:
    (scan_id,) = twins.insert([drawn.row])
    try:
        refused = _act(twins, action, scan_id, drawn)
    finally:
        twins.clear()
    attempt, assignment = drawn.echo if drawn.echo is not None else (None, None)
    row = drawn.row
    holding = Holding(row.status, row.attempt_count, row.assignment_id, row.worker)
    reason = diagnose_stale(holding, worker=drawn.worker, attempt=attempt, assignment_id=assignment)
    assert refused == (None if reason is None else reason.value)


# Retention: `lifecycle.retention.scan_is_due` and `delivery_minute_is_due` against the
# pruning statements (store/operator/retention.py), at the default policy the twins' store has.
POLICY = RetentionPolicy()


@dataclass(frozen=True)
class Ended:
    """A scan's status and the two end times pruning reads, drawn independently of each
    other, each a microsecond either side of some kind's boundary."""

    status: Status
    finished_at: int | None
    dead_lettered_at: int | None


def _boundary(kind: PruneKind) -> st.SearchStrategy[int]:
    kept = POLICY.kept(kind)
    assert kept is not None
    return _near.map(lambda t: t - kept)


_ENDS = st.none() | st.one_of(*(_boundary(kind) for kind in SCAN_KINDS))


@st.composite
def ended_rows(draw: st.DrawFn) -> Ended:
    status = draw(st.sampled_from([Status.FINISHED, Status.FAILED]) | st.sampled_from(list(Status)))
    return Ended(status, draw(_ENDS), draw(_ENDS))


async def _prune_scans(store: Any) -> None:
    for kind in SCAN_KINDS:
        await store.retention.prune(kind, limit=1_000)


@EXAMPLES
@given(rows=st.lists(ended_rows(), max_size=12))
def test_pruning_removes_exactly_the_scans_the_rule_finds_due(
    twins: Twins, rows: list[Ended]
) -> None:
    values = [
        twins._values(n, Row(Status.QUEUED, None, None, 0))
        | {
            "status": r.status.value,
            "finished_at": r.finished_at,
            "dead_lettered_at": r.dead_lettered_at,
        }
        for n, r in enumerate(rows, start=1)
    ]
    # A live key is unique: give each live row its own package.
    with twins.engine.begin() as conn:
        ids = [
            conn.execute(insert(scans).values(**v).returning(scans.c.id)).scalar_one()
            for v in values
        ]
    try:
        twins.store.run(_prune_scans, twins.store.target)
        with twins.engine.connect() as conn:
            left = set(conn.execute(text("SELECT id FROM scans")).scalars())
    finally:
        twins.clear()
    due = {
        scan_id
        for scan_id, r in zip(ids, rows, strict=True)
        if scan_is_due(
            status=r.status,
            finished_at=r.finished_at,
            dead_lettered_at=r.dead_lettered_at,
            now_us=NOW,
            policy=POLICY,
        )
    }
    assert set(ids) - left == due


@EXAMPLES
@given(offsets=st.lists(st.integers(min_value=-3, max_value=3), max_size=6, unique=True))
def test_pruning_removes_exactly_the_minutes_the_rule_finds_due(
    twins: Twins, offsets: list[int]
) -> None:
    """Minutes starting a microsecond either side of the instant their retention has passed
    since they ended."""
    kept = POLICY.kept(PruneKind.DELIVERY_COUNTS)
    assert kept is not None
    starts = [NOW - kept - DELIVERY_MINUTE_US + offset for offset in offsets]
    with twins.engine.begin() as conn:
        for start in starts:
            conn.execute(
                insert(delivery_counts).values(
                    endpoint_id=twins.endpoint_id, minute_us=start, attempts=1, failures=0
                )
            )
    try:
        twins.store.retention.prune(PruneKind.DELIVERY_COUNTS, limit=100)
        with twins.engine.connect() as conn:
            left = set(conn.execute(text("SELECT minute_us FROM delivery_counts")).scalars())
    finally:
        with twins.engine.begin() as conn:
            conn.execute(text("DELETE FROM delivery_counts"))
    due = {start for start in starts if delivery_minute_is_due(start, now_us=NOW, kept=kept)}
    assert set(starts) - left == due
