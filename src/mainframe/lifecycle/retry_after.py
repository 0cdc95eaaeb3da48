"""A `Retry-After` header read one way wherever one arrives (a hook's receiver, a watcher's
source): delay-seconds or an HTTP date (RFC 9110, section 10.2.3), measured from a `now` passed
in, then held within the caller's bound. The rule, case by case, is in docs/hooks.md and
docs/watch.md."""

from __future__ import annotations

import email.utils
import math
import re
from dataclasses import dataclass
from datetime import UTC, timedelta

from mainframe.clock import EPOCH, MICROS

# Delay-seconds: ASCII digits, with a sign and a fraction tolerated. Anything else that is
# not an HTTP date (`1e3`, `inf`, `1_000`, other scripts' digits) is no Retry-After at all.
_SECONDS = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True, slots=True)
class Wait:
    """What a Retry-After asked, in seconds from now (negative for a time already past), and
    the wait honoured: the same, held within [0, the caller's bound]."""

    asked: float
    seconds: float

    @property
    def bounded(self) -> bool:
        """Whether the wait differs from what was asked (a past time, or beyond the bound)."""
        return self.seconds != self.asked


def retry_after_seconds(value: str | None, *, now_us: int) -> float | None:
    """What a Retry-After value asks, in seconds from `now_us` (negative for a date in the
    past or a negative number); None when there is none or it is neither delay-seconds nor an
    HTTP date, so the caller backs off as if none had come."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime dates and a `-0000` zone: HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return ((when - EPOCH) // timedelta(microseconds=1) - now_us) / MICROS


def bound(asked: float, *, cap: float) -> Wait:
    """The wait honoured for `asked` seconds: none for a time past, at most `cap`; what is
    not a number waits the cap."""
    seconds = cap if math.isnan(asked) else min(max(asked, 0.0), cap)
    return Wait(asked, seconds)
