"""The metrics of docs/observability.md, scraped from a real server as a dead letter
happens, and a source's last submission scraped from every server process sharing one
database."""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import httpx

from tests.e2e.test_server import auth, provision
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

LAST_SUBMISSION = "mainframe_intake_last_submission_timestamp_seconds"


def scrape(http: httpx.Client) -> dict[str, float]:
    series: dict[str, float] = {}
    for line in http.get("/metrics").text.splitlines():
        match = re.fullmatch(r"([a-z_]+(?:\{[^}]*\})?) (\S+)", line)
        if match:
            series[match[1]] = float(match[2])
    return series


def test_counters_and_gauges_move_as_the_seed_says(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    env = {
        "MAINFRAME_JOB_TIMEOUT": "1",
        "MAINFRAME_MAX_JOB_ATTEMPTS": "2",
        "MAINFRAME_METRICS_REFRESH_SECONDS": "0.2",
        # No sweeper during the test: the exhausted state must be seen before a poll reaps it.
        "MAINFRAME_SWEEP_SECONDS": "3600",
    }
    worker, source = auth(tokens["worker"]), auth(tokens["source"])
    with ServerProcess(url, tmp_path, **env) as server, httpx.Client(base_url=server.url) as http:
        first = scrape(http)
        for name in (
            "packages_dead_lettered_total",
            "packages_fail_total",
            "packages_success_total",
            'packages_queue{state="exhausted"}',
            'packages_scan_outcomes{outcome="dead_lettered"}',
        ):
            assert first[name] == 0, name
        assert abs(first["performance_snapshot_timestamp_seconds"] - time.time()) < 30

        ok = http.post("/api/v1/scans", headers=source, json={"name": "ok", "version": "1"})
        doomed = http.post("/api/v1/scans", headers=source, json={"name": "bad", "version": "2"})
        jobs = http.post("/api/v1/jobs?batch=2", headers=worker).json()
        by_id = {job["scan_id"]: job for job in jobs}
        good = by_id[ok.json()["scan_id"]]
        http.post(
            f"/api/v1/jobs/{good['scan_id']}/result",
            headers=worker,
            json={"outcome": "finished", "attempt": 1, "assignment_id": good["assignment_id"]},
        )
        assert scrape(http)["packages_success_total"] == 1
        # Polls find nothing until the doomed scan's one-second lease lapses; then it is leased
        # again, its second and last attempt, which is left to lapse too.
        [again] = wait_for(
            lambda: http.post("/api/v1/jobs", headers=worker).json(),
            timeout=15,
            what="the doomed scan leased again after its lease lapsed",
        )
        assert again["scan_id"] == doomed.json()["scan_id"] and again["attempt"] == 2
        exhausted = wait_for(
            lambda: (lambda m: m if m['packages_queue{state="exhausted"}'] == 1 else None)(
                scrape(http)
            ),
            timeout=15,
            what="the exhausted gauge at 1",
        )
        assert exhausted["packages_dead_lettered_total"] == 0
        assert http.post("/api/v1/jobs", headers=worker).json() == []  # this poll reaps it
        after = scrape(http)
        assert after["packages_dead_lettered_total"] == 1
        assert after["packages_fail_total"] == 1
        assert after['packages_reaped_total{reason="lease_expired"}'] == 1
        assert after['packages_attempt_failures_total{outcome="lease_expired"}'] == 1
        settled = wait_for(
            lambda: (lambda m: m if m['packages_queue{state="exhausted"}'] == 0 else None)(
                scrape(http)
            ),
            timeout=15,
            what="the exhausted gauge back at 0",
        )
        assert settled['packages_scan_outcomes{outcome="dead_lettered"}'] == 1
        assert settled['packages_scan_outcomes{outcome="finished"}'] == 1
        assert settled['packages_scan_outcomes{outcome="failed"}'] == 0
        assert (
            settled["performance_snapshot_timestamp_seconds"]
            > first["performance_snapshot_timestamp_seconds"]
        )
        assert any(
            k.startswith(
                'mainframe_http_request_duration_seconds_count{method="POST",route="/api/v1/jobs"'
            )
            for k in settled
        )
    [line] = [e for e in server.log_events() if e["event"] == "scan_dead_lettered"]
    assert line["level"] == "error" and line["package_name"] == "bad"
    assert line["package_version"] == "2" and line["attempt_count"] == 2
    assert line["prior_worker"] == "scanner-1" and line["reason"] == "lease_expired"
    assert line["leased_at"] and line["endpoint"] == "pypi" and line["queue"] == "default"


def last_submissions(http: httpx.Client) -> dict[str, float]:
    """The last-submission gauge's series, by their labels as scraped."""
    return {
        name.removeprefix(LAST_SUBMISSION): value
        for name, value in scrape(http).items()
        if name.startswith(LAST_SUBMISSION + "{")
    }


def test_a_sources_last_submission_is_on_every_server_of_the_database(
    database_url: str, tmp_path: Path
) -> None:
    """A source submits through one server; every server (two on PostgreSQL) shows its last
    submission, labelled by endpoint and source, at about when it was accepted. A source that
    never submitted, and an owner submitting by hand, have no series."""
    tokens = provision(database_url)
    cli(database_url, "token", "create", "--endpoint", "pypi", "--source", "cron")  # silent
    count = 1 if database_url.startswith("sqlite") else 2
    env = {"MAINFRAME_METRICS_REFRESH_SECONDS": "0.2"}
    with ExitStack() as stack:
        servers = [stack.enter_context(ServerProcess(database_url, tmp_path, **env))
                   for _ in range(count)]  # fmt: skip
        with httpx.Client(base_url=servers[0].url) as first:
            assert last_submissions(first) == {}, "nothing submitted yet: no series"
            by_hand = {"name": "by-hand", "version": "1", "endpoint": "pypi"}
            made = first.post("/api/v1/scans", headers=auth(tokens["owner"]), json=by_hand)
            assert made.status_code == 201
            accepted = time.time()
            fed = {"name": "fed", "version": "1"}
            made = first.post("/api/v1/scans", headers=auth(tokens["source"]), json=fed)
            assert made.status_code == 201
        for server in servers:
            with httpx.Client(base_url=server.url) as http:
                found = wait_for(
                    partial(last_submissions, http),
                    timeout=30,
                    what=f"the source's last submission on {server.url}/metrics",
                )
                scraped = time.time()
            assert set(found) == {'{endpoint="pypi",source="feed"}'}, found
            # Written by the database's clock within a flush (5 s) of the submission.
            assert accepted - 1 <= found['{endpoint="pypi",source="feed"}'] <= scraped
