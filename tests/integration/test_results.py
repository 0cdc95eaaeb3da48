"""Results, heartbeats, waits and operator actions on both databases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mainframe.lifecycle.rules import StaleCode, StaleResultRejected, Status
from mainframe.lifecycle.scans import (
    AttemptFailed,
    EndpointRevoked,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScanReady,
)
from mainframe.store import Job, NotFound, Report, Stale
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.database import Accepted, ResultConflict
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World, submit_scan


def report(
    job: Job | None,
    outcome: str = "finished",
    *,
    retryable: bool = True,
    summary: str | None = None,
) -> Report:
    if job is None:
        return Report(outcome, retryable, None, None, summary, None, None)
    return Report(outcome, retryable, job.attempt, job.assignment_id, summary, "s3://a", '{"ok":1}')


def owner_view(world: World, scan_id: int):  # type: ignore[no-untyped-def]
    assert world.owner.owner_id is not None
    return world.store.listings.get_scan(world.owner.owner_id, scan_id)


def stale_code(world: World, worker, scan_id: int, rep: Report) -> str:  # type: ignore[no-untyped-def]
    before = owner_view(world, scan_id)
    with pytest.raises(Stale) as refused:
        world.store.results.report(worker, scan_id, rep)
    after = owner_view(world, scan_id)
    assert after == before, "a stale result must change nothing"
    return refused.value.code


def test_finished_result_closes_the_attempt(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    closed = world.store.results.report(world.worker, scan_id, report(job, summary="clean"))
    assert closed.status is Status.FINISHED and closed.finished_at == world.clock.now_us()
    assert owner_view(world, scan_id).result == '{"ok":1}'
    [attempt] = owner_view(world, scan_id).attempts
    assert (attempt.outcome, attempt.summary, attempt.artifact) == ("finished", "clean", "s3://a")
    assert world.published.of(ScanFinished)


def test_retryable_failure_requeues_until_the_cap_then_dead_letters(world: World) -> None:
    scan_id = world.submit()
    for attempt in range(1, MAX_ATTEMPTS + 1):
        [job] = world.store.leasing.lease(world.worker, 1)
        assert job.attempt == attempt
        scan = world.store.results.report(
            world.worker, scan_id, report(job, "failed", summary="boom")
        )
    assert scan.status is Status.FAILED
    assert scan.fail_reason == "attempts_exhausted" and scan.dead_lettered_at is not None
    assert len(world.published.of(AttemptFailed)) == MAX_ATTEMPTS - 1
    [dead] = world.published.of(ScanDeadLettered)
    assert dead.final_attempt.summary == "boom"  # type: ignore[attr-defined]
    assert world.store.leasing.lease(world.worker, 1) == []


def test_non_retryable_failure_is_a_plain_failure(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    scan = world.store.results.report(world.worker, scan_id, report(job, "failed", retryable=False))
    assert scan.status is Status.FAILED and scan.dead_lettered_at is None
    assert scan.fail_reason == "failed"
    assert world.published.of(ScanFailed) and not world.published.of(ScanDeadLettered)


def test_stale_codes(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    assert stale_code(world, world.other_worker, scan_id, report(job)) == "not_lease_holder"
    wrong = Report("finished", True, job.attempt, "nope", None, None, None)
    assert stale_code(world, world.worker, scan_id, wrong) == "stale_assignment"
    world.store.results.report(world.worker, scan_id, report(job))
    # Without the assignment the repeat cannot be told from another result: refused.
    assert stale_code(world, world.worker, scan_id, report(None)) == "already_terminal"
    codes = [e.code for e in world.published.of(StaleResultRejected)]  # type: ignore[attr-defined]
    assert codes == ["not_lease_holder", "stale_assignment", "already_terminal"]


def test_a_result_sent_again_gets_the_first_answer(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    first = world.store.results.report(world.worker, scan_id, report(job))
    world.clock.advance(5)
    events = len(world.published.events)
    assert world.store.results.report(world.worker, scan_id, report(job)) == first
    assert len(world.published.events) == events, "a replay changes and announces nothing"
    [attempt] = owner_view(world, scan_id).attempts
    assert attempt.outcome == "finished"


def conflict_of(world: World, scan_id: int, rep: Report) -> ResultConflict:
    before = owner_view(world, scan_id)
    events = len(world.published.events)
    with pytest.raises(ResultConflict) as refused:
        world.store.results.report(world.worker, scan_id, rep)
    assert owner_view(world, scan_id) == before, "a conflict must change nothing"
    [rejected] = world.published.events[events:]
    assert rejected == StaleResultRejected(
        "npm", scan_id, world.worker.name, StaleCode.RESULT_CONFLICT, rep.attempt
    ), "counted and logged as a refused result"
    return refused.value


@pytest.mark.parametrize(
    "other",
    [
        {"outcome": "failed"},
        {"summary": "another summary"},
        {"result": '{"ok":2}'},
        {"artifact": "s3://b"},
    ],
    ids=["outcome", "summary", "result", "artifact"],
)
def test_the_same_assignment_with_other_content_is_a_conflict(
    world: World, other: dict[str, str]
) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    accepted = world.store.results.report(world.worker, scan_id, report(job, summary="clean"))
    world.clock.advance(5)
    conflict = conflict_of(world, scan_id, replace(report(job, summary="clean"), **other))
    assert conflict.code == "result_conflict"
    assert conflict.accepted == Accepted("finished", "FINISHED", None, accepted.finished_at)
    assert "outcome finished" in conflict.detail and "accepted at" in conflict.detail


def test_content_is_compared_as_it_means(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    sent = replace(report(job), result='{"b": 1, "a": [1, 2]}')
    first = world.store.results.report(world.worker, scan_id, sent)
    # Keys in another order, and a success that says it is not retryable: the same result.
    again = replace(sent, result='{"a":[1,2],"b":1}', retryable=False)
    assert world.store.results.report(world.worker, scan_id, again) == first
    assert conflict_of(world, scan_id, replace(sent, result='{"a":[2,1],"b":1}'))


def test_a_success_after_the_final_failure_is_a_conflict_not_the_dead_letter(
    world: World,
) -> None:
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS):
        [job] = world.store.leasing.lease(world.worker, 1)
        dead = world.store.results.report(world.worker, scan_id, report(job, "failed"))
    assert dead.dead_lettered_at is not None
    conflict = conflict_of(world, scan_id, report(job))
    assert conflict.accepted == Accepted("failed", "FAILED", "attempts_exhausted", dead.finished_at)
    assert world.store.results.report(world.worker, scan_id, report(job, "failed")) == dead


def test_a_conflict_in_a_batch_refuses_its_item_only(world: World) -> None:
    a_id, b_id = world.submit("a"), world.submit("b")
    world.submit("c")
    a, b = world.store.leasing.lease(world.worker, 2)
    world.store.results.report(world.worker, a_id, report(a))
    done = world.store.results.complete(
        world.worker, [(a_id, report(a, "failed")), (b_id, report(b))], fetch=1
    )
    conflict, closed = done.outcomes
    assert isinstance(conflict.error, ResultConflict) and conflict.closed is None
    assert closed.closed is not None and closed.closed.status is Status.FINISHED
    assert done.jobs == [], "an item whose assignment closed before takes no new leases"
    assert owner_view(world, a_id).status is Status.FINISHED


def test_a_result_on_an_attempt_the_operator_failed_is_a_conflict(world: World) -> None:
    assert world.owner.owner_id is not None
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.interventions.fail(world.owner.owner_id, scan_id, retryable=False, summary="stuck")
    conflict = conflict_of(world, scan_id, report(job, "failed", retryable=False, summary="stuck"))
    assert (conflict.accepted.outcome, conflict.accepted.status) == ("failed", "FAILED")


def test_a_replayed_retry_keeps_its_due_time(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    first = world.store.results.report(world.worker, scan_id, report(job, "failed"))
    assert first.status is Status.QUEUED
    [again] = world.store.leasing.lease(world.worker, 1)
    assert again.attempt == 2, "leased again in between"
    assert world.store.results.report(world.worker, scan_id, report(job, "failed")) == first


def test_another_worker_sending_the_same_result_is_not_a_replay(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.results.report(world.worker, scan_id, report(job))
    assert stale_code(world, world.other_worker, scan_id, report(job)) == "already_terminal"


def test_complete_and_fetch_leases_the_next_jobs_once(world: World) -> None:
    ids = [world.submit(f"p{i}") for i in range(4)]
    [job] = world.store.leasing.lease(world.worker, 1)
    done = world.store.results.complete(world.worker, [(job.scan_id, report(job))], fetch=2)
    assert [j.scan_id for j in done.jobs] == ids[1:3]
    assert [j.attempt for j in done.jobs] == [1, 1]
    again = world.store.results.complete(world.worker, [(job.scan_id, report(job))], fetch=2)
    assert again.outcomes == done.outcomes
    assert again.jobs == done.jobs, "the same jobs, not a second set of leases"
    [last] = world.store.leasing.lease(world.worker, 5)
    assert last.scan_id == ids[3]


def test_a_replay_leaves_out_jobs_no_longer_held(world: World) -> None:
    for i in range(3):
        world.submit(f"p{i}")
    [job] = world.store.leasing.lease(world.worker, 1)
    done = world.store.results.complete(world.worker, [(job.scan_id, report(job))], fetch=2)
    finished, _lapsed = done.jobs
    world.store.results.report(world.worker, finished.scan_id, report(finished))
    world.clock.advance(JOB_TIMEOUT + 1)
    again = world.store.results.complete(world.worker, [(job.scan_id, report(job))], fetch=2)
    assert again.jobs == [], "one finished, one lapsed: neither is the worker's any more"
    assert again.outcomes == done.outcomes


def test_a_refused_result_leases_nothing(world: World) -> None:
    world.submit("a")
    world.submit("b")
    [job] = world.store.leasing.lease(world.worker, 1)
    wrong = Report("finished", True, job.attempt, "nope", None, None, None)
    done = world.store.results.complete(world.worker, [(job.scan_id, wrong)], fetch=1)
    assert done.jobs == [] and isinstance(done.outcomes[0].error, Stale)
    assert len(world.store.leasing.lease(world.worker, 5)) == 1


def test_a_batch_with_a_replayed_item_takes_no_new_leases(world: World) -> None:
    ids = [world.submit(f"p{i}") for i in range(6)]
    a, b = world.store.leasing.lease(world.worker, 2)
    first = world.store.results.complete(world.worker, [(a.scan_id, report(a))], fetch=1)
    [fetched] = first.jobs
    mixed = world.store.results.complete(
        world.worker, [(a.scan_id, report(a)), (b.scan_id, report(b))], fetch=3
    )
    assert [o.closed is not None for o in mixed.outcomes] == [True, True]
    assert mixed.jobs == [fetched], "the replayed item's jobs, and no new ones"
    assert len(world.store.leasing.lease(world.worker, 10)) == len(ids) - 3


def test_result_for_dead_lettered_scan_is_refused(world: World) -> None:
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS):
        [job] = world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    assert world.store.leasing.sweep() == 1
    assert stale_code(world, world.worker, scan_id, report(job)) == "already_terminal"


def test_late_result_on_lapsed_unreassigned_lease_is_accepted(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT * 5)
    assert world.store.results.report(world.worker, scan_id, report(job)).status is Status.FINISHED


def test_late_result_at_the_cap_before_reaping_is_accepted(world: World) -> None:
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS):
        [job] = world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    assert world.store.results.report(world.worker, scan_id, report(job)).status is Status.FINISHED
    assert world.store.leasing.sweep() == 0


def test_rollout_form_is_accepted_only_on_attempt_one(world: World) -> None:
    first = world.submit(name="a")
    [job] = world.store.leasing.lease(world.worker, 1)
    assert world.store.results.report(world.worker, first, report(None)).status is Status.FINISHED
    second = world.submit(name="b")
    world.store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT + 1)
    [job] = world.store.leasing.lease(world.worker, 1)
    assert job.attempt == 2
    assert stale_code(world, world.worker, second, report(None)) == "stale_assignment"


def test_unknown_or_foreign_scan_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        world.store.results.report(world.worker, 10**9, report(None))
    anon, _ = submit_scan(
        world.store,
        None,
        endpoint="pypi",
        queue="default",
        name="x",
        version="1",
        kind="scan",
        payload=None,
    )
    with pytest.raises(NotFound):
        world.store.results.report(world.worker, anon.id, report(None))
    with pytest.raises(NotFound):
        world.store.listings.get_scan(world.owner.owner_id, anon.id)  # type: ignore[arg-type]


def test_batch_items_are_independent(world: World) -> None:
    a, b = world.submit(name="a"), world.submit(name="b")
    jobs = world.store.leasing.lease(world.worker, 2)
    items = [
        (a, report(jobs[0])),
        (b, Report("finished", True, 9, "x", None, None, None)),
        (10**9, report(None)),
    ]
    out = world.store.results.report_many(world.worker, items)
    assert out[0].closed is not None and out[0].closed.status is Status.FINISHED
    assert isinstance(out[1].error, Stale) and isinstance(out[2].error, NotFound)
    assert owner_view(world, b).status is Status.PENDING


def test_heartbeat_extends_the_lease(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.clock.advance(JOB_TIMEOUT - 1)
    until = world.store.assignments.heartbeat(
        world.worker, scan_id, attempt=job.attempt, assignment_id=job.assignment_id
    )
    assert until == world.clock.now_us() + int(JOB_TIMEOUT * 1_000_000)
    world.clock.advance(JOB_TIMEOUT - 1)
    assert world.store.leasing.lease(world.other_worker, 1) == []
    with pytest.raises(Stale):
        world.store.assignments.heartbeat(
            world.other_worker, scan_id, attempt=job.attempt, assignment_id=job.assignment_id
        )


def test_wait_that_lapses_at_the_cap_dead_letters_as_interrupt_expired(world: World) -> None:
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS - 1):
        world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.assignments.wait(
        world.worker,
        scan_id,
        attempt=job.attempt,
        assignment_id=job.assignment_id,
        seconds=JOB_TIMEOUT * 4,
        reason="sandbox run",
    )
    world.clock.advance(JOB_TIMEOUT * 2)
    assert world.store.leasing.sweep() == 0, "a live wait outlasts the job timeout"
    world.clock.advance(JOB_TIMEOUT * 2 + 1)
    assert world.store.leasing.sweep() == 1
    scan = owner_view(world, scan_id)
    assert scan.fail_reason == "interrupt_expired"
    assert scan.attempts[-1].outcome == "interrupt_expired"
    assert scan.attempts[-1].summary == "sandbox run"
    assert stale_code(world, world.worker, scan_id, report(job)) == "already_terminal"


def test_resume_returns_to_an_ordinary_lease(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.assignments.wait(
        world.worker,
        scan_id,
        attempt=1,
        assignment_id=job.assignment_id,
        seconds=5,
        reason="review",
    )
    until = world.store.assignments.resume(
        world.worker, scan_id, attempt=1, assignment_id=job.assignment_id
    )
    assert until == world.clock.now_us() + int(JOB_TIMEOUT * 1_000_000)
    assert owner_view(world, scan_id).wait_reason is None


def test_lapsed_wait_below_cap_is_reclaimed(world: World) -> None:
    scan_id = world.submit()
    [job] = world.store.leasing.lease(world.worker, 1)
    world.store.assignments.wait(
        world.worker,
        scan_id,
        attempt=1,
        assignment_id=job.assignment_id,
        seconds=1,
        reason="review",
    )
    world.clock.advance(2)
    [again] = world.store.leasing.lease(world.other_worker, 1)
    assert again.attempt == 2
    assert owner_view(world, scan_id).attempts[0].outcome == "interrupt_expired"


def test_operator_fail_behaves_like_the_worker(world: World) -> None:
    assert world.owner.owner_id is not None
    scan_id = world.submit()
    for _ in range(MAX_ATTEMPTS):
        world.store.leasing.lease(world.worker, 1)
        scan = world.store.interventions.fail(
            world.owner.owner_id, scan_id, retryable=True, summary="operator"
        )
    assert scan.status is Status.FAILED and scan.fail_reason == "attempts_exhausted"
    with pytest.raises(Stale):
        world.store.interventions.fail(world.owner.owner_id, scan_id, retryable=True, summary=None)


def test_revocation_cascade_is_silent_and_total(world: World) -> None:
    assert world.owner.owner_id is not None
    leased = world.submit(name="leased")
    world.submit(name="queued")
    world.store.leasing.lease(world.worker, 1)
    world.published.events.clear()
    assert world.store.revocations.revoke(world.owner.owner_id, "npm", origin="api") == 2
    assert [type(e) for e in world.published.events] == [EndpointRevoked]
    scan = owner_view(world, leased)
    assert scan.fail_reason == "endpoint_revoked" and scan.dead_lettered_at is not None
    assert scan.attempts[-1].outcome == "endpoint_revoked"


def test_resubmission_returns_the_live_scan_and_promotes_quarantine(world: World) -> None:
    first, created = submit_scan(
        world.store,
        world.source,
        endpoint=None,
        queue="default",
        name="p",
        version="1",
        kind="scan",
        payload=None,
    )
    again, created_again = submit_scan(
        world.store,
        world.source,
        endpoint=None,
        queue="default",
        name="p",
        version="1",
        kind="scan",
        payload=None,
    )
    assert created and not created_again and again.id == first.id
    anon, _ = submit_scan(
        world.store,
        None,
        endpoint="pypi",
        queue="q",
        name="p",
        version="1",
        kind="scan",
        payload=None,
    )
    source = world.store.authentication.authenticate(
        world.store.owners.create_token(
            OPERATOR, "pypi", role="source", principal="reg", origin="cli"
        )[1]
    )
    world.published.events.clear()
    promoted, created = submit_scan(
        world.store,
        source,
        endpoint=None,
        queue="q",
        name="p",
        version="1",
        kind="scan",
        payload=None,
    )
    assert not created and promoted.id == anon.id
    assert promoted.status is Status.QUEUED and promoted.verified
    assert [type(e) for e in world.published.events] == [ScanReady]
