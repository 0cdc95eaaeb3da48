"""Closed time windows with stable keys, and how long to wait before asking again.

A window is identified by its start and length (`2026-09-27T10:14:00Z/60s`), so every
retry, overlapping invocation and watcher process names the same window the same way."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from mainframe.clock import MICROS, rfc3339

# Ceiling of the full-jitter exponential backoff between refused polls (docs/watch.md).
BACKOFF_CAP_SECONDS = 60.0


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """[start, end) in microseconds since the epoch, UTC."""

    start_us: int
    length_s: int

    @property
    def end_us(self) -> int:
        return self.start_us + self.length_s * MICROS

    @property
    def key(self) -> str:
        return f"{rfc3339(self.start_us, precision='seconds')}/{self.length_s}s"

    @classmethod
    def containing(cls, instant_us: int, length_s: int) -> Window:
        size = length_s * MICROS
        return cls(instant_us - instant_us % size, length_s)

    @classmethod
    def from_key(cls, key: str) -> Window:
        stamp, _, length = key.partition("/")
        if not length.endswith("s"):
            raise ValueError(f"not a window key: {key!r}")
        start = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return cls(int(start.timestamp()) * MICROS, int(length[:-1]))


def closed_windows(*, now_us: int, length_s: int, settle_s: float, lookback_s: int) -> list[Window]:
    """Every window that has closed (plus the settle delay) within the lookback, oldest first."""
    newest_closed_end = now_us - round(settle_s * MICROS)
    last = Window.containing(newest_closed_end, length_s)
    if last.end_us > newest_closed_end:
        last = Window(last.start_us - length_s * MICROS, length_s)
    count = max(0, lookback_s // length_s)
    first_start = last.start_us - (count - 1) * length_s * MICROS
    return [
        Window(first_start + i * length_s * MICROS, length_s)
        for i in range(count)
        if first_start + i * length_s * MICROS >= 0
    ]


def retry_delay(
    headers: Mapping[str, str], attempt: int, *, now: datetime, rng: random.Random
) -> float:
    """Seconds to wait before poll attempt `attempt + 1`: Retry-After (seconds or an HTTP
    date; a past date means no wait), else full jitter over min(60, 2**attempt)."""
    asked = retry_after_seconds(headers, now=now)
    if asked is not None:
        return max(0.0, asked)
    return backoff_delay(attempt, rng=rng)


def backoff_delay(attempt: int, *, rng: random.Random) -> float:
    """Full jitter over min(60, 2**attempt) seconds, so refused watchers do not retry in step."""
    return rng.uniform(0.0, min(BACKOFF_CAP_SECONDS, 2.0**attempt))


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime) -> float | None:
    """What Retry-After asks, in seconds from `now` (negative for a date in the past); None
    when there is none or it is neither a number nor an HTTP date."""
    value = _header(headers, "retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
