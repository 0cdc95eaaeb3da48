"""The periodic sweeper: reaps lapsed, budget-spent scans so dead letters are announced even
when no worker polls, and prunes what is past its retention (store/operator/retention.py) so the
database stops growing in a steady state."""

from __future__ import annotations

import asyncio
from collections import Counter as Tally
from collections.abc import Awaitable, Callable

from prometheus_client import Counter

from mainframe.lifecycle.rules import PruneKind
from mainframe.lifecycle.scans import RowsPruned
from mainframe.logs import get_logger
from mainframe.store import Store

# Dead letters reaped per sweep transaction; the sweep repeats until fewer come back.
SWEEP_BATCH = 500
# Rows pruned per transaction: a few milliseconds of SQLite's write lock (docs/reliability.md
# has the measured figure), the same bound as a sweep's or a redrive's chunk.
PRUNE_BATCH = 500
# The pause after a full batch, so requests waiting for the write lock go first and pruning
# a large backlog takes a small share of the database (docs/performance.md: the loop's cost).
PRUNE_PAUSE_SECONDS = 0.05
# How often the planner's statistics are checked on PostgreSQL (store/engine/planner_statistics.py).
STATISTICS_SECONDS = 5.0
# How often the dead row versions of `scans` are checked on PostgreSQL: at thousands of scans
# a second the head of the queue fills with dead index entries within seconds
# (store/engine/queue_vacuum.py).
QUEUE_VACUUM_SECONDS = 1.0
# How often the credentials requests presented have their last use written
# (store/accounts/authentication.py), and the sources whose submissions were accepted their
# last submission (store/accounts/submissions.py).
TOKEN_USE_SECONDS = 5.0
# How often this process's activity counts are added to the database (store/operator/activity.py).
ACTIVITY_SECONDS = 5.0


async def sweep_once(store: Store) -> int:
    """Reap until nothing is left; return how many lapsed leases were reaped (dead-lettered
    at the cap, sent round again below it)."""
    total = 0
    while True:
        reaped = await store.leasing.sweep(limit=SWEEP_BATCH)
        total += reaped
        if reaped < SWEEP_BATCH:
            return total


async def sweep_forever(store: Store, *, every: float, failures: Counter | None = None) -> None:
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            reaped = await sweep_once(store)
        except Exception as exc:  # keep sweeping: the next round may succeed
            log.error("sweep_failed", error=f"{type(exc).__name__}: {exc}")
            if failures is not None:
                failures.inc()
            continue
        if reaped:
            log.info("sweep_reaped", reaped=reaped)


async def prune_once(
    store: Store,
    *,
    batch: int = PRUNE_BATCH,
    pause: float = PRUNE_PAUSE_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    progress: Callable[[RowsPruned], None] | None = None,
) -> Tally[PruneKind]:
    """Prune every kind past its retention, a batch per transaction with a pause after each
    full one, until a batch comes back short; return the rows pruned per kind (attempts too).
    `progress` hears of every batch; the counter and the log line come from the event the
    store published after commit (effects.py)."""
    pruned: Tally[PruneKind] = Tally()
    for kind in store.retention.policy.pruned():
        while True:
            done = await store.retention.prune(kind, limit=batch)
            pruned[kind] += done.count
            pruned[PruneKind.ATTEMPTS] += done.attempts
            if progress is not None:
                progress(done)
            if done.count < batch:
                break
            await sleep(pause)
    return pruned


async def prune_forever(store: Store, *, every: float, failures: Counter | None = None) -> None:
    """Prune every `every` seconds (the sweep's period), beside the reaping, never in its way."""
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            await prune_once(store)
        except Exception as exc:  # keep pruning: the next round may succeed
            log.error("prune_failed", error=f"{type(exc).__name__}: {exc}")
            if failures is not None:
                failures.inc()


async def _each(every: float, step: Callable[[], Awaitable[object]], failed: str) -> None:
    """Run `step` every `every` seconds for ever; a failure is logged as `failed` and the next
    round tries again."""
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            await step()
        except Exception as exc:  # the next round may succeed
            log.warning(failed, error=f"{type(exc).__name__}: {exc}")


async def keep_statistics(store: Store, *, every: float) -> None:
    """Keep the planner's statistics of the growing tables current (PostgreSQL only)."""

    async def refresh() -> None:
        analysed = await store.planner_statistics.refresh()
        if analysed:
            get_logger().info("statistics_refreshed", tables=analysed)

    await _each(every, refresh, "statistics_refresh_failed")


async def keep_queue_clean(store: Store, *, every: float) -> None:
    """Vacuum `scans` whenever enough of it is dead (PostgreSQL only)."""
    await _each(every, store.queue_vacuum.refresh, "queue_vacuum_failed")


async def keep_token_use(store: Store, *, every: float) -> None:
    """Write the last use of the credentials this process's requests presented, and the last
    submission of the sources whose submissions it accepted."""
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        for flush in (store.authentication.flush, store.last_submissions.flush):
            try:
                await flush()
            except Exception as exc:  # the next round writes them (a submission keeps its note)
                log.warning("token_use_flush_failed", error=f"{type(exc).__name__}: {exc}")


async def keep_activity(store: Store, *, every: float) -> None:
    """Add this process's activity counts to the current minute and hour; a chart may lag
    while a flush fails, and the next round adds them."""
    await _each(every, store.activity.flush, "activity_flush_failed")
