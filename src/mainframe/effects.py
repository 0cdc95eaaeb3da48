"""The one place where committed transitions become effects: counters, log lines, the
fleet's activity counts in memory (flushed by the store's `Activity`), and hook announcements
(handed to the dispatcher, which never blocks the caller)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from mainframe.clock import rfc3339
from mainframe.hooks import Dispatcher
from mainframe.hooks.policy import ANNOUNCED
from mainframe.lifecycle.rules import (
    AttemptOutcome,
    DeadLetterReason,
    PruneKind,
    StaleResultRejected,
)
from mainframe.lifecycle.scans import (
    AttemptFailed,
    EndpointRevoked,
    Event,
    LeasesGranted,
    QueuePaused,
    QueueResumed,
    RowsPruned,
    ScanDeadLettered,
    ScanFailed,
    ScanFinished,
    ScansRedriven,
)
from mainframe.logs import get_logger, neutralize
from mainframe.metrics import Metrics
from mainframe.store import Activity, Publish

NO_WORKER = ""  # what a revocation's dead letters count under in the activity: nobody held them
MAX_NOTED = 10_000  # (endpoint, worker) pairs noted between two flushes at most
_LAPSES = frozenset({AttemptOutcome.LEASE_EXPIRED.value, AttemptOutcome.INTERRUPT_EXPIRED.value})
_LAPSE_REASONS = frozenset({DeadLetterReason.LEASE_EXPIRED, DeadLetterReason.INTERRUPT_EXPIRED})


def wire(
    metrics: Metrics,
    log: Any | None = None,
    dispatcher: Dispatcher | None = None,
    activity: Activity | None = None,
) -> Publish:
    """Build the store's after-commit publisher."""
    logger = log or get_logger()

    def publish(events: Sequence[Event]) -> None:
        for event in events:
            _apply(event, metrics, logger)
        if activity is not None:
            note_activity(activity.noted, events)
        # A poll's or a finished result's events are none a hook hears of: the dispatcher is
        # not asked about them at all.
        if dispatcher is not None and any(isinstance(event, ANNOUNCED) for event in events):
            dispatcher.offer(events)

    return publish


def _apply(event: Event, metrics: Metrics, log: Any) -> None:
    match event:
        case ScanFinished():
            metrics.succeeded.inc()
        case ScanFailed():
            metrics.failed.inc()
        case ScanDeadLettered():
            metrics.dead_lettered.inc()
            metrics.failed.inc()
            metrics.reaps.labels(event.reason.value).inc()
            _log_dead_letter(event, log)
        case AttemptFailed():
            metrics.attempt_failures.labels(event.outcome).inc()
        case LeasesGranted():
            if event.reassigned:
                metrics.reassigned_leases.inc(event.reassigned)
            metrics.new_leases.inc(event.count - event.reassigned)
        case StaleResultRejected():
            metrics.stale_results.labels(event.code.value).inc()
            log.warning(
                "stale_result_rejected",
                scan_id=event.scan_id,
                endpoint=event.endpoint,
                worker=neutralize(event.worker),
                code=event.code.value,
                attempt=event.attempt,
            )
        case _:
            _apply_operator(event, metrics, log)


def _apply_operator(event: Event, metrics: Metrics, log: Any) -> None:
    """What an operator did (a revocation, a redrive, a pause) and the database's upkeep."""
    match event:
        case EndpointRevoked():
            metrics.revocations.inc()
            metrics.revoked_scans.inc(event.dead_lettered)
            metrics.reaps.labels("endpoint_revoked").inc(event.dead_lettered)
            log.warning(
                "endpoint_revoked", endpoint=event.endpoint, dead_lettered=event.dead_lettered
            )
        case QueuePaused() | QueueResumed():
            metrics.set_paused(event.endpoint, event.queue, paused=isinstance(event, QueuePaused))
            log.warning(
                "queue_paused" if isinstance(event, QueuePaused) else "queue_resumed",
                endpoint=event.endpoint,
                queue=neutralize(event.queue),
                by=neutralize(event.by),
            )
        case ScansRedriven():
            metrics.redriven.inc(event.redriven)
            log.info(
                "scans_redriven",
                owner_id=event.owner_id,
                audit_id=event.audit_id,
                by=event.by,
                redriven=event.redriven,
                skipped=event.skipped,
            )
        case _:
            _apply_upkeep(event, metrics, log)


def _apply_upkeep(event: Event, metrics: Metrics, log: Any) -> None:
    """The database's upkeep: a pruning batch is counted by kind and logged once."""
    if isinstance(event, RowsPruned):
        metrics.pruned.labels(event.kind.value).inc(event.count)
        metrics.pruned.labels(PruneKind.ATTEMPTS.value).inc(event.attempts)
        log.info("pruned", kind=event.kind.value, count=event.count, attempts=event.attempts)


def _log_dead_letter(event: ScanDeadLettered, log: Any) -> None:
    scan = event.scan
    log.error(
        "scan_dead_lettered",
        scan_id=scan.scan_id,
        endpoint=scan.endpoint,
        queue=neutralize(scan.queue),
        package_name=neutralize(scan.name),
        package_version=neutralize(scan.version),
        attempt_count=event.attempt_count,
        prior_worker=neutralize(event.prior_worker),
        leased_at=rfc3339(event.leased_at),
        reason=event.reason.value,
    )


def note_activity(noted: Counter[tuple[int, str, str]], events: Sequence[Event]) -> None:
    """Add committed events to this process's activity counts, by (endpoint id, worker,
    kind); at most MAX_NOTED pairs are kept between two flushes."""
    for event in events:
        if isinstance(event, EndpointRevoked):
            _add(noted, (event.endpoint_id, NO_WORKER, "dead_lettered"), event.dead_lettered)
            continue
        key = _counted(event)
        if key is None:
            continue
        _add(noted, key, 1)
        if isinstance(event, ScanDeadLettered):
            # The attempt that made a dead letter failed or lapsed like any other.
            kind = "lapsed" if event.reason in _LAPSE_REASONS else "attempt_failures"
            if event.reason is not DeadLetterReason.ENDPOINT_REVOKED:
                _add(noted, (key[0], key[1], kind), 1)
        elif isinstance(event, ScanFailed):  # its attempt failed like any other
            _add(noted, (key[0], key[1], "attempt_failures"), 1)


def _counted(event: Event) -> tuple[int, str, str] | None:
    """Which (endpoint, worker, kind) an event adds one to; None for one that counts
    nothing here (a revocation adds its count separately)."""
    match event:
        case ScanFinished():
            return event.scan.endpoint_id, event.worker or NO_WORKER, "finished"
        case ScanFailed():
            return event.scan.endpoint_id, event.worker or NO_WORKER, "failed"
        case AttemptFailed():
            kind = "lapsed" if event.outcome in _LAPSES else "attempt_failures"
            return event.scan.endpoint_id, event.worker or NO_WORKER, kind
        case ScanDeadLettered():
            return event.scan.endpoint_id, event.prior_worker or NO_WORKER, "dead_lettered"
    return None


def _add(noted: Counter[tuple[int, str, str]], key: tuple[int, str, str], n: int) -> None:
    if key in noted or len(noted) < MAX_NOTED:
        noted[key] += n
