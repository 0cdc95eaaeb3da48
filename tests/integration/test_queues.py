"""Pausing and resuming a queue on both databases: a paused queue's scans are never leased (by
a poll or complete-and-fetch), intake goes on, leases already out complete, a retry waits out
its backoff, nothing is dead-lettered by the pause, and a resume hands the scans out again in
the order they had, without a redrive; the API, the audit trail and /metrics show it. Its
scans are the state `paused` in the snapshot, `mainframe stats` and the overview, and the
oldest due age is that of the scans a poll could lease, whichever queue is paused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from mainframe.cli.stats import stats_figures, stats_lines
from mainframe.lifecycle.events import QueuePaused, ScanDeadLettered, ScanReady
from mainframe.lifecycle.rules import QueueState
from mainframe.metrics.reconcile import reconcile_once
from mainframe.store import NotFound, Report, ScanSpec
from mainframe.store.audit import CLI
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World, add_endpoint


def pause(world: World, queue: str = "slow") -> Any:
    assert world.owner.owner_id is not None
    return world.store.queues.pause(world.owner.owner_id, "npm", queue, by="bob", origin=CLI)


def resume(world: World, queue: str = "slow") -> Any:
    assert world.owner.owner_id is not None
    return world.store.queues.resume(world.owner.owner_id, "npm", queue, by="bob", origin=CLI)


def leased(world: World, n: int = 50) -> list[str]:
    return [job.name for job in world.store.leasing.lease(world.worker, n)]


def test_a_paused_queues_scans_are_not_leased_and_come_back_in_order(world: World) -> None:
    for i in range(3):
        world.submit(f"slow-{i}", queue="slow")
        world.clock.advance(1)
        world.submit(f"fast-{i}", queue="fast")
        world.clock.advance(1)
    change = pause(world)
    assert (change.paused, change.changed, change.scans) == (True, True, 3)
    assert pause(world).changed is False, "pausing again changes nothing"
    world.submit("slow-new", queue="slow")  # intake goes on, parked
    assert leased(world) == ["fast-0", "fast-1", "fast-2"]
    assert leased(world) == [], "polls answer as if the paused queue were empty"
    change = resume(world)
    assert (change.paused, change.changed, change.scans) == (False, True, 4)
    assert leased(world) == ["slow-0", "slow-1", "slow-2", "slow-new"]
    assert resume(world).changed is False


def test_leases_already_out_complete_and_nothing_is_dead_lettered(world: World) -> None:
    held = world.submit("held", queue="slow")
    [job] = world.store.leasing.lease(world.worker, 1)
    assert job.scan_id == held
    pause(world)
    report = Report("finished", True, job.attempt, job.assignment_id, None, None, None)
    assert world.store.results.report(world.worker, held, report).status.value == "FINISHED"
    failing = world.submit("fails", queue="slow")
    resume(world)
    [job] = world.store.leasing.lease(world.worker, 1)
    pause(world)
    # A retryable failure goes back to the paused queue: left out until the resume.
    report = Report("failed", True, job.attempt, job.assignment_id, "boom", None, None)
    done = world.store.results.complete(world.worker, [(failing, report)], fetch=5)
    assert done.jobs == [] and leased(world) == []
    world.clock.advance(JOB_TIMEOUT * MAX_ATTEMPTS * 2)
    world.store.leasing.sweep()
    assert world.published.of(ScanDeadLettered) == [], "a pause dead-letters nothing"
    resume(world)
    assert leased(world) == ["fails"]


def test_a_scheduled_retry_still_waits_out_its_backoff(world: World) -> None:
    scan = world.submit("later", queue="slow")
    [job] = world.store.leasing.lease(world.worker, 1)
    report = Report("failed", True, job.attempt, job.assignment_id, "boom", None, None, 60.0)
    due = world.store.results.report(world.worker, scan, report).available_at
    pause(world)
    resume(world)
    assert leased(world) == [], "the retry's due time came back with it"
    world.clock.advance(61)
    assert leased(world) == ["later"] and due is not None


def test_a_resume_announces_the_scans_it_made_claimable_and_intake_while_paused_does_not(
    world: World,
) -> None:
    pause(world)
    parked = world.submit("parked", queue="slow")
    assert not [e for e in world.published.of(ScanReady) if e.scan.scan_id == parked]  # type: ignore[attr-defined]
    assert world.published.of(QueuePaused)
    resume(world)
    ready = [e for e in world.published.of(ScanReady) if e.scan.scan_id == parked]  # type: ignore[attr-defined]
    assert len(ready) == 1


def test_another_owners_endpoint_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        world.store.queues.pause(
            world.owner.owner_id, "pypi", "slow", by="bob", origin=CLI
        )  # alice's endpoint, asked by bob


def test_pause_and_resume_over_the_api_are_shown_audited_and_on_metrics(api: Any) -> None:
    for name, queue in (("a", "slow"), ("b", "fast"), ("c", "slow")):
        api.submit(name, queue=queue)
    paused = api.post("/api/v1/endpoints/pypi/queues/slow/pause", api.owner)
    assert paused.status_code == 200, paused.text
    assert paused.json() == {
        "endpoint": "pypi", "queue": "slow", "paused": True, "changed": True, "scans": 2,
    }  # fmt: skip
    shown = api.get("/api/v1/endpoints/pypi", api.owner).json()
    [queue] = shown["paused_queues"]
    assert (queue["queue"], queue["paused_by"]) == ("slow", "alice")
    assert [job["name"] for job in api.lease(batch=10)] == ["b"]
    reconcile(api)
    metrics = api.client.get("/metrics").text
    assert 'mainframe_queue_paused{endpoint="pypi",queue="slow"} 1.0' in metrics
    resumed = api.post("/api/v1/endpoints/pypi/queues/slow/resume", api.owner).json()
    assert (resumed["paused"], resumed["scans"]) == (False, 2)
    assert [job["name"] for job in api.lease(batch=10)] == ["a", "c"]
    reconcile(api)
    metrics = api.client.get("/metrics").text
    assert 'mainframe_queue_paused{endpoint="pypi",queue="slow"} 0.0' in metrics
    actions = [e["action"] for e in api.get("/api/v1/audit", api.owner).json()["entries"]]
    assert actions[:2] == ["queue_resumed", "queue_paused"]
    refused = api.post("/api/v1/endpoints/evil/queues/slow/pause", api.owner)
    assert refused.status_code == 404, "another owner's endpoint is not revealed"
    bad = api.post("/api/v1/endpoints/pypi/queues/-bad/pause", api.owner)
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "path.queue"


def reconcile(api: Any) -> None:
    """One reconciliation of the app's gauges now, on the app's own loop."""
    rt = api.client.app.state.runtime
    assert api.client.portal.call(reconcile_once, rt.store, rt.metrics)


def fail(world: World, job: Any, *, retry_after: float | None = None) -> None:
    """A retryable failure of the job's attempt (due again at once unless `retry_after`)."""
    report = Report("failed", True, job.attempt, job.assignment_id, "boom", None, None, retry_after)
    world.store.results.report(world.worker, job.scan_id, report)


