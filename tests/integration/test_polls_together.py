"""Job polls that reach the store while another is at the database go together in one
statement on PostgreSQL (LEASE_TOGETHER), from any workers of any endpoints, and each poll
still gets what it would have got alone: jobs of its own endpoint that no other poll got,
never a retry its own worker may not take yet, none from an empty queue, and its own refusal
for a token that is no worker's."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from sqlalchemy import Engine, text

from mainframe.store import Report
from mainframe.store.engine.database import StoreError
from tests.integration.conftest import World, issue
from tests.integration.test_results_together import (
    Counted,
    held_at_once,
    two_endpoints,
    worker_of,
)


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite runs each poll in process")


def polls_at_once(
    world: World, engine: Engine, polls: list[tuple[Any, int]]
) -> tuple[Any, Counted]:
    """Every poll sent at the same moment, the first held by a table its statement reads
    locked; each outcome is the poll's jobs or the error raised."""
    leasing = world.store.target.leasing
    counted = leasing.db = Counted(leasing.db)
    calls = [functools.partial(leasing.lease, caller, batch) for caller, batch in polls]
    lock = "LOCK TABLE paused_queues IN ACCESS EXCLUSIVE MODE"
    return held_at_once(world, engine, lock, calls), counted


def known(world: World, *callers: Any) -> None:
    """Each caller's first poll, which reaps its endpoint in a transaction of its own; the
    polls after it are the plain statement that goes with others."""
    for caller in callers:
        assert world.store.leasing.lease(caller, 0) == []


def test_polls_that_meet_go_in_one_statement_each_with_jobs_of_its_own(
    world: World, engine: Engine
) -> None:
    pypi_worker = two_endpoints(world, 8)
    known(world, world.worker, world.other_worker, pypi_worker)
    polls = [(world.worker, 1), (world.other_worker, 2), (pypi_worker, 3), (world.worker, 2),
             (pypi_worker, 1)]  # fmt: skip
    outcomes, counted = polls_at_once(world, engine, polls)
    assert counted.statements == 2, "the first went alone, the four that met it together"
    names = [[job.name for job in jobs] for jobs in outcomes]
    assert [len(found) for found in names] == [1, 2, 3, 2, 1]
    assert all(name.startswith("npm") for found in names[:2] + names[3:4] for name in found)
    assert all(name.startswith("pypi") for found in names[2:3] + names[4:] for name in found)
    everyone = [name for found in names for name in found]
    assert len(set(everyone)) == len(everyone) == 9, "no job went to two polls"
    for (caller, _), jobs in zip(polls, outcomes, strict=True):
        for job in jobs:
            assert worker_of(engine, job.scan_id) == (caller.name, "PENDING")


def test_a_poll_of_an_empty_queue_gets_nothing_and_a_revoked_token_its_refusal(
    world: World, engine: Engine
) -> None:
    pypi_worker = world.store.authentication.authenticate(
        issue(world.store, "pypi", "worker", "p1")
    )
    world.submit("only")
    known(world, world.worker, world.other_worker, pypi_worker)
    with engine.begin() as conn:  # the pypi endpoint revoked since its worker's last poll
        conn.execute(text("UPDATE endpoints SET revoked_at = 1 WHERE name = 'pypi'"))
    polls = [(world.worker, 1), (world.other_worker, 1), (pypi_worker, 1), (world.worker, 1)]
    outcomes, counted = polls_at_once(world, engine, polls)
    assert [job.name for job in outcomes[0]] == ["only"]
    assert outcomes[1] == [] and outcomes[3] == []
    assert isinstance(outcomes[2], StoreError)
    assert counted.statements == 3, "alone, together, then the revoked token alone"


def test_a_polls_turn_at_its_own_workers_failure_passes_it_by(world: World, engine: Engine) -> None:
    """w2 asked recently, so the scan w1 just failed may not go back to w1 yet: w1's walk
    passes it by and takes the next scan, which w2's turn (after w1's share) reached too, so
    w2 gets fewer than it asked for this time; the retry stays queued, never w1's."""
    pypi_worker = world.store.authentication.authenticate(
        issue(world.store, "pypi", "worker", "p1")
    )
    for name in ("failing", "a", "b"):
        world.submit(name)
    known(world, world.worker, world.other_worker, pypi_worker)
    [failing] = world.store.leasing.lease(world.worker, 1)
    world.store.authentication.note(world.other_worker.digest)
    world.store.authentication.flush()
    fail = Report("failed", True, failing.attempt, failing.assignment_id, "boom", None, None)
    world.store.results.report(world.worker, failing.scan_id, fail)
    polls = [(pypi_worker, 1), (world.worker, 1), (world.other_worker, 1)]
    outcomes, counted = polls_at_once(world, engine, polls)
    assert counted.statements == 2
    assert [[job.name for job in jobs] for jobs in outcomes] == [[], ["a"], []]
    assert worker_of(engine, failing.scan_id) == (world.worker.name, "QUEUED")
