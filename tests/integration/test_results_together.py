"""Requests of finished results (one or several each) that reach the store while another is
at the database go together in one statement on PostgreSQL (COMPLETE_TOGETHER), from any
workers of any endpoints, and each request still gets what it would have got alone: its own
closes, its own next jobs (never a job another request got, never a retry its own worker may
not take yet), its history rows with the jobs leased with them, and the outcome totals; a
request some result of which does not close there (a replay, a stale one) gets the answers it
would have got alone."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine, text

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import ScanFinished
from mainframe.store import Report, ScanSpec
from mainframe.store.engine.database import Stale
from mainframe.store.work.results import Completion
from tests.integration.conftest import World, issue
from tests.integration.test_intake_together import Counted

# One request: who sends it, the job it reports finished, and how many next jobs it asks for.
Ask = tuple[Any, Any, int]


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite runs each request's steps in its own transaction, in process")


def finished(job: Any, result: str = '{"ok": 1}') -> Report:
    return Report("finished", False, job.attempt, job.assignment_id, None, None, result)


def held_at_once(
    world: World, engine: Engine, lock: str, calls: list[Callable[[], Awaitable[Any]]]
) -> list[Any]:
    """Every call made at the same moment; the first is held at the database (by `lock`,
    taken in another transaction) until the rest have met behind it. Each outcome is the
    call's value or the error it raised."""

    async def all_at_once() -> list[Any]:
        tasks = []
        with engine.connect() as conn:
            conn.execute(text(lock))
            for call in calls:
                tasks.append(asyncio.create_task(call()))
                await asyncio.sleep(0.01)
            await asyncio.to_thread(conn.commit)
        return await asyncio.gather(*tasks, return_exceptions=True)

    found: list[Any] = world.store.run(all_at_once)
    return found


def at_once(world: World, engine: Engine, asks: list[Ask]) -> tuple[list[Any], Counted]:
    """Every request sent at the same moment, the first held by the outcome totals' rows
    locked; each outcome is a Completion or the error raised."""
    return batches_at_once(world, engine, [(caller, [job], n) for caller, job, n in asks])


def batches_at_once(
    world: World, engine: Engine, asks: list[tuple[Any, list[Any], int]]
) -> tuple[list[Any], Counted]:
    """As `at_once`, each request reporting a list of jobs finished."""
    results = world.store.target.results
    counted = results.db = Counted(results.db)
    calls = [
        functools.partial(
            results.complete, caller, [(job.scan_id, finished(job)) for job in jobs], fetch=n
        )
        for caller, jobs, n in asks
    ]
    return held_at_once(world, engine, "UPDATE scan_totals SET count = count", calls), counted


def pypi_credentials(world: World) -> tuple[Any, Any]:
    """A worker and a source of alice's `pypi`, the world's other endpoint."""
    found = [
        world.store.authentication.authenticate(issue(world.store, "pypi", role, name))
        for role, name in (("worker", "p1"), ("source", "pfeed"))
    ]
    return found[0], found[1]


def two_endpoints(world: World, n: int) -> Any:
    """`n` scans queued on each of the world's two endpoints (npm0.., pypi0..); pypi's worker."""
    pypi_worker, pypi_source = pypi_credentials(world)
    for i in range(n):
        world.submit(f"npm{i}")
        world.store.intake.submit(pypi_source, endpoint=None, spec=_spec(f"pypi{i}"))
    return pypi_worker


def lease(world: World, caller: Any, n: int) -> list[Any]:
    return list(world.store.leasing.lease(caller, n))


def worker_of(engine: Engine, scan_id: int) -> tuple[str, str]:
    with engine.connect() as conn:
        row = conn.execute(text(f"SELECT worker, status FROM scans WHERE id = {scan_id}")).one()
    return row[0], row[1]


def finished_total(engine: Engine) -> int:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT sum(count) FROM scan_totals WHERE outcome = 'finished'")
        ).scalar()
    return int(found or 0)


def next_assignments(engine: Engine, scan_id: int) -> str | None:
    with engine.connect() as conn:
        found = conn.execute(
            text(f"SELECT next_assignments FROM attempts WHERE scan_id = {scan_id}")
        ).scalar()
    return None if found is None else str(found)


def jobs_of(outcomes: list[Any]) -> Iterator[Any]:
    for outcome in outcomes:
        assert isinstance(outcome, Completion), outcome
        yield from outcome.jobs


