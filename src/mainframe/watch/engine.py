"""The poll loop. Each tick evaluates every closed, incomplete window in the lookback, oldest
first, under a lease: throttled polls are retried after Retry-After or jittered backoff up to
the attempt budget; any other inconclusive poll is recorded under its class and left for the
next tick; a complete one is stored with its alert change in one transaction. Then the
watcher judges its own visibility (observer health). Missing is never zero: nothing but a
complete observation moves the checkpoint or an alert."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mainframe.clock import MICROS, Clock, rfc3339, to_us
from mainframe.watch.observations import RETRYABLE, Observation, PollClass
from mainframe.watch.policies import DeliveryPolicy, ObserverHealth, ObserverPolicy
from mainframe.watch.ports import AlertMessage, NoTelemetry, Source, Telemetry
from mainframe.watch.retention import WatchRetention
from mainframe.watch.state import AlertUpdate, WatchStore
from mainframe.watch.windows import BACKOFF_CAP_SECONDS, Window, closed_windows, retry_delay

DELIVERY_ALERT = "delivery_failure"
OBSERVER_ALERT_PREFIX = "observer_"  # + a key of ObserverPolicy.firing: observer_outbox_delay
# The source itself is unavailable (quota spent, or no answer): polling the remaining windows
# now would only add load, so the tick stops there and the next one resumes.
STOPS_TICK = frozenset({PollClass.THROTTLE_EXHAUSTED, PollClass.TRANSPORT_ERROR})
# Rows forgotten per transaction when pruning past the retention, so a long-stopped
# watcher's first tick never holds a shared SQLite file's write lock for long.
PRUNE_BATCH = 500


@dataclass
class TickReport:
    """What one tick did, window by window."""

    now_us: int
    completed: list[str] = field(default_factory=list)
    failed: dict[str, PollClass] = field(default_factory=dict)  # the invocation's last class
    skipped: list[str] = field(default_factory=list)  # leased by another invocation
    lost: list[str] = field(default_factory=list)  # taken over after our lease lapsed
    transitions: list[AlertMessage] = field(default_factory=list)
    observer: dict[str, bool] = field(default_factory=dict)
    pruned: dict[str, int] = field(default_factory=dict)  # rows past the retention, by table
    polls: int = 0
    stopped: PollClass | None = None  # why windows were left for the next tick


class Engine:
    """Evaluates closed windows of one source against the delivery and observer policies.

    `owner` must be unique per process (and per overlapping invocation): a lease held by the
    same owner counts as one's own and is renewed."""

    def __init__(
        self,
        store: WatchStore,
        source: Source,
        delivery: DeliveryPolicy,
        observer: ObserverPolicy,
        *,
        window_s: int,
        settle_s: float,
        lookback_s: int,
        owner: str,
        lease_s: float,
        clock: Clock,
        sleep: Callable[[float], None],
        rng: random.Random,
        telemetry: Telemetry = NoTelemetry(),
        max_attempts: int = 5,
        max_wait_s: float = BACKOFF_CAP_SECONDS,
        retention: WatchRetention = WatchRetention(),
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.store = store
        self.source = source
        self.started_us = clock.now_us()
        self.delivery = delivery
        self.observer = observer
        self.window_s = window_s
        self.settle_s = settle_s
        self.lookback_s = lookback_s
        self.owner = owner
        self.lease_us = to_us(lease_s)
        self.clock = clock
        self.sleep = sleep
        self.rng = rng
        self.telemetry = telemetry
        self.max_attempts = max_attempts
        # A Retry-After longer than this ends the invocation instead of sleeping through it;
        # polling resumes once it has passed (the store keeps it for the next invocation).
        self.max_wait_s = max_wait_s
        self.retention = retention
        self._held: set[str] = set()  # windows this instance is evaluating (re-entrant ticks)

    def tick(self) -> TickReport:
        """Evaluate every closed, incomplete window in the lookback, then observer health."""
        now = self.clock.now_us()
        report = TickReport(now)
        windows = closed_windows(
            now_us=now, length_s=self.window_s, settle_s=self.settle_s, lookback_s=self.lookback_s
        )
        if windows and now < self.store.quiet_until(self.source.name):
            report.stopped = PollClass.THROTTLED
            windows = []
        if windows:
            done = self.store.completed_keys(since_us=windows[0].start_us)
            self._evaluate_all([w for w in windows if w.key not in done], report)
            completed = done | set(report.completed)
            self.telemetry.incomplete_streak(_trailing_incomplete(windows, completed))
        self._observe(report)
        self._prune(now, report)
        return report

    def _prune(self, now: int, report: TickReport) -> None:
        """Forget what is past the retention, a batch per transaction; count it."""
        windows_before = self.retention.windows_before(now_us=now, lookback_s=self.lookback_s)
        if windows_before is not None:
            while True:
                windows, polls = self.store.prune_windows(
                    before_us=windows_before, limit=PRUNE_BATCH
                )
                self._pruned(report, windows=windows, polls=polls)
                if windows < PRUNE_BATCH:
                    break
        delivered_before = self.retention.delivered_before(now_us=now)
        if delivered_before is not None:
            while True:
                outbox = self.store.prune_delivered(before_us=delivered_before, limit=PRUNE_BATCH)
                self._pruned(report, outbox=outbox)
                if outbox < PRUNE_BATCH:
                    break

    def _pruned(self, report: TickReport, **counts: int) -> None:
        for table, count in counts.items():
            if count:
                report.pruned[table] = report.pruned.get(table, 0) + count
                self.telemetry.pruned(table, count)

    def _evaluate_all(self, windows: Iterable[Window], report: TickReport) -> None:
        for window in windows:
            outcome = self._evaluate(window, report)
            if outcome in STOPS_TICK:
                report.stopped = outcome
                return

    def _evaluate(self, window: Window, report: TickReport) -> PollClass | None:
        if window.key in self._held or not self._lease(window):
            report.skipped.append(window.key)
            return None
        self._held.add(window.key)
        try:
            return self._poll(window, report)
        finally:
            self._held.discard(window.key)
            self.store.release_lease(window, owner=self.owner)

    def _lease(self, window: Window) -> bool:
        now = self.clock.now_us()
        return self.store.take_lease(window, owner=self.owner, now_us=now, lease_us=self.lease_us)

    def _poll(self, window: Window, report: TickReport) -> PollClass | None:
        """Poll one leased window up to the attempt budget; its outcome class, None if lost."""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1 and not self._lease(window):  # renew; lost if taken over
                report.lost.append(window.key)
                return None
            observation = _checked(self.source.fetch(window))
            report.polls += 1
            if observation.complete:
                return self._complete(window, observation, attempt, report)
            self._record(window, observation, attempt)
            if observation.poll_class not in RETRYABLE:
                report.failed[window.key] = observation.poll_class
                return observation.poll_class
            if attempt == self.max_attempts or not self._wait(observation, attempt):
                break
        exhausted = Observation(
            PollClass.THROTTLE_EXHAUSTED,
            status=observation.status,
            detail=f"refused after {attempt} of {self.max_attempts} attempts",
        )
        self._record(window, exhausted, attempt)
        report.failed[window.key] = PollClass.THROTTLE_EXHAUSTED
        return PollClass.THROTTLE_EXHAUSTED

    def _wait(self, refusal: Observation, attempt: int) -> bool:
        """Sleep before the next attempt; False when the wait exceeds max_wait_s."""
        now = self.clock.now_us()
        at = datetime.fromtimestamp(now / MICROS, tz=UTC)
        delay = retry_delay(dict(refusal.retry_headers), attempt, now=at, rng=self.rng)
        if delay > self.max_wait_s:
            self.store.keep_quiet(self.source.name, until_us=now + to_us(delay), now_us=now)
            return False
        self.sleep(delay)
        return True

    def _record(self, window: Window, observation: Observation, attempt: int) -> None:
        now = self.clock.now_us()
        self.store.record_poll(window, observation, owner=self.owner, attempt=attempt, now_us=now)
        self.telemetry.poll(self.source.name, observation.poll_class)

    def _complete(
        self, window: Window, observation: Observation, attempt: int, report: TickReport
    ) -> PollClass | None:
        assert observation.counts is not None
        counts = observation.counts
        verdict = AlertUpdate(
            alert=DELIVERY_ALERT,
            policy_version=self.delivery.version,
            firing=self.delivery.firing(counts),
            window_key=window.key,
            as_of_us=window.end_us,
            at_us=window.start_us,
            labels=self._labels("delivery"),
            annotations={"attempts": str(counts.attempts), "failures": str(counts.failures)},
        )
        done = self.store.complete_window(
            window,
            observation,
            owner=self.owner,
            attempt=attempt,
            now_us=self.clock.now_us(),
            alert=verdict,
        )
        self.telemetry.poll(self.source.name, PollClass.COMPLETE)
        if done is None:
            report.lost.append(window.key)
            return None
        report.completed.append(window.key)
        if done.transition is not None:
            report.transitions.append(done.transition)
        self.telemetry.window_completed(window)
        return PollClass.COMPLETE

    def _observe(self, report: TickReport) -> None:
        now = self.clock.now_us()
        health = self.store.observer_health()
        report.observer = self.observer.firing(
            health, now_us=now, watching_since_us=self.started_us
        )
        stamp = rfc3339(now) or ""
        verdicts = [
            AlertUpdate(
                alert=OBSERVER_ALERT_PREFIX + name,
                policy_version=self.observer.version,
                firing=firing,
                window_key=stamp,  # observer health is judged at an instant, not per window
                as_of_us=now,
                at_us=now,
                labels=self._labels("observer"),
                annotations=_health_notes(health),
            )
            for name, firing in report.observer.items()
        ]
        report.transitions.extend(self.store.apply_alerts(verdicts, now_us=now))

    def _labels(self, kind: str) -> dict[str, str]:
        return {"source": self.source.name, "kind": kind}


def _checked(observation: Observation) -> Observation:
    """A COMPLETE class without counts is a source bug: treat it as untrustworthy bytes."""
    if observation.poll_class is PollClass.COMPLETE and observation.counts is None:
        return Observation(PollClass.MALFORMED, status=observation.status, detail="no counts")
    return observation


def _trailing_incomplete(windows: list[Window], completed: set[str]) -> int:
    """How many of the newest closed windows in a row are still incomplete."""
    count = 0
    for window in reversed(windows):
        if window.key in completed:
            break
        count += 1
    return count


def _health_notes(health: ObserverHealth) -> dict[str, str]:
    return {
        "newest_completed_end": rfc3339(health.newest_completed_end_us) or "none",
        "consecutive_throttle_exhaustions": str(health.consecutive_throttle_exhaustions),
        "oldest_undelivered_outbox": rfc3339(health.oldest_undelivered_outbox_us) or "none",
    }
