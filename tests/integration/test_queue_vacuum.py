"""The head of the queue kept clean (store/engine/queue_vacuum.py): on PostgreSQL, once the
leases left enough dead row versions in `scans`, the server's upkeep vacuums it and a poll
no longer walks their entries in ix_scans_queued; below the threshold it leaves the table
alone. SQLite removes an index entry with its row and is never vacuumed."""

from __future__ import annotations

import time

from sqlalchemy import Engine, text

from mainframe.store.engine.queue_vacuum import QueueVacuum
from tests.integration.conftest import World

LEASED = 60
# The due walk of a poll, as the leasing statements make it (ix_scans_queued).
DUE_WALK = (
    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) "
    "SELECT id FROM scans WHERE endpoint_id = (SELECT id FROM endpoints WHERE name = 'npm') "
    "AND status = 'QUEUED' AND available_at <= 9223372036854775807 "
    "ORDER BY available_at, id LIMIT 1"
)


def _fill_and_lease(world: World) -> None:
    for n in range(LEASED + 1):
        world.submit(f"pkg{n}")
    assert len(world.store.leasing.lease(world.worker, LEASED)) == LEASED


def _dead_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_force_next_flush()"))
        found = conn.execute(
            text("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'scans'")
        ).scalar_one()
    return int(found)


def _buffers(engine: Engine) -> int:
    """The buffers a poll's due walk reads to find its first due scan."""
    with engine.connect() as conn:
        # A table this small would be read whole; a real queue's is walked by its index.
        conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(row[0] for row in conn.execute(text(DUE_WALK)))
    assert "ix_scans_queued" in plan, plan
    hits = [int(part.split("=")[1]) for part in plan.split() if part.startswith("hit=")]
    return max(hits)


def test_leases_past_the_threshold_are_vacuumed_and_the_walk_shrinks(
    world: World, engine: Engine
) -> None:
    upkeep = QueueVacuum(world.store.target.db, at_least=LEASED // 2, share=0.0)
    if world.store.target.db.dialect == "sqlite":
        _fill_and_lease(world)
        assert world.store.run(upkeep.refresh) is False, "SQLite keeps no dead entries"
        return
    below = QueueVacuum(world.store.target.db, at_least=10 * LEASED, share=0.0)
    _fill_and_lease(world)
    # An idle backend reports its counts after 10 s, or as it exits: the store's idle
    # connections are closed (it opens new ones) so the leases' dead rows show at once.
    world.store.run(world.store.target.db.close)
    deadline = time.monotonic() + 5
    while _dead_rows(engine) < LEASED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _dead_rows(engine) >= LEASED, "the leases' old row versions are dead"
    walked_before = _buffers(engine)
    assert world.store.run(below.refresh) is False, "below its threshold: left alone"
    assert world.store.run(upkeep.refresh) is True
    assert _dead_rows(engine) < LEASED // 2
    assert _buffers(engine) < walked_before, "the poll walks fewer pages once vacuumed"
    [job] = world.store.leasing.lease(world.worker, 1)
    assert job.name == f"pkg{LEASED}", "the queue is as it was: the one scan left is due"
