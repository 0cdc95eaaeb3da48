"""The poll loop of one source. Each tick evaluates every closed, incomplete window in the
lookback, oldest first, under a lease. Every poll first takes leave from the source's quota,
shared with every watcher on the database (a slot, tokens, no not-before time), waiting for it
within a bound or leaving the window for the next tick, which is never a failed poll. A
throttled poll is retried after Retry-After (which then holds every watcher off the source)
or jittered backoff, a server error after backoff, both up to the attempt budget; any other
inconclusive poll is recorded under its class and left for the next tick; a complete one is
stored with its alert change in one transaction. Then the watcher judges its own visibility
of the source (observer health). Missing is never zero: nothing but a complete observation
moves the checkpoint or an alert."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from mainframe.clock import MICROS, Clock, rfc3339, to_us
from mainframe.lifecycle.backoff import Backoff
from mainframe.lifecycle.retry_after import bound, retry_after_seconds
from mainframe.watch.observations import (
    RETRIED_IN_TICK,
    STOPS_TICK,
    THROTTLING,
    Observation,
    PollClass,
)
from mainframe.watch.policies import DeliveryPolicy, ObserverHealth, ObserverPolicy
from mainframe.watch.ports import AlertMessage, NoTelemetry, Source, Telemetry
from mainframe.watch.quota import MAX_NOT_BEFORE_S, QuotaPolicy, slot_hold_us
from mainframe.watch.quotas import Permit
from mainframe.watch.retention import WatchRetention
from mainframe.watch.state import AlertUpdate, WatchStore
from mainframe.watch.windows import Window, closed_windows

# Between polls refused without a Retry-After (or failed by the server): 2 s doubling per
# attempt up to a minute, full jitter, so refused watchers do not retry in step (docs/watch.md).
POLL_BACKOFF = Backoff(base=2.0, cap=60.0)
DELIVERY_ALERT = "delivery_failure"
OBSERVER_ALERT_PREFIX = "observer_"  # + a key of ObserverPolicy.firing: observer_outbox_delay
# Rows forgotten per transaction when pruning past the retention, so a long-stopped
# watcher's first tick never holds a shared SQLite file's write lock for long.
PRUNE_BATCH = 500
# A poll that found no leave from the quota within the bound: the window waits for the next
# tick, and so do the rest (asking again at once would find the same).
HELD: Literal["held"] = "held"
# The shortest wait between two asks for leave, so a loop of asks is bounded in count.
MIN_ASK_US = 1_000
Outcome = PollClass | Literal["held"] | None


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
    held: str | None = None  # the quota kept the rest for the next tick: not_before, ...
    quota_waits: int = 0  # polls that waited for (or did not get) leave from the quota
    # Retry-After values (seconds) outside [0, MAX_NOT_BEFORE_S], taken as the nearest bound.
    bounded_retry_after: list[float] = field(default_factory=list)


class Engine:
    """Evaluates closed windows of one source against the delivery and observer policies.
    `store` is bound to the source's name (WatchStore.for_source).

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
        max_wait_s: float = POLL_BACKOFF.cap,
        retention: WatchRetention = WatchRetention(),
        quota: QuotaPolicy = QuotaPolicy(),
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if store.source != source.name:
            raise ValueError(
                f"the store is bound to {store.source!r}, the source is {source.name!r}"
            )
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
        # A Retry-After, or a wait for the quota, longer than this ends the source's tick
        # instead of sleeping through it; polling resumes once it has passed (the store
        # keeps the not-before time for every watcher and the next invocation).
        self.max_wait_s = max_wait_s
        self.retention = retention
        self.quota = quota
        self._held: set[str] = set()  # windows this instance is evaluating (re-entrant ticks)

    def tick(self) -> TickReport:
        """Evaluate every closed, incomplete window in the lookback, then observer health."""
        now = self.clock.now_us()
        report = TickReport(now)
        windows = closed_windows(
            now_us=now, length_s=self.window_s, settle_s=self.settle_s, lookback_s=self.lookback_s
        )
        if windows:
            done = self.store.completed_keys(since_us=windows[0].start_us)
            self._evaluate_all([w for w in windows if w.key not in done], report)
            completed = done | set(report.completed)
            self.telemetry.incomplete_streak(self.name, _trailing_incomplete(windows, completed))
        self.telemetry.not_before(self.name, self.store.not_before_us())
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

    @property
    def name(self) -> str:
        return self.source.name

    def _evaluate_all(self, windows: Iterable[Window], report: TickReport) -> None:
        for window in windows:
            outcome = self._evaluate(window, report)
            if outcome == HELD:
                return
            if outcome in STOPS_TICK:
                report.stopped = outcome
                return

    def _evaluate(self, window: Window, report: TickReport) -> Outcome:
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

    def _poll(self, window: Window, report: TickReport) -> Outcome:
        """Poll one leased window up to the attempt budget; its outcome class, HELD when the
        quota gave no leave within the bound, None if the window was lost."""
        refusal, attempt = None, 0
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1 and not self._lease(window):  # renew; lost if taken over
                report.lost.append(window.key)
                return None
            observation = self._fetch(window, report)
            if observation is None:
                return HELD
            report.polls += 1
            if observation.complete:
                return self._complete(window, observation, attempt, report)
            self._record(window, observation, attempt)
            if observation.poll_class not in RETRIED_IN_TICK:
                report.failed[window.key] = observation.poll_class
                return observation.poll_class
            refusal = observation
            if attempt == self.max_attempts or not self._wait(observation, attempt, report):
                break
        assert refusal is not None  # max_attempts >= 1
        if refusal.poll_class not in THROTTLING:
            report.failed[window.key] = refusal.poll_class  # server errors to the bound
            return refusal.poll_class
        exhausted = Observation(
            PollClass.THROTTLE_EXHAUSTED,
            status=refusal.status,
            detail=f"refused after {attempt} of {self.max_attempts} attempts",
        )
        self._record(window, exhausted, attempt)
        report.failed[window.key] = PollClass.THROTTLE_EXHAUSTED
        return PollClass.THROTTLE_EXHAUSTED

    def _fetch(self, window: Window, report: TickReport) -> Observation | None:
        """One poll under leave from the quota; None when none came within the bound."""
        permit = self._permit(report)
        if permit is None:
            return None
        try:
            return _checked(self.source.fetch(window))
        finally:
            self.store.release(permit)

    def _permit(self, report: TickReport) -> Permit | None:
        """Ask the shared quota for leave, waiting while the wait fits in max_wait_s."""
        bound = to_us(self.max_wait_s)
        hold = slot_hold_us(requests=self.source.requests_per_poll, timeout_s=self.source.timeout_s)
        spent = 0
        while True:
            got = self.store.acquire(
                self.quota,
                holder=self.owner,
                cost=self.source.requests_per_poll,
                hold_us=hold,
                max_wait_us=bound - spent,
            )
            if isinstance(got, Permit):
                if got.wait_us:  # tokens reserved ahead of their time: go at that time
                    self.sleep(got.wait_us / MICROS)
                if got.wait_us or spent:
                    self._waited(report)
                return got
            wait = max(got.retry_in_us, MIN_ASK_US)
            if spent + wait > bound:
                self._waited(report)
                report.held = got.reason
                return None
            self.sleep(wait / MICROS)
            spent += wait

    def _waited(self, report: TickReport) -> None:
        report.quota_waits += 1
        self.telemetry.quota_wait(self.name)

    def _wait(self, refusal: Observation, attempt: int, report: TickReport) -> bool:
        """Before the next attempt: a Retry-After holds every watcher off the source until
        then (the next ask for leave waits it out); otherwise jittered backoff here. False
        when the wait exceeds max_wait_s."""
        asked = retry_after_seconds(refusal.retry_after, now_us=self.clock.now_us())
        if asked is None or refusal.poll_class not in THROTTLING:
            delay = POLL_BACKOFF.delay(attempt, self.rng.random())
            if delay > self.max_wait_s:
                return False
            self.sleep(delay)
            return True
        wait = bound(asked, cap=MAX_NOT_BEFORE_S)
        if wait.bounded:
            report.bounded_retry_after.append(asked)
        stored, _ = self.store.hold_off(self.quota, asked)
        self.telemetry.not_before(self.name, stored)
        return wait.seconds <= self.max_wait_s

    def _record(self, window: Window, observation: Observation, attempt: int) -> None:
        now = self.clock.now_us()
        self.store.record_poll(window, observation, owner=self.owner, attempt=attempt, now_us=now)
        self.telemetry.poll(self.name, observation.poll_class)

    def _complete(
        self, window: Window, observation: Observation, attempt: int, report: TickReport
    ) -> Outcome:
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
        self.telemetry.poll(self.name, PollClass.COMPLETE)
        if done is None:
            report.lost.append(window.key)
            return None
        report.completed.append(window.key)
        if done.transition is not None:
            report.transitions.append(done.transition)
        self.telemetry.window_completed(self.name, window)
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
        return {"source": self.name, "kind": kind}


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
        "credential_refused": "yes" if health.auth_refused else "no",
    }
