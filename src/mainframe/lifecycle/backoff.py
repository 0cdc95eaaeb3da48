"""When a scan sent back to the queue becomes due again: exponential backoff with full jitter,
bounded, or the delay a worker asked for. Pure: the random draw is passed in."""

from __future__ import annotations

from dataclasses import dataclass

MICROS = 1_000_000
# A worker's own retry_after_seconds is honoured up to this bound (one day), whatever the
# configured maximum: the worker knows its registry's outage better than our schedule does.
MAX_REQUESTED_DELAY_SECONDS = 86_400.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """`base` seconds doubling per attempt up to `cap`; a base of 0 turns the wait off."""

    base: float = 10.0
    cap: float = 600.0

    def ceiling(self, attempt: int) -> float:
        """The longest wait after failed attempt `attempt` (1-based), in seconds."""
        if self.base <= 0:
            return 0.0
        # Capping the exponent keeps 2**n finite for absurd attempt numbers.
        return min(self.cap, self.base * 2.0 ** min(max(attempt - 1, 0), 62))


def retry_delay_us(
    policy: RetryPolicy, *, attempt: int, draw: float, requested: float | None = None
) -> int:
    """Microseconds to wait before the next attempt; `draw` is uniform in [0, 1).

    Full jitter (a uniform draw below the ceiling) spreads a fleet's retries so a registry
    outage does not come back as one synchronised wave."""
    if requested is not None:
        return round(min(max(requested, 0.0), MAX_REQUESTED_DELAY_SECONDS) * MICROS)
    return round(policy.ceiling(attempt) * draw * MICROS)
