"""The pure core: the scan lifecycle (statuses, the attempt budget, staleness, dead-letter
reasons, events), and the backoff, token bucket and Retry-After reading every part shares."""

from __future__ import annotations

from mainframe.lifecycle.rules import (
    LIVE,
    TERMINAL,
    AttemptOutcome,
    DeadLetterReason,
    Holding,
    QueueState,
    Settlement,
    StaleCode,
    Status,
    diagnose_stale,
    queue_state,
    settle,
)
from mainframe.lifecycle.scans import Event

__all__ = [
    "LIVE",
    "TERMINAL",
    "AttemptOutcome",
    "DeadLetterReason",
    "Event",
    "Holding",
    "QueueState",
    "Settlement",
    "StaleCode",
    "Status",
    "diagnose_stale",
    "queue_state",
    "settle",
]
