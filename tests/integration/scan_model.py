"""A plain model of Mainframe's scans for the model-based test of the figures
(test_figures_model.py): what each scan is after every operation, and from that every figure
an operator reads.

It imports nothing of the server: statuses, reasons and states are spelled out here, a
failure's cause is a label given with its summary (SUMMARIES), and time is integer
microseconds handed in by the test. The rules it follows:
- the lifecycle of README "The lifecycle in one paragraph", with a retry base of 0, so a
  retry is due at once and no scan is ever `scheduled`;
- a poll first reaps its endpoint's lapsed leases (budget spent: a dead letter, reason
  `lease_expired`; budget left: back to QUEUED), then leases due scans of unpaused queues;
- a paused queue's QUEUED scans are in a state of their own, `paused`; its PENDING ones run
  out as they would (docs/board.md "Pausing a queue");
- the oldest due age is taken over the QUEUED scans a poll could lease, from when each became
  due (docs/observability.md), which a pause does not change;
- the outcome totals count every scan that ended, pruned ones too (docs/observability.md:
  "The outcome totals are never pruned"), and lose a dead letter when it is redriven
  (docs/board.md "Redrive");
- the process counters leave a revocation's dead letters out (docs/observability.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

QUARANTINED, QUEUED, PENDING, FINISHED, FAILED = (
    "QUARANTINED", "QUEUED", "PENDING", "FINISHED", "FAILED",
)  # fmt: skip
LIVE = (QUARANTINED, QUEUED, PENDING)
# The live states of `packages_queue{state}` and `mainframe stats`, `paused` included.
STATES = ("queued", "paused", "scheduled", "pending", "retryable", "exhausted", "quarantined")
OUTCOMES = ("finished", "failed", "dead_lettered")
HOUR_US = 3_600_000_000
SPARK_HOURS = 24  # the causes view's sparkline: the last 24 hours, one bar an hour

# Failure summaries a worker or an operator sends, with the cause a person files each under:
# pairs that differ only in what varies between occurrences share a label, pairs that differ
# in a word (float64, float32) do not.
SUMMARIES: dict[str | None, str] = {
    "timeout after 150000 ms": "timeout",
    "timeout after 900 ms": "timeout",
    "worker log follows\n  reading sdist\ntimeout after 77 ms": "timeout",
    "shape (123456,) does not match (98765,)": "shape",
    "shape (98765,) does not match (4,)": "shape",
    "float64 overflow in sum": "float64",
    "float32 overflow in sum": "float32",
    "bad offset 0x1f3a in header": "offset",
    "bad offset 0x2b in header": "offset",
    None: "no summary",
}
LAPSE = "the lease ran out"  # the cause of a lease that lapsed at the cap
REVOKED = "the endpoint was revoked"  # the cause of a revocation's dead letters


@dataclass
class Scan:
    """One scan as the model sees it."""

    id: int
    endpoint: str
    queue: str
    name: str
    kind: str
    verified: bool
    status: str
    due_at: int | None = None  # when a QUEUED scan became due
    attempts: int = 0  # assignments since it was submitted or last redriven
    holder: str | None = None  # the worker of the current (or last) lease
    assignment: str | None = None
    lease_ends: int | None = None
    ended_at: int | None = None  # FINISHED or plainly FAILED
    dead_at: int | None = None
    reason: str | None = None
    cause: str | None = None  # a dead letter's label
    # The worker that failed (or let lapse) the last attempt and when the scan was due again
    # at the earliest: a retry goes to another worker for a while.
    failed_by: tuple[str, int] | None = None
    # The same, however the last attempt closed (an operator's fail too) and kept across a
    # redrive, with when the scan was due at the latest: the polls that may rightly skip it.
    skippable_by: tuple[str, int] | None = None

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def outcome(self) -> str | None:
        if self.status == FINISHED:
            return "finished"
        if self.status == FAILED:
            return "dead_lettered" if self.dead_at is not None else "failed"
        return None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.endpoint, self.name, self.kind

    def short(self) -> str:
        where = f"{self.endpoint}/{self.queue}"
        dead = f" dead({self.reason}, {self.cause!r})" if self.dead_at is not None else ""
        held = f" by {self.holder}" if self.status == PENDING else ""
        what = f"#{self.id} {self.name}:{self.kind} {where}"
        return f"{what} {self.status}{held}{dead}, attempts {self.attempts}"


@dataclass
class Model:
    """Every scan, paused queue and revoked endpoint, and the process counters."""

    job_timeout_us: int
    max_attempts: int
    kept_us: dict[str, int]  # retention per outcome
    scans: dict[int, Scan] = field(default_factory=dict)
    paused: set[tuple[str, str]] = field(default_factory=set)
    revoked: set[str] = field(default_factory=set)
    pruned: Counter[str] = field(default_factory=Counter)
    dead_lettered_total: int = 0  # packages_dead_lettered_total
    fail_total: int = 0  # packages_fail_total
    success_total: int = 0  # packages_success_total
    attempt_failures: Counter[str] = field(default_factory=Counter)

    # What a scan is now.
    def state(self, scan: Scan, now: int) -> str | None:
        if scan.status == QUARANTINED:
            return "quarantined"
        if scan.status == QUEUED:
            if (scan.endpoint, scan.queue) in self.paused:
                return "paused"
            return "queued" if scan.due_at is None or scan.due_at <= now else "scheduled"
        if scan.status == PENDING:
            assert scan.lease_ends is not None
            if scan.lease_ends >= now:
                return "pending"
            return "exhausted" if scan.attempts >= self.max_attempts else "retryable"
        return None

    def paused_gauge(self, name: str, labels: dict[str, str]) -> float:
        """`mainframe_queue_paused{endpoint,queue}`: 1 while the queue is paused."""
        assert name == "mainframe_queue_paused"
        return float((labels["endpoint"], labels["queue"]) in self.paused)

    def leasable(self, scan: Scan, now: int) -> bool:
        """Due, QUEUED and in a queue a poll reads."""
        return self.state(scan, now) == "queued" and scan.endpoint not in self.revoked

    def states(self, now: int) -> dict[str, int]:
        found = Counter(self.state(s, now) for s in self.scans.values())
        return {state: found[state] for state in STATES}

    def outcomes(self) -> dict[str, int]:
        found = Counter(s.outcome for s in self.scans.values()) + self.pruned
        return {outcome: found[outcome] for outcome in OUTCOMES}

    def oldest_due_age(self, now: int, endpoint: str | None = None) -> float | None:
        """Seconds the longest-waiting leasable scan has waited since it became due."""
        due = [
            s.due_at
            for s in self.scans.values()
            if self.leasable(s, now) and s.due_at is not None
            and (endpoint is None or s.endpoint == endpoint)
        ]  # fmt: skip
        return None if not due else round((now - min(due)) / 1e6, 3)

    def dead_letters(self) -> Iterator[Scan]:
        return (s for s in self.scans.values() if s.dead_at is not None)

    def select(self, *, endpoint: str | None = None, queue: str | None = None) -> Iterator[Scan]:
        return (
            s
            for s in self.scans.values()
            if (endpoint is None or s.endpoint == endpoint) and (queue is None or s.queue == queue)
        )

    def live_key(self, key: tuple[str, str, str]) -> Scan | None:
        return next((s for s in self.scans.values() if s.live and s.key == key), None)

    # Transitions, each as the lifecycle states it.
    def submitted(self, scan: Scan, now: int) -> None:
        scan.due_at = now if scan.status == QUEUED else None
        self.scans[scan.id] = scan

    def promoted(self, scan: Scan, now: int) -> None:
        """A verified submission of a key that sits in QUARANTINED."""
        scan.status, scan.verified, scan.due_at = QUEUED, True, now

    def reap(self, now: int, endpoint: str | None) -> list[Scan]:
        """A poll's (one endpoint) or the sweeper's (every endpoint) reap of lapsed leases."""
        lapsed = [
            s
            for s in self.scans.values()
            if s.status == PENDING and s.lease_ends is not None and s.lease_ends < now
            and (endpoint is None or s.endpoint == endpoint)
        ]  # fmt: skip
        for scan in lapsed:
            assert scan.holder is not None and scan.lease_ends is not None
            scan.failed_by = (scan.holder, scan.lease_ends)
            scan.skippable_by = (scan.holder, now)
            if scan.attempts >= self.max_attempts:
                self._dead(scan, now, "lease_expired", LAPSE)
            else:
                self._requeue(scan, now, "lease_expired")
        return lapsed

    def leased(self, scan: Scan, worker: str, assignment: str, now: int) -> None:
        scan.status, scan.holder, scan.assignment = PENDING, worker, assignment
        scan.attempts += 1
        scan.lease_ends = now + self.job_timeout_us
        scan.due_at = None

    def closed(self, scan: Scan, now: int, *, outcome: str, retryable: bool,
               summary: str | None, by_worker: bool) -> str:  # fmt: skip
        """A result of the current attempt (a worker's, or an operator's in its stead)."""
        assert scan.status == PENDING and scan.holder is not None
        scan.lease_ends = None
        if outcome == "finished":
            scan.status, scan.ended_at = FINISHED, now
            self.success_total += 1
            return "finished"
        if not retryable:
            scan.status, scan.ended_at, scan.reason = FAILED, now, "failed"
            self.fail_total += 1
            return "failed"
        scan.failed_by = (scan.holder, now) if by_worker else None
        scan.skippable_by = (scan.holder, now)
        if scan.attempts >= self.max_attempts:
            self._dead(scan, now, "attempts_exhausted", SUMMARIES[summary])
            return "dead letter"
        self._requeue(scan, now, "failed")
        return "queued again"

    def failed_unleased(self, scan: Scan, now: int) -> None:
        """An operator's plain failure of a scan nobody holds."""
        scan.status, scan.ended_at, scan.reason, scan.due_at = FAILED, now, "failed", None
        self.fail_total += 1

    def revoke(self, endpoint: str, now: int) -> list[Scan]:
        """The cascade: every live scan of the endpoint a dead letter, counted by nobody."""
        self.revoked.add(endpoint)
        ended = [s for s in self.scans.values() if s.endpoint == endpoint and s.live]
        for scan in ended:
            scan.status, scan.dead_at, scan.ended_at = FAILED, now, now
            scan.reason, scan.cause, scan.lease_ends, scan.due_at = (
                "endpoint_revoked", REVOKED, None, None,
            )  # fmt: skip
        return ended

    def redrive(self, ids: Iterable[int], now: int) -> tuple[list[int], dict[int, str]]:
        """Requeue what may be requeued; the rest skipped with its reason (docs/board.md):
        unknown, not a dead letter, a revoked endpoint's, or a live key's twin."""
        requeued: list[int] = []
        skipped: dict[int, str] = {}
        keys: set[tuple[str, str, str]] = set()
        for scan_id in dict.fromkeys(ids):
            scan = self.scans.get(scan_id)
            if scan is None:
                skipped[scan_id] = "not_found"
            elif scan.endpoint in self.revoked:
                skipped[scan_id] = "endpoint_revoked"
            elif scan.dead_at is None:
                skipped[scan_id] = "not_dead_lettered"
            elif self.live_key(scan.key) is not None or scan.key in keys:
                skipped[scan_id] = "live_duplicate"
            else:
                keys.add(scan.key)
                requeued.append(scan_id)
        for scan_id in requeued:
            scan = self.scans[scan_id]
            scan.status, scan.due_at, scan.attempts = QUEUED, now, 0
            scan.dead_at = scan.reason = scan.cause = scan.ended_at = None
            # Due again now: a poll may still pass it over for the worker that failed it last.
            if scan.skippable_by is not None:
                scan.skippable_by = (scan.skippable_by[0], now)
            scan.failed_by = None
        return requeued, skipped

    def prune(self, now: int) -> list[Scan]:
        """What retention removes: each ended scan past its kind's retention."""
        gone = []
        for scan in list(self.scans.values()):
            outcome = scan.outcome
            if outcome is None:
                continue
            ended = scan.dead_at if outcome == "dead_lettered" else scan.ended_at
            assert ended is not None
            if ended <= now - self.kept_us[outcome]:
                gone.append(self.scans.pop(scan.id))
                self.pruned[outcome] += 1
        return gone

    def _dead(self, scan: Scan, now: int, reason: str, cause: str) -> None:
        scan.status, scan.dead_at, scan.ended_at = FAILED, now, now
        scan.reason, scan.cause, scan.lease_ends = reason, cause, None
        self.dead_lettered_total += 1
        self.fail_total += 1

    def _requeue(self, scan: Scan, now: int, outcome: str) -> None:
        scan.status, scan.due_at, scan.lease_ends = QUEUED, now, None
        self.attempt_failures[outcome] += 1


def hour_of(us: int) -> int:
    return us - us % HOUR_US


def sparkline(dead_at: Iterable[int], now: int) -> list[int]:
    """Dead letters per hour over the last SPARK_HOURS hours, the oldest hour first."""
    since = hour_of(now) - (SPARK_HOURS - 1) * HOUR_US
    bars = [0] * SPARK_HOURS
    for at in dead_at:
        index = (hour_of(at) - since) // HOUR_US
        if 0 <= index < SPARK_HOURS:
            bars[index] += 1
    return bars
