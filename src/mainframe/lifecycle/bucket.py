"""A token bucket as arithmetic over plain data: tokens accrue at `rate` per second up to
`burst`, and a request takes `cost` of them, waiting when they are short. Pure: the time is
passed in. The server's per-key limiters (`ratelimit.py`) keep their buckets in memory and the
watcher's shared quota (`watch/quota.py`) keeps its bucket in the database; both decide here."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mainframe.clock import MICROS


@dataclass(frozen=True, slots=True)
class Bucket:
    """Tokens left at `at_us` (below zero while requests are reserved ahead of their time)."""

    tokens: float
    at_us: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """`cost` tokens taken: the request may go `wait_us` from now; `bucket` is the new state."""

    bucket: Bucket
    wait_us: int


def full(burst: int, now_us: int) -> Bucket:
    """A bucket after a quiet spell: `burst` requests may go at once."""
    return Bucket(float(burst), now_us)


def refilled(bucket: Bucket, *, rate: float, burst: int, now_us: int) -> Bucket:
    """The bucket at `now_us`: tokens accrue at the rate up to the burst. A clock that stepped
    back adds nothing and never moves the bucket's time back."""
    elapsed_s = max(0, now_us - bucket.at_us) / MICROS
    return Bucket(min(float(burst), bucket.tokens + elapsed_s * rate), max(now_us, bucket.at_us))


def reserve(
    bucket: Bucket, *, rate: float, burst: int, cost: int, now_us: int, max_wait_us: int
) -> Reservation | int:
    """Take `cost` tokens, going into debt when the bucket is short so that requests leave in
    the order they asked, each no sooner than the rate allows. When the wait would exceed
    `max_wait_us` (0: take only what is there) nothing is taken and the wait is returned."""
    now = refilled(bucket, rate=rate, burst=burst, now_us=now_us)
    short = cost - now.tokens
    wait_us = 0 if short <= 0 else math.ceil(short / rate * MICROS)
    if wait_us > max_wait_us:
        return wait_us
    return Reservation(Bucket(now.tokens - cost, now.at_us), wait_us)
