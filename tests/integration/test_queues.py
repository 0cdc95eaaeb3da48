"""Pausing and resuming a queue on both databases: a paused queue's scans are never leased (by
a poll or complete-and-fetch), intake goes on, leases already out complete, a retry waits out
its backoff, nothing is dead-lettered by the pause, and a resume hands the scans out again in
the order they had, without a redrive; the API, the audit trail and /metrics show it. Its
scans are the state `paused` in the snapshot, `mainframe stats` and the overview, and the
oldest due age is that of the scans a poll could lease, whichever queue is paused. A redrive,
a quarantine release or a verified resubmission into a paused queue parks what it puts there,
so no poll reads it, and never leaves it parked when a resume lifts the pause meanwhile."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg import sql as pgsql
from sqlalchemy import Engine, select, text

from mainframe.cli.stats import stats_figures, stats_lines
from mainframe.lifecycle.causes import cause_of
from mainframe.lifecycle.rules import QueueState, lapse_outcome
from mainframe.lifecycle.scans import QueuePaused, ScanDeadLettered, ScanReady
from mainframe.metrics.reconcile import reconcile_once
from mainframe.store import Budget, NotFound, Report, ScanSpec
from mainframe.store.accounts.audit import CLI
from mainframe.store.engine.database import Sql
from mainframe.store.engine.schema import scans
from mainframe.store.operator.dead_letters import DeadLetterFilter
from mainframe.store.operator.fleet_snapshot import OLDEST_DUE
from mainframe.store.operator.redrive import REQUEUE
from mainframe.store.work.intake import PROMOTE
from mainframe.store.work.leasing import LEASE, lease_params
from tests.integration.conftest import (
    JOB_TIMEOUT,
    MAX_ATTEMPTS,
    World,
    add_endpoint,
    submit_scan,
)
from tests.polling import wait_for


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


BUDGET = Budget.of(job_timeout=JOB_TIMEOUT, max_attempts=MAX_ATTEMPTS)
# The paused queue's QUEUED scans gone from the queue (as if it held nothing), or given
# their due times back (as a redrive into a paused queue used to leave them): the two
# yardsticks of a Walk, each inside the transaction the walk rolls back.
UNQUEUE_SLOW = "UPDATE scans SET status = 'FINISHED' WHERE status = 'QUEUED' AND queue = 'slow'"
UNPARK_SLOW = (
    "UPDATE scans SET available_at = paused_due_at, paused_due_at = NULL "
    "WHERE status = 'QUEUED' AND queue = 'slow'"
)


@dataclass
class Walk:
    """How many rows of `scans` one of the server's statements reads, run as the server runs
    it (by the world's clock; on PostgreSQL its generic plan) in a transaction rolled back
    afterwards, after `first` when given. PostgreSQL: the rows each step over `scans` read,
    kept or filtered out (EXPLAIN ANALYZE). SQLite: the times its VM checked for progress,
    which it does on every turn of a loop, so once for every row a walk steps over."""

    engine: Engine
    world: World
    sql: Sql
    params: dict[str, Any]

    def reads(self, first: str | None = None) -> int:
        now = self.world.clock.now_us()
        if self.engine.dialect.name == "sqlite":
            return self._sqlite_steps(now, first)
        return self._pg_rows(now, first)

    def _sqlite_steps(self, now: int, first: str | None) -> int:
        assert self.engine.url.database is not None
        conn = sqlite3.connect(self.engine.url.database, isolation_level=None)
        conn.create_function("mf_now", 0, lambda: now, deterministic=True)
        steps = 0

        def step() -> int:
            nonlocal steps
            steps += 1
            return 0  # go on

        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SELECT count(*) FROM sqlite_schema")  # its reading is not counted
            if first is not None:
                conn.execute(first)
            conn.set_progress_handler(step, 1)
            conn.execute(self.sql.sqlite, self.params).fetchall()
            conn.set_progress_handler(None, 1)
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return steps

    def _pg_rows(self, now: int, first: str | None) -> int:
        with self.engine.connect() as conn, conn.begin() as tx:
            driver: Any = conn.connection.driver_connection
            driver.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            driver.execute("SELECT set_config('mainframe.clock_us', %s, true)", (str(now),))
            if first is not None:
                driver.execute(first)
            driver.execute("PREPARE walk AS " + self.sql.pg_text)
            try:
                values = self.sql.pg_args(self.params)
                arguments = pgsql.SQL(", ").join(pgsql.Literal(v) for v in values)
                explain = pgsql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE walk")
                if values:
                    explain = pgsql.SQL("{} ({})").format(explain, arguments)
                [(found,)] = driver.execute(explain).fetchall()
            finally:
                driver.execute("DEALLOCATE walk")
                tx.rollback()
        return _rows_of_scans(found[0]["Plan"])


def _rows_of_scans(node: dict[str, Any]) -> int:
    """The rows the plan's steps over `scans` read (a loop's figures are per turn)."""
    read = 0
    if node.get("Relation Name") == "scans" and node["Node Type"] != "ModifyTable":
        kept, dropped = node["Actual Rows"], node.get("Rows Removed by Filter", 0)
        read = round((kept + dropped) * node["Actual Loops"])
    return read + sum(_rows_of_scans(child) for child in node.get("Plans", ()))


def dead_letters(world: World, queue: str, n: int) -> list[int]:
    """`n` dead letters of `queue`, oldest first, each of whose leases lapsed to the last."""
    specs = [ScanSpec(f"{queue}-{i:03}", "1", queue) for i in range(n)]
    made = world.store.intake.submit_many(world.source, endpoint=None, specs=specs)
    for _ in range(MAX_ATTEMPTS):
        assert len(world.store.leasing.lease(world.worker, n)) == n
        world.clock.advance(JOB_TIMEOUT + 1)
        assert world.store.leasing.sweep(limit=n) == n
    owner, f = world.owner.owner_id, DeadLetterFilter(queue=queue)
    assert world.store.dead_letters.count(owner, f) == n
    return [item.scan.id for item in made]


# The cause of a scan whose every lease lapsed.
LAPSED = cause_of(lapse_outcome(waiting=False).value, None).key


def redrive(world: World, how: str, ids: list[int]) -> Any:
    """Redrive the dead letters `ids` (all the endpoint has): by id, by a filter (their
    endpoint) or by their cause."""
    owner = world.owner.owner_id
    if how == "ids":
        return world.store.dead_letters.redrive_ids(owner, ids, origin=CLI)
    f = DeadLetterFilter(endpoint="npm") if how == "filter" else DeadLetterFilter(cause=LAPSED)
    return world.store.dead_letters.redrive_filter(owner, f, confirm=len(ids), origin=CLI)


def parked(engine: Engine, ids: list[int]) -> list[int]:
    """Which of the scans are parked: QUEUED with no due time, their due time kept."""
    with engine.connect() as conn:
        found = conn.execute(
            select(scans.c.id).where(
                scans.c.id.in_(ids), scans.c.status == "QUEUED",
                scans.c.available_at.is_(None), scans.c.paused_due_at.is_not(None),
            )
        )  # fmt: skip
        return sorted(found.scalars())


def test_a_redrive_into_a_paused_queue_parks_its_scans_and_the_poll_never_reads_them(
    world: World, engine: Engine
) -> None:
    """500 dead letters redriven into a paused queue wait parked: the endpoint's poll leases
    the other queue's scans, submitted after the redrive, and reads no more of `scans` than
    with the paused queue empty, where the same scans left due (as a redrive used to leave
    them) are each read by every poll; they count as paused, and a resume hands them out in
    their order. The oldest due age stays the other queue's."""
    ids = dead_letters(world, "slow", 500)
    world.clock.advance(1)
    pause(world)
    world.published.events.clear()
    done = redrive(world, "cause", ids)
    assert done.redriven == 500 and done.skipped == []
    assert parked(engine, ids) == ids
    assert not [e for e in world.published.of(ScanReady)], "announced when resumed, not now"
    world.clock.advance(1)
    fast_due = world.clock.now_us()
    for i in range(5):
        world.submit(f"fast-{i}", queue="fast")

    poll = Walk(engine, world, LEASE, lease_params(world.worker, 10, BUDGET))
    oldest = Walk(engine, world, OLDEST_DUE, {})
    for walk in (poll, oldest):
        assert walk.reads() == walk.reads(UNQUEUE_SLOW), "the parked scans are not read"
        assert walk.reads(UNPARK_SLOW) >= walk.reads() + 500, "left due, each would be"
    assert states(world) == {QueueState.QUEUED: 5, QueueState.PAUSED: 500}
    assert world.store.listings.snapshot().oldest_due_at == fast_due
    figures = stats_figures(world.store.listings.snapshot())
    assert (figures["queue"]["paused"], figures["queue"]["queued"]) == (500, 5)
    assert leased(world, 10) == [f"fast-{i}" for i in range(5)]
    assert leased(world, 10) == []

    world.published.events.clear()
    assert resume(world).scans == 500
    assert states(world) == {QueueState.QUEUED: 500, QueueState.PENDING: 5}
    assert parked(engine, ids) == []
    ready = [e.scan.scan_id for e in world.published.of(ScanReady)]  # type: ignore[attr-defined]
    assert sorted(ready) == ids, "each verified scan announced once, at the resume"
    assert leased(world, 500) == [f"slow-{i:03}" for i in range(500)], "in their order"


