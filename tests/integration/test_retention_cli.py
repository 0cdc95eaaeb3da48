"""`mainframe db prune` on both databases, against the real clock: a dry run says what would
go per kind and changes nothing, a prune removes exactly that, with the server's retention
settings (and a bad one refused with one line naming it). The rows were written ten days
ago through a store on a fake clock."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal
from sqlalchemy import Engine

from mainframe.clock import MICROS, FakeClock
from mainframe.lifecycle.retention import DAY_US
from tests.integration.conftest import open_world
from tests.integration.test_retention import Kept
from tests.serverproc import cli_run


@pytest.fixture
def aged(database_url: str, loop: BlockingPortal, engine: Engine) -> Iterator[Kept]:
    """A finished scan, a plain failure and a dead letter, all ended ten days ago."""
    ten_days_ago = FakeClock(time.time_ns() // 1000 - 10 * DAY_US)
    found = Kept(open_world(database_url, loop, ten_days_ago), engine)
    found.finish("done")
    found.fail("broken")
    found.dead_letter("gone")
    found.clock.advance(60)
    yield found
    found.store.close()


def test_a_dry_run_says_what_would_go_and_changes_nothing(aged: Kept, database_url: str) -> None:
    before = aged.rows()
    done = cli_run(database_url, "db", "prune", "--dry-run", MAINFRAME_AUDIT_RETENTION_DAYS="never")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines == [
        "finished                 1 scan  with 1 attempt          kept 7 days",
        "failed                   0 scans with 0 attempts         kept 30 days",
        "dead_lettered            0 scans with 0 attempts         kept 90 days",
        "audit                    - rows                          kept forever",
        "delivery_counts          0 rows                          kept 35 days",
        "board_sessions           0 rows                          kept 1 day",
        "dry run: 1 row and 1 attempt would be pruned",
    ]
    assert aged.rows() == before


def test_a_prune_removes_what_the_dry_run_named(aged: Kept, database_url: str) -> None:
    before = aged.rows()
    env = {"MAINFRAME_DEAD_LETTER_RETENTION_DAYS": "9.5"}
    dry = cli_run(database_url, "db", "prune", "--dry-run", **env)
    assert "dead_lettered            1 scan  with 3 attempts" in dry.stdout
    done = cli_run(database_url, "db", "prune", **env)
    assert done.exit_code == 0, done.output
    assert "pruned finished         1" in done.stdout
    assert "pruned dead_lettered    1" in done.stdout
    assert done.stdout.splitlines()[-1] == "pruned 2 rows and 4 attempts"
    after = aged.rows()
    assert (after["finished"], after["dead_lettered"], after["failed"]) == (0, 0, 1)
    assert after["attempts"] == before["attempts"] - 4
    assert after["audit"] == before["audit"]  # ten days old: within the year
    again = cli_run(database_url, "db", "prune", **env)
    assert again.exit_code == 0
    assert again.stdout.strip() == "nothing is past its retention; nothing pruned"


def test_a_bad_retention_is_refused_naming_the_setting(aged: Kept, database_url: str) -> None:
    done = cli_run(database_url, "db", "prune", MAINFRAME_FINISHED_RETENTION_DAYS="forever")
    assert done.exit_code == 2
    assert "invalid setting MAINFRAME_FINISHED_RETENTION_DAYS" in done.stderr
    assert aged.rows()["finished"] == 1


def test_the_totals_stay_when_the_scans_go(aged: Kept, database_url: str) -> None:
    snapshot = aged.store.listings.snapshot()
    assert cli_run(database_url, "db", "prune", MAINFRAME_FAILED_RETENTION_DAYS="0").exit_code == 0
    assert aged.rows()["failed"] == 0
    assert aged.store.listings.snapshot().outcomes == snapshot.outcomes
    assert abs(aged.clock.now_us() - (time.time_ns() // 1000 - 10 * DAY_US)) < 120 * MICROS
