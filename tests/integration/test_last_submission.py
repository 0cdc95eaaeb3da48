"""A source's last accepted submission, on SQLite and PostgreSQL: intake notes the source once
its submission commits, a flush writes it by the database's clock at most every COARSE_US,
and the reconciled gauge, `mainframe stats` and the board's endpoint page read it back, a
source silent past the threshold marked quiet."""

from __future__ import annotations

from typing import Any

import pytest

from mainframe.cli.stats import stats_figures, stats_lines
from mainframe.clock import MICROS, rfc3339
from mainframe.lifecycle.quiet import QUIET_AFTER_SECONDS
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import reconcile_once
from mainframe.store import Invalid, Presented, ScanSpec, Unauthorized, digest
from mainframe.store.accounts.authentication import COARSE_US
from mainframe.store.accounts.owners import OPERATOR
from tests.integration import test_board_pages
from tests.integration.conftest import World, issue, submit_scan
from tests.integration.test_board_pages import sign_in
from tests.integration.test_dead_letters import Desk

GAUGE = "mainframe_intake_last_submission_timestamp_seconds"


def last_submissions(world: World) -> dict[str, int | None]:
    """Each source of a live endpoint as `endpoint/source`, with its last submission."""
    snapshot = world.store.listings.snapshot()
    return {f"{s.endpoint}/{s.source}": s.at for s in snapshot.sources}


def submit(world: World, caller: Any, *, endpoint: str | None = None, name: str = "a") -> None:
    submit_scan(world.store, caller, endpoint=endpoint, queue="default", name=name,
                version="1", kind="scan", payload=None)  # fmt: skip


def gauge(world: World) -> dict[tuple[str, str], float]:
    """The gauge's series after one reconciliation into a fresh registry, by their labels."""
    metrics = Metrics()
    assert world.store.run(reconcile_once, world.store.target, metrics)
    [family] = [f for f in metrics.registry.collect() if f.name == GAUGE]
    return {(s.labels["endpoint"], s.labels["source"]): s.value for s in family.samples}


def test_an_accepted_submission_is_written_by_a_flush_at_most_every_coarse_interval(
    world: World,
) -> None:
    assert last_submissions(world) == {"npm/feed": None}, "issued, never submitted"
    world.submit("a")
    assert last_submissions(world) == {"npm/feed": None}, "the submission itself writes nothing"
    assert world.store.last_submissions.flush() == 1
    first = world.clock.now_us()
    assert last_submissions(world) == {"npm/feed": first}
    world.clock.advance(COARSE_US / 2 / MICROS)
    world.submit("a")  # its live key: accepted again, the scan as it was
    world.store.last_submissions.flush()
    assert last_submissions(world) == {"npm/feed": first}, "within the interval: not written"
    world.clock.advance(COARSE_US / MICROS)
    submit(world, world.source, endpoint="npm", name="b")  # naming its own endpoint
    world.store.last_submissions.flush()
    assert last_submissions(world) == {"npm/feed": world.clock.now_us()}
    assert world.store.last_submissions.flush() == 0, "nothing noted since: no transaction"


def test_only_a_sources_accepted_submissions_count(world: World) -> None:
    submit(world, world.owner, endpoint="npm")  # an owner's, by hand
    submit(world, None, endpoint="pypi")  # anonymous, into quarantine
    with pytest.raises(Unauthorized):
        submit(world, world.worker)
    with pytest.raises(Unauthorized):
        submit(world, Presented(digest("mfs_not-a-token")))
    with pytest.raises(Invalid):
        submit(world, world.source, endpoint="pypi")  # not its endpoint: refused
    # A batch whose every item the route refused reaches the store empty: nothing accepted.
    assert world.store.intake.submit_many(world.source, endpoint=None, specs=[]) == []
    assert world.store.last_submissions.flush() == 0
    assert last_submissions(world) == {"npm/feed": None}
    assert gauge(world) == {}, "no series for a source that never submitted"

    world.clock.advance(60)
    specs = [ScanSpec("a", "1"), ScanSpec("b", "1")]
    assert len(world.store.intake.submit_many(world.source, endpoint=None, specs=specs)) == 2
    assert world.store.last_submissions.flush() == 1
    assert last_submissions(world) == {"npm/feed": world.clock.now_us()}


