"""How long the watcher keeps what it no longer needs (`[retention]` of watch.toml): windows
with their poll log, and alerts its sinks already took. Pure: given now, the instant before
which each is forgotten. A window still inside the lookback is never forgotten, however
short the retention: the next tick may poll it again, and its poll log is what observer
health counts. An undelivered alert is never forgotten at all."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.clock import MICROS

DAY_US = 86_400 * MICROS
# The default retentions in days (watch.example.toml). A window's poll log: a week, to read
# back how a source behaved over the last few days.
POLL_LOG_DAYS = 7.0
# A delivered alert, with the sinks that took it: a month of what the watcher told whom.
DELIVERED_OUTBOX_DAYS = 30.0
# What the watcher's telemetry counts as pruned (bounded label values).
TABLES = ("windows", "polls", "outbox")


def days_us(days: float | None) -> int | None:
    """Days as microseconds; None (kept forever) stays None."""
    return None if days is None else round(days * DAY_US)


@dataclass(frozen=True, slots=True)
class WatchRetention:
    """Microseconds each is kept after it ended; None keeps it forever."""

    poll_log_us: int | None = days_us(POLL_LOG_DAYS)
    delivered_outbox_us: int | None = days_us(DELIVERED_OUTBOX_DAYS)

    def windows_before(self, *, now_us: int, lookback_s: int) -> int | None:
        """Windows that ended before this instant go, with their poll log (None: none)."""
        if self.poll_log_us is None:
            return None
        return now_us - max(self.poll_log_us, lookback_s * MICROS)

    def delivered_before(self, *, now_us: int) -> int | None:
        """Alerts delivered before this instant go, with their sinks (None: none)."""
        if self.delivered_outbox_us is None:
            return None
        return now_us - self.delivered_outbox_us
