"""A source's quota, shared by every watcher on the database: a token bucket (a rate with a
burst, the arithmetic of lifecycle/bucket.py), a limit on requests in flight, and a
source-wide "not before" time set by a refusal with Retry-After. Pure: the store reads the
shared state and the database's clock, these functions decide, and the store writes back what
they return (docs/watch.md, "The quota")."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.clock import MICROS
from mainframe.lifecycle.bucket import Bucket, Reservation, full, reserve
from mainframe.lifecycle.retry_after import bound

# A Retry-After beyond this is taken as this: a broken header must not silence a source for
# days; the observer alerts on the stale checkpoint long before.
MAX_NOT_BEFORE_S = 3600.0
# How soon a watcher that found every slot taken asks again (a slot frees when a request
# ends; requests are bounded by the source's timeout).
SLOT_RECHECK_S = 0.05


@dataclass(frozen=True, slots=True)
class QuotaPolicy:
    """A source's allowance across every watcher: None for a limit not set."""

    requests_per_second: float | None = None
    burst: int = 1
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.requests_per_second is not None and self.requests_per_second <= 0:
            raise ValueError("requests_per_second must be positive")
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    @property
    def limited(self) -> bool:
        return self.requests_per_second is not None or self.max_concurrency is not None


def take(
    bucket: Bucket, policy: QuotaPolicy, *, cost: int, now_us: int, max_wait_us: int
) -> Reservation | int:
    """`cost` tokens from the source's shared bucket (lifecycle/bucket.py's `reserve`: into
    debt, in the order asked, up to `max_wait_us`); a source without a rate never waits."""
    if policy.requests_per_second is None:
        return Reservation(full(policy.burst, now_us), 0)
    return reserve(
        bucket,
        rate=policy.requests_per_second,
        burst=policy.burst,
        cost=cost,
        now_us=now_us,
        max_wait_us=max_wait_us,
    )


@dataclass(frozen=True, slots=True)
class NotBefore:
    """Until when every watcher stays off the source, and whether the asked delay was bounded."""

    until_us: int
    bounded: bool


def not_before(now_us: int, delay_s: float) -> NotBefore:
    """The hold a refusal asks for: `delay_s` from now, never negative nor past the bound."""
    wait = bound(delay_s, cap=MAX_NOT_BEFORE_S)
    return NotBefore(now_us + round(wait.seconds * MICROS), wait.bounded)


def slot_hold_us(*, requests: int, timeout_s: float) -> int:
    """How long a slot is held before another watcher may take it: the poll's requests at
    their timeout, plus a margin, so a watcher that died mid-request frees it."""
    return round((requests * timeout_s + 5.0) * MICROS)
