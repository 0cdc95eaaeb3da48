"""A paused queue across server processes: two `mainframe serve` on one PostgreSQL, the queue
paused through one of them, workers polling both with complete-and-fetch: no scan of the
paused queue is leased by either process, the other queue drains, a lease taken before the
pause completes, and the resume (through the other process) hands the held scans out in the
order they were submitted; nothing is dead-lettered. The process that pauses or resumes shows
`mainframe_queue_paused` at once; the other sees it, and the held scans as `paused`, at its
next reconciliation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def drain(servers: list[ServerProcess], worker: str, rounds: int = 20) -> list[str]:
    """Poll every server in turn, finishing each job with ?next=1, until none has work."""
    names: list[str] = []
    for _ in range(rounds):
        got = False
        for server in servers:
            with httpx.Client(base_url=server.url, headers=auth(worker), timeout=10) as http:
                jobs: list[dict[str, Any]] = http.post("/api/v1/jobs?batch=5").json()
                while jobs:
                    got = True
                    job = jobs.pop(0)
                    names.append(job["name"])
                    body = {"outcome": "finished", "attempt": job["attempt"],
                            "assignment_id": job["assignment_id"]}  # fmt: skip
                    done = http.post(f"/api/v1/jobs/{job['scan_id']}/result?next=1", json=body)
                    assert done.status_code == 200, done.text
                    jobs += done.json()["next"]
        if not got:
            return names
    raise AssertionError("the servers kept handing out work")


def test_no_process_leases_a_paused_queue_and_the_resume_keeps_its_order(
    pg_url: str, tmp_path: Path
) -> None:
    cli(pg_url, "owner", "create", "ops")
    owner = cli(pg_url, "owner", "create", "ops2")  # another owner, for a 404
    cli(pg_url, "endpoint", "create", "pypi", "--owner", "ops")
    worker = cli(pg_url, "token", "create", "--endpoint", "pypi", "--worker", "w1")
    source = cli(pg_url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    with ServerProcess(pg_url, tmp_path) as a, ServerProcess(pg_url, tmp_path) as b:
        with httpx.Client(base_url=a.url, timeout=10) as http:
            submit = lambda name, queue: http.post(  # noqa: E731
                "/api/v1/scans", headers=auth(source), json={"name": name, "version": "1",
                                                              "queue": queue},
            )  # fmt: skip
            assert submit("early", "held").status_code == 201
            [held] = http.post("/api/v1/jobs", headers=auth(worker)).json()  # out before
            for i in range(20):
                assert submit(f"held-{i:02}", "held").status_code == 201
                assert submit(f"free-{i:02}", "free").status_code == 201
            paused = cli(pg_url, "queue", "pause", "pypi", "held")
            assert "paused; 20 scans held back" in paused
            for i in range(20, 25):
                assert submit(f"held-{i:02}", "held").status_code == 201  # intake goes on
        leased = drain([a, b], worker)
        assert sorted(leased) == [f"free-{i:02}" for i in range(20)], leased
        with httpx.Client(base_url=b.url, timeout=10) as http:
            body = {"outcome": "finished", "attempt": 1, "assignment_id": held["assignment_id"]}
            done = http.post(f"/api/v1/jobs/{held['scan_id']}/result", json=body,
                             headers=auth(worker))  # fmt: skip
            assert done.status_code == 200 and done.json()["status"] == "FINISHED"
            refused = http.post("/api/v1/endpoints/pypi/queues/held/resume", headers=auth(owner))
            assert refused.status_code == 404
        resumed = cli(pg_url, "queue", "resume", "pypi", "held")
        assert "resumed; 25 scans due again" in resumed
        assert drain([b, a], worker) == [f"held-{i:02}" for i in range(25)]
    for server in (a, b):
        assert not [e for e in server.log_events() if e["event"] == "scan_dead_lettered"]


HELD = 'mainframe_queue_paused{endpoint="pypi",queue="held"}'


def metrics_of(server: ServerProcess) -> str:
    return httpx.get(server.url + "/metrics", timeout=10, trust_env=False).text


def shows(server: ServerProcess, *lines: str) -> str | None:
    """The server's /metrics when it holds every line, else None."""
    text = metrics_of(server)
    return text if all(line in text.splitlines() for line in lines) else None


def test_the_pausing_process_shows_the_gauge_at_once_and_the_other_reconciles_it(
    pg_url: str, tmp_path: Path
) -> None:
    owner = cli(pg_url, "owner", "create", "ops")
    cli(pg_url, "endpoint", "create", "pypi", "--owner", "ops")
    source = cli(pg_url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    # `a` never reconciles during the test: what it shows, it set itself.
    never, often = (
        {"MAINFRAME_METRICS_REFRESH_SECONDS": "600"},
        {"MAINFRAME_METRICS_REFRESH_SECONDS": "0.5"},
    )
    with (
        ServerProcess(pg_url, tmp_path, **never) as a,
        ServerProcess(pg_url, tmp_path, **often) as b,
        httpx.Client(base_url=a.url, headers=auth(owner), timeout=10) as http,
    ):
        for name, queue in (("h1", "held"), ("h2", "held"), ("h3", "held"), ("f1", "free")):
            body = {"name": name, "version": "1", "queue": queue}
            submitted = http.post("/api/v1/scans", json=body, headers=auth(source))
            assert submitted.status_code == 201
        assert http.post("/api/v1/endpoints/pypi/queues/held/pause").status_code == 200
        assert shows(a, f"{HELD} 1.0", 'packages_queue{state="paused"} 0.0'), metrics_of(a)
        wait_for(
            lambda: shows(b, f"{HELD} 1.0", 'packages_queue{state="paused"} 3.0',
                          'packages_queue{state="queued"} 1.0'),
            timeout=15, what="the other process reconciled the pause",
        )  # fmt: skip
        assert http.post("/api/v1/endpoints/pypi/queues/held/resume").status_code == 200
        assert shows(a, f"{HELD} 0.0"), metrics_of(a)
        wait_for(
            lambda: shows(b, f"{HELD} 0.0", 'packages_queue{state="paused"} 0.0',
                          'packages_queue{state="queued"} 4.0'),
            timeout=15, what="the other process reconciled the resume",
        )  # fmt: skip
