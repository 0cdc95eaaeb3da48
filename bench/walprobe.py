"""One scan's life on PostgreSQL, WAL record by WAL record: a source's submission, a worker's
lease and its finished result, each between two WAL positions, listed by pg_waldump with the
relation each record touches and its length. A warm-up (800 scans leased and closed, then a
checkpoint and 300 more) comes first, so no record carries a page's first image since the
checkpoint. Run as a user who can read the cluster's pg_wal (root here):

    PYTHONPATH=src .venv/bin/python bench/walprobe.py

It makes and drops the database `walprobe` on the local cluster (docs/performance.md, "One
scan, record by record")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import psycopg

from mainframe.lifecycle.rules import Report
from mainframe.settings import Settings
from mainframe.store import Presented, ScanSpec, Store, create_store_engine, digest, upgrade
from mainframe.store import open_store as open_mainframe
from mainframe.store.accounts.owners import OPERATOR

PAYLOAD = '{"distributions": ["https://files.example/p.tar.gz"]}'
RESULT = '{"score": 3, "inspector_url": null, "rules_matched": [], "commit": "abc"}'
_RECORD = re.compile(r"rmgr: (\w+)\s+len \(rec/tot\):\s+\d+/\s*(\d+),.*desc: (\S+)")
_RELATION = re.compile(r"rel \d+/\d+/(\d+)")


def _lsn(conn: psycopg.Connection) -> str:
    row = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
    assert row is not None
    return str(row[0])


async def credentials(store: Store) -> tuple[Presented, Presented]:
    await store.owners.create_owner("ops")
    owner = await store.owners.owner_id("ops")
    await store.owners.create_endpoint(owner, "pypi", open_intake=False, origin="cli")
    made = [
        (await store.owners.create_token(OPERATOR, "pypi", role=r, principal=n, origin="cli"))[1]
        for r, n in (("source", "feed"), ("worker", "w1"))
    ]
    return Presented(digest(made[0])), Presented(digest(made[1]))


async def _probe(url: str, conn_url: str) -> dict[str, tuple[str, str]]:
    store = open_mainframe(Settings(database_url=url))
    source, worker = await credentials(store)

    async def submit(name: str) -> None:
        spec = ScanSpec(name=name, version="1.0", payload=PAYLOAD)
        await store.intake.submit(source, endpoint=None, spec=spec)

    async def lease() -> tuple[int, Report]:
        [job] = await store.leasing.lease(worker, 1)
        report = Report("finished", False, job.attempt, job.assignment_id, None, None, RESULT)
        return job.scan_id, report

    for i in range(3000):
        await submit(f"p{i}")
    for i in range(1100):
        if i == 800:
            with psycopg.connect(conn_url, autocommit=True) as conn:
                conn.execute("CHECKPOINT")
        await store.results.complete(worker, [await lease()])
    marks: dict[str, tuple[str, str]] = {}
    with psycopg.connect(conn_url, autocommit=True) as conn:

        async def step(name: str, work: Callable[[], Awaitable[object]]) -> object:
            start = _lsn(conn)
            done = await work()
            marks[name] = (start, _lsn(conn))
            return done

        await step("submit", lambda: submit("probe"))
        leased = await step("lease", lease)
        assert isinstance(leased, tuple)
        await step("close", lambda: store.results.complete(worker, [leased]))
    await store.close()
    return marks


def _names(conn_url: str) -> dict[str, str]:
    with psycopg.connect(conn_url) as conn:
        rows = conn.execute("SELECT relfilenode, relname FROM pg_class WHERE relfilenode <> 0")
        return {str(node): name for node, name in rows}


def _dump(wal: Path, start: str, end: str, names: dict[str, str]) -> list[str]:
    out = subprocess.run(
        ["pg_waldump", "-p", str(wal), "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    lines = []
    for line in out.splitlines():
        found = _RECORD.search(line)
        if found is None:
            continue
        rmgr, length, what = found.groups()
        relation = _RELATION.search(line.split("blkref")[-1])
        target = names.get(relation[1], relation[1]) if relation else ""
        lines.append(f"  {rmgr:<11} {what:<14} {length:>5} B  {target}")
    return lines


@contextlib.contextmanager
def scratch_database(admin: str, name: str, revision: str = "head") -> Iterator[str]:
    """A new database `name` beside the admin URL's, at the store's `revision` (its newest by
    default); dropped after (and first, should an earlier run have left it)."""
    url = f"{admin.rpartition('/')[0]}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        engine = create_store_engine(url)
        upgrade(engine, revision=revision)
        engine.dispose()
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--wal", type=Path, default=Path("/var/lib/postgresql/15/main/pg_wal"))
    args = parser.parse_args()
    with scratch_database(args.admin, "walprobe") as url:
        marks = asyncio.run(_probe(url, url))
        names = _names(url)
        for step, (start, end) in marks.items():
            lines = _dump(args.wal, start, end, names)
            print(f"{step}: {len(lines)} records")
            print("\n".join(lines))


if __name__ == "__main__":
    main()
