"""A source's quota, shared by every watcher on the database: a token bucket (a rate with a
burst), a limit on requests in flight, and a source-wide "not before" time set by a refusal
with Retry-After. Pure: the store reads the shared state and the database's clock, these
functions decide, and the store writes back what they return (docs/watch.md, "The quota")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mainframe.clock import MICROS

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


@dataclass(frozen=True, slots=True)
class Bucket:
    """The shared bucket: tokens left at `at_us` (below zero while requests are reserved
    ahead of their time)."""

    tokens: float
    at_us: int


def full(policy: QuotaPolicy, now_us: int) -> Bucket:
    """A bucket after a quiet spell: `burst` requests may go at once."""
    return Bucket(float(policy.burst), now_us)


def refilled(bucket: Bucket, policy: QuotaPolicy, now_us: int) -> Bucket:
    """The bucket at `now_us`: tokens accrue at the rate up to the burst."""
    rate = policy.requests_per_second
    if rate is None:
        return Bucket(float(policy.burst), now_us)
    elapsed_s = max(0, now_us - bucket.at_us) / MICROS
    return Bucket(
        min(float(policy.burst), bucket.tokens + elapsed_s * rate), max(now_us, bucket.at_us)
    )


@dataclass(frozen=True, slots=True)
class Reservation:
    """`cost` tokens taken: the request may go `wait_us` from now; `bucket` is the new state."""

    bucket: Bucket
    wait_us: int


def reserve(
    bucket: Bucket, policy: QuotaPolicy, *, cost: int, now_us: int, max_wait_us: int
) -> Reservation | int:
    """Take `cost` tokens, going into debt when the bucket is short so that requests leave in
    the order they asked, each no sooner than the rate allows. When the wait would exceed
    `max_wait_us` nothing is taken and the wait is returned instead."""
    now = refilled(bucket, policy, now_us)
    rate = policy.requests_per_second
    if rate is None:
        return Reservation(now, 0)
    short = cost - now.tokens
    wait_us = 0 if short <= 0 else math.ceil(short / rate * MICROS)
    if wait_us > max_wait_us:
        return wait_us
    return Reservation(Bucket(now.tokens - cost, now.at_us), wait_us)


@dataclass(frozen=True, slots=True)
class NotBefore:
    """Until when every watcher stays off the source, and whether the asked delay was bounded."""

    until_us: int
    bounded: bool


def not_before(now_us: int, delay_s: float) -> NotBefore:
    """The hold a refusal asks for: `delay_s` from now, never negative nor past the bound."""
    bounded = delay_s > MAX_NOT_BEFORE_S or delay_s < 0 or not math.isfinite(delay_s)
    delay = min(max(delay_s, 0.0), MAX_NOT_BEFORE_S) if math.isfinite(delay_s) else MAX_NOT_BEFORE_S
    return NotBefore(now_us + round(delay * MICROS), bounded)


def slot_hold_us(*, requests: int, timeout_s: float) -> int:
    """How long a slot is held before another watcher may take it: the poll's requests at
    their timeout, plus a margin, so a watcher that died mid-request frees it."""
    return round((requests * timeout_s + 5.0) * MICROS)
