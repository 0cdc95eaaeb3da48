"""What pruning costs the worker loop, in process: the store's complete-and-fetch at batch 1
(one `results.complete(..., fetch=1)` per scan, as `loop b1` makes over HTTP) for a window,
with the server's own pruner (`sweeper.prune_forever`) running beside it at a retention of 0,
against the same loop with nothing to prune. The arms alternate in one process on one SQLite
file, each window starting from an empty history (pruned, untimed, before it), so the
machine's drift falls on both.

Without HTTP a scan costs the server a fraction of what it costs over it, so pruning's share
here is an upper bound of its share of `bench.py`'s `loop b1` (docs/performance.md). Usage:

    .venv/bin/python bench/pruning.py --windows 10 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mainframe.lifecycle.retention import RetentionPolicy
from mainframe.store import Budget, Principal, Report, ScanSpec, Store, open_database
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.retention import Retention
from mainframe.sweeper import prune_forever, prune_once

PAYLOAD = '{"distributions": ["https://files.example/pkg-1.0.tar.gz"]}'
AT_ONCE = RetentionPolicy.uniform(0)
FOREVER = RetentionPolicy.uniform(None)


async def _no_pause(_seconds: float) -> None:
    return None


async def _fill(store: Store, source: Principal, count: int, tag: str) -> None:
    for start in range(0, count, 1_000):
        specs = [
            ScanSpec(f"{tag}-{n}", "1.0", payload=PAYLOAD) for n in range(start, start + 1_000)
        ]
        await store.intake.submit_many(source, endpoint=None, specs=specs)


async def _loop(store: Store, worker: Principal, seconds: float) -> int:
    """Complete-and-fetch at batch 1 for `seconds`; how many scans finished."""
    [job] = await store.leasing.lease(worker, 1)
    done, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        report = Report("finished", True, job.attempt, job.assignment_id, "clean", None, "{}")
        completion = await store.results.complete(worker, [(job.scan_id, report)], fetch=1)
        done += 1
        [job] = completion.jobs
    return done


async def _window(store: Store, worker: Principal, seconds: float, *, pruned: bool) -> float:
    """Scans a second over one window, the pruner running beside it when `pruned`."""
    at_once = dataclasses.replace(store, retention=Retention(store.db, AT_ONCE))
    await prune_once(at_once, sleep=_no_pause)  # every window starts from an empty history
    chosen = (
        at_once if pruned else dataclasses.replace(store, retention=Retention(store.db, FOREVER))
    )
    pruner = asyncio.create_task(prune_forever(chosen, every=1.0))
    try:
        started = time.monotonic()
        done = await _loop(store, worker, seconds)
        return done / (time.monotonic() - started)
    finally:
        pruner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pruner


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mainframe-pruning-"))
    try:
        await measure(args, f"sqlite:///{workdir / 'bench.db'}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def measure(args: argparse.Namespace, url: str) -> None:
    """Both arms, alternating, on a fresh database at `url`; prints every window and the
    ratios."""
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    store = Store.build(open_database(url), Budget.of(job_timeout=300, max_attempts=3))
    await store.owners.create_owner("bench")
    await store.owners.create_endpoint(
        await store.owners.owner_id("bench"), "bench", open_intake=False, origin="cli"
    )
    principals = []
    for role in ("source", "worker"):
        secret = (
            await store.owners.create_token(
                OPERATOR, "bench", role=role, principal=role, origin="cli"
            )
        )[1]
        found = await store.authentication.authenticate(secret)
        assert found is not None
        principals.append(found)
    source, worker = principals
    rates: dict[bool, list[float]] = {False: [], True: []}
    for window in range(args.windows):
        for pruned in (False, True) if window % 2 == 0 else (True, False):
            await _fill(store, source, args.per_window, f"w{window}{pruned:d}")
            rates[pruned].append(await _window(store, worker, args.seconds, pruned=pruned))
            arm = "pruned" if pruned else "kept"
            print(f"window {window} {arm:<6} {rates[pruned][-1]:8.0f} scans/s", flush=True)
    await store.close()
    kept, pruned_ = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median kept forever {kept:.0f} scans/s, pruned at 0 {pruned_:.0f} scans/s")
    print(
        f"ratio pruned / kept: {pruned_ / kept:.3f} (per-window ratios, median: "
        f"{statistics.median(p / k for k, p in zip(rates[False], rates[True], strict=True)):.3f})"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=10, help="windows per arm")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of a window")
    parser.add_argument(
        "--per-window", type=int, default=30_000, help="scans queued before each window"
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
