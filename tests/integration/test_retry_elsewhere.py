"""A retry goes to another worker, on both databases: the poll (LEASE) and the result that
takes its next jobs (COMPLETE on PostgreSQL, its steps on SQLite) lease a scan its last
worker failed exactly when `lifecycle.elsewhere.may_lease` says, judged by the database's
clock (the fake clock) with the other worker's token use as the flush wrote it."""

from __future__ import annotations

from itertools import product

import pytest

from mainframe.lifecycle.elsewhere import ASKING_US, may_lease, others_asking
from mainframe.lifecycle.rules import Status
from mainframe.store import Report
from tests.integration.conftest import World

BOUND_S = 60  # the default MAINFRAME_RETRY_ELSEWHERE_SECONDS, as the world's budget has it
ASKING_S = ASKING_US // 1_000_000


def fail(job: object) -> Report:
    return Report("failed", True, job.attempt, job.assignment_id, "boom", None, None)  # type: ignore[attr-defined]


def finish(job: object) -> Report:
    return Report("finished", True, job.attempt, job.assignment_id, None, None, None)  # type: ignore[attr-defined]


def failed_by_w1(world: World) -> int:
    """A scan whose first attempt w1 failed, due again at once (the world's retries do not
    wait)."""
    world.submit("failing")
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.results.report(world.worker, job.scan_id, fail(job))
    return int(job.scan_id)


def w2_asks(world: World) -> None:
    """w2's token used now, as a request notes it and the periodic flush writes it."""
    world.store.authentication.note(world.other_worker.digest)
    world.store.authentication.flush()


# (seconds since the scan fell due, seconds since w2 asked or None for never): around the
# bound and the asking window.
CASES = list(product((0, BOUND_S - 1, BOUND_S, BOUND_S + 5), (1, ASKING_S - 1, ASKING_S, None)))


@pytest.mark.parametrize(("due_ago", "asked_ago"), CASES)
def test_a_poll_leases_its_own_failure_exactly_when_the_rule_says(
    world: World, due_ago: int, asked_ago: int | None
) -> None:
    if asked_ago is not None and asked_ago > due_ago:
        w2_asks(world)
        world.clock.advance(asked_ago - due_ago)
    scan_id = failed_by_w1(world)
    due_at = world.clock.now_us()
    if asked_ago is not None and asked_ago <= due_ago:
        world.clock.advance(due_ago - asked_ago)
        w2_asks(world)
        world.clock.advance(asked_ago)
    else:
        world.clock.advance(due_ago)
    now = world.clock.now_us()
    used = None if asked_ago is None else now - asked_ago * 1_000_000
    allowed = may_lease(
        worker="w1",
        last_worker="w1",
        due_at=due_at,
        now=now,
        bound_us=BOUND_S * 1_000_000,
        others_asking=others_asking(worker="w1", last_used={"w2": used}, now=now),
    )
    leased = [job.scan_id for job in world.store.leasing.lease(world.worker, 5)]
    assert leased == ([scan_id] if allowed else [])


def test_another_worker_takes_the_retry_and_the_history_keeps_both(world: World) -> None:
    w2_asks(world)
    scan_id = failed_by_w1(world)
    assert world.store.leasing.lease(world.worker, 1) == []
    [job] = world.store.leasing.lease(world.other_worker, 1)
    assert (job.scan_id, job.attempt) == (scan_id, 2)
    world.store.results.report(world.other_worker, scan_id, finish(job))
    scan = world.store.listings.get_scan(world.owner.owner_id, scan_id)
    assert scan.status == Status.FINISHED
    assert [(a.worker, a.outcome) for a in scan.attempts] == [("w1", "failed"), ("w2", "finished")]


def test_a_lapsed_lease_goes_to_another_worker_too(world: World) -> None:
    scan_id = world.submit()
    world.store.leasing.lease(world.worker, 1)
    world.clock.advance(31)  # past the world's job timeout: the next poll reaps it
    w2_asks(world)
    assert world.store.leasing.lease(world.worker, 1) == []  # reaped, and passed over
    [job] = world.store.leasing.lease(world.other_worker, 1)
    assert (job.scan_id, job.attempt) == (scan_id, 2)


def test_the_next_jobs_of_a_result_pass_over_its_own_failures(world: World) -> None:
    w2_asks(world)
    own = failed_by_w1(world)
    first, second = world.submit("a"), world.submit("b")
    [job] = world.store.leasing.lease(world.worker, 1)
    assert job.scan_id == first  # its own failure, due first, is passed over
    done = world.store.results.complete(world.worker, [(first, finish(job))], fetch=5)
    assert [next_job.scan_id for next_job in done.jobs] == [second]
    [retry] = world.store.leasing.lease(world.other_worker, 5)
    assert retry.scan_id == own