def states(world: World) -> dict[QueueState, int]:
    return {state: n for state, n in world.store.listings.snapshot().queue.items() if n}


def test_a_paused_queue_is_its_own_state_and_hides_no_other_backlog(world: World) -> None:
    """One queue paused with parked scans and two retries sent back after the pause (one due,
    one waiting); the other queue's scans have waited 700 s, and another endpoint's too."""
    started = world.clock.now_us()
    world.submit("slow-a", queue="slow")
    world.submit("slow-b", queue="slow")
    held = world.store.leasing.lease(world.worker, 2)
    for name in ("slow-c", "slow-d", "slow-e"):
        world.submit(name, queue="slow")
    assert pause(world).scans == 3
    fail(world, held[0])  # back in the paused queue, due at once: left out, not parked
    fail(world, held[1], retry_after=3600)  # back in the paused queue, waiting a backoff
    world.clock.advance(1)
    due_at = world.clock.now_us()
    for name in ("fast-0", "fast-1", "fast-2"):
        world.submit(name, queue="fast")
    world.clock.advance(1)
    add_endpoint(world.store, "bob", "crates", open_intake=False)
    world.store.intake.submit(world.owner, endpoint="crates", spec=ScanSpec("crate", "1"))
    [retried] = world.store.leasing.lease(world.worker, 1)
    assert retried.name == "fast-0", "the paused queue's due retry is not leased"
    fail(world, retried, retry_after=3600)
    world.clock.advance(699)

    snap = world.store.listings.snapshot()
    assert states(world) == {
        QueueState.QUEUED: 3,  # fast-1, fast-2 and crates' scan: the next polls lease them
        QueueState.PAUSED: 5,  # three parked, one due retry, one waiting retry
        QueueState.SCHEDULED: 1,  # fast-0's retry
    }
    assert snap.oldest_due_at == due_at, "the other queue's oldest due scan, not the retry's"
    figures = stats_figures(snap)
    assert figures["queue"]["paused"] == 5 and figures["queue"]["queued"] == 3
    assert figures["oldest_queued_age_seconds"] == 700
    lines = stats_lines(figures)
    assert "the oldest scan a poll could lease has waited 700 s since it was due" in lines
    assert "5 scans held by paused queues are not counted there: see paused above" in lines

    assert world.owner.owner_id is not None
    [npm] = [c for c in world.store.listings.overview(world.owner.owner_id).endpoints
             if c.name == "npm"]  # fmt: skip
    assert (npm.counts["queued"], npm.counts["paused"]) == (3, 5)  # fast-0 waits, still queued
    assert npm.oldest_queued_at == due_at
    # With this endpoint's leasable scans out, another endpoint's due scan still counts.
    assert leased(world) == ["fast-1", "fast-2"]
    assert world.store.listings.snapshot().oldest_due_at == due_at + 1_000_000, "crates' scan"

    assert resume(world).scans == 3
    assert states(world) == {
        QueueState.QUEUED: 5, QueueState.SCHEDULED: 2, QueueState.PENDING: 2,
    }  # fmt: skip
    assert world.store.listings.snapshot().oldest_due_at == started, "slow-c's own due time"
    assert leased(world) == ["slow-a", "slow-c", "slow-d", "slow-e"], "no redrive needed"
    assert world.published.of(ScanDeadLettered) == []


