"""The dead-letter listing at scale: p50/p99 of the first page, of a search by package name,
of the unfiltered count and of the counts narrowed by a reason or a queue, and of the owner's
overview (the board's pills and cards), with N dead letters in the database (the aim: each
under 20 ms at 1,000,000; docs/board.md has the figures); and the causes view with CAUSES
causes among them (the aim: under 50 ms; docs/performance.md).

Filling a million rows through the API takes hours on a small machine, so this benchmark
writes them directly with SQL (one INSERT ... SELECT per table) and says so in its output;
the timings are of the store calls the routes make (`store.dead_letters.page`), on
PostgreSQL by default. Usage:

    .venv/bin/python bench/dead_letters.py --size 1000000
    .venv/bin/python bench/dead_letters.py --size 50000 --database-url sqlite:////tmp/dl.db
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

from mainframe.lifecycle.scans import SHARDS
from mainframe.store import Budget, Store, open_database
from mainframe.store.engine.database import first
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.dead_letters import (
    COUNT_DEAD_LETTERS,
    PLAN_WITH_VALUES,
    DeadLetterFilter,
)

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
NOW = 1_790_000_000_000_000
ENDPOINTS = 4  # the owner's endpoints; dead letters alternate over them
RUNS = 200
TARGET_MS = 20.0
CAUSES = 1_000  # dead letters spread over this many causes
CAUSES_TARGET_MS = 50.0


def _series(engine: Engine, size: int) -> str:
    """A row source of i = 1..size on either database."""
    if engine.dialect.name == "postgresql":
        return f"generate_series(1, {size}) AS g(i)"
    return (
        f"(WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {size}) "
        "SELECT i FROM g)"
    )


def _word(number: str) -> str:
    """SQL turning a number's digits into letters (a-j), in both dialects: package names
    with letters spread over trigrams as real names are, not one shared prefix."""
    expr = number
    for digit, letter in zip("0123456789", "abcdefghij", strict=True):
        expr = f"replace({expr}, '{digit}', '{letter}')"
    return expr


# A scrambled, unique name per row: the digits of a multiplicative hash of i, as letters.
NAME = _word("CAST(i * 2654435761 % 4294967296 AS TEXT)") + " || '-' || " + _word("CAST(i AS TEXT)")


# One dead letter in seven was in the `priority` queue, the rest in `default`.
QUEUE = "CASE WHEN i % 7 = 0 THEN 'priority' ELSE 'default' END"


def _cause_key(engine: Engine) -> str:
    """SQL for row i's cause: one of CAUSES keys of 16 hex digits, as the rule makes them."""
    if engine.dialect.name == "postgresql":
        return f"lpad(to_hex(i % {CAUSES}), 16, '0')"
    return f"printf('%016x', i % {CAUSES})"


def _causes(conn: Connection) -> None:
    """The causes' names and the counts the triggers keep, as they would stand after the
    dead letters were made one by one (the fill inserts them; the triggers count changes)."""
    conn.execute(
        text(
            "INSERT INTO causes (cause, pattern, first_seen_at, grouping_version) SELECT "
            f"DISTINCT cause, 'timed out after <duration> on <path> ' || cause, {NOW}, 2 "
            "FROM scans"
        )
    )
    conn.execute(
        text(
            "INSERT INTO dead_letter_causes (endpoint_id, cause, dead_letters, first_seen_at, "
            "last_seen_at, example_scan_id) SELECT endpoint_id, cause, count(*), "
            "min(dead_lettered_at), max(dead_lettered_at), max(id) FROM scans "
            "GROUP BY endpoint_id, cause"
        )
    )
    for facet, column in (("queue", "queue"), ("kind", "kind"), ("worker", "worker")):
        conn.execute(
            text(
                "INSERT INTO cause_facets (endpoint_id, cause, facet, value, hits) "
                f"SELECT endpoint_id, cause, '{facet}', {column}, count(*) "
                f"FROM scans GROUP BY endpoint_id, cause, {column}"
            )
        )
    conn.execute(
        text(
            "INSERT INTO dead_letter_counts (endpoint_id, cause, queue, fail_reason, "
            "dead_letters) SELECT endpoint_id, cause, queue, fail_reason, count(*) FROM scans "
            "GROUP BY endpoint_id, cause, queue, fail_reason"
        )
    )
    hour = "dead_lettered_at - dead_lettered_at % 3600000000"
    conn.execute(
        text(
            "INSERT INTO cause_hours (endpoint_id, cause, hour_us, dead_letters) "
            f"SELECT endpoint_id, cause, {hour}, count(*) FROM scans "
            f"GROUP BY endpoint_id, cause, {hour}"
        )
    )


