"""A statement sent on its own (no transaction around it) or a transaction that PostgreSQL
picks as a deadlock's victim did nothing, and the transaction it met goes on; the store runs
it again, so the worker whose result or poll it carried gets its answer, never a 503 for a
conflict it had no part in (docs/scale-out.md, *Deadlocks between server processes*)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Connection, Engine, text

from mainframe.lifecycle.rules import Status
from mainframe.store import Budget
from mainframe.store.accounts.audit import CLI
from mainframe.store.hooks.hook_secrets import SecretBox
from mainframe.store.work.results import Completion
from tests.integration.conftest import JOB_TIMEOUT, World, open_world
from tests.integration.test_queues import dead_letters as queue_dead_letters
from tests.integration.test_results_together import finished, finished_total, lease, worker_of

# Bounds on waiting for the store's statement to queue behind the test's lock.
WAIT_S = 10.0
POLL_S = 0.02
HOOK_URL = "https://hooks.example.com/in"


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite takes one lock on the whole database: no two writers deadlock")


def wait_for_lock_wait(watcher: Connection) -> None:
    """Until a backend of the store waits on a row lock (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        waiting = watcher.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
        ).scalar()
        if waiting:
            return
        time.sleep(POLL_S)
    raise AssertionError("the store's statement never waited on the test's lock")


def close_the_cycle(holder: Connection, watcher: Connection, then: str) -> object:
    """Once the store's work waits on what the test holds, take what the store has already
    locked (`then`): the store's backend, whose deadlock check comes first (the default second
    against this one's minute), breaks the cycle by aborting its own work, and the test's
    transaction commits, freeing what it held for the run again. `then`'s first value."""
    wait_for_lock_wait(watcher)
    found = holder.execute(text(then)).scalar()
    holder.commit()
    return found


def cross(holder: Connection, watcher: Connection, scan_id: int) -> str:
    """With every outcome total held, once the store's work (which has locked the scan)
    queues behind them, ask for that scan; its status as the lock found it."""
    scan = f"SELECT status FROM scans WHERE id = {scan_id} FOR UPDATE"
    return str(close_the_cycle(holder, watcher, scan))


def test_a_result_whose_statement_a_deadlock_aborted_is_sent_again_and_closes(
    world: World, engine: Engine
) -> None:
    world.submit("pkg")
    [job] = lease(world, world.worker, 1)

    async def both() -> tuple[str, Any]:
        with engine.connect() as holder, engine.connect() as watcher:
            holder.execute(text("SET deadlock_timeout = '60s'"))
            holder.execute(text("UPDATE scan_totals SET count = count"))
            report = world.store.target.results.complete(
                world.worker, [(job.scan_id, finished(job))], fetch=0
            )
            task = asyncio.create_task(report)
            seen = await asyncio.to_thread(cross, holder, watcher, job.scan_id)
        return seen, await task

    seen, outcome = world.store.run(both)
    # The store had the scan locked while it waited; the lock came free with the totals still
    # held and the scan still PENDING: its statement was aborted, not finished.
    assert seen == "PENDING"
    assert isinstance(outcome, Completion), outcome
    [item] = outcome.outcomes
    assert item.error is None and item.closed is not None
    assert item.closed.status is Status.FINISHED
    assert worker_of(engine, job.scan_id) == (world.worker.name, "FINISHED")
    assert finished_total(engine) == 1, "counted once, by the statement sent again"
    with engine.connect() as conn:
        history = conn.execute(
            text(f"SELECT count(*) FROM attempts WHERE scan_id = {job.scan_id}")
        ).scalar()
    assert history == 1


def dead_letters(engine: Engine, scan_id: int) -> tuple[str, int, int]:
    """The scan's status, its history rows, and the dead letters the outcome totals count."""
    with engine.connect() as conn:
        status = conn.execute(text(f"SELECT status FROM scans WHERE id = {scan_id}")).scalar()
        history = conn.execute(
            text(f"SELECT count(*) FROM attempts WHERE scan_id = {scan_id}")
        ).scalar()
        total = conn.execute(
            text("SELECT sum(count) FROM scan_totals WHERE outcome = 'dead_lettered'")
        ).scalar()
    return str(status), int(history or 0), int(total or 0)


