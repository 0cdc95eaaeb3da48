"""Retention on both databases: each kind pruned once its own retention has passed and not
before, attempts going with their scan, dead letters on their own clock, a redriven scan
kept as the live scan it is, the outcome totals and the process counters untouched, and
what was pruned counted and logged after commit. Time is the fake clock the store (and so
`mf_now()`) reads; nothing sleeps."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from sqlalchemy import Engine, text

from mainframe import effects
from mainframe.clock import MICROS
from mainframe.lifecycle.retention import DAY_US, RetentionPolicy
from mainframe.lifecycle.rules import PruneKind, Status
from mainframe.lifecycle.scans import RowsPruned
from mainframe.metrics import Metrics
from mainframe.store import Job, NotFound, Report, ScanSpec
from mainframe.store.accounts.audit import CLI
from mainframe.store.hooks.deliveries import minute_of
from mainframe.sweeper import prune_once
from tests.integration.conftest import MAX_ATTEMPTS, World, open_world

HOUR_US = 3_600 * MICROS
# Each kind a day apart, so one walk through time sees them go one by one.
SPACED = RetentionPolicy(
    finished=1 * DAY_US,
    failed=2 * DAY_US,
    dead_lettered=3 * DAY_US,
    audit=4 * DAY_US,
    delivery_counts=5 * DAY_US,
    board_sessions=6 * DAY_US,
)
# What a row of each kind, and its attempts, are counted as.
COUNTS = {
    "finished": "SELECT count(*) FROM scans WHERE status = 'FINISHED'",
    "failed": "SELECT count(*) FROM scans WHERE status = 'FAILED' AND dead_lettered_at IS NULL",
    "dead_lettered": "SELECT count(*) FROM scans WHERE dead_lettered_at IS NOT NULL",
    "live": "SELECT count(*) FROM scans WHERE status IN ('QUEUED', 'PENDING', 'QUARANTINED')",
    "attempts": "SELECT count(*) FROM attempts",
    "audit": "SELECT count(*) FROM audit",
    "delivery_counts": "SELECT count(*) FROM delivery_counts",
    "board_sessions": "SELECT count(*) FROM board_sessions",
}


async def _no_pause(_seconds: float) -> None:
    return None


class Kept:
    """A world whose store prunes by `policy`, the database read beside it."""

    def __init__(self, world: World, engine: Engine) -> None:
        self.world = world
        self.store = world.store
        self.clock = world.clock
        self.engine = engine

    def rows(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {kind: int(conn.execute(text(sql)).scalar_one()) for kind, sql in COUNTS.items()}

    def prune(self, *, batch: int = 500) -> dict[PruneKind, int]:
        """A pass of the sweeper's pruning, without its pauses."""
        pruned = self.store.run(prune_once, self.store.target, batch=batch, sleep=_no_pause)
        return {kind: n for kind, n in pruned.items() if n}

    def finish(self, name: str) -> int:
        scan_id = self.world.submit(name)
        job = self.lease_one()
        self.store.results.report(self.world.worker, scan_id, _report(job))
        return scan_id

    def fail(self, name: str) -> int:
        scan_id = self.world.submit(name)
        job = self.lease_one()
        self.store.results.report(self.world.worker, scan_id, _report(job, "failed", False))
        return scan_id

    def dead_letter(self, name: str) -> int:
        scan_id = self.world.submit(name)
        for _ in range(MAX_ATTEMPTS):
            job = self.lease_one()
            self.store.results.report(self.world.worker, scan_id, _report(job, "failed"))
        return scan_id

    def lease_one(self) -> Job:
        [job] = self.store.leasing.lease(self.world.worker, 1)
        return job  # type: ignore[no-any-return]


def _report(job: Job, outcome: str = "finished", retryable: bool = True) -> Report:
    return Report(outcome, retryable, job.attempt, job.assignment_id, "summary", None, None)


def kept_world(
    database_url: str, loop: BlockingPortal, engine: Engine, policy: RetentionPolicy
) -> Kept:
    return Kept(open_world(database_url, loop, retention=policy), engine)


