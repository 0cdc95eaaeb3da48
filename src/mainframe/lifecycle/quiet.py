"""A quiet source: one whose last accepted submission is older than a threshold. The board's
endpoint page and `mainframe stats` mark it; the `MainframeSourceQuiet` alert pages on the
same condition (docs/observability.md, "Quiet sources"). A source that never submitted is
not quiet: nothing stopped, and the alert has no series to fire on either."""

from __future__ import annotations

from mainframe.clock import MICROS

# An hour without an accepted submission: the default of MAINFRAME_QUIET_SOURCE_SECONDS and
# the `> 3600` of MainframeSourceQuiet in deploy/prometheus/alerts.yml, held equal by
# tests/integration/test_alert_rules.py. A feed that polls a registry every few minutes has
# missed a dozen rounds by then; one that runs hourly wants a larger number in both places.
QUIET_AFTER_SECONDS = 3600.0


def silent_for(last_submitted_at: int | None, *, now: int) -> float | None:
    """Seconds since the last accepted submission (never negative), or None for never."""
    if last_submitted_at is None:
        return None
    return max(0, now - last_submitted_at) / MICROS


def is_quiet(last_submitted_at: int | None, *, now: int, quiet_after: float) -> bool:
    """Whether the last accepted submission was more than `quiet_after` seconds before `now`
    (microseconds, the database's clock); never for a source that has not submitted."""
    silent = silent_for(last_submitted_at, now=now)
    return silent is not None and silent > quiet_after
