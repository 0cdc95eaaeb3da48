"""How long to wait before trying again, one formula for every part that retries: a step that
doubles per retry from `base` up to `cap` (a base of 0 turns the wait off), and a uniform draw
within a jitter band of it, so a fleet refused together does not come back together. Pure: the
draw is passed in. Each caller keeps its own constants; a scan's retries keep theirs here."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.clock import MICROS
from mainframe.lifecycle.retry_after import bound

# A worker's own retry_after_seconds is honoured up to this bound (one day), whatever the
# configured maximum: the worker knows its registry's outage better than our schedule does.
MAX_REQUESTED_DELAY_SECONDS = 86_400.0


@dataclass(frozen=True, slots=True)
class Jitter:
    """Where a wait falls for a uniform draw in [0, 1): between `low` and `high` times its
    step."""

    low: float
    high: float

    def spread(self, step: float, draw: float) -> float:
        """The wait for `draw` (uniform in [0, 1)) within the band around `step` seconds."""
        return step * (self.low + (self.high - self.low) * draw)


# Anywhere from no wait to the whole step: spreads a fleet's retries the most.
FULL_JITTER = Jitter(0.0, 1.0)
# Half the step fixed, the other half drawn: spread, yet a retry never comes at once.
EQUAL_JITTER = Jitter(0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry n (from 1) steps `base` x 2^(n-1) seconds, at most `cap`, and waits a draw within
    `jitter` of its step (a band within [0, 1], so never more than `cap`); a base of 0 turns
    the wait off."""

    base: float
    cap: float
    jitter: Jitter = FULL_JITTER

    def ceiling(self, retry: int) -> float:
        """The step of retry `retry` (1-based) in seconds: the longest wait under full jitter."""
        if self.base <= 0:
            return 0.0
        # Capping the exponent keeps 2**n finite for absurd retry numbers.
        return min(self.cap, self.base * 2.0 ** min(max(retry - 1, 0), 62))

    def delay(self, retry: int, draw: float) -> float:
        """Seconds to wait before retry `retry`; `draw` is uniform in [0, 1)."""
        return self.jitter.spread(self.ceiling(retry), draw)


@dataclass(frozen=True, slots=True)
class RetryPolicy(Backoff):
    """A scan's retries: `base` seconds doubling per failed attempt up to `cap`, full jitter
    (MAINFRAME_RETRY_BASE_SECONDS and MAINFRAME_RETRY_MAX_SECONDS, README: Settings)."""

    base: float = 10.0
    cap: float = 600.0


def retry_delay_us(
    policy: RetryPolicy, *, attempt: int, draw: float, requested: float | None = None
) -> int:
    """Microseconds before a scan sent back to the queue is due again, after failed attempt
    `attempt`: the delay the worker asked for, else the policy's backoff; `draw` is uniform in
    [0, 1)."""
    if requested is not None:
        return round(bound(requested, cap=MAX_REQUESTED_DELAY_SECONDS).seconds * MICROS)
    return round(policy.delay(attempt, draw) * MICROS)
