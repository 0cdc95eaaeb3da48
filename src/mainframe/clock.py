"""Time as an injected dependency: the server reads a Clock, tests move a FakeClock."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol, overload

MICROS = 1_000_000
# How much of the second rfc3339 renders: always six digits, none, or six when not zero.
Precision = Literal["microseconds", "seconds", "auto"]


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


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAIVE_EPOCH = EPOCH.replace(tzinfo=None)  # what rfc3339 renders: UTC, written as Z


def parse_rfc3339(text: str) -> int | None:
    """Microseconds since the epoch of an RFC 3339 time with its offset (`Z` or `+hh:mm`);
    None for text that is not one or has no offset. The one parser beside `rfc3339`."""
    try:
        stamp = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None
    return (stamp - EPOCH) // timedelta(microseconds=1)


@overload
def rfc3339(us: int, *, precision: Precision = "microseconds") -> str: ...
@overload
def rfc3339(us: int | None, *, precision: Precision = "microseconds") -> str | None: ...
def rfc3339(us: int | None, *, precision: Precision = "microseconds") -> str | None:
    """Render stored microseconds as RFC 3339 UTC (`2026-09-27T10:14:00.000000Z`), the one
    formatter of server and watcher. `precision` "seconds" drops the fraction (window keys);
    "auto" keeps it only when the instant has one (the watcher's query parameters)."""
    if us is None:
        return None
    # Integer arithmetic from the epoch: half the time of `fromtimestamp`, and every reply of
    # the hot routes renders one or more.
    stamp = NAIVE_EPOCH + timedelta(microseconds=us)
    if precision == "auto":
        precision = "microseconds" if stamp.microsecond else "seconds"
    # isoformat pads the year to four digits, which strftime("%Y") does not on Linux.
    return stamp.isoformat(timespec=precision) + "Z"
