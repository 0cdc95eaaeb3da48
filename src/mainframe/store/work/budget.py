"""The lifecycle's configured limits, in the store's units (microseconds)."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.clock import to_us


@dataclass(frozen=True, slots=True)
class Budget:
    job_timeout_us: int
    max_attempts: int
    reap_per_poll: int
    max_wait_us: int
    elsewhere_us: int = 60_000_000  # a retry waits this long for another worker; 0: off

    @classmethod
    def of(
        cls,
        *,
        job_timeout: float,
        max_attempts: int,
        reap_per_poll: int = 100,
        max_wait: float = 86400.0,
        elsewhere: float = 60.0,
    ) -> Budget:
        return cls(
            to_us(job_timeout), max_attempts, reap_per_poll, to_us(max_wait), to_us(elsewhere)
        )
