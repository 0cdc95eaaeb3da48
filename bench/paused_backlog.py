"""A big paused queue beside a waiting backlog: what the metrics' snapshot and the owner's
overview cost, and whether the oldest due age still sees the other queue.

One endpoint holds BIG scans in queue `big`, due for 800 s, and SMALL in queue `small`, due
for 700 s; three more endpoints hold nothing. The rows are written DIRECTLY WITH SQL (not
through the API). Each store call the refresh loop and the board make is timed with nothing
paused, then with `big` paused through the store (its scans parked) and RETRIES of them sent
back to it after the pause (unparked, due, older than every `small` scan), once autovacuum
would have passed. Beside them, the yardstick: one statement that reads the paused queue's
parked rows one by one. On PostgreSQL the plans of the oldest due scan and of the QUEUED
states are printed with the rows each step read. Usage:

    .venv/bin/python bench/paused_backlog.py
    .venv/bin/python bench/paused_backlog.py --database-url sqlite:////tmp/paused.db
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from sqlalchemy import Engine, text

from dead_letters import _database, _series
from mainframe.store import Budget, Store, open_database
from mainframe.store.accounts.audit import CLI
from mainframe.store.engine.database import Sql, value
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.fleet_snapshot import OLDEST_DUE, QUEUED_STATES

BIG = 150_000
SMALL = 50_000
RETRIES = 100  # of the paused queue's scans, sent back after the pause: due, not parked
ENDPOINTS = 4
RUNS = 50
SECOND = 1_000_000
# The yardstick: every parked row of the paused queue read from the table, one by one.
READ_PARKED = (
    "SELECT count(queue) FROM scans WHERE endpoint_id = 1 AND status = 'QUEUED' "
    "AND available_at IS NULL"
)


def fill(engine: Engine, now: int) -> None:
    """The owner, its endpoints, and the two queues' scans of endpoint 1, all due."""
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'ops', {now})"))
        for e in range(1, ENDPOINTS + 1):
            conn.execute(
                text(
                    "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                    f"VALUES ({e}, 'endpoint-{e}', 1, FALSE, {now})"
                )
            )
        for queue, rows, first, due in (
            ("big", BIG, 0, now - 800 * SECOND),
            ("small", SMALL, BIG, now - 700 * SECOND),
        ):
            conn.execute(
                text(
                    "INSERT INTO scans (id, endpoint_id, queue, name, version, kind, status, "
                    "verified, created_at, updated_at, attempt_count, attempt_base, "
                    "redrive_count, available_at) "
                    f"SELECT {first} + i, 1, '{queue}', '{queue}-' || CAST(i AS TEXT), '1', "
                    f"'scan', 'QUEUED', TRUE, {due}, {due}, 0, 0, 0, {due} + i "
                    f"FROM {_series(engine, rows)}"
                )
            )
    settle(engine)


def settle(engine: Engine) -> None:
    """Statistics and dead row versions as autovacuum would leave them after a while."""
    analyse = "ANALYZE" if engine.dialect.name == "sqlite" else "VACUUM ANALYZE"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(analyse))


def send_back(engine: Engine) -> None:
    """RETRIES of the paused queue's scans back in it after the pause, due: not parked."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE scans SET available_at = paused_due_at, paused_due_at = NULL "
                f"WHERE id <= {RETRIES} AND queue = 'big'"
            )
        )
    settle(engine)


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> tuple[float, float]:
    await call()  # warm the statement caches
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


async def one(store: Store, sql: Sql) -> object:
    async with store.db.read() as tx:
        return await value(tx, sql)


async def measure(store: Store, engine: Engine, label: str, runs: int) -> None:
    snap = await store.listings.snapshot()
    age = (snap.taken_at - snap.oldest_due_at) / SECOND if snap.oldest_due_at else 0.0
    states = {state.value: n for state, n in snap.queue.items() if n}
    print(f"\n{label}: {states}, oldest due age {age:.0f} s")
    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "oldest due scan (OLDEST_DUE)": lambda: one(store, OLDEST_DUE),
        "QUEUED scans by state (QUEUED_STATES)": lambda: one(store, QUEUED_STATES),
        "the whole snapshot (every refresh)": store.listings.snapshot,
        "the owner's overview (the board)": lambda: store.listings.overview(1),
    }
    for name, call in cases.items():
        p50, p95 = await timed(call, runs)
        print(f"  {name:<40} p50 {p50:8.2f} ms  p95 {p95:8.2f} ms")
    started = time.perf_counter()
    with engine.connect() as conn:
        conn.execute(text(READ_PARKED)).scalar_one()
    took = (time.perf_counter() - started) * 1000
    print(f"  {'yardstick: the parked rows one by one':<40} once {took:8.2f} ms")


def pg_plan(engine: Engine) -> None:
    """The plans of the two statements that read a paused queue's scans, with the rows each
    step read (PostgreSQL)."""
    for sql in (OLDEST_DUE, QUEUED_STATES):
        with engine.connect() as conn:
            found = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql.pg_text))
            print(f"  plan of {sql.name}:")
            for (line,) in found.all():
                print("    " + line)


async def run(url: str, runs: int) -> None:
    engine = create_store_engine(url)
    store = Store.build(open_database(url), Budget.of(job_timeout=60, max_attempts=3))
    now = int(time.time() * SECOND)  # both databases' clock: the host's
    started = time.perf_counter()
    fill(engine, now)
    print(
        f"filled {BIG + SMALL:,} queued scans DIRECTLY WITH SQL (not through the API) in "
        f"{time.perf_counter() - started:.1f} s on {engine.dialect.name}"
    )
    await measure(store, engine, "nothing paused", runs)
    change = await store.queues.pause(1, "endpoint-1", "big", by="bench", origin=CLI)
    send_back(engine)
    await measure(
        store, engine, f"`big` paused ({change.scans:,} parked), {RETRIES} sent back", runs
    )
    if engine.dialect.name == "postgresql":
        pg_plan(engine)
    await store.close()
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: a fresh PostgreSQL database, dropped")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    url, drop = _database(args.database_url)
    try:
        upgrade(create_store_engine(url))
        asyncio.run(run(url, args.runs))
    finally:
        drop()


if __name__ == "__main__":
    main()
