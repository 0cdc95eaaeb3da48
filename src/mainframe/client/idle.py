"""What an idle worker may still lease: the scans whose retry it scheduled (a result's reply
says when each is due, `available_at`), so `--idle-exit` waits for them rather than leaving
them to nobody. Plain bookkeeping over times given to it (seconds since the epoch)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# How long after a retry fell due the worker still waits for it: polls that find nothing then
# mean another worker took it, or its queue was paused; also covers clocks a little apart.
LATER_GRACE = 10.0


@dataclass
class LaterScans:
    """Scans this worker expects to lease later, each with when it is due."""

    due: dict[int, float] = field(default_factory=dict)

    def expect(self, scan_id: int, at: float) -> None:
        self.due[scan_id] = at

    def leased(self, scan_ids: Iterable[int]) -> None:
        for scan_id in scan_ids:
            self.due.pop(scan_id, None)

    def next_due(self, now: float, grace: float = LATER_GRACE) -> float | None:
        """The soonest a scan is due, forgetting those due more than `grace` ago; None when
        nothing is expected."""
        self.due = {scan_id: at for scan_id, at in self.due.items() if at + grace >= now}
        return min(self.due.values(), default=None)


def idle_pause(
    *, now: float, idle_since: float, due: float | None, bound: float, poll_interval: float
) -> float | None:
    """How long an idle `--idle-exit` worker sleeps before polling again, or None to exit:
    nothing is expected, or the next scan is due after the bound on waiting."""
    if due is None or due > idle_since + bound:
        return None
    return poll_interval if due <= now else min(poll_interval, due - now)