def name_of(i: int) -> str:
    """The name `fill` gives row i (to search for one that exists)."""
    table = str.maketrans("0123456789", "abcdefghij")
    return f"{str(i * 2654435761 % 4294967296).translate(table)}-{str(i).translate(table)}"


def fill(engine: Engine, size: int) -> None:
    """One owner, ENDPOINTS endpoints, `size` dead letters each with its final attempt."""
    rows = _series(engine, size)
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO owners (id, name, created_at) VALUES (1, 'ops', {NOW})"))
        for e in range(1, ENDPOINTS + 1):
            conn.execute(
                text(
                    "INSERT INTO endpoints (id, name, owner_id, open_intake, created_at) "
                    f"VALUES ({e}, 'endpoint-{e}', 1, FALSE, {NOW})"
                )
            )
        conn.execute(
            text(
                "INSERT INTO scans (id, endpoint_id, queue, name, version, kind, status, verified, "
                "source, worker, leased_at, created_at, updated_at, finished_at, fail_reason, "
                "attempt_count, assignment_id, dead_lettered_at, attempt_base, redrive_count, "
                "cause) "
                f"SELECT i, 1 + i % {ENDPOINTS}, {QUEUE}, {NAME}, '1.0', "
                "'scan', 'FAILED', TRUE, 'feed', 'w1', "
                f"{NOW} + i * 1000, {NOW} + i * 1000, {NOW} + i * 1000 + 5, "
                f"{NOW} + i * 1000 + 5, 'attempts_exhausted', 3, 'a-' || CAST(i AS TEXT), "
                f"{NOW} + i * 1000 + 5, 0, 0, {_cause_key(engine)} FROM {rows}"
            )
        )
        conn.execute(
            text(
                "INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, "
                "closed_at, outcome, summary, artifact) SELECT id, 3, 3, assignment_id, worker, "
                "leased_at, dead_lettered_at, 'failed', 'exit 1', NULL FROM scans"
            )
        )
        _causes(conn)
        # The outcome totals as the transitions would have kept them (every shard of every
        # outcome, as an endpoint's creation makes them; the finished and failed scans as if
        # retention had pruned them all), and what retention pruned.
        conn.execute(
            text(
                "INSERT INTO scan_totals (endpoint_id, outcome, shard, count) "
                "SELECT endpoints.id, outcomes.outcome, shards.shard, 0 FROM endpoints, "
                "(SELECT 'finished' AS outcome UNION ALL SELECT 'failed' "
                "UNION ALL SELECT 'dead_lettered') AS outcomes, "
                f"(SELECT i - 1 AS shard FROM {_series(engine, SHARDS)}) AS shards"
            )
        )
        conn.execute(
            text(
                "UPDATE scan_totals SET count = CASE WHEN outcome = 'dead_lettered' THEN "
                "(SELECT COUNT(*) FROM scans WHERE scans.endpoint_id = scan_totals.endpoint_id) "
                f"ELSE {size} END WHERE shard = 1"
            )
        )
        conn.execute(
            text(
                "INSERT INTO pruned_scans (endpoint_id, outcome, count) SELECT id, outcome, "
                f"{size} FROM endpoints, (SELECT 'finished' AS outcome UNION ALL "
                "SELECT 'failed') AS outcomes"
            )
        )
    # As autovacuum would leave it: statistics, and the trigram index's pending list merged.
    vacuum = "ANALYZE" if engine.dialect.name == "sqlite" else "VACUUM ANALYZE"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(vacuum))


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> tuple[float, float]:
    samples = []
    await call()  # warm the statement caches
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def _admin(statement: str) -> None:
    # A fresh connection each time: a long-idle one may have been ended by the server.
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(statement))
    admin.dispose()


