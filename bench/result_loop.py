"""PostgreSQL's CPU for one result at batch 1, with nothing else running: one connection of
the store closes a result and leases the next (complete-and-fetch, one statement) in a loop,
and the CPU every `postgres` process used meanwhile (from /proc) is divided by the results.
A first filter for a change to the result statement or the schema under it, steadier than
`bench.py`'s sixteen workers; it measures the tree it imports:

    PYTHONPATH=src .venv/bin/python bench/result_loop.py --runs 3
    PYTHONPATH=src .venv/bin/python bench/result_loop.py --runs 3 --pooler transaction

With `--pooler transaction` the store reaches the database through a PgBouncer of its own in
transaction pooling, after the role's defaults are written as `mainframe db upgrade` does;
`--pooler prepared` through PgBouncer 1.24 with max_prepared_statements (its statements kept).
Each run makes and drops the database `result_loop` on the local cluster: a queue filled, a
warm-up (so the history has rows), a vacuum and an analyse with autovacuum then off for the
scratch tables (so no run's figure holds a vacuum another's does not), then the loop
(docs/performance.md, "One trigger for a dead letter's update")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from mainframe.lifecycle.rules import Report
from mainframe.settings import Settings
from mainframe.store import Job, Presented, ScanSpec, Store, create_store_engine
from mainframe.store import open_store as open_mainframe
from mainframe.store.engine.migrate import set_role_defaults
from mainframe.store.engine.pg_settings import SessionPolicy
from servers import KEEPING, PgBouncer, pool_mode
from walprobe import PAYLOAD, RESULT, credentials, scratch_database

TICK = os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float:
    """Seconds of CPU every process named `postgres` has used, as /proc counts it."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we read
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


async def _results(store: Store, worker: Presented, job: Job, n: int) -> Job:
    for _ in range(n):
        report = Report("finished", False, job.attempt, job.assignment_id, None, None, RESULT)
        [job] = (await store.results.complete(worker, [(job.scan_id, report)], fetch=1)).jobs
    return job


@contextlib.contextmanager
def _reached(url: str, pooler: str) -> Iterator[str]:
    """The URL the store uses: the database's own, or a PgBouncer's in front of it."""
    if pooler == "none":
        yield url
        return
    engine = create_store_engine(url)
    set_role_defaults(engine, SessionPolicy(pool_mode(pooler)))
    engine.dispose()
    with PgBouncer(pool_mode(pooler), pool_size=2, keeps_prepared=pooler == KEEPING) as bouncer:
        yield bouncer.url(url.rpartition("/")[2])


def _steady(conn: psycopg.Connection) -> None:
    """Every run starts the loop from the same state: vacuumed and analysed, with autovacuum
    off for the run's tables, whose CPU would otherwise land in one run and not the next."""
    tables = conn.execute(
        "SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables"
    ).fetchall()
    for (table,) in tables:
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    conn.execute("VACUUM ANALYZE")


async def _run(
    direct: str, url: str, pooler: str, queued: int, warm: int, n: int
) -> tuple[float, float]:
    keeps = pooler == KEEPING
    mode = pool_mode(pooler)
    settings = Settings(database_url=url, database_pooler=mode, database_pooler_prepares=keeps)
    store = open_mainframe(settings)
    source, worker = await credentials(store)
    for start in range(0, queued, 500):
        names = [f"p{i}" for i in range(start, start + 500)]
        specs = [ScanSpec(name=name, version="1.0", payload=PAYLOAD) for name in names]
        await store.intake.submit_many(source, endpoint=None, specs=specs)
    [job] = await store.leasing.lease(worker, 1)
    job = await _results(store, worker, job, warm)
    with psycopg.connect(direct, autocommit=True) as conn:
        _steady(conn)
    began, cpu = time.perf_counter(), postgres_cpu()
    await _results(store, worker, job, n)
    wall, used = time.perf_counter() - began, postgres_cpu() - cpu
    await store.close()
    return used / n * 1e6, wall / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--queued", type=int, default=40_000)
    parser.add_argument("--warmup", type=int, default=3_000, help="results before the loop")
    parser.add_argument("--results", type=int, default=4_000, help="results measured")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pooler", choices=("none", "transaction", KEEPING), default="none")
    args = parser.parse_args()
    if args.queued <= args.warmup + args.results:
        parser.error("--queued must exceed --warmup plus --results: every result leases the next")
    figures = []
    for run in range(1, args.runs + 1):
        with (
            scratch_database(args.admin, "result_loop") as direct,
            _reached(direct, args.pooler) as url,
        ):
            cpu, wall = asyncio.run(
                _run(direct, url, args.pooler, args.queued, args.warmup, args.results)
            )
        figures.append(cpu)
        print(f"run {run}: PostgreSQL {cpu:.0f} µs CPU per result, {wall:.0f} µs wall", flush=True)
    print(f"median of {args.runs}: PostgreSQL {statistics.median(figures):.0f} µs CPU per result")


if __name__ == "__main__":
    main()
