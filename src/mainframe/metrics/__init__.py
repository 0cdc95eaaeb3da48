"""Prometheus metrics of one server process. Labels stay bounded: no ids, names or messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

from mainframe.lifecycle.rules import AttemptOutcome, DeadLetterReason, StaleCode


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

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
        self._prime()

    def _prime(self) -> None:
        # Every labelled series exists from start-up, so rate() and absent() see zeros.
        for outcome in AttemptOutcome:
            self.attempt_failures.labels(outcome.value)
        for code in StaleCode:
            self.stale_results.labels(code.value)
        for kind in ("new", "reassigned"):
            self.leases.labels(kind)
        for reason in DeadLetterReason:
            self.reaps.labels(reason.value)
