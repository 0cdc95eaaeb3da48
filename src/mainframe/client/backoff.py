"""How long a worker waits before trying the server again, so a fleet cut off together does
not come back in lockstep and hammer a server that is just recovering (docs/reliability.md)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Exponential backoff with equal jitter: retry n waits between half and all of
    `base * 2**n` (at most `cap`); half is fixed, so a retry never comes at once."""

    base: float
    cap: float
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, failures: int) -> float:
        step = min(self.cap, self.base * 2.0 ** min(failures, 32))
        return step / 2 + self.rng.uniform(0, step / 2)