def test_results_that_meet_close_in_one_statement_each_with_its_own_next_jobs(
    world: World, engine: Engine
) -> None:
    for n in range(16):
        world.submit(f"pkg{n}")
    held = lease(world, world.worker, 4) + lease(world, world.other_worker, 4)
    callers = [world.worker] * 4 + [world.other_worker] * 4
    asks = [(caller, job, 1) for caller, job in zip(callers, held, strict=True)]
    outcomes, counted = at_once(world, engine, asks)
    assert counted.statements == 2, "the first went alone, the seven that met it together"
    for (caller, job, _), outcome in zip(asks, outcomes, strict=True):
        [item] = outcome.outcomes
        assert item.error is None and item.closed is not None
        assert (item.closed.scan_id, item.closed.status) == (job.scan_id, Status.FINISHED)
        [given] = outcome.jobs
        assert worker_of(engine, given.scan_id) == (caller.name, "PENDING")
        assert next_assignments(engine, job.scan_id) == given.assignment_id
        assert worker_of(engine, job.scan_id) == (caller.name, "FINISHED")
    given = [job.scan_id for job in jobs_of(outcomes)]
    assert len(set(given)) == 8, "no job went to two requests"
    assert not set(given) & {job.scan_id for job in held}
    assert finished_total(engine) == 8
    rest = lease(world, world.worker, 16)
    assert len(rest) == 0, "the eight jobs left were leased with the results, once each"


def test_requests_of_two_endpoints_that_meet_each_take_their_own_endpoints_jobs(
    world: World, engine: Engine
) -> None:
    pypi_worker = two_endpoints(world, 6)
    npm = lease(world, world.worker, 3)
    pypi = lease(world, pypi_worker, 3)
    asks = [(world.worker, npm[0], 1)]
    asks += [(pypi_worker, job, 1) for job in pypi] + [(world.worker, job, 1) for job in npm[1:]]
    outcomes, counted = at_once(world, engine, asks)
    assert counted.statements == 2
    names = [[job.name for job in outcome.jobs] for outcome in outcomes]
    assert [len(found) for found in names] == [1] * 6
    assert all(found[0].startswith("npm") for found in names[:1] + names[4:])
    assert all(found[0].startswith("pypi") for found in names[1:4])
    assert len({name for found in names for name in found}) == 6


def test_a_retry_stays_queued_rather_than_go_back_to_the_worker_that_failed_it(
    world: World, engine: Engine
) -> None:
    """w2 asked recently, so the scan w1 just failed may not go back to w1 yet: w1's walk
    passes it by and takes the next scan, which w2's turn (after w1's share) reached too, so
    w2 gets fewer than it asked for this time; the retry stays queued, never w1's."""
    for name in ("failing", "a", "b", "c", "d"):
        world.submit(name)
    [failing] = lease(world, world.worker, 1)
    a, b = lease(world, world.other_worker, 2)
    world.store.authentication.note(world.other_worker.digest)
    world.store.authentication.flush()
    fail = Report("failed", True, failing.attempt, failing.assignment_id, "boom", None, None)
    world.store.results.report(world.worker, failing.scan_id, fail)
    [c] = lease(world, world.worker, 1)
    assert (failing.name, a.name, b.name, c.name) == ("failing", "a", "b", "c")
    asks = [(world.other_worker, a, 0), (world.worker, c, 1), (world.other_worker, b, 1)]
    outcomes, counted = at_once(world, engine, asks)
    assert counted.statements == 2
    assert [[job.name for job in outcome.jobs] for outcome in outcomes] == [[], ["d"], []]
    assert worker_of(engine, failing.scan_id) == (world.worker.name, "QUEUED")


def test_a_replayed_and_a_stale_result_that_meet_others_get_their_answers_alone(
    world: World, engine: Engine
) -> None:
    for n in range(6):
        world.submit(f"pkg{n}")
    first, second, third = lease(world, world.worker, 3)
    before = world.store.results.complete(world.worker, [(first.scan_id, finished(first))], fetch=1)
    stale = replace(second, assignment_id="not-it")
    asks = [(world.worker, third, 1), (world.worker, first, 1), (world.worker, stale, 1)]
    outcomes, counted = at_once(world, engine, asks)
    assert counted.statements == 4, "alone, together, then the two that did not close"
    replayed, refused = outcomes[1], outcomes[2]
    assert replayed.outcomes[0].error is None
    assert [job.scan_id for job in replayed.jobs] == [job.scan_id for job in before.jobs]
    assert isinstance(refused.outcomes[0].error, Stale)
    assert worker_of(engine, second.scan_id) == (world.worker.name, "PENDING")
    assert finished_total(engine) == 2


