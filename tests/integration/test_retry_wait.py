"""Retries wait: a scan sent back to the queue is leased again only once its backoff is over,
whether a worker failed it, an operator failed it or its lease lapsed; a worker may name its
own delay; a scan waiting for its retry is `scheduled`, not stuck. On both databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.rules import QueueState, Status
from mainframe.lifecycle.scans import ScanReady
from mainframe.store import Report
from mainframe.store.engine.database import Sql
from mainframe.store.engine.postgres import PgTx
from mainframe.store.engine.sqlite import SqliteTx
from tests.integration.conftest import (
    JOB_TIMEOUT,
    MAX_ATTEMPTS,
    Recorder,
    World,
    blocking_store,
    submit_scan,
)

BASE, CAP = 10.0, 600.0
S = 1_000_000


@pytest.fixture
def waiting(world: World, database_url: str, loop: BlockingPortal) -> Iterator[World]:
    """The same world, its store rebuilt with the default backoff (10 s doubling)."""
    recorder = Recorder()
    store = blocking_store(
        database_url,
        loop,
        world.clock,
        retry=RetryPolicy(base=BASE, cap=CAP),
        publish=recorder,
    )
    yield World(
        store, world.clock, recorder, world.owner, world.source, world.worker, world.other_worker
    )
    store.close()


def failed(job_attempt: int, assignment: str, *, after: float | None = None) -> Report:
    return Report("failed", True, job_attempt, assignment, "registry 503", None, None, after)


def lease_one(world: World) -> list[int]:
    return [job.scan_id for job in world.store.leasing.lease(world.worker, 10)]


def test_a_retryable_failure_waits_out_its_backoff(waiting: World) -> None:
    scan_id = waiting.submit()
    [job] = waiting.store.leasing.lease(waiting.worker, 1)
    closed = waiting.store.results.report(waiting.worker, scan_id, failed(1, job.assignment_id))
    now = waiting.clock.now_us()
    assert closed.status is Status.QUEUED and closed.available_at is not None
    delay = closed.available_at - now
    assert 0 <= delay < BASE * S, "attempt 1's wait is drawn below the base"
    ready = waiting.published.of(ScanReady)[-1]  # the first one announced the submission
    assert ready.available_at == closed.available_at  # type: ignore[attr-defined]
    waiting.clock.advance(delay / S - 0.001)
    if delay > 1000:
        assert lease_one(waiting) == [], "not due yet"
        assert waiting.store.listings.snapshot().queue[QueueState.SCHEDULED] == 1
    waiting.clock.advance(0.002)
    [again] = waiting.store.leasing.lease(waiting.worker, 1)
    assert (again.scan_id, again.attempt) == (scan_id, 2)


def test_the_wait_doubles_and_is_jittered_across_a_fleet(waiting: World) -> None:
    ids = [waiting.submit(name=f"p{i}") for i in range(40)]
    jobs = waiting.store.leasing.lease(waiting.worker, 40)
    for job in jobs:
        waiting.store.results.report(waiting.worker, job.scan_id, failed(1, job.assignment_id))
    first = [_available(waiting, i) - waiting.clock.now_us() for i in ids]
    assert max(first) < BASE * S and len(set(first)) > 30, "spread, not one synchronised wave"
    waiting.clock.advance(BASE)
    jobs = waiting.store.leasing.lease(waiting.worker, 40)
    assert len(jobs) == 40 and {job.attempt for job in jobs} == {2}
    for job in jobs:
        waiting.store.results.report(waiting.worker, job.scan_id, failed(2, job.assignment_id))
    second = [_available(waiting, i) - waiting.clock.now_us() for i in ids]
    assert max(second) < 2 * BASE * S and max(second) > BASE * S, "attempt 2 waits up to 20 s"


def test_a_worker_names_its_own_delay(waiting: World) -> None:
    scan_id = waiting.submit()
    [job] = waiting.store.leasing.lease(waiting.worker, 1)
    report = failed(1, job.assignment_id, after=90.0)
    closed = waiting.store.results.report(waiting.worker, scan_id, report)
    assert closed.available_at == waiting.clock.now_us() + 90 * S
    waiting.clock.advance(89.9)
    assert lease_one(waiting) == []
    waiting.clock.advance(0.2)
    assert lease_one(waiting) == [scan_id]


def test_a_lapsed_lease_below_the_cap_waits_before_its_next_attempt(waiting: World) -> None:
    scan_id = waiting.submit()
    waiting.store.leasing.lease(waiting.worker, 1)
    waiting.clock.advance(JOB_TIMEOUT + 1)
    waiting.published.events.clear()
    leased = lease_one(waiting)  # this poll notices the lapse and requeues with a backoff
    scan = waiting.store.listings.get_scan(waiting.owner.owner_id, scan_id)  # type: ignore[arg-type]
    assert scan.status is Status.QUEUED and scan.attempts[-1].outcome == "lease_expired"
    [ready] = waiting.published.of(ScanReady)
    assert ready.available_at == scan.available_at  # type: ignore[attr-defined]
    assert scan.available_at is not None
    if scan.available_at > waiting.clock.now_us():
        assert leased == []
    waiting.clock.advance(BASE)
    assert lease_one(waiting) == [scan_id]


def test_an_operators_retryable_fail_waits_too(waiting: World) -> None:
    scan_id = waiting.submit()
    waiting.store.leasing.lease(waiting.worker, 1)
    owner = waiting.owner.owner_id
    assert owner is not None
    scan = waiting.store.interventions.fail(owner, scan_id, retryable=True, summary="flaky")
    assert scan.status is Status.QUEUED and scan.available_at is not None
    assert scan.available_at - waiting.clock.now_us() < BASE * S


def test_the_cap_still_dead_letters_without_waiting(waiting: World) -> None:
    scan_id = waiting.submit()
    for attempt in range(1, MAX_ATTEMPTS + 1):
        waiting.clock.advance(CAP)
        [job] = waiting.store.leasing.lease(waiting.worker, 1)
        assert job.attempt == attempt
        closed = waiting.store.results.report(
            waiting.worker, scan_id, failed(attempt, job.assignment_id)
        )
    assert closed.status is Status.FAILED and closed.available_at is None
    assert closed.dead_lettered_at == waiting.clock.now_us()


def test_a_steady_poll_is_one_statement_when_no_lapse_is_due(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        world.submit(name=f"s{i}")
    world.store.leasing.lease(world.worker, 1)  # the first poll looks for lapses once
    ran = statements_run(monkeypatch)
    world.store.leasing.lease(world.worker, 1)
    assert ran == ["lease"], "the token check and the lease are one statement"


def statements_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the statements every transaction runs from now on, in order."""
    ran: list[str] = []
    for tx in (SqliteTx, PgTx):
        for method in ("rows", "run", "many"):
            original = getattr(tx, method)

            async def traced(
                self: object, sql: Sql, *args: object, _o: object = original
            ) -> object:
                ran.append(sql.name)
                return await _o(self, sql, *args)  # type: ignore[operator]

            monkeypatch.setattr(tx, method, traced)
    return ran


def test_owner_submissions_are_due_at_once(world: World) -> None:
    scan, created = submit_scan(
        world.store,
        world.source,
        endpoint=None,
        queue="default",
        name="n",
        version="1",
        kind="scan",
        payload=None,
    )
    assert created and scan.available_at == scan.created_at


def _available(world: World, scan_id: int) -> int:
    owner = world.owner.owner_id
    assert owner is not None
    found = world.store.listings.get_scan(owner, scan_id).available_at
    assert found is not None
    return found