@pytest.mark.parametrize("how", ["ids", "filter", "cause"])
def test_each_redrive_parks_only_the_scans_whose_queue_is_paused(
    world: World, engine: Engine, how: str
) -> None:
    """One redrive over two queues, one of them paused: its scans are parked (and announced
    at the resume), the other queue's are due at once and announced now."""
    slow = dead_letters(world, "slow", 3)
    fast = dead_letters(world, "fast", 2)
    pause(world)
    world.published.events.clear()
    assert redrive(world, how, slow + fast).redriven == 5
    assert parked(engine, slow + fast) == slow
    ready = {e.scan.scan_id for e in world.published.of(ScanReady)}  # type: ignore[attr-defined]
    assert ready == set(fast)
    assert states(world) == {QueueState.QUEUED: 2, QueueState.PAUSED: 3}
    assert leased(world) == ["fast-000", "fast-001"]
    resume(world)
    assert leased(world) == ["slow-000", "slow-001", "slow-002"]


def test_a_release_or_a_verified_resubmission_into_a_paused_queue_parks_the_scan(
    world: World, engine: Engine
) -> None:
    """The two ways out of quarantine put the scan in the paused queue parked, as intake
    does; the resume makes them due, in their order."""
    held = [quarantined(world, engine, name) for name in ("released", "promoted")]
    pause(world)
    world.store.intake.release(world.owner.owner_id, held[0])
    promoted = world.submit("promoted", "1", queue="slow")
    assert promoted == held[1]
    assert parked(engine, held) == held
    assert states(world) == {QueueState.PAUSED: 2}
    assert leased(world) == []
    resume(world)
    assert leased(world) == ["released", "promoted"]


