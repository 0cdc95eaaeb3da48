"""The longest steps of the event loop while bulk submissions of 1,000 scans go through the
whole application in process, one after another: a task that only yields to the loop counts
each step's length, and each request's longest is what any other request of the process
would have waited for meanwhile. The bodies are made before and the steps read after, so
only the server's work is in them; it measures the tree it imports:

    PYTHONPATH=src .venv/bin/python bench/bulk_steps.py --db postgresql sqlite --runs 3

On PostgreSQL it makes and drops the database `bulk_steps` on the local cluster; on SQLite a
file in a temporary directory (docs/performance.md, "Bulk requests in slices")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
from fastapi import FastAPI

from mainframe.api.app import create_app
from mainframe.settings import Settings
from mainframe.store import create_store_engine, upgrade
from mainframe.store.accounts.owners import OPERATOR
from walprobe import scratch_database

SCANS = 1000
WARM_REQUESTS = 2  # the first requests prepare statements and fill caches


async def _source_token(app: FastAPI) -> str:
    store = app.state.runtime.store
    await store.owners.create_owner("ops")
    owner = await store.owners.owner_id("ops")
    await store.owners.create_endpoint(owner, "pypi", open_intake=False, origin="cli")
    made = await store.owners.create_token(
        OPERATOR, "pypi", role="source", principal="feed", origin="cli"
    )
    return str(made[1])


async def _longest_steps(url: str, requests: int) -> list[float]:
    """Each measured request's longest step of the loop, in milliseconds."""
    app = create_app(Settings(database_url=url), sweeper=False)
    steps: list[tuple[float, float]] = []
    spans: list[tuple[float, float]] = []
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {await _source_token(app)}"}
        bodies = [
            orjson.dumps({"scans": [{"name": f"p{r}-{i}", "version": "1"} for i in range(SCANS)]})
            for r in range(requests)
        ]
        gc.collect()
        gc.freeze()  # as a server process does once it has started (wiring.py::settle_heap)

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0)
                now = time.perf_counter()
                steps.append((last, now))
                last = now

        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            ticking = asyncio.create_task(ticker())
            for body in bodies:
                began = time.perf_counter()
                reply = await http.post("/api/v1/scans/batch", content=body, headers=headers)
                spans.append((began, time.perf_counter()))
                if reply.status_code != 200:
                    raise SystemExit(f"the bulk submission failed: {reply.text}")
            ticking.cancel()
    longest = []
    for began, ended in spans[WARM_REQUESTS:]:
        # No step inside a request: the whole request was one step.
        inside = [b - a for a, b in steps if a <= ended and b >= began] or [ended - began]
        longest.append(1e3 * max(inside))
    return longest


@contextlib.contextmanager
def _database(db: str, admin: str) -> Iterator[str]:
    if db == "postgresql":
        with scratch_database(admin, "bulk_steps") as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bulk_steps.db'}"
        engine = create_store_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite"])
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--requests", type=int, default=12, help="bulk submissions a run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for db in args.db:
        medians = []
        for run in range(1, args.runs + 1):
            with _database(db, args.admin) as url:
                longest = asyncio.run(_longest_steps(url, args.requests + WARM_REQUESTS))
            medians.append(statistics.median(longest))
            shown = ", ".join(f"{ms:.1f}" for ms in longest)
            print(f"{db} run {run}: longest step of each request (ms): {shown}", flush=True)
        print(f"{db}: median of the runs' medians {statistics.median(medians):.1f} ms", flush=True)


if __name__ == "__main__":
    main()
