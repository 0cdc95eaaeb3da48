"""What one poll of a window told us. Only a complete observation carries counts: every
other outcome is inconclusive and names its failure class. Missing is not zero."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PollClass(StrEnum):
    """Bounded outcome classes of a poll, kept apart in telemetry and storage."""

    COMPLETE = "complete"
    THROTTLED = "throttled"  # 429, or 503 with Retry-After: retry after a delay
    THROTTLE_EXHAUSTED = "throttle_exhausted"  # still refused after the attempt bound
    TRANSPORT_ERROR = "transport_error"  # no answer: the result is unknown
    HTTP_ERROR = "http_error"  # another status: the contract is not met
    PARTIAL = "partial"  # complete: false, Prometheus warnings, non-success status
    MALFORMED = "malformed"  # bytes arrived but were not trustworthy


RETRYABLE = frozenset({PollClass.THROTTLED})


@dataclass(frozen=True, slots=True)
class Counts:
    attempts: int
    failures: int


@dataclass(frozen=True, slots=True)
class Observation:
    poll_class: PollClass
    counts: Counts | None = None
    status: int | None = None
    retry_headers: tuple[tuple[str, str], ...] = ()
    detail: str = ""

    @property
    def complete(self) -> bool:
        return self.poll_class is PollClass.COMPLETE and self.counts is not None

    @classmethod
    def of(cls, attempts: int, failures: int) -> Observation:
        return cls(PollClass.COMPLETE, Counts(attempts, failures), 200)
