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
    TIMEOUT = "timeout"  # no answer in time (connect or read): the result is unknown
    CONNECTION_ERROR = "connection_error"  # refused, reset, TLS, DNS: no answer at all
    SERVER_ERROR = "server_error"  # 5xx (not a throttling 503): worth another try soon
    AUTH_ERROR = "auth_error"  # 401/403: nothing improves until a person fixes the token
    CLIENT_ERROR = "client_error"  # another 4xx: the request itself is wrong
    HTTP_ERROR = "http_error"  # any other status (a redirect, a 2xx that is not 200)
    PARTIAL = "partial"  # complete: false, Prometheus warnings, non-success status
    MALFORMED = "malformed"  # bytes arrived but were not trustworthy
    # Recorded by releases that did not tell a timeout from a reset; never produced now.
    TRANSPORT_ERROR = "transport_error"


# The classes a poll produces today (telemetry primes these; old rows may hold others).
CURRENT = tuple(c for c in PollClass if c is not PollClass.TRANSPORT_ERROR)
# Retried within the tick: after Retry-After (or backoff) for a refusal, after backoff for a
# server error; both up to the attempt bound.
THROTTLING = frozenset({PollClass.THROTTLED})
RETRIED_IN_TICK = frozenset({PollClass.THROTTLED, PollClass.SERVER_ERROR})
# The source cannot answer this tick (or cannot answer this watcher at all): asking for the
# next windows now would only add load, so the source's tick stops and the next resumes.
STOPS_TICK = frozenset(
    {
        PollClass.THROTTLE_EXHAUSTED,
        PollClass.TIMEOUT,
        PollClass.CONNECTION_ERROR,
        PollClass.SERVER_ERROR,
        PollClass.AUTH_ERROR,
        PollClass.CLIENT_ERROR,
        PollClass.TRANSPORT_ERROR,
    }
)


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

    @property
    def retry_after(self) -> str | None:
        """The refusal's Retry-After header as sent, if it sent one."""
        return next((v for k, v in self.retry_headers if k.lower() == "retry-after"), None)

    @classmethod
    def of(cls, attempts: int, failures: int) -> Observation:
        return cls(PollClass.COMPLETE, Counts(attempts, failures), 200)
