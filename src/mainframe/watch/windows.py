"""Closed time windows with stable keys.

A window is identified by its start and length (`2026-09-27T10:14:00Z/60s`), so every
retry, overlapping invocation and watcher process names the same window the same way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from mainframe.clock import MICROS, rfc3339


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
