"""Failing over to a synchronous standby (docs/scale-out.md), with clusters of the test's own.

Under load, the server names both hosts in one libpq URL with `target_session_attrs=read-write`;
the primary is stopped at once and the standby promoted: every result answered 200 is
FINISHED on the new primary, the same process accepts results again within 10 s of the
promotion, and meanwhile it answers only 503. A server started on the standby itself answers
every write 503 (never 500) and `/readyz` 503, says so in one log line, and serves again once
the standby is promoted, without a restart."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mainframe.cli import app
from tests.faults.standby import Pair
from tests.serverproc import ServerProcess, cli, mainframe_env

# More than the workers can finish before the promotion and the load after it, on a quiet
# machine too: a backlog drained before the failover leaves nothing to accept after it.
SCANS = 20_000
WORKERS = 8
LOAD_BEFORE_S = 3.0  # load on the primary before it dies
RECOVERY_BOUND_S = 10.0  # from the promotion to the first accepted result
AFTER_S = 2.0  # load on the new primary once it accepts
DEADLINE_S = 60.0


@pytest.fixture
def pair() -> Iterator[Pair]:
    made = Pair()
    try:
        made.primary.psql("CREATE DATABASE mf")
        yield made
    finally:
        made.drop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _provision(url: str, workers: int) -> dict[str, str]:
    cli(url, "db", "upgrade")
    tokens = {"owner": cli(url, "owner", "create", "ops")}
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    tokens["source"] = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    for index in range(workers):
        tokens[f"w{index}"] = cli(
            url, "token", "create", "--endpoint", "pypi", "--worker", f"w{index}"
        )
    return tokens


@dataclass
class Record:
    """What the workers saw: statuses by time, and the scans whose result got a 200."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter[int] = field(default_factory=Counter)
    accepted: dict[int, float] = field(default_factory=dict)  # scan id -> when its 200 came
    unexpected: list[str] = field(default_factory=list)

    def saw(self, response: httpx.Response) -> None:
        with self.lock:
            self.statuses[response.status_code] += 1
            if response.status_code not in (200, 503):
                self.unexpected.append(f"{response.request.url.path}: {response.text}")


def _post(http: httpx.Client, record: Record, path: str, **kwargs: Any) -> httpx.Response | None:
    try:
        response = http.post(path, **kwargs)
    except httpx.TimeoutException as exc:
        with record.lock:
            record.unexpected.append(f"{path}: {exc!r}")
        return None
    record.saw(response)
    return response


def _worker(url: str, token: str, record: Record, stop: threading.Event) -> None:
    """Poll when holding nothing; report each job with ?next=1, resending a result that got
    503 (a replay when it had landed) until it is answered 200."""
    job: dict[str, Any] | None = None
    with httpx.Client(base_url=url, headers=auth(token), timeout=20) as http:
        while not stop.is_set():
            if job is None:
                polled = _post(http, record, "/api/v1/jobs")
                if polled is None or polled.status_code != 200 or not polled.json():
                    time.sleep(0.05)
                    continue
                [job] = polled.json()
            body = {
                "outcome": "finished",
                "attempt": job["attempt"],
                "assignment_id": job["assignment_id"],
            }
            done = _post(http, record, f"/api/v1/jobs/{job['scan_id']}/result?next=1", json=body)
            if done is None or done.status_code != 200:
                time.sleep(0.05)
                continue
            with record.lock:
                record.accepted[job["scan_id"]] = time.monotonic()
            following = done.json()["next"]
            job = following[0] if following else None


def _fill(url: str, source: str) -> None:
    with httpx.Client(base_url=url, headers=auth(source), timeout=60) as http:
        for start in range(0, SCANS, 1000):
            scans = [{"name": f"p{i}", "version": "1"} for i in range(start, start + 1000)]
            response = http.post("/api/v1/scans/batch", json={"scans": scans})
            assert response.status_code == 200, response.text


