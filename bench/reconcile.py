"""Reconciliation benchmark: how long the metrics snapshot takes with a large scans table.

Writes FINISHED history plus a QUEUED backlog straight into the table with SQL
(bench/synthetic.py), leases some through the store, then times `Store.snapshot()` (what
the refresh loop runs) and prints median, p95 and max, plus the query plans. The aim is
under 50 ms at 1M scans, flat as the finished history grows.

It measures the reconciliation query and nothing else: the rows do not come in through
intake, so this says nothing about how fast scans can be submitted (bench/bench.py does).

    python bench/reconcile.py --rows 1000000 --queued 200000 --runs 30
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

from mainframe.clock import SystemClock
from mainframe.store import Budget, Store
from mainframe.store.migrate import upgrade
from mainframe.store.sqlalchemy_engine import create_store_engine
from synthetic import analyze, create_database, drop_database, endpoint_id_of, seed_scans

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
IN_FLIGHT = 2_000


def _database(kind: str, workdir: Path) -> tuple[str, str | None]:
    if kind == "sqlite":
        return f"sqlite:///{workdir / 'reconcile.db'}", None
    name = "mf_reconcile_" + uuid.uuid4().hex[:8]
    return create_database(PG_ADMIN_URL, name), name


def _seed(store: Store, rows: int, queued: int) -> None:
    store.create_owner("bench")
    store.create_endpoint("bench", owner="bench", open_intake=False)
    endpoint_id = endpoint_id_of(store.engine, "bench")
    started = time.perf_counter()
    seed_scans(
        store.engine,
        endpoint_id=endpoint_id,
        queued=queued,
        finished=rows - queued,
        now_us=store.now(),
    )
    worker = store.authenticate(store.create_token(endpoint="bench", role="worker", principal="w"))
    assert worker is not None
    for _ in range(IN_FLIGHT // 100):
        store.lease(worker, 100)
    analyze(store.engine)
    print(f"  wrote {rows:,} synthetic scans in {time.perf_counter() - started:.1f} s")


def _plans(store: Store) -> None:
    postgres = store.engine.dialect.name == "postgresql"
    prefix = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
    queries = {
        "queued count": "SELECT count(*) FROM scans WHERE status = 'QUEUED'",
        "pending states": "SELECT count(*) FROM scans WHERE status = 'PENDING'",
        "outcome totals": "SELECT outcome, sum(count) FROM scan_totals GROUP BY outcome",
    }
    with store.engine.connect() as conn:
        for label, sql in queries.items():
            rows = conn.execute(text(prefix + sql)).all()
            plan = " | ".join(str(row[-1]) for row in rows)
            print(f"  plan {label}: {plan}")


def measure(kind: str, *, rows: int, queued: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url, pg_name = _database(kind, Path(tmp))
        engine = create_store_engine(url)
        try:
            upgrade(engine)
            store = Store(engine, Budget.of(job_timeout=600, max_attempts=3), clock=SystemClock())
            _seed(store, rows, queued)
            _plans(store)
            store.snapshot()  # warm the cache, as the loop's steady state is
            took = []
            for _ in range(runs):
                started = time.perf_counter()
                snapshot = store.snapshot()
                took.append((time.perf_counter() - started) * 1000)
            print(f"  snapshot: {snapshot.queue}")
        finally:
            engine.dispose()
            if pg_name is not None:
                drop_database(PG_ADMIN_URL, pg_name)
    took.sort()
    return {
        "median_ms": statistics.median(took),
        "p95_ms": took[int(len(took) * 0.95) - 1],
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
        print(f"{kind}: {args.rows:,} scans, {args.queued:,} queued, {IN_FLIGHT:,} in flight")
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