@pytest.fixture
def spaced(database_url: str, loop: BlockingPortal, engine: Engine) -> Iterator[Kept]:
    found = kept_world(database_url, loop, engine, SPACED)
    yield found
    found.store.close()


@pytest.fixture
def defaults(database_url: str, loop: BlockingPortal, engine: Engine) -> Iterator[Kept]:
    found = kept_world(database_url, loop, engine, RetentionPolicy())
    yield found
    found.store.close()


def test_each_kind_goes_once_its_own_retention_has_passed_and_not_before(spaced: Kept) -> None:
    """One row of each kind ends at t0 (a minute of delivery counts at the minute's end, a
    session when it expires); walking the clock to a microsecond before each kind's
    retention has passed prunes nothing of it, and to the instant it has, exactly it."""
    store, clock = spaced.store, spaced.clock
    t0 = clock.now_us()  # the world's accounts, and their audit rows, were made at t0 too
    spaced.finish("done")
    spaced.fail("broken")
    spaced.dead_letter("gone")
    secret = store.owners.create_owner("carol")
    assert store.sessions.sign_in(secret, lifetime_us=HOUR_US, origin=CLI) is not None
    store.deliveries.record(1, attempts=3, failures=1)
    before = spaced.rows()
    assert before["audit"] >= 1 and before["attempts"] == 1 + 1 + MAX_ATTEMPTS
    ended = {
        "finished": t0,
        "failed": t0,
        "dead_lettered": t0,
        "audit": t0,
        "delivery_counts": minute_of(t0) + 60 * MICROS,
        "board_sessions": t0 + HOUR_US,
    }
    attempts_of = {"finished": 1, "failed": 1, "dead_lettered": MAX_ATTEMPTS}
    gone: set[str] = set()
    for kind in PruneKind:
        if kind is PruneKind.ATTEMPTS:
            continue
        due_at = ended[kind.value] + SPACED.kept(kind)  # type: ignore[operator]
        clock.advance((due_at - 1 - clock.now_us()) / MICROS)
        assert spaced.prune() == {}, f"{kind} pruned before its retention"
        assert spaced.rows()[kind.value] == before[kind.value]
        clock.advance(1 / MICROS)
        pruned = spaced.prune()
        gone.add(kind.value)
        rows = spaced.rows()
        assert pruned.get(kind) == before[kind.value], kind
        assert pruned.get(PruneKind.ATTEMPTS, 0) == attempts_of.get(kind.value, 0)
        assert {k for k in ended if rows[k] == 0} == gone
        assert rows["attempts"] == sum(n for k, n in attempts_of.items() if k not in gone)


def test_attempts_go_with_their_scan_and_no_other(defaults: Kept) -> None:
    store, clock = defaults.store, defaults.clock
    old = defaults.dead_letter("old")
    clock.advance(80 * 86_400)
    young = defaults.dead_letter("young")
    clock.advance(10 * 86_400)  # old: 90 days a dead letter; young: 10
    assert defaults.prune() == {PruneKind.DEAD_LETTERED: 1, PruneKind.ATTEMPTS: MAX_ATTEMPTS}
    owner_id = defaults.world.owner.owner_id
    with pytest.raises(NotFound):
        store.listings.get_scan(owner_id, old)
    assert len(store.listings.get_scan(owner_id, young).attempts) == MAX_ATTEMPTS


def test_a_dead_letter_outlives_the_finished_retention(defaults: Kept) -> None:
    """Finished and dead-lettered at the same instant: eight days on, past the finished
    scans' week, the finished scan is gone and the dead letter stays for its own 90 days."""
    finished = defaults.finish("done")
    dead = defaults.dead_letter("gone")
    defaults.clock.advance(8 * 86_400)
    assert defaults.prune() == {PruneKind.FINISHED: 1, PruneKind.ATTEMPTS: 1}
    owner_id = defaults.world.owner.owner_id
    with pytest.raises(NotFound):
        defaults.store.listings.get_scan(owner_id, finished)
    assert defaults.store.listings.get_scan(owner_id, dead).dead_lettered_at is not None
    defaults.clock.advance(82 * 86_400)
    assert defaults.prune() == {PruneKind.DEAD_LETTERED: 1, PruneKind.ATTEMPTS: MAX_ATTEMPTS}


