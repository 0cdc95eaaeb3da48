"""The database snapshot behind the reconciled gauges, on both databases."""

from __future__ import annotations

from mainframe.lifecycle.rules import QueueState
from mainframe.store import Report
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World, submit_scan


def finish(world: World, job: object, outcome: str = "finished", retryable: bool = True) -> None:
    world.store.results.report(
        world.worker,
        job.scan_id,  # type: ignore[attr-defined]
        Report(outcome, retryable, job.attempt, job.assignment_id, None, None, None),  # type: ignore[attr-defined]
    )


def test_outcomes_never_overlap_and_queue_states_follow_time(world: World) -> None:
    for i in range(6):
        world.submit(name=f"p{i}")
    jobs = world.store.leasing.lease(world.worker, 6)
    finish(world, jobs[0])
    finish(world, jobs[1], "failed", retryable=False)
    snap = world.store.listings.snapshot()
    assert snap.outcomes == {"finished": 1, "failed": 1, "dead_lettered": 0}
    assert snap.queue[QueueState.PENDING] == 4
    world.clock.advance(JOB_TIMEOUT + 1)
    snap = world.store.listings.snapshot()
    assert snap.queue[QueueState.PENDING] == 0 and snap.queue[QueueState.RETRYABLE] == 4
    # Drive them to the cap and let their final leases lapse.
    for _ in range(MAX_ATTEMPTS - 1):
        assert len(world.store.leasing.lease(world.other_worker, 4)) == 4
        world.clock.advance(JOB_TIMEOUT + 1)
    snap = world.store.listings.snapshot()
    assert snap.queue[QueueState.EXHAUSTED] == 4 and snap.queue[QueueState.RETRYABLE] == 0
    world.store.leasing.sweep()
    snap = world.store.listings.snapshot()
    assert snap.queue[QueueState.EXHAUSTED] == 0
    assert snap.outcomes == {"finished": 1, "failed": 1, "dead_lettered": 4}


def test_revocation_counts_as_dead_lettered_in_database_truth(world: World) -> None:
    assert world.owner.owner_id is not None
    world.submit(name="a")
    submit_scan(
        world.store,
        None,
        endpoint="pypi",
        queue="default",
        name="q",
        version="1",
        kind="scan",
        payload=None,
    )
    world.store.revocations.revoke(world.owner.owner_id, "npm", origin="api")
    snap = world.store.listings.snapshot()
    assert snap.outcomes["dead_lettered"] == 1
    assert snap.queue[QueueState.QUARANTINED] == 1 and snap.queue[QueueState.QUEUED] == 0


def test_oldest_queued_age(world: World) -> None:
    assert world.store.listings.snapshot().oldest_due_at is None
    created = world.clock.now_us()
    world.submit(name="old")
    world.clock.advance(10)
    world.submit(name="new")
    snap = world.store.listings.snapshot()
    assert snap.oldest_due_at == created
