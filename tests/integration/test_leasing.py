"""The job poll on both databases: attempts, reassignment, reaping, isolation."""

from __future__ import annotations

import pytest

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import LeasesGranted, ScanDeadLettered
from mainframe.store import Report, Stale, Unauthorized
from mainframe.store.accounts.owners import OPERATOR
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World, issue, submit_scan


def finished(job: object) -> Report:
    return Report("finished", True, job.attempt, job.assignment_id, None, None, None)  # type: ignore[attr-defined]


def test_first_assignment_is_attempt_one(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 5)
    assert (job.scan_id, job.attempt) == (scan_id, 1)
    assert job.lease_expires_at == world.clock.now_us() + int(JOB_TIMEOUT * 1_000_000)
    assert world.store.leasing.lease(world.other_worker, 5) == []


def test_lapsed_lease_below_cap_is_reassigned_with_new_assignment(world: World) -> None:
    scan_id = world.submit()
    [first] = world.store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT + 0.001)
    [second] = world.store.leasing.lease(world.other_worker, 1)
    assert second.scan_id == scan_id
    assert second.attempt == 2
    assert second.assignment_id != first.assignment_id
    scan = world.store.listings.get_scan(world.owner.owner_id, scan_id)  # type: ignore[arg-type]
    assert [(a.seq, a.worker, a.outcome) for a in scan.attempts] == [
        (1, "w1", "lease_expired"),
        (2, "w2", None),
    ]


def test_final_lease_lapse_dead_letters_on_next_poll(world: World) -> None:
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS):
        [job] = world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    assert job.attempt == MAX_ATTEMPTS
    assert world.store.leasing.lease(world.worker, 1) == []
    scan = world.store.listings.get_scan(world.owner.owner_id, scan_id)  # type: ignore[arg-type]
    assert scan.status is Status.FAILED
    assert scan.fail_reason == "lease_expired"
    assert scan.dead_lettered_at == world.clock.now_us()
    assert [a.outcome for a in scan.attempts] == ["lease_expired"] * MAX_ATTEMPTS
    [event] = world.published.of(ScanDeadLettered)
    assert event.reason == "lease_expired" and event.attempt_count == MAX_ATTEMPTS  # type: ignore[attr-defined]
    world.clock.advance(JOB_TIMEOUT * 10)
    assert world.store.leasing.lease(world.worker, 10) == []


def test_dead_lettering_never_blocks_healthy_work_in_the_same_poll(world: World) -> None:
    doomed = [world.submit(name=f"doomed{i}") for i in range(3)]
    for _ in range(MAX_ATTEMPTS):
        assert len(world.store.leasing.lease(world.worker, 3)) == 3
        world.clock.advance(JOB_TIMEOUT + 1)
    healthy = world.submit(name="healthy")
    jobs = world.store.leasing.lease(world.worker, 1)
    assert [job.scan_id for job in jobs] == [healthy]
    assert len(world.published.of(ScanDeadLettered)) == len(doomed)


def test_workers_never_see_another_endpoints_scans(world: World) -> None:
    submit_scan(
        world.store,
        None,
        endpoint="pypi",
        queue="default",
        name="anon",
        version="1",
        kind="scan",
        payload=None,
    )
    pypi_worker = world.store.authentication.authenticate(
        world.store.owners.create_token(
            OPERATOR, "pypi", role="worker", principal="pw", origin="cli"
        )[1]
    )
    assert pypi_worker is not None
    world.submit()
    jobs = world.store.leasing.lease(pypi_worker, 10)
    assert jobs == []  # the only pypi scan is quarantined; the npm scan is not theirs
    assert len(world.store.leasing.lease(world.worker, 10)) == 1


def test_quarantined_scans_are_never_leased_until_released(world: World) -> None:
    scan, created = submit_scan(
        world.store,
        None,
        endpoint="pypi",
        queue="default",
        name="anon",
        version="1",
        kind="scan",
        payload=None,
    )
    assert created and scan.status is Status.QUARANTINED and not scan.verified
    worker = world.store.authentication.authenticate(
        world.store.owners.create_token(
            OPERATOR, "pypi", role="worker", principal="pw", origin="cli"
        )[1]
    )
    assert worker is not None
    world.clock.advance(3600)
    assert world.store.leasing.lease(worker, 10) == []
    alice = world.store.authentication.authenticate(
        world.store.owners.create_token(
            OPERATOR, "pypi", role="source", principal="feed", origin="cli"
        )[1]
    )
    assert alice is not None
    owner_id = alice.owner_id
    assert owner_id is not None
    released = world.store.intake.release(owner_id, scan.id)
    assert released.status is Status.QUEUED and not released.verified
    assert [job.scan_id for job in world.store.leasing.lease(worker, 10)] == [scan.id]