def test_a_redriven_scan_is_not_pruned_as_a_dead_letter(defaults: Kept) -> None:
    """Redriven a day after it was dead-lettered, the scan waits in the queue past the dead
    letters' retention and is kept, history and all; once it finishes, it goes after the
    finished scans' week, with every attempt of its history."""
    store, clock = defaults.store, defaults.clock
    scan_id = defaults.dead_letter("again")
    clock.advance(86_400)
    owner_id = defaults.world.owner.owner_id
    done = store.dead_letters.redrive_ids(owner_id, [scan_id], origin=CLI)
    assert done.redriven == 1
    clock.advance(100 * 86_400)
    assert PruneKind.DEAD_LETTERED not in defaults.prune()
    scan = store.listings.get_scan(owner_id, scan_id)
    assert scan.status is Status.QUEUED and len(scan.attempts) == MAX_ATTEMPTS
    job = defaults.lease_one()
    store.results.report(defaults.world.worker, scan_id, _report(job))
    clock.advance(7 * 86_400 - 1)
    assert PruneKind.FINISHED not in defaults.prune()
    clock.advance(1)
    pruned = defaults.prune()
    assert pruned[PruneKind.FINISHED] == 1 and pruned[PruneKind.ATTEMPTS] == MAX_ATTEMPTS + 1


def test_live_scans_are_never_pruned(
    database_url: str, loop: BlockingPortal, engine: Engine
) -> None:
    at_once = kept_world(database_url, loop, engine, RetentionPolicy.uniform(0))
    try:
        at_once.world.submit("queued")
        at_once.world.submit("pending")
        at_once.lease_one()
        at_once.clock.advance(365 * 86_400)
        pruned = at_once.prune()
        assert set(pruned) == {PruneKind.AUDIT}  # the accounts' audit rows, nothing of scans
        assert at_once.rows()["live"] == 2
    finally:
        at_once.store.close()


def test_pruning_changes_no_total_and_no_counter_and_is_counted_after_commit(
    database_url: str, loop: BlockingPortal, engine: Engine
) -> None:
    """The reconciled outcomes (database truth kept as counts) and the process counters are
    what they were; the pruned rows are counted by kind and each batch logs one line."""
    at_once = kept_world(database_url, loop, engine, RetentionPolicy.uniform(0))
    metrics, lines = Metrics(), _Lines()
    try:
        at_once.store.target.db.publish = effects.wire(metrics, log=lines)
        for n in range(5):
            at_once.finish(f"done{n}")
        at_once.fail("broken")
        at_once.dead_letter("gone")
        counters = _counters(metrics)
        snapshot = at_once.store.listings.snapshot()
        assert snapshot.outcomes == {"finished": 5, "failed": 1, "dead_lettered": 1}
        lines.clear()
        pruned = at_once.prune(batch=2)
        assert pruned[PruneKind.FINISHED] == 5 and at_once.rows()["attempts"] == 0
        assert at_once.store.listings.snapshot().outcomes == snapshot.outcomes
        assert _counters(metrics) == counters
        for kind, count in pruned.items():
            assert _pruned(metrics, kind) == count
        # Five finished scans in batches of two: three lines; one each for the others.
        batches = [(line["kind"], line["count"]) for line in lines.of("pruned")]
        assert batches[:3] == [("finished", 2), ("finished", 2), ("finished", 1)]
        assert ("failed", 1) in batches and ("dead_lettered", 1) in batches
    finally:
        at_once.store.close()