def quarantined(world: World, engine: Engine, name: str) -> int:
    """A scan of queue `slow` submitted anonymously, so quarantined."""
    with engine.begin() as conn:  # an endpoint with open intake takes anonymous scans
        conn.execute(text("UPDATE endpoints SET open_intake = TRUE WHERE name = 'npm'"))
    found, _ = submit_scan(world.store, None, endpoint="npm", queue="slow", name=name,
                           version="1", kind="scan", payload=None)  # fmt: skip
    return int(found.id)


@pytest.mark.parametrize("way", ["redrive", "release"])
def test_a_scan_parked_while_a_resume_lifts_the_pause_is_never_left_parked(
    world: World, engine: Engine, database_url: str, way: str
) -> None:
    """A redrive's chunk or a release from quarantine that parks a scan (its queue paused when
    the statement began) holds a resume's lifting of the pause back until it commits, so the
    resume's unparking sees the scan: none waits parked in a queue no longer paused, for a
    resume nobody would send. PostgreSQL only: SQLite runs one writer at a time."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite runs one writer at a time: a redrive and a resume never overlap")
    if way == "redrive":
        [gone] = dead_letters(world, "slow", 1)
        statement, values = REQUEUE, REQUEUE.pg_args({"ids": f"[{gone}]"})
    else:
        gone = quarantined(world, engine, "slow-000")
        params = {"scan": gone, "verified": False, "source": None}
        statement, values = PROMOTE, PROMOTE.pg_args(params)
    pause(world)
    resumed: list[Any] = []
    with engine.connect() as redriving, engine.connect() as watching:
        driver: Any = redriving.connection.driver_connection
        tx = redriving.begin()
        now = str(world.clock.now_us())
        driver.execute("SELECT set_config('mainframe.clock_us', %s, true)", (now,))
        driver.execute("PREPARE parking AS " + statement.pg_text)
        arguments = pgsql.SQL(", ").join(pgsql.Literal(v) for v in values)
        driver.execute(pgsql.SQL("EXECUTE parking ({})").format(arguments))  # the queue is paused
        resuming = threading.Thread(target=lambda: resumed.append(resume(world)))
        resuming.start()
        waiting = text(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        wait_for(
            lambda: not resuming.is_alive() or watching.execute(waiting).scalar_one() == 1,
            timeout=10,
            what="the resume done, or waiting for the redrive's transaction",
        )
        tx.commit()
        resuming.join(timeout=10)
    assert parked(engine, [gone]) == [], "parked in a queue no longer paused"
    assert leased(world) == ["slow-000"]
    [change] = resumed
    assert (change.changed, change.scans) == (True, 1), "the resume gave it its due time"
