"""A real server at a retention of zero: a scan finished over HTTP is pruned by the server's
own sweeper, counted on /metrics and logged once, while the outcome totals keep counting it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.e2e.test_metrics import scrape
from tests.e2e.test_server import auth, provision
from tests.polling import wait_for
from tests.serverproc import ServerProcess

PRUNED = 'mainframe_pruned_rows_total{kind="%s"}'


def test_the_sweeper_prunes_a_finished_scan_and_counts_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    env = {
        "MAINFRAME_SWEEP_SECONDS": "0.2",
        "MAINFRAME_METRICS_REFRESH_SECONDS": "0.2",
        "MAINFRAME_FINISHED_RETENTION_DAYS": "0",
    }
    owner, worker, source = (auth(tokens[k]) for k in ("owner", "worker", "source"))
    with ServerProcess(url, tmp_path, **env) as server, httpx.Client(base_url=server.url) as http:
        assert scrape(http)[PRUNED % "finished"] == 0
        created = http.post("/api/v1/scans", headers=source, json={"name": "ok", "version": "1"})
        [job] = http.post("/api/v1/jobs?batch=1", headers=worker).json()
        body = {"outcome": "finished", "attempt": 1, "assignment_id": job["assignment_id"]}
        done = http.post(f"/api/v1/jobs/{job['scan_id']}/result", headers=worker, json=body)
        assert done.status_code == 200, done.text

        series = wait_for(
            lambda: (s := scrape(http))[PRUNED % "finished"] == 1 and s,
            timeout=15,
            what="the finished scan pruned",
        )
        assert series[PRUNED % "attempts"] == 1
        scan_id = created.json()["scan_id"]
        assert http.get(f"/api/v1/scans/{scan_id}", headers=owner).status_code == 404
        outcomes = wait_for(
            lambda: scrape(http)['packages_scan_outcomes{outcome="finished"}'],
            timeout=15,
            what="the finished outcome counted",
        )
        assert outcomes == 1 and series["packages_success_total"] == 1
        [line] = [e for e in server.log_events() if e.get("event") == "pruned"]
        assert (line["kind"], line["count"], line["attempts"]) == ("finished", 1, 1)
