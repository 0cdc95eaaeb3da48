"""The dispatcher's rules as plain functions: which events are announced and to which hooks,
how an attempt is classified, and whether and when it is retried. Pure: time and the random
draw are passed in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from mainframe.lifecycle.backoff import Jitter
from mainframe.lifecycle.retry_after import bound, retry_after_seconds
from mainframe.lifecycle.scans import Event, ScanDeadLettered, ScanReady

MAX_ATTEMPTS = 3  # each notification gets up to three attempts (README: Hooks)
RETRY_AFTER_CAP_SECONDS = 60.0  # a receiver's Retry-After is honoured up to this
# Each configured backoff step (MAINFRAME_HOOKS_BACKOFF_SECONDS) is drawn within ±25% of it.
JITTER = Jitter(0.75, 1.25)
# The events hooks hear of (README: Hooks); effects.py hands the dispatcher nothing else.
ANNOUNCED = (ScanReady, ScanDeadLettered)
DISABLE_AFTER_FAILURES = 10  # consecutive failed notifications before a hook is disabled
RETRYABLE_STATUSES = frozenset({408, 429})


class AttemptResult(StrEnum):
    """The `result` label of mainframe_hook_attempts_total: a bounded class, never a code."""

    OK = "2xx"
    REDIRECT = "3xx"
    CLIENT_ERROR = "4xx"
    SERVER_ERROR = "5xx"
    RATELIMITED = "ratelimited"
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    TRANSPORT_ERROR = "transport_error"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Attempt:
    result: AttemptResult
    status: int | None = None
    retry_after: float | None = None  # seconds the receiver asked (negative: a time past)

    @property
    def delivered(self) -> bool:
        return self.result is AttemptResult.OK

    @property
    def retryable(self) -> bool:
        if self.status is not None:
            return self.status in RETRYABLE_STATUSES or self.status >= 500
        return self.result in (
            AttemptResult.TIMEOUT,
            AttemptResult.CONNECT_ERROR,
            AttemptResult.TRANSPORT_ERROR,
        )


def announced(event: Event) -> ScanReady | ScanDeadLettered | None:
    """The event when hooks hear of it: only the two types, and only for scans that passed
    the sender gate. A revocation cascade is an EndpointRevoked, never announced."""
    if isinstance(event, ANNOUNCED) and event.scan.verified:
        return event
    return None


def admits(hook_queue: str | None, scan_queue: str) -> bool:
    """The one matching rule's queue filter: no filter admits every queue."""
    return hook_queue is None or hook_queue == scan_queue


def from_status(status: int, retry_after: str | None, *, now_us: int) -> Attempt:
    """Classify a response by its status code."""
    if 200 <= status < 300:
        return Attempt(AttemptResult.OK, status)
    wait = retry_after_seconds(retry_after, now_us=now_us) if status in (429, 503) else None
    if status == 429:
        return Attempt(AttemptResult.RATELIMITED, status, wait)
    if status >= 500:
        return Attempt(AttemptResult.SERVER_ERROR, status, wait)
    if status >= 400:
        return Attempt(AttemptResult.CLIENT_ERROR, status)
    return Attempt(AttemptResult.REDIRECT, status)


def next_delay(
    attempt: Attempt, *, number: int, backoff: Sequence[float], draw: float
) -> float | None:
    """Seconds to wait before attempt `number + 1`, or None when there is none to make.
    `draw` is uniform in [0, 1)."""
    if attempt.delivered or not attempt.retryable or number >= MAX_ATTEMPTS:
        return None
    if attempt.retry_after is not None:
        return bound(attempt.retry_after, cap=RETRY_AFTER_CAP_SECONDS).seconds
    step = backoff[min(number, len(backoff)) - 1] if backoff else 0.0
    return JITTER.spread(step, draw)
