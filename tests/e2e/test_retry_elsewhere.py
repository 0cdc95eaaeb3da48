"""A bad worker cannot kill good scans: two `mainframe worker` processes on one endpoint of a
real server, one whose command always fails and one whose command always succeeds. Each scan
the bad worker fails goes to the good one, so every scan finishes with its attempts on record
and none becomes a dead letter."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli, mainframe_env

SCANS = 60


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def start_worker(url: str, server: str, token: str, *command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mainframe", "worker", "--url", server, "--token", token,
         "--poll-interval", "0.2", "--", *command],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=mainframe_env(url),
    )  # fmt: skip


def test_no_good_scan_dead_letters_while_another_worker_asks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    cli(url, "db", "upgrade")
    owner = cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    bad = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "broken-disk")
    good = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "healthy")
    source = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    # Retries are due at once, so only the rule keeps the bad worker from a scan's attempts.
    with ServerProcess(url, tmp_path, MAINFRAME_RETRY_BASE_SECONDS="0") as server:
        # The healthy worker takes a tenth of a second a scan, so the batch outlasts a few of
        # the broken one's polls however busy the machine: both lease from it.
        workers = [start_worker(url, server.url, bad, "false"),
                   start_worker(url, server.url, good, "sleep", "0.1")]  # fmt: skip
        try:
            with httpx.Client(base_url=server.url, timeout=10) as http:

                def both_asked() -> bool:
                    listed = http.get("/api/v1/endpoints/pypi/tokens", headers=auth(owner))
                    used = {t["name"]: t["last_used_at"] for t in listed.json()["tokens"]}
                    return bool(used["broken-disk"] and used["healthy"])

                wait_for(both_asked, timeout=30, what="both workers' polls on record")
                scans = [{"name": f"pkg-{i}", "version": "1"} for i in range(SCANS)]
                sent = http.post("/api/v1/scans/batch", headers=auth(source), json={"scans": scans})
                assert sent.status_code in (200, 201), sent.text

                def ended() -> list[dict[str, Any]]:
                    got = http.get("/api/v1/scans?limit=500", headers=auth(owner)).json()
                    listed = got["scans"]
                    done = [s for s in listed if s["status"] in ("FINISHED", "FAILED")]
                    return listed if len(done) == SCANS else []

                listed = wait_for(ended, timeout=90, what=f"{SCANS} scans ended")
                shown = [
                    http.get(f"/api/v1/scans/{s['scan_id']}", headers=auth(owner)).json()
                    for s in listed
                ]
                attempts = [scan["attempts"] for scan in shown]
        finally:
            for proc in workers:
                proc.terminate()
                proc.wait(timeout=30)
    assert Counter(s["status"] for s in listed) == {"FINISHED": SCANS}
    by = Counter((a["worker"], a["outcome"]) for history in attempts for a in history)
    assert by[("broken-disk", "failed")] > 0  # the bad worker did get scans, and failed them
    assert set(by) <= {("broken-disk", "failed"), ("healthy", "finished")}
    for history in attempts:  # the bad worker failed each at most once, and stays on record
        assert [a["worker"] for a in history].count("broken-disk") <= 1
        assert history[-1]["worker"] == "healthy"