def test_failover_loses_no_acknowledged_result(pair: Pair, tmp_path: Path) -> None:
    url = pair.url("mf")
    tokens = _provision(url, WORKERS)
    record, stop = Record(), threading.Event()
    with ServerProcess(url, tmp_path, MAINFRAME_JOB_TIMEOUT="300") as server:
        _fill(server.url, tokens["source"])
        threads = [
            threading.Thread(
                target=_worker, args=(server.url, tokens[f"w{i}"], record, stop), daemon=True
            )
            for i in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(LOAD_BEFORE_S)  # the load runs on the primary meanwhile
        before = len(record.accepted)
        promoted = pair.fail_over()
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            with record.lock:
                after = [at for at in record.accepted.values() if at > promoted]
            if after and time.monotonic() > min(after) + AFTER_S:
                break
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(30)
        pid = server.proc.pid
        assert server.proc.poll() is None, "the same process served throughout"
    first = f"{min(after) - promoted:.3f} s" if after else "nothing"
    figures = (  # for docs/scale-out.md, shown with pytest -s, and for a failure's message
        f"accepted {len(record.accepted)} ({before} before the failover), statuses "
        f"{dict(record.statuses)}, first accepted {first} after promotion, unexpected "
        f"{record.unexpected[:5]}"
    )
    print(figures)
    assert before > 0, "results were accepted before the failover"
    assert after, f"no result was accepted after the promotion: {figures}"
    assert min(after) - promoted <= RECOVERY_BOUND_S, min(after) - promoted
    assert record.unexpected == [], record.unexpected[:5]
    assert set(record.statuses) <= {200, 503} and record.statuses[503] > 0, record.statuses
    ids = ",".join(str(scan_id) for scan_id in record.accepted)
    finished = pair.standby.psql(
        f"SELECT count(*) FROM scans WHERE id IN ({ids}) AND status = 'FINISHED'", "mf"
    )
    assert int(finished) == len(record.accepted), f"acknowledged results lost (server {pid})"


def _cli_failure(url: str, *args: str) -> tuple[int, str]:
    env: dict[str, str | None] = dict(mainframe_env(url))
    done = CliRunner().invoke(app, list(args), env=env)
    return done.exit_code, done.stderr


def test_a_server_on_a_read_only_host_answers_503_until_it_is_promoted(
    pair: Pair, tmp_path: Path
) -> None:
    tokens = _provision(pair.primary.url("mf"), 1)
    standby = pair.standby.url("mf")
    code, said = _cli_failure(standby, "owner", "create", "bob")
    assert code == 1 and said.count("\n") == 1, said
    assert said.startswith("mainframe: the database host is read-only") and standby in said
    with ServerProcess(standby, tmp_path) as server, httpx.Client(base_url=server.url) as http:
        read_only = [e for e in server.log_events() if e["event"] == "database_read_only"]
        assert len(read_only) == 1 and read_only[0]["database"] == standby
        writes = [
            http.post("/api/v1/scans", headers=auth(tokens["source"]), json={"name": "a",
                                                                              "version": "1"}),
            http.post("/api/v1/jobs", headers=auth(tokens["w0"])),
            http.post("/api/v1/endpoints", headers=auth(tokens["owner"]), json={"name": "e2"}),
        ]  # fmt: skip
        for response in writes:
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "database_unavailable"
            assert int(response.headers["Retry-After"]) >= 1
        listed = http.get("/api/v1/scans", headers=auth(tokens["owner"]))
        assert listed.status_code == 200, "reads are served by the standby"
        assert http.get("/readyz").status_code == 503
        assert http.get("/healthz").status_code == 200
        pid = server.proc.pid
        promoted = pair.fail_over()
        body = {"name": "b", "version": "1"}
        while True:
            made = http.post("/api/v1/scans", headers=auth(tokens["source"]), json=body)
            assert made.status_code in (201, 503), made.text
            if made.status_code == 201:
                break
            assert time.monotonic() - promoted < RECOVERY_BOUND_S, "not served again in time"
            time.sleep(0.1)
        assert http.get("/readyz").status_code == 200
        assert server.proc.pid == pid and server.proc.poll() is None
    assert not [e for e in server.log_events() if e.get("status") == 500]