def _database(url: str | None) -> tuple[str, Callable[[], None]]:
    if url is not None:
        return url, lambda: None
    name = "mf_bench_" + uuid.uuid4().hex[:8]
    _admin(f"CREATE DATABASE {name}")

    def drop() -> None:
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return f"postgresql://postgres@127.0.0.1:5432/{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--database-url", help="default: a fresh PostgreSQL database, dropped")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    url, drop = _database(args.database_url)
    try:
        engine = create_store_engine(url)
        upgrade(engine)
        started = time.perf_counter()
        fill(engine, args.size)
        print(
            f"filled {args.size:,} dead letters DIRECTLY WITH SQL (not through the API) "
            f"in {time.perf_counter() - started:.1f} s on {engine.dialect.name}"
        )
        engine.dispose()
        asyncio.run(measure(url, name_of(args.size // 3).split("-")[0], args.runs, args.size))
    finally:
        drop()


async def scanned(store: Store, owner_id: int, reason: str) -> int:
    """A reason's count as the store took it before the kept counts by queue and reason
    (the `counts_now` migration): every matching dead letter read, planned with its values."""
    async with store.db.read() as tx:
        await tx.run(PLAN_WITH_VALUES)
        params = DeadLetterFilter(reason=reason).params(owner_id)
        return int((await first(tx, COUNT_DEAD_LETTERS, params) or (0,))[0])


async def measure(url: str, term: str, runs: int, size: int) -> None:
    """Time the store calls the routes make; `term` is one package's name, as typed."""
    store = Store.build(open_database(url), Budget.of(job_timeout=60, max_attempts=3))
    role = store.dead_letters
    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "first page (50)": lambda: role.page(1, DeadLetterFilter(), after=None, limit=50),
        f"search q={term} (page + its count)": lambda: role.page(
            1, DeadLetterFilter(q=term), after=None, limit=50
        ),
        "count (unfiltered, the Dead pill)": lambda: role.count(1, DeadLetterFilter()),
        "count (one endpoint)": lambda: role.count(1, DeadLetterFilter(endpoint="endpoint-2")),
        "count (a reason: every dead letter)": lambda: role.count(
            1, DeadLetterFilter(reason="attempts_exhausted")
        ),
        "count (a reason none has)": lambda: role.count(
            1, DeadLetterFilter(reason="lease_expired")
        ),
        "count (a queue)": lambda: role.count(1, DeadLetterFilter(queue="default")),
        "count (a reason and a queue)": lambda: role.count(
            1, DeadLetterFilter(reason="attempts_exhausted", queue="priority")
        ),
        "count (a reason, read as before)": lambda: scanned(store, 1, "attempts_exhausted"),
        "count (the newest 1%, since)": lambda: role.count(
            1, DeadLetterFilter(since=NOW + size * 990)
        ),
        "overview (the pills and cards)": lambda: store.listings.overview(1),
    }
    print(f"{'case':<44} {'p50 ms':>8} {'p99 ms':>8}  under {TARGET_MS:.0f} ms")
    for label, call in cases.items():
        p50, p99 = await timed(call, runs)
        verdict = "yes" if p99 < TARGET_MS else "NO"
        print(f"{label:<44} {p50:>8.2f} {p99:>8.2f}  {verdict}")
    one = f"{CAUSES // 3:016x}"  # a cause that exists
    by_cause: dict[str, Callable[[], Awaitable[object]]] = {
        f"causes view (first 50 of {CAUSES:,})": lambda: store.causes.page(
            1, endpoint=None, after=None, limit=50
        ),
        "one cause's dead letters (page + count)": lambda: role.page(
            1, DeadLetterFilter(cause=one), after=None, limit=50
        ),
        "one cause's count with a reason": lambda: role.count(
            1, DeadLetterFilter(cause=one, reason="attempts_exhausted")
        ),
    }
    print(f"{'case':<44} {'p50 ms':>8} {'p99 ms':>8}  under {CAUSES_TARGET_MS:.0f} ms")
    for label, call in by_cause.items():
        p50, p99 = await timed(call, runs)
        verdict = "yes" if p99 < CAUSES_TARGET_MS else "NO"
        print(f"{label:<44} {p50:>8.2f} {p99:>8.2f}  {verdict}")
    await store.close()


if __name__ == "__main__":
    main()
