"""`mainframe stats` as an operator reads it: a header, one line per state and outcome with
its meaning, each source's last submission with the quiet ones marked, and JSON with plain
nested keys for `jq`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mainframe.cli.stats import OUTCOME_MEANINGS, QUEUE_MEANINGS
from mainframe.clock import MICROS, FakeClock
from mainframe.store import Budget, Report, ScanSpec, Store, open_database
from tests.blocking import Blocking, portal
from tests.serverproc import cli, cli_run


def test_stats_in_words_and_as_nested_json(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    assert cli_run(url, "db", "upgrade").exit_code == 0
    cli(url, "owner", "create", "alice")
    cli(url, "endpoint", "create", "pypi")
    source_secret = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    worker_secret = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "w")
    with portal() as loop:
        store = Blocking(
            Store.build(open_database(url), Budget.of(job_timeout=30, max_attempts=3)), loop
        )
        source = store.authentication.authenticate(source_secret)
        worker = store.authentication.authenticate(worker_secret)
        for name in ("a", "b", "c"):
            store.intake.submit(source, endpoint=None, spec=ScanSpec(name, "1"))
        first, _held = store.leasing.lease(worker, 2)
        done = Report("finished", True, first.attempt, first.assignment_id, None, None, None)
        store.results.report(worker, first.scan_id, done)
        store.close()

    plain = cli_run(url, "stats")
    assert plain.exit_code == 0 and plain.stderr == ""
    lines = plain.stdout.splitlines()
    assert lines[0].split() == ["LIVE", "SCANS", "COUNT", "MEANING"]
    rows = {line.split()[0]: line for line in lines if line and not line.isupper()}
    assert rows["queued"].split()[1] == "1" and rows["pending"].split()[1] == "1"
    assert QUEUE_MEANINGS["retryable"] in rows["retryable"]
    assert "OUTCOMES" in plain.stdout and rows["finished"].split()[1] == "1"
    assert "dead letters" in plain.stdout and "{" not in plain.stdout

    figures = json.loads(cli_run(url, "stats", "--json").stdout)
    assert figures["queue"] == dict.fromkeys(QUEUE_MEANINGS, 0) | {"queued": 1, "pending": 1}
    assert figures["outcomes"] == dict.fromkeys(OUTCOME_MEANINGS, 0) | {"finished": 1}
    assert figures["oldest_queued_age_seconds"] >= 0


def test_stats_show_a_paused_queues_scans_apart_from_the_due_backlog(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    assert cli_run(url, "db", "upgrade").exit_code == 0
    cli(url, "owner", "create", "alice")
    cli(url, "endpoint", "create", "pypi")
    source_secret = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    with portal() as loop:
        store = Blocking(
            Store.build(open_database(url), Budget.of(job_timeout=30, max_attempts=3)), loop
        )
        source = store.authentication.authenticate(source_secret)
        for name, queue in (("a", "slow"), ("b", "slow"), ("c", "fast")):
            store.intake.submit(source, endpoint=None, spec=ScanSpec(name, "1", queue))
        store.close()
    assert "paused; 2 scans held back" in cli(url, "queue", "pause", "pypi", "slow")

    figures = json.loads(cli_run(url, "stats", "--json").stdout)
    assert figures["queue"] == dict.fromkeys(QUEUE_MEANINGS, 0) | {"queued": 1, "paused": 2}
    assert figures["oldest_queued_age_seconds"] > 0, "the fast queue's scan is due and waits"
    lines = cli_run(url, "stats").stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line and not line.isupper()}
    assert rows["paused"].split()[1] == "2" and QUEUE_MEANINGS["paused"] in rows["paused"]
    assert "2 scans held by paused queues are not counted there: see paused above" in lines


def test_stats_name_each_sources_last_submission_and_mark_the_quiet_ones(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    assert cli_run(url, "db", "upgrade").exit_code == 0
    cli(url, "owner", "create", "alice")
    cli(url, "endpoint", "create", "pypi")
    feed_secret = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    cli(url, "token", "create", "--endpoint", "pypi", "--source", "cron")
    two_hours_ago = FakeClock(round(time.time() * MICROS) - 7200 * MICROS)
    with portal() as loop:
        db = open_database(url, clock=two_hours_ago)  # SQLite's clock is the process's
        store = Blocking(Store.build(db, Budget.of(job_timeout=30, max_attempts=3)), loop)
        feed = store.authentication.authenticate(feed_secret)
        store.intake.submit(feed, endpoint=None, spec=ScanSpec("a", "1"))
        store.last_submissions.flush()
        store.close()

    lines = cli_run(url, "stats").stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.startswith("pypi/")}
    assert rows["pypi/cron"].split()[1:] == ["never"]
    assert rows["pypi/feed"].endswith("s ago  QUIET")
    assert lines[-1].startswith("1 source quiet: silent for over 3600 s")
    figures = json.loads(cli_run(url, "stats", "--json").stdout)
    [cron, feed_figures] = figures["sources"]
    assert cron == {"endpoint": "pypi", "source": "cron", "last_submitted_at": None,
                    "silent_seconds": None, "quiet": False}  # fmt: skip
    assert feed_figures["quiet"] and 7200 <= feed_figures["silent_seconds"] < 7300
    assert figures["quiet_after_seconds"] == 3600

    # The board's and the stats' threshold is the setting's.
    patient = cli_run(url, "stats", "--json", MAINFRAME_QUIET_SOURCE_SECONDS="86400").stdout
    assert [s["quiet"] for s in json.loads(patient)["sources"]] == [False, False]
