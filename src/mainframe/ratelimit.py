"""Per-key token buckets over an injected clock: how the stats API and the board's sign-in say
429 and when to come back (Retry-After), and how the dispatcher holds a hook to its rate. The
arithmetic is lifecycle/bucket.py's; this keeps one bucket per key in memory. Process-local:
with several server processes each has its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mainframe.clock import MICROS, Clock
from mainframe.lifecycle.bucket import Bucket, full, reserve

# Idle keys are forgotten after this many full refills (a bucket idle that long is full, so
# forgetting it changes nothing), so the table stays small.
FORGET_AFTER_REFILLS = 4
MAX_KEYS = 10_000


@dataclass
class TokenBucket:
    rate_per_s: float
    burst: int
    clock: Clock
    _buckets: dict[str, Bucket] = field(default_factory=dict)

    def take(self, key: str) -> float:
        """Spend one token for `key`: 0.0 when allowed, else seconds until one is free."""
        now = self.clock.now_us()
        bucket = self._buckets.get(key) or full(self.burst, now)
        got = reserve(
            bucket, rate=self.rate_per_s, burst=self.burst, cost=1, now_us=now, max_wait_us=0
        )
        if isinstance(got, int):
            return got / MICROS
        self._remember(key, got.bucket)
        return 0.0

    def _remember(self, key: str, bucket: Bucket) -> None:
        if key not in self._buckets and len(self._buckets) >= MAX_KEYS:
            self._forget_idle(bucket.at_us)
        self._buckets[key] = bucket

    def _forget_idle(self, now: int) -> None:
        horizon = FORGET_AFTER_REFILLS * self.burst / self.rate_per_s * MICROS
        for key, bucket in list(self._buckets.items()):
            if now - bucket.at_us > horizon:
                del self._buckets[key]
        if len(self._buckets) >= MAX_KEYS:
            self._buckets.clear()


def retry_after_header(seconds: float) -> str:
    """Retry-After in whole seconds, never 0 for a refusal."""
    return str(max(1, math.ceil(seconds)))
