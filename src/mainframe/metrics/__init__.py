"""Prometheus metrics of one server process. Labels stay bounded: no ids, names or messages."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from mainframe.lifecycle.rules import AttemptOutcome, DeadLetterReason, PruneKind, StaleCode
from mainframe.metrics.hooks import HookMetrics

# The *_created series double every counter and no rule of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# How an attempt can close and still send its scan back to the queue.
REQUEUEING_OUTCOMES = (
    AttemptOutcome.FAILED,
    AttemptOutcome.LEASE_EXPIRED,
    AttemptOutcome.INTERRUPT_EXPIRED,
)


# The states of `mainframe_db_connections`, in the order the pool counts them.
POOL_STATES = ("in_use", "idle", "waiting")


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # Every (endpoint, queue) ever reported paused, so a resumed one reads 0, not absent.
    paused_seen: set[tuple[str, str]] = field(default_factory=set)
    # Pauses and resumes this process committed, numbered: each queue's latest, and the count.
    # A reconciliation leaves alone a queue set after it began reading (metrics/reconcile.py).
    paused_set_at: dict[tuple[str, str], int] = field(default_factory=dict)
    paused_sets: int = 0
    # The (endpoint, source) series of the last reconciliation, so a deleted one is removed.
    submission_series: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        r = self.registry
        self.dead_lettered = Counter(
            "packages_dead_lettered",
            "Scans dead-lettered by this process (revocation cascades excluded).",
            registry=r,
        )
        self.failed = Counter(
            "packages_fail",
            "Scans that reached FAILED in this process, "
            "dead letters included (revocation cascades excluded).",
            registry=r,
        )
        self.succeeded = Counter(
            "packages_success", "Scans that reached FINISHED in this process.", registry=r
        )
        self.attempt_failures = Counter(
            "packages_attempt_failures",
            "Closed attempts that sent the scan back to QUEUED.",
            ["outcome"],
            registry=r,
        )
        self.stale_results = Counter(
            "packages_stale_results",
            "Results, heartbeats and waits refused as stale, by code.",
            ["code"],
            registry=r,
        )
        self.leases = Counter(
            "packages_leases_granted", "Assignments handed to workers.", ["kind"], registry=r
        )
        self.reaps = Counter(
            "packages_reaped", "Dead letters by terminal reason.", ["reason"], registry=r
        )
        self.revocations = Counter(
            "packages_endpoint_revocations", "Endpoint revocation cascades.", registry=r
        )
        self.revoked_scans = Counter(
            "packages_revocation_dead_lettered",
            "Scans dead-lettered by revocation cascades.",
            registry=r,
        )
        self.redriven = Counter(
            "packages_redriven",
            "Dead letters put back in the queue by an operator's redrive.",
            registry=r,
        )
        self.pruned = Counter(
            "mainframe_pruned_rows",
            "Rows removed past their retention, by kind (attempts go with their scans); "
            "the outcome totals are never pruned.",
            ["kind"],
            registry=r,
        )
        self.outcomes = Gauge(
            "packages_scan_outcomes",
            "Terminal scans by outcome, reconciled from the database; failed excludes dead "
            "letters, so the three never overlap.",
            ["outcome"],
            registry=r,
        )
        self.queue = Gauge(
            "packages_queue",
            "Live scans by state, reconciled from the database.",
            ["state"],
            registry=r,
        )
        self.oldest_queued_age = Gauge(
            "packages_oldest_queued_age_seconds",
            "How long the longest-waiting due QUEUED scan has waited (0 when none); "
            "a retry waiting out its backoff is not waiting.",
            registry=r,
        )
        self.snapshot_timestamp = Gauge(
            "performance_snapshot_timestamp_seconds",
            "Unix time of the latest successful database reconciliation.",
            registry=r,
        )
        self.reconcile_failures = Counter(
            "packages_reconciliation_failures",
            "Database reconciliations that failed (the snapshot timestamp stays put).",
            registry=r,
        )
        self.sweep_failures = Counter(
            "packages_sweep_failures",
            "Sweeps (reaping or pruning) that failed, e.g. while the database was unreachable "
            "(the next one retries).",
            registry=r,
        )
        self.reconcile_duration = Gauge(
            "packages_reconciliation_duration_seconds",
            "How long the latest successful reconciliation took.",
            registry=r,
        )
        self.http_duration = Histogram(
            "mainframe_http_request_duration_seconds",
            "HTTP request duration by route template, method and status code.",
            ["route", "method", "status"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=r,
        )
        self.queue_paused = Gauge(
            "mainframe_queue_paused",
            "1 while an operator has paused the queue (its scans are not leased), 0 once "
            "resumed; queues never paused are absent.",
            ["endpoint", "queue"],
            registry=r,
        )
        # Labelled by names an owner issued (endpoints, source credentials), never by
        # anything a request chose: as many series as source credentials that submitted.
        self.last_submission = Gauge(
            "mainframe_intake_last_submission_timestamp_seconds",
            "Unix time of the source's last accepted submission, reconciled from the "
            "database (to about 15 s); absent for a source that never submitted.",
            ["endpoint", "source"],
            registry=r,
        )
        self.db_connections = Gauge(
            "mainframe_db_connections",
            "This process's database connections: in use, idle, and callers waiting for one.",
            ["state"],
            registry=r,
        )
        self.hooks = HookMetrics(r)
        self._prime()

    def set_paused(self, endpoint: str, queue: str, *, paused: bool) -> None:
        """`mainframe_queue_paused` at once, in the process that paused or resumed the queue
        (after commit); the others see it at their next reconciliation."""
        self.paused_sets += 1
        self.paused_set_at[endpoint, queue] = self.paused_sets
        self.paused_seen.add((endpoint, queue))
        self.queue_paused.labels(endpoint, queue).set(1 if paused else 0)

    def watch_pool(self, counts: Callable[[], tuple[int, int, int]]) -> None:
        """Read the connection gauges from the pool at every scrape (nothing on the hot path)."""
        for index, state in enumerate(POOL_STATES):
            self.db_connections.labels(state).set_function(functools.partial(_nth, counts, index))

    def _prime(self) -> None:
        # Every labelled series exists from start-up, so rate() and absent() see zeros.
        for outcome in REQUEUEING_OUTCOMES:
            self.attempt_failures.labels(outcome.value)
        for code in StaleCode:
            self.stale_results.labels(code.value)
        # The hot path's two children, bound once: labels() looks a child up on every call.
        self.new_leases = self.leases.labels("new")
        self.reassigned_leases = self.leases.labels("reassigned")
        for reason in DeadLetterReason:
            self.reaps.labels(reason.value)
        for kind in PruneKind:
            self.pruned.labels(kind.value)


def _nth(counts: Callable[[], tuple[int, int, int]], index: int) -> float:
    return float(counts()[index])
