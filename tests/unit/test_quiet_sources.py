"""Intake's dead-man's switch without a database: when a source counts as quiet (time passed
in, never read), the gauge's series as reconciliations come and go, `mainframe stats`' lines,
and a last submission noted while the database is away kept for the next flush."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from mainframe.cli.stats import source_lines
from mainframe.clock import MICROS
from mainframe.lifecycle.quiet import QUIET_AFTER_SECONDS, is_quiet, silent_for
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import apply_submissions
from mainframe.store import Database, LastSubmission, Unavailable
from mainframe.store.accounts.submissions import LastSubmissions

NOW = 1_790_000_000 * MICROS
GAUGE = "mainframe_intake_last_submission_timestamp_seconds"


def test_a_source_is_quiet_only_past_the_threshold() -> None:
    hour = QUIET_AFTER_SECONDS
    assert not is_quiet(NOW - 3600 * MICROS, now=NOW, quiet_after=hour), "at it: not yet"
    assert is_quiet(NOW - 3600 * MICROS - 1, now=NOW, quiet_after=hour)
    assert not is_quiet(NOW - 10 * MICROS, now=NOW, quiet_after=hour)
    assert is_quiet(NOW - 11 * MICROS, now=NOW, quiet_after=10)


def test_a_source_that_never_submitted_is_not_quiet() -> None:
    assert not is_quiet(None, now=NOW, quiet_after=0.001)
    assert silent_for(None, now=NOW) is None


def test_a_submission_stamped_after_now_is_silent_for_no_time() -> None:
    # Another host's flush may stamp a moment after this read's now.
    assert silent_for(NOW + 5 * MICROS, now=NOW) == 0
    assert not is_quiet(NOW + 5 * MICROS, now=NOW, quiet_after=0.001)
    assert silent_for(NOW - 1_500_000, now=NOW) == 1.5


def last(endpoint: str, source: str, at: int | None) -> LastSubmission:
    return LastSubmission(endpoint, source, at, NOW)


def series(metrics: Metrics) -> dict[tuple[str, str], float]:
    [family] = [f for f in metrics.registry.collect() if f.name == GAUGE]
    return {(s.labels["endpoint"], s.labels["source"]): s.value for s in family.samples}


def test_the_gauge_follows_the_sources_that_submitted() -> None:
    metrics = Metrics()
    apply_submissions(metrics, (last("pypi", "feed", None),))
    assert series(metrics) == {}, "never submitted: no series, so the alert has none"
    apply_submissions(metrics, (last("pypi", "feed", NOW), last("npm", "cron", None)))
    assert series(metrics) == {("pypi", "feed"): NOW / MICROS}
    later = NOW + 90 * MICROS
    apply_submissions(metrics, (last("pypi", "feed", later), last("npm", "cron", NOW)))
    assert series(metrics) == {("pypi", "feed"): later / MICROS, ("npm", "cron"): NOW / MICROS}
    apply_submissions(metrics, (last("npm", "cron", NOW),))  # feed's credential deleted
    assert series(metrics) == {("npm", "cron"): NOW / MICROS}


def test_stats_say_which_sources_are_quiet_and_by_which_setting() -> None:
    assert source_lines({"sources": [], "quiet_after_seconds": 3600.0}) == [
        "no source credentials: nothing to be quiet"
    ]
    sources = [
        {"endpoint": "pypi", "source": "feed", "last_submitted_at": "2026-09-27T10:14:00Z",
         "silent_seconds": 12.5, "quiet": False},
        {"endpoint": "pypi", "source": "nightly-registry-mirror", "last_submitted_at": None,
         "silent_seconds": None, "quiet": False},
    ]  # fmt: skip
    lines = source_lines({"sources": sources, "quiet_after_seconds": 3600.0})
    assert lines[0].split() == ["SOURCE", "LAST", "SUBMISSION"]
    assert lines[1].split() == ["pypi/feed", "2026-09-27T10:14:00Z,", "12.5", "s", "ago"]
    assert lines[2].split() == ["pypi/nightly-registry-mirror", "never"]
    assert lines[-1] == (
        "no source quiet: none that submitted has been silent for over 3600 s "
        "(MAINFRAME_QUIET_SOURCE_SECONDS)"
    )
    both = [dict(s, quiet=True, silent_seconds=7200.0) for s in sources[:1]] * 2
    assert source_lines({"sources": both, "quiet_after_seconds": 60.0})[-1].startswith(
        "2 sources quiet: silent for over 60 s since the last accepted submission"
    )


class Away:
    """A database that refuses every transaction until it is back, then records the digests
    each flush writes."""

    def __init__(self) -> None:
        self.back = False
        self.written: list[list[str]] = []

    @asynccontextmanager
    async def write(self, *, lasting: bool = False) -> AsyncIterator[Away]:
        if not self.back:
            raise Unavailable("database_unavailable", "the database is away")
        yield self

    async def many(self, _sql: object, params: Sequence[Mapping[str, Any]]) -> None:
        self.written.append([str(p["digest"]) for p in params])


def test_a_last_submission_noted_while_the_database_is_away_is_written_when_it_is_back() -> None:
    db = Away()
    noted = LastSubmissions(cast(Database, db))
    noted.note("digest-b")
    noted.note("digest-a")
    with pytest.raises(Unavailable):
        asyncio.run(noted.flush())
    noted.note("digest-c")
    db.back = True
    assert asyncio.run(noted.flush()) == 3
    assert db.written == [["digest-a", "digest-b", "digest-c"]]  # in one order for every process
    assert asyncio.run(noted.flush()) == 0 and len(db.written) == 1