def test_the_gauge_has_a_series_per_source_that_submitted_and_loses_a_deleted_ones(
    world: World,
) -> None:
    issue(world.store, "npm", "source", "cron")  # never submits
    world.submit("a")
    world.store.last_submissions.flush()
    at = world.clock.now_us() / MICROS
    assert gauge(world) == {("npm", "feed"): at}

    metrics = Metrics()  # one registry across reconciliations, as a server keeps it
    assert world.store.run(reconcile_once, world.store.target, metrics)
    assert metrics.registry.get_sample_value(GAUGE, {"endpoint": "npm", "source": "feed"}) == at
    [feed] = [t for t in world.store.owners.tokens(OPERATOR, "npm") if t.name == "feed"]
    world.store.owners.delete_token(OPERATOR, "npm", feed.id, origin="cli")
    assert world.store.run(reconcile_once, world.store.target, metrics)
    assert metrics.registry.get_sample_value(GAUGE, {"endpoint": "npm", "source": "feed"}) is None


def test_a_revoked_endpoints_sources_are_left_out(world: World) -> None:
    public = world.store.authentication.authenticate(issue(world.store, "pypi", "source", "pub"))
    submit(world, public)
    world.submit("a")
    world.store.last_submissions.flush()
    now = world.clock.now_us()
    assert last_submissions(world) == {"npm/feed": now, "pypi/pub": now}
    world.store.revocations.revoke(world.store.owners.owner_id("alice"), "pypi", origin="cli")
    assert last_submissions(world) == {"npm/feed": now}
    assert set(gauge(world)) == {("npm", "feed")}


def test_stats_mark_a_source_quiet_past_the_threshold_by_the_databases_clock(
    world: World,
) -> None:
    issue(world.store, "npm", "source", "cron")
    world.submit("a")
    world.store.last_submissions.flush()
    submitted = world.clock.now_us()
    world.clock.advance(QUIET_AFTER_SECONDS)
    figures = stats_figures(world.store.listings.snapshot())
    assert figures["sources"] == [
        {"endpoint": "npm", "source": "cron", "last_submitted_at": None,
         "silent_seconds": None, "quiet": False},
        {"endpoint": "npm", "source": "feed", "last_submitted_at": _seconds(submitted),
         "silent_seconds": QUIET_AFTER_SECONDS, "quiet": False},
    ]  # fmt: skip
    world.clock.advance(1)
    figures = stats_figures(world.store.listings.snapshot())
    assert [s["quiet"] for s in figures["sources"]] == [False, True]
    lines = stats_lines(figures)
    assert "npm/cron      never" in lines
    assert f"npm/feed      {_seconds(submitted)}, 3601 s ago  QUIET" in lines
    assert lines[-1] == (
        "1 source quiet: silent for over 3600 s since the last accepted submission "
        "(MAINFRAME_QUIET_SOURCE_SECONDS)"
    )
    shorter = stats_figures(world.store.listings.snapshot(), quiet_after=7200)
    assert not any(s["quiet"] for s in shorter["sources"]), "the threshold is the setting's"


def _seconds(us: int) -> str:
    return rfc3339(us, precision="seconds")


def test_the_board_shows_each_sources_last_submission_and_marks_a_quiet_one(
    board: Desk,
) -> None:
    issue(board.store, "pypi", "source", "cron")  # never submits
    sign_in(board, board.alice)
    section = _sources(board)
    assert "feed" in section and "cron" in section and ">never<" in section
    assert "quiet</span>" not in section

    board.ok("POST", "/api/v1/scans", board.source, {"name": "pkg", "version": "1"})
    board.store.last_submissions.flush()
    row = _row(_sources(board), "feed")
    assert 'data-label="Last submission"><time' in row and "just now" in row
    assert "quiet</span>" not in row and "stands-out" not in row

    board.clock.advance(QUIET_AFTER_SECONDS + 1)
    sign_in(board, board.alice)  # the board's sign-in lasted ten minutes
    section = _sources(board)
    row = _row(section, "feed")
    assert "1 h ago" in row and '<span class="status quiet">quiet</span>' in row
    assert 'class="stands-out"' in row
    assert "quiet</span>" not in _row(section, "cron"), "never submitted: not quiet"
    assert "silent for over 1h 0m" in section


def _sources(board: Desk) -> str:
    html = board.client.get("/board/endpoints/pypi").text
    return html.split('aria-labelledby="sources-heading"')[1].split("</section>")[0]


def _row(section: str, source: str) -> str:
    return next(r for r in section.split("<tr")[2:] if f"<bdi>{source}</bdi>" in r)


board = test_board_pages.board  # the board in process