def test_requests_of_several_results_that_meet_close_in_one_statement_each_with_its_own_jobs(
    world: World, engine: Engine
) -> None:
    for n in range(20):
        world.submit(f"pkg{n}")
    mine = lease(world, world.worker, 6)
    theirs = lease(world, world.other_worker, 3)
    asks = [(world.worker, mine[:1], 1), (world.worker, mine[1:4], 3)]
    asks += [(world.other_worker, theirs, 2), (world.worker, mine[4:], 2)]
    outcomes, counted = batches_at_once(world, engine, asks)
    assert counted.statements == 2, "the first went alone, the three that met it together"
    for (caller, jobs, n), outcome in zip(asks, outcomes, strict=True):
        assert [item.scan_id for item in outcome.outcomes] == [job.scan_id for job in jobs]
        assert all(item.error is None for item in outcome.outcomes)
        assert all(item.closed.status is Status.FINISHED for item in outcome.outcomes)
        assert len(outcome.jobs) == n
        assert all(
            worker_of(engine, job.scan_id) == (caller.name, "PENDING") for job in outcome.jobs
        )
        given = {job.assignment_id for job in outcome.jobs}
        for job in jobs:
            assert set((next_assignments(engine, job.scan_id) or "").split(",")) == given
    given_ids = [job.scan_id for job in jobs_of(outcomes)]
    assert len(set(given_ids)) == 8, "no job went to two requests"
    assert finished_total(engine) == 9
    assert len(world.published.of(ScanFinished)) == 9
    assert len(lease(world, world.worker, 20)) == 20 - 9 - 8


def test_a_request_of_several_with_a_stale_result_closes_the_rest_and_is_answered_as_alone(
    world: World, engine: Engine
) -> None:
    """Its fresh results close in the statement that met; it is then answered alone: those
    closes as replays (the answers they were given, the jobs leased with them), the stale
    result refused, every close counted once."""
    for n in range(10):
        world.submit(f"pkg{n}")
    first, a, b, c = lease(world, world.worker, 4)
    [other] = lease(world, world.other_worker, 1)
    stale = replace(b, assignment_id="not-it")
    asks = [(world.worker, [first], 1), (world.worker, [a, stale, c], 2)]
    asks += [(world.other_worker, [other], 1)]
    outcomes, counted = batches_at_once(world, engine, asks)
    assert counted.statements == 3, "alone, together, then the request with the stale result"
    answered = outcomes[1].outcomes
    assert [item.scan_id for item in answered] == [a.scan_id, b.scan_id, c.scan_id]
    assert answered[0].closed is not None and answered[2].closed is not None
    assert answered[0].closed.status is Status.FINISHED
    assert isinstance(answered[1].error, Stale)
    assert worker_of(engine, b.scan_id) == (world.worker.name, "PENDING")
    jobs = outcomes[1].jobs
    assert len(jobs) == 2, "a stale result is no replay: the request still takes its jobs"
    assert all(worker_of(engine, job.scan_id) == (world.worker.name, "PENDING") for job in jobs)
    assert finished_total(engine) == 4
    assert len(world.published.of(ScanFinished)) == 4


def test_a_request_of_several_with_a_replayed_result_takes_no_more_jobs_than_alone(
    world: World, engine: Engine
) -> None:
    """A result already accepted, sent again beside fresh ones: the request is answered with
    the replay's own jobs and leases nothing new, as a request alone would."""
    for n in range(10):
        world.submit(f"pkg{n}")
    first, a, b = lease(world, world.worker, 3)
    [other] = lease(world, world.other_worker, 1)
    before = world.store.results.complete(world.worker, [(a.scan_id, finished(a))], fetch=1)
    asks = [(world.worker, [first], 1), (world.worker, [a, b], 3)]
    asks += [(world.other_worker, [other], 1)]
    outcomes, counted = batches_at_once(world, engine, asks)
    assert counted.statements == 3, "alone, together, then the request with the replay"
    answered = outcomes[1].outcomes
    assert all(item.error is None and item.closed is not None for item in answered)
    assert [job.scan_id for job in outcomes[1].jobs] == [job.scan_id for job in before.jobs]
    assert finished_total(engine) == 4
    assert len(world.published.of(ScanFinished)) == 4
    assert [len(outcome.jobs) for outcome in outcomes] == [1, 1, 1]
    assert len(lease(world, world.worker, 10)) == 10 - 4 - 3


def _spec(name: str) -> ScanSpec:
    return ScanSpec(name, "1.0")


def test_large_results_that_meet_go_in_statements_no_larger_than_a_request(
    world: World, engine: Engine
) -> None:
    for n in range(8):
        world.submit(f"pkg{n}")
    held = lease(world, world.worker, 4)
    big = '{"blob": "' + "x" * 600_000 + '"}'
    sent = ['{"ok": 1}', big, big, '{"ok": 2}']
    results = world.store.target.results
    counted = results.db = Counted(results.db)
    calls = [
        functools.partial(
            results.complete, world.worker, [(job.scan_id, finished(job, result))], fetch=1
        )
        for job, result in zip(held, sent, strict=True)
    ]
    outcomes = held_at_once(world, engine, "UPDATE scan_totals SET count = count", calls)
    assert counted.statements == 3, "the first alone; then the first large one, then the rest"
    assert all(outcome.outcomes[0].closed is not None for outcome in outcomes)
    assert len({job.scan_id for job in jobs_of(outcomes)}) == 4
    with engine.connect() as conn:
        kept = conn.execute(
            text(f"SELECT length(result) FROM scans WHERE id = {held[2].scan_id}")
        ).scalar()
    assert kept == len(big)
