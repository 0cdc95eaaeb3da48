"""The reconciliation loop: gauges are set from a database snapshot every refresh period.
A scrape only reads what the last successful reconciliation left behind."""

from __future__ import annotations

import asyncio
import time

from mainframe.clock import MICROS
from mainframe.lifecycle.rules import QueueState
from mainframe.logs import get_logger
from mainframe.metrics import Metrics
from mainframe.store import LastSubmission, Snapshot, Store


def apply(metrics: Metrics, snapshot: Snapshot, *, took: float) -> None:
    """Publish a snapshot; every outcome and queue state gets a value, zero included."""
    for outcome, count in snapshot.outcomes.items():
        metrics.outcomes.labels(outcome).set(count)
    for state in QueueState:
        metrics.queue.labels(state.value).set(snapshot.queue.get(state, 0))
    oldest = snapshot.oldest_due_at
    age = 0.0 if oldest is None else max(0.0, (snapshot.taken_at - oldest) / MICROS)
    metrics.oldest_queued_age.set(age)
    metrics.reconcile_duration.set(took)
    apply_submissions(metrics, snapshot.sources)
    metrics.snapshot_timestamp.set(snapshot.taken_at / MICROS)


def apply_submissions(metrics: Metrics, sources: tuple[LastSubmission, ...]) -> None:
    """Each source's last accepted submission in Unix seconds. A source that never submitted
    has no series, so the quiet-source alert cannot fire for it; one whose credential was
    deleted, or whose endpoint was revoked, loses its series, and the alert ends with it."""
    current = {(s.endpoint, s.source): s.at for s in sources if s.at is not None}
    for gone in metrics.submission_series - current.keys():
        metrics.last_submission.remove(*gone)
    for (endpoint, source), at in current.items():
        metrics.last_submission.labels(endpoint, source).set(at / MICROS)
    metrics.submission_series = set(current)


def apply_paused(metrics: Metrics, paused: set[tuple[str, str]], *, read_after: int) -> None:
    """1 for every paused queue, 0 for one that was and is no longer (bounded: queues an
    operator named). A queue this process paused or resumed after the `read_after`th set, that
    is while the database was being read, keeps what that set said: it is newer."""
    metrics.paused_seen |= paused
    for endpoint, queue in metrics.paused_seen:
        if metrics.paused_set_at.get((endpoint, queue), 0) > read_after:
            continue
        metrics.queue_paused.labels(endpoint, queue).set(1 if (endpoint, queue) in paused else 0)


async def reconcile_once(store: Store, metrics: Metrics) -> bool:
    """One reconciliation; a failure is counted and logged, and leaves the gauges alone."""
    started = time.perf_counter()
    read_after = metrics.paused_sets
    try:
        snapshot = await store.listings.snapshot()
        paused = await store.queues.all_paused()
    except Exception as exc:  # the database may be down; the staleness alert will say so
        metrics.reconcile_failures.inc()
        get_logger().error("reconciliation_failed", error=f"{type(exc).__name__}: {exc}")
        return False
    apply(metrics, snapshot, took=time.perf_counter() - started)
    apply_paused(metrics, paused, read_after=read_after)
    return True


async def reconcile_forever(store: Store, metrics: Metrics, *, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        await reconcile_once(store, metrics)
