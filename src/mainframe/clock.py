"""Time as an injected dependency: the server reads a Clock, tests move a FakeClock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

MICROS = 1_000_000


class Clock(Protocol):
    def now_us(self) -> int:
        """Microseconds since the Unix epoch, UTC."""
        ...


class SystemClock:
    def now_us(self) -> int:
        return time.time_ns() // 1000


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start_us: int = 1_790_000_000 * MICROS) -> None:
        self._now = start_us

    def now_us(self) -> int:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += round(seconds * MICROS)


def to_us(seconds: float) -> int:
    return round(seconds * MICROS)


def rfc3339(us: int | None) -> str | None:
    """Render stored microseconds as RFC 3339 UTC with microsecond precision."""
    if us is None:
        return None
    seconds, micros = divmod(us, MICROS)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)
    # isoformat pads the year to four digits, which strftime("%Y") does not on Linux.
    return stamp.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