@pytest.mark.parametrize("reaper", ["poll", "sweep"])
def test_a_reap_whose_transaction_a_deadlock_aborted_runs_again_and_dead_letters_once(
    database_url: str, loop: Any, engine: Engine, reaper: str
) -> None:
    """The reap of a lapsed lease is one transaction of several statements (the history row,
    the dead letter, the totals): aborted as a deadlock's victim it runs again from its start,
    and the worker's poll (or the sweeper) goes on as if it had come a moment later."""
    budget = Budget.of(job_timeout=JOB_TIMEOUT, max_attempts=1)
    world = open_world(database_url, loop, budget=budget)
    try:
        scan_id = world.submit("pkg")
        [job] = lease(world, world.worker, 1)
        assert job.scan_id == scan_id
        world.clock.advance(JOB_TIMEOUT + 1)
        leasing = world.store.target.leasing

        async def both() -> tuple[str, Any]:
            with engine.connect() as holder, engine.connect() as watcher:
                holder.execute(text("SET deadlock_timeout = '60s'"))
                holder.execute(text("UPDATE scan_totals SET count = count"))
                work = leasing.lease(world.worker, 1) if reaper == "poll" else leasing.sweep()
                task = asyncio.create_task(work)
                seen = await asyncio.to_thread(cross, holder, watcher, scan_id)
            return seen, await task

        seen, outcome = world.store.run(both)
        # The run again skips a scan still locked (the test's transaction commits just after
        # the store's was aborted); a later sweep then takes it.
        later = world.store.leasing.sweep()
    finally:
        world.store.close()
    # The store held the lapsed scan while it waited on the totals, and let it go still
    # PENDING: its transaction was aborted, not committed.
    assert seen == "PENDING"
    if reaper == "poll":
        assert outcome == []
    else:
        assert outcome + later == 1
    assert dead_letters(engine, scan_id) == ("FAILED", 1, 1), "reaped once, after the abort"


def test_a_redrive_whose_chunk_a_deadlock_aborted_runs_again_and_is_audited_once(
    world: World, engine: Engine
) -> None:
    """A redrive's chunk (the audit row, the requeue, the totals) aborted as a deadlock's
    victim runs again from what the last chunk committed: the operator gets the redrive, not
    a 503, and the audit trail names it once with its true count."""
    [scan_id] = queue_dead_letters(world, "default", 1)
    redrives = world.store.target.dead_letters

    async def both() -> tuple[str, Any]:
        with engine.connect() as holder, engine.connect() as watcher:
            holder.execute(text("SET deadlock_timeout = '60s'"))
            holder.execute(text("UPDATE scan_totals SET count = count"))
            work = redrives.redrive_ids(world.owner.owner_id, [scan_id], origin=CLI)
            task = asyncio.create_task(work)
            seen = await asyncio.to_thread(cross, holder, watcher, scan_id)
        return seen, await task

    seen, done = world.store.run(both)
    assert seen == "FAILED", "the requeue was aborted, not committed"
    assert (done.redriven, done.skipped, done.requeued_ids) == (1, [], [scan_id])
    with engine.connect() as conn:
        status = conn.execute(text(f"SELECT status FROM scans WHERE id = {scan_id}")).scalar()
        audited = conn.execute(
            text("SELECT count(*), max(count) FROM audit WHERE action = 'redrive'")
        ).one()
    assert status == "QUEUED"
    assert tuple(audited) == (1, 1)


def test_an_owner_action_whose_transaction_a_deadlock_aborted_runs_again_and_is_audited_once(
    database_url: str, loop: Any, engine: Engine
) -> None:
    """Owners' and operators' actions (a hook's creation, a token's rotation) are
    transactions of several statements too: aborted as a deadlock's victim they run again,
    so the caller gets its answer instead of a 503, and the audit trail names it once."""
    world = open_world(database_url, loop, hook_box=SecretBox([Fernet.generate_key()]))
    owner = world.owner.owner_id
    store = world.store.target
    try:

        async def both(table: str, work: Callable[[], Awaitable[Any]], then: str) -> Any:
            with engine.connect() as holder, engine.connect() as watcher:
                holder.execute(text("SET deadlock_timeout = '60s'"))
                holder.execute(text(f"LOCK TABLE {table} IN SHARE MODE"))
                task = asyncio.create_task(work())
                await asyncio.to_thread(close_the_cycle, holder, watcher, then)
            return await task

        # The creation locks its endpoint's row, then inserts the hook.
        create = functools.partial(
            store.hooks.create,
            owner,
            "npm",
            url=HOOK_URL,
            queue=None,
            rate_per_minute=60,
            secret="s",
            origin=CLI,
        )
        endpoint = "SELECT id FROM endpoints WHERE name = 'npm' FOR UPDATE"
        hook = world.store.run(both, "hooks", create, endpoint)
        # The rotation deletes the owner's tokens, then writes its audit row.
        rotate = functools.partial(store.owners.rotate_owner_token, "bob", origin=CLI)
        tokens = f"SELECT id FROM tokens WHERE owner_id = {owner} AND role = 'owner' FOR UPDATE"
        secret, replaced = world.store.run(both, "audit", rotate, tokens)
        signs_in = world.store.authentication.authenticate(secret) is not None
    finally:
        world.store.close()
    assert hook.url == HOOK_URL and replaced == 1
    with engine.connect() as conn:
        hooks = conn.execute(text("SELECT count(*) FROM hooks")).scalar()
        audited = conn.execute(
            text(
                "SELECT action, count(*) FROM audit"
                " WHERE action IN ('hook_created', 'owner_token_rotated')"
                " GROUP BY action ORDER BY action"
            )
        ).all()
        owner_tokens = conn.execute(
            text(f"SELECT count(*) FROM tokens WHERE owner_id = {owner} AND role = 'owner'")
        ).scalar()
    assert hooks == 1
    assert [tuple(row) for row in audited] == [("hook_created", 1), ("owner_token_rotated", 1)]
    assert owner_tokens == 1 and signs_in