def test_a_scan_left_parked_by_a_resume_cut_short_is_paused_until_resumed_again(
    world: World, engine: Any
) -> None:
    """A resume removes the pause first and gives due times back chunk by chunk; a scan it
    has not reached yet is not leased, so it is not counted queued; resuming again ends it."""
    world.submit("parked", queue="slow")
    pause(world)
    with engine.begin() as conn:  # the pause lifted, as a resume's first step leaves it
        conn.execute(text("DELETE FROM paused_queues"))
    assert leased(world) == []
    assert states(world) == {QueueState.PAUSED: 1}
    assert world.store.listings.snapshot().oldest_due_at is None
    assert resume(world).scans == 1
    assert states(world) == {QueueState.QUEUED: 1}
    assert leased(world) == ["parked"]


def test_the_paused_gauges_over_the_api_move_at_once_and_are_reconciled(api: Any) -> None:
    """No reconciliation runs between the pause, the scrape, the resume and the next scrape:
    the process that paused and resumed shows each at once; `packages_queue{state="paused"}`
    exists from the first scrape and follows at the next reconciliation."""
    metrics = api.client.get("/metrics").text
    assert 'packages_queue{state="paused"} 0.0' in metrics
    assert "mainframe_queue_paused{" not in metrics
    for name in ("a", "b"):
        api.submit(name, queue="slow")
    assert api.post("/api/v1/endpoints/pypi/queues/slow/pause", api.owner).status_code == 200
    metrics = api.client.get("/metrics").text
    assert 'mainframe_queue_paused{endpoint="pypi",queue="slow"} 1.0' in metrics
    reconcile(api)
    metrics = api.client.get("/metrics").text
    assert 'packages_queue{state="paused"} 2.0' in metrics
    assert 'packages_queue{state="queued"} 0.0' in metrics
    assert "packages_oldest_queued_age_seconds 0.0" in metrics
    assert api.post("/api/v1/endpoints/pypi/queues/slow/resume", api.owner).status_code == 200
    metrics = api.client.get("/metrics").text
    assert 'mainframe_queue_paused{endpoint="pypi",queue="slow"} 0.0' in metrics
    reconcile(api)
    metrics = api.client.get("/metrics").text
    assert 'mainframe_queue_paused{endpoint="pypi",queue="slow"} 0.0' in metrics
    assert 'packages_queue{state="paused"} 0.0' in metrics
    assert 'packages_queue{state="queued"} 2.0' in metrics