def test_nothing_due_publishes_nothing(spaced: Kept) -> None:
    """A pass that finds nothing past its retention reports nothing: no counter, no line."""
    spaced.finish("young")
    spaced.world.published.events.clear()
    assert spaced.prune() == {}
    assert not spaced.world.published.of(RowsPruned)


class _Lines:
    """A logger that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})

    warning = error = info

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == event]

    def clear(self) -> None:
        self.lines.clear()


def _counters(metrics: Metrics) -> tuple[float, float, float]:
    return (
        metrics.succeeded._value.get(),
        metrics.failed._value.get(),
        metrics.dead_lettered._value.get(),
    )


def _pruned(metrics: Metrics, kind: PruneKind) -> float:
    value: float = metrics.registry.get_sample_value(
        "mainframe_pruned_rows_total", {"kind": kind.value}
    )
    return value


# The steady state: rounds of submit, lease, finish and a sweeper's pass at a retention of 0.
ROUNDS = 40
PER_ROUND = 100  # so the run finishes 40 times what the table ever holds
WARM_UP = 5  # rounds before the size is taken as the steady state's
# How far the SQLite file may drift from its size after the warm-up: 16 pages of 4 KiB.
# Without pruning the same rounds grow it by about 11 pages each (440 over the run).
DRIFT_PAGES = 16
PAYLOAD = '{"distributions": ["https://files.example/pkg-1.0.tar.gz"]}'


def _round(kept: Kept, number: int) -> None:
    store, world = kept.store, kept.world
    specs = [ScanSpec(f"pkg{number}-{n}", "1.0", payload=PAYLOAD) for n in range(PER_ROUND)]
    assert all(
        item.created for item in store.intake.submit_many(world.source, endpoint=None, specs=specs)
    )
    jobs = store.leasing.lease(world.worker, PER_ROUND)
    assert len(jobs) == PER_ROUND
    store.results.complete(world.worker, [(job.scan_id, _report(job)) for job in jobs])
    kept.clock.advance(1)


def _pages(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("PRAGMA page_count")).scalar_one())


def test_at_a_retention_of_zero_the_tables_and_the_file_stay_flat(
    database_url: str, loop: BlockingPortal, engine: Engine
) -> None:
    """4,000 scans finished, 100 at a time, each round swept: no round leaves a finished scan
    or an attempt behind, the SQLite file stays within DRIFT_PAGES of its size after the
    warm-up (its freed pages are reused: auto_vacuum is NONE), and the outcome totals count
    every scan finished."""
    at_once = kept_world(database_url, loop, engine, RetentionPolicy.uniform(0))
    sqlite = engine.dialect.name == "sqlite"
    try:
        for number in range(ROUNDS):
            _round(at_once, number)
            pruned = at_once.prune()
            assert pruned[PruneKind.FINISHED] == PER_ROUND
            rows = at_once.rows()
            assert (rows["finished"], rows["attempts"], rows["live"]) == (0, 0, 0)
            if sqlite and number == WARM_UP:
                steady = _pages(engine)
            if sqlite and number > WARM_UP:
                assert _pages(engine) <= steady + DRIFT_PAGES, f"grew by round {number}"
        snapshot = at_once.store.listings.snapshot()
        assert snapshot.outcomes["finished"] == ROUNDS * PER_ROUND
    finally:
        at_once.store.close()
    if sqlite:
        path = engine.url.database
        assert path is not None
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)  # NONE
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        assert pages <= steady + DRIFT_PAGES
        assert os.path.getsize(path) == pages * page_size


def test_without_pruning_the_same_rounds_grow_the_file(
    database_url: str, loop: BlockingPortal, engine: Engine
) -> None:
    """The control of the test above: kept forever, ten rounds already outgrow its bound."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the file's size is SQLite's")
    forever = kept_world(database_url, loop, engine, RetentionPolicy.uniform(None))
    try:
        _round(forever, 0)
        start = _pages(engine)
        for number in range(1, 11):
            _round(forever, number)
        assert forever.prune() == {}
        assert _pages(engine) > start + 4 * DRIFT_PAGES
    finally:
        forever.store.close()
