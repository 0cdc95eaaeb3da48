"""Alert policies over complete windows (delivery) and over the watcher itself (observer
health). Pure functions: counts and ages in, desired alert states out."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.watch.observations import Counts


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """Fire when the failure ratio exceeds `ratio` over at least `min_attempts`, or when
    failures reach `absolute_failures` (a small but total outage)."""

    version: str
    ratio: float
    min_attempts: int
    absolute_failures: int

    def firing(self, counts: Counts) -> bool:
        if counts.failures >= self.absolute_failures > 0:
            return True
        if counts.attempts < self.min_attempts or counts.attempts == 0:
            return False
        return counts.failures / counts.attempts > self.ratio


@dataclass(frozen=True, slots=True)
class ObserverHealth:
    """What the watcher knows about its own visibility at one instant."""

    newest_completed_end_us: int | None
    consecutive_throttle_exhaustions: int
    oldest_undelivered_outbox_us: int | None
    auth_refused: bool = False  # the source's newest poll was refused the watcher's credential


@dataclass(frozen=True, slots=True)
class ObserverPolicy:
    """Reduced visibility is its own alert, never a delivery alert."""

    version: str
    max_checkpoint_age_s: float
    max_throttle_exhaustions: int
    max_outbox_age_s: float

    def firing(
        self, health: ObserverHealth, *, now_us: int, watching_since_us: int | None = None
    ) -> dict[str, bool]:
        """Each observer condition; with no window completed yet, the checkpoint counts as
        stale once the watcher has been running longer than the allowed age."""

        def older_than(stamp: int | None, limit_s: float) -> bool:
            return stamp is not None and (now_us - stamp) / 1_000_000 > limit_s

        newest = health.newest_completed_end_us
        reference = newest if newest is not None else watching_since_us
        stale = reference is None or older_than(reference, self.max_checkpoint_age_s)
        return {
            "stale_checkpoint": stale,
            "throttle_exhaustion": (
                health.consecutive_throttle_exhaustions >= self.max_throttle_exhaustions
            ),
            "outbox_delay": older_than(health.oldest_undelivered_outbox_us, self.max_outbox_age_s),
            # At once: no wait improves a refused credential; only a person fixing it does.
            "auth_failure": health.auth_refused,
        }


@dataclass(frozen=True, slots=True)
class AlertState:
    """An alert's state and the end of the newest window that set it."""

    firing: bool
    as_of_end_us: int


def advance(current: AlertState | None, *, firing: bool, window_end_us: int) -> AlertState | None:
    """The new state after evaluating a window, or None when nothing changes.

    A window older than the one that set the current state never moves it: a delayed
    window that completes after a newer one cannot resolve (or re-open) an alert."""
    if current is not None and window_end_us <= current.as_of_end_us:
        return None
    if current is not None and current.firing == firing:
        return AlertState(firing, window_end_us)
    if current is None and not firing:
        return AlertState(False, window_end_us)
    return AlertState(firing, window_end_us)


def changed(current: AlertState | None, new: AlertState | None) -> bool:
    """Whether `new` is a transition worth an outbox row (not a mere refresh)."""
    if new is None:
        return False
    if current is None:
        return new.firing
    return current.firing != new.firing
