"""Per-key token buckets over an injected clock: how the stats API says 429 and when to
come back (Retry-After). Process-local: with several server processes each has its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mainframe.clock import MICROS, Clock

# Idle keys are forgotten after this many full refills, so the table stays small.
FORGET_AFTER_REFILLS = 4
MAX_KEYS = 10_000


@dataclass
class TokenBucket:
    rate_per_s: float
    burst: int
    clock: Clock
    _state: dict[str, tuple[float, int]] = field(default_factory=dict)

    def take(self, key: str) -> float:
        """Spend one token for `key`: 0.0 when allowed, else seconds until one is free."""
        now = self.clock.now_us()
        tokens, stamp = self._state.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) / MICROS * self.rate_per_s)
        if tokens >= 1.0:
            self._remember(key, (tokens - 1.0, now))
            return 0.0
        self._remember(key, (tokens, now))
        return (1.0 - tokens) / self.rate_per_s

    def _remember(self, key: str, state: tuple[float, int]) -> None:
        if key not in self._state and len(self._state) >= MAX_KEYS:
            self._forget_idle(state[1])
        self._state[key] = state

    def _forget_idle(self, now: int) -> None:
        horizon = FORGET_AFTER_REFILLS * self.burst / self.rate_per_s * MICROS
        for key, (_, stamp) in list(self._state.items()):
            if now - stamp > horizon:
                del self._state[key]
        if len(self._state) >= MAX_KEYS:
            self._state.clear()


def retry_after_header(seconds: float) -> str:
    """Retry-After in whole seconds, never 0 for a refusal."""
    return str(max(1, math.ceil(seconds)))