def test_revoked_endpoint_refuses_its_worker(world: World) -> None:
    world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.submit(name="other")
    assert world.owner.owner_id is not None
    assert world.store.revocations.revoke(world.owner.owner_id, "npm", origin="api") == 2
    with pytest.raises(Unauthorized):
        world.store.leasing.lease(world.worker, 1)
    with pytest.raises(Unauthorized):
        world.store.results.report(world.worker, job.scan_id, finished(job))


def test_lease_grants_are_published_after_commit(world: World) -> None:
    for i in range(4):
        world.submit(name=f"p{i}")
    world.store.leasing.lease(world.worker, 3)
    [grant] = world.published.of(LeasesGranted)
    assert grant.count == 3 and grant.reassigned == 0  # type: ignore[attr-defined]


def test_batch_lease_returns_oldest_first(world: World) -> None:
    ids = [world.submit(name=f"p{i}") for i in range(5)]
    jobs = world.store.leasing.lease(world.worker, 3)
    assert [job.scan_id for job in jobs] == ids[:3]
    assert len({job.assignment_id for job in jobs}) == 3


def test_stale_worker_cannot_touch_reassigned_scan(world: World) -> None:
    world.submit()
    [old] = world.store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT + 1)
    [new] = world.store.leasing.lease(world.worker, 1)
    with pytest.raises(Stale) as refused:
        world.store.results.report(world.worker, old.scan_id, finished(old))
    assert refused.value.code == "stale_assignment"
    assert (
        world.store.results.report(world.worker, new.scan_id, finished(new)).status
        is Status.FINISHED
    )


def test_the_sweeper_reaps_the_oldest_lapses_of_every_endpoint_first(world: World) -> None:
    """Each endpoint's leases are walked by deadline and the oldest of them all go first, so
    one endpoint's lapses never wait behind another's newer ones."""
    store, auth = world.store, world.store.authentication
    pypi_source = auth.authenticate(issue(store, "pypi", "source", "feed2"))
    pypi_worker = auth.authenticate(issue(store, "pypi", "worker", "wp"))
    oldest = world.submit(name="npm-oldest")
    store.leasing.lease(world.worker, 1)
    world.clock.advance(1)
    middle, _ = submit_scan(
        store,
        pypi_source,
        endpoint=None,
        queue="default",
        name="pypi-middle",
        version="1.0",
        kind="scan",
        payload=None,
    )
    store.leasing.lease(pypi_worker, 1)
    world.clock.advance(1)
    newest = world.submit(name="npm-newest")
    store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT + 1)
    assert store.leasing.sweep(limit=2) == 2
    owners = {oldest: world.owner.owner_id, newest: world.owner.owner_id,
              middle.id: store.owners.owner_id("alice")}  # fmt: skip
    statuses = {scan: store.listings.get_scan(owner, scan).status for scan, owner in owners.items()}
    assert statuses == {oldest: Status.QUEUED, middle.id: Status.QUEUED, newest: Status.PENDING}
    assert store.leasing.sweep(limit=2) == 1


def test_sweeper_clears_a_crowd_of_lapsed_leases_and_the_spent_one_behind_it(
    world: World,
) -> None:
    crowd = [world.submit(name=f"crowd{i}") for i in range(30)]
    world.store.leasing.lease(world.worker, len(crowd))
    world.clock.advance(1)
    doomed = world.submit(name="doomed")
    for _ in range(MAX_ATTEMPTS - 1):
        [job] = world.store.leasing.lease(world.other_worker, 1)
        world.store.results.report(
            world.other_worker,
            doomed,
            Report("failed", True, job.attempt, job.assignment_id, None, None, None),
        )
    [job] = world.store.leasing.lease(world.other_worker, 1)
    assert (job.scan_id, job.attempt) == (doomed, MAX_ATTEMPTS)
    world.clock.advance(JOB_TIMEOUT + 1)
    # The crowd lapsed first and still has budget: the sweeper requeues it, batch after
    # batch, and reaches the spent scan behind it in the same sweep.
    swept = [world.store.leasing.sweep(limit=5) for _ in range(8)]
    assert swept == [5, 5, 5, 5, 5, 5, 1, 0]
    [dead] = world.published.of(ScanDeadLettered)
    assert dead.scan.scan_id == doomed  # type: ignore[attr-defined]
    requeued = world.store.listings.list_scans(
        world.owner.owner_id,  # type: ignore[arg-type]
        status=Status.QUEUED,
        queue=None,
        endpoint=None,
        before_id=None,
        limit=100,
    )
    assert sorted(scan.id for scan in requeued) == sorted(crowd)
