"""What the fleet did, counted as it happened, on both databases: each process notes its
committed events and a flush adds them to the current minute and hour of the database's
clock; the charts read bars of the owner's endpoints, an endpoint's workers their last hour
and the leases they hold, and a worker failing far more than the rest is marked."""

from __future__ import annotations

from typing import Any

import pytest

from mainframe.effects import note_activity
from mainframe.shapes import operator as shapes
from mainframe.store import Report
from mainframe.store.accounts.audit import CLI
from mainframe.store.operator.activity import Activity
from tests.blocking import Blocking
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World


def counting(world: World, loop: Any) -> Blocking:
    """The world's store publishing to an activity counter as the server's wiring does."""
    activity = world.store.target.activity
    recorder = world.store.target.db.publish

    def publish(events: Any) -> None:
        recorder(events)
        note_activity(activity.noted, events)

    world.store.target.db.publish = publish
    return Blocking(activity, loop)


def finish(world: World, worker: Any, n: int, *, outcome: str = "finished") -> None:
    for i in range(n):
        world.submit(f"{outcome}-{worker.name}-{i}-{world.clock.now_us()}")
        [job] = world.store.leasing.lease(worker, 1)
        report = Report(outcome, True, job.attempt, job.assignment_id, "exit 1", None, None)
        world.store.results.report(worker, job.scan_id, report)


def test_counts_are_added_to_the_minute_and_the_hour_of_the_flush(world: World, loop: Any) -> None:
    assert world.owner.owner_id is not None
    activity = counting(world, loop)
    finish(world, world.worker, 3)
    world.submit("plain")
    [job] = world.store.leasing.lease(world.worker, 1)
    plain = Report("failed", False, job.attempt, job.assignment_id, "bad", None, None)
    world.store.results.report(world.worker, job.scan_id, plain)
    assert activity.flush() == 5  # 3 finished, 1 plain failure (and its failed attempt)
    assert activity.flush() == 0, "a flush adds each count once"
    [bar] = activity.chart(world.owner.owner_id, span="minute", bars=1)
    assert (bar.finished, bar.failed, bar.dead_lettered) == (3, 1, 0)
    hours = activity.chart(world.owner.owner_id, span="hour", bars=24)
    assert len(hours) == 24 and hours[-1].finished == 3 and sum(b.finished for b in hours) == 3
    world.clock.advance(61)
    finish(world, world.worker, 2)
    activity.flush()
    minutes = activity.chart(world.owner.owner_id, span="minute", bars=2)
    assert [b.finished for b in minutes] == [3, 2], "one bar a minute, oldest first"


def test_dead_letters_lapses_and_revocations_are_counted(world: World, loop: Any) -> None:
    assert world.owner.owner_id is not None
    activity = counting(world, loop)
    world.submit("lapsing")
    for _ in range(MAX_ATTEMPTS):
        world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    world.store.leasing.sweep()
    for i in range(2):
        world.submit(f"live-{i}")
    world.store.revocations.revoke(world.owner.owner_id, "npm", origin=CLI)
    activity.flush()
    total = activity.chart(world.owner.owner_id, span="hour", bars=1)[-1]
    assert total.dead_lettered == 1 + 2
    hours = activity.workers(world.owner.owner_id, "npm")
    assert hours["w1"].lapsed == MAX_ATTEMPTS, "each lapse, the last one's dead letter too"


def test_workers_at_a_glance_mark_the_one_failing_far_more(world: World, loop: Any) -> None:
    assert world.owner.owner_id is not None
    activity = counting(world, loop)
    finish(world, world.worker, 12)
    finish(world, world.other_worker, 2)
    finish(world, world.other_worker, 10, outcome="failed")
    world.submit("held")
    world.store.leasing.lease(world.worker, 1)
    activity.flush()
    tokens = world.store.owners.tokens(world.owner.owner_id, "npm")
    hours = activity.workers(world.owner.owner_id, "npm")
    shown = shapes.workers("npm", tokens, hours).model_dump()
    by_name = {w["worker"]: w for w in shown["workers"]}
    assert by_name["w1"]["leases_held"] == 1 and by_name["w1"]["stands_out"] is False
    w2 = by_name["w2"]
    assert w2["last_hour"] == {"finished": 2, "failed": 10, "lapsed": 0}
    assert w2["stands_out"] is True and round(w2["failure_share"], 2) == 0.83
    assert 0 < shown["failure_share"] < w2["failure_share"]


def test_an_unreachable_flush_keeps_its_counts_for_the_next(world: World, loop: Any) -> None:
    activity = counting(world, loop)
    finish(world, world.worker, 2)
    real = activity.target.db

    class Broken:
        dialect = real.dialect

        def write(self, *, lasting: bool = False) -> Any:
            raise OSError("the database is away")

    activity.target.db = Broken()
    with pytest.raises(OSError):
        activity.flush()
    activity.target.db = real
    assert activity.flush() == 2, "nothing lost while the database was away"


def test_a_fresh_activity_counter_reads_empty_charts(world: World, loop: Any) -> None:
    assert world.owner.owner_id is not None
    fresh = Blocking(Activity(world.store.target.db), loop)
    bars = fresh.chart(world.owner.owner_id, span="hour", bars=24)
    assert len(bars) == 24 and not any(b.finished or b.failed or b.dead_lettered for b in bars)
