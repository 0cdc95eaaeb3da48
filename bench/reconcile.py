"""Reconciliation benchmark: how long the metrics snapshot takes with a large scans table.

Writes FINISHED history plus a QUEUED backlog straight into the table with SQL
(bench/synthetic.py), leases some through the store, then times `store.listings.snapshot()`
(what the refresh loop runs: the statements of store/operator/fleet_snapshot.py, in one read
transaction) and prints median, p95 and max, plus each statement's plan. The aim is under
50 ms at 1M scans, flat as the finished history grows.

It measures the reconciliation and nothing else: the rows do not come in through intake,
so this says nothing about how fast scans can be submitted (bench/bench.py does).

    python bench/reconcile.py --rows 1000000 --queued 200000 --runs 30
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import Engine, text

from mainframe.store import Budget, Store, open_database
from mainframe.store.accounts.audit import CLI
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.accounts.totals import TOTALS
from mainframe.store.engine.database import Sql
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.fleet_snapshot import (
    OLDEST_DUE,
    PENDING_STATES,
    QUARANTINED_COUNT,
    QUEUED_STATES,
)
from synthetic import analyze, create_database, drop_database, endpoint_id_of, seed_scans

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
IN_FLIGHT = 2_000  # of the queued scans, leased through the store before the timing
MAX_ATTEMPTS = 3
# What one snapshot runs (store/operator/fleet_snapshot.py::snapshot), with its parameters.
SNAPSHOT: tuple[tuple[Sql, dict[str, int]], ...] = (
    (QUEUED_STATES, {}),
    (PENDING_STATES, {"max_attempts": MAX_ATTEMPTS}),
    (QUARANTINED_COUNT, {}),
    (OLDEST_DUE, {}),
    (TOTALS, {}),
)


def _database(kind: str, workdir: Path) -> tuple[str, str | None]:
    if kind == "sqlite":
        return f"sqlite:///{workdir / 'reconcile.db'}", None
    name = "mf_reconcile_" + uuid.uuid4().hex[:8]
    return create_database(PG_ADMIN_URL, name), name


async def _seed(store: Store, engine: Engine, rows: int, queued: int) -> int:
    """The owner, its endpoint and the synthetic scans; then some leased through the store.
    Returns how many are in flight."""
    await store.owners.create_owner("bench")
    owner_id = await store.owners.owner_id("bench")
    await store.owners.create_endpoint(owner_id, "bench", open_intake=False, origin=CLI)
    started = time.perf_counter()
    seed_scans(
        engine,
        endpoint_id=endpoint_id_of(engine, "bench"),
        queued=queued,
        finished=rows - queued,
        now_us=store.clock.now_us(),
    )
    _, secret = await store.owners.create_token(
        OPERATOR, "bench", role="worker", principal="w", origin=CLI
    )
    worker = await store.authentication.authenticate(secret)
    assert worker is not None
    leased = 0
    while leased < min(IN_FLIGHT, queued):
        leased += len(await store.leasing.lease(worker, min(100, IN_FLIGHT - leased)))
    analyze(engine)
    print(f"  wrote {rows:,} synthetic scans in {time.perf_counter() - started:.1f} s")
    return leased


def _plans(engine: Engine, now_us: int) -> None:
    """The plan of each statement of the snapshot, planned with its values (the generic plans
    the server's sessions run are pinned by tests/integration/test_plans.py)."""
    postgres = engine.dialect.name == "postgresql"
    prefix = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
    with engine.connect() as conn:
        if postgres:  # as the server's sessions have it (store/engine/pg_settings.py)
            conn.execute(text("SET jit = off"))
        else:  # the store's SQLite connections answer mf_now() from the process
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.create_function("mf_now", 0, lambda: now_us, deterministic=True)
        for sql, params in SNAPSHOT:
            statement = (sql.postgresql or sql.sqlite) if postgres else sql.sqlite
            found = conn.execute(text(prefix + statement), params).all()
            plan = " | ".join(str(row[-1]).strip() for row in found)
            print(f"  plan {sql.name}: {plan}")


async def _timed(url: str, engine: Engine, *, rows: int, queued: int, runs: int) -> list[float]:
    store = Store.build(open_database(url), Budget.of(job_timeout=600, max_attempts=MAX_ATTEMPTS))
    try:
        in_flight = await _seed(store, engine, rows, queued)
        print(f"  {in_flight:,} in flight")
        _plans(engine, store.clock.now_us())
        await store.listings.snapshot()  # warm the statement caches, as the loop's steady state
        took = []
        for _ in range(runs):
            started = time.perf_counter()
            snapshot = await store.listings.snapshot()
            took.append((time.perf_counter() - started) * 1000)
        states = {state.value: n for state, n in snapshot.queue.items() if n}
        print(f"  snapshot: {states}")
    finally:
        await store.close()
    return took


def measure(kind: str, *, rows: int, queued: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url, pg_name = _database(kind, Path(tmp))
        engine = create_store_engine(url)
        try:
            upgrade(engine)
            took = asyncio.run(_timed(url, engine, rows=rows, queued=queued, runs=runs))
        finally:
            engine.dispose()
            if pg_name is not None:
                drop_database(PG_ADMIN_URL, pg_name)
    took.sort()
    return {
        "median_ms": statistics.median(took),
        "p95_ms": took[max(int(len(took) * 0.95) - 1, 0)],
        "max_ms": took[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    results = {}
    for kind in kinds:
        print(f"{kind}: {args.rows:,} scans, {args.queued:,} queued")
        results[kind] = measure(kind, rows=args.rows, queued=args.queued, runs=args.runs)
    print("\n| database | scans | queued | median ms | p95 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, figures in results.items():
        print(
            f"| {kind} | {args.rows:,} | {args.queued:,} | {figures['median_ms']:.1f} | "
            f"{figures['p95_ms']:.1f} | {figures['max_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
