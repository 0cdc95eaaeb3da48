"""PostgreSQL stopped and started under load (docs/reliability.md).

Workers and a source keep a real server busy while the database cluster is stopped for a
few seconds: requests that cannot reach it answer 503 `database_unavailable` with
`Retry-After` (never a 500), `/healthz` stays 200 while `/readyz` says 503, every log line
stays one JSON object, and once the cluster is back the same server serves again without a
restart, every result it accepted still there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import IN_CI, PG_ADMIN_URL, drop_pg_database, fresh_pg_database
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

OUTAGE_SECONDS = 4.0
LOAD_GOING = 20  # scans finished before PostgreSQL is stopped: the load is under way
RECOVERY_BOUND_SECONDS = 10.0  # from the cluster answering again to the first 2xx


def _cluster() -> tuple[str, str] | None:
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if not versions or shutil.which("pg_ctlcluster") is None or os.geteuid() != 0:
        return None
    return versions[-1], "main"


def _pg_ctl(action: str) -> None:
    found = _cluster()
    assert found is not None
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", *found, action]
    if action == "stop":
        command += ["-m", "fast"]
    subprocess.run(command, check=True, timeout=60, capture_output=True)


def _wait_for_postgres(timeout: float = 60.0) -> None:
    command = ["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"]
    wait_for(
        lambda: subprocess.run(command, check=False).returncode == 0,
        timeout=timeout,
        what="PostgreSQL back",
        every=0.2,
    )


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    if _cluster() is None:
        if IN_CI:
            pytest.fail("the outage test needs pg_ctlcluster and root in CI")
        pytest.skip("needs pg_ctlcluster and root to stop the local cluster")
    name = fresh_pg_database(pg_template)
    yield f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    _wait_for_postgres()
    drop_pg_database(name)


@dataclass
class Record:
    """What the clients saw, by status; the scans whose results got a 200."""

    statuses: Counter[int] = field(default_factory=Counter)
    unavailable_without_retry_after: int = 0
    wrong_503_bodies: list[str] = field(default_factory=list)
    transport_errors: int = 0
    finished: set[int] = field(default_factory=set)
    last_ok: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, response: httpx.Response) -> None:
        with self.lock:
            self.statuses[response.status_code] += 1
            if response.status_code < 300:
                self.last_ok = time.monotonic()
            if response.status_code == 503:
                if "retry-after" not in response.headers:
                    self.unavailable_without_retry_after += 1
                if response.json().get("error") != "database_unavailable":
                    self.wrong_503_bodies.append(response.text)


def _worker(url: str, token: str, record: Record, stop: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=15) as http:
        while not stop.is_set():
            try:
                polled = http.post("/api/v1/jobs?batch=5")
                record.saw(polled)
                if polled.status_code != 200 or not polled.json():
                    time.sleep(0.05)
                    continue
                for job in polled.json():
                    echo = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
                    done = http.post(
                        f"/api/v1/jobs/{job['scan_id']}/result",
                        json={"outcome": "finished", **echo},
                    )
                    record.saw(done)
                    if done.status_code == 200:
                        with record.lock:
                            record.finished.add(job["scan_id"])
            except httpx.TransportError:
                with record.lock:
                    record.transport_errors += 1
                time.sleep(0.05)


def _source(url: str, token: str, record: Record, stop: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    number = 0
    with httpx.Client(base_url=url, headers=headers, timeout=15) as http:
        while not stop.is_set():
            number += 1
            try:
                record.saw(http.post("/api/v1/scans", json={"name": f"p{number}", "version": "1"}))
            except httpx.TransportError:
                with record.lock:
                    record.transport_errors += 1
            time.sleep(0.01)


def _probe(url: str, path: str) -> int:
    try:
        return httpx.get(url + path, timeout=10).status_code
    except httpx.TransportError:
        return -1


@pytest.mark.slow
def test_a_stopped_database_is_503_and_the_server_recovers_by_itself(
    pg_url: str, tmp_path: Path
) -> None:
    cli(pg_url, "owner", "create", "ops")
    cli(pg_url, "endpoint", "create", "pypi", "--owner", "ops")
    worker = cli(pg_url, "token", "create", "--endpoint", "pypi", "--worker", "w1")
    source = cli(pg_url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    record, stop = Record(), threading.Event()
    with ServerProcess(pg_url, tmp_path, MAINFRAME_SWEEP_SECONDS="0.5") as server:
        threads = [threading.Thread(target=_source, args=(server.url, source, record, stop))]
        threads += [
            threading.Thread(target=_worker, args=(server.url, worker, record, stop))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        try:
            # The outage starts once the workers are finishing scans, not after a fixed while.
            wait_for(lambda: len(record.finished) >= LOAD_GOING, timeout=30, what="the load")
            _pg_ctl("stop")
            time.sleep(OUTAGE_SECONDS / 2)
            during = (_probe(server.url, "/healthz"), _probe(server.url, "/readyz"))
            time.sleep(OUTAGE_SECONDS / 2)
        finally:
            _pg_ctl("start")
        _wait_for_postgres()
        back = time.monotonic()
        deadline = back + RECOVERY_BOUND_SECONDS
        while record.last_ok < back and time.monotonic() < deadline:
            time.sleep(0.1)
        recovered = record.last_ok - back
        time.sleep(1.0)  # a little load after recovery
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        after = _probe(server.url, "/readyz")
        stderr = server.stderr_path.read_text()

    assert during == (200, 503), during
    assert after == 200
    assert record.last_ok >= back, f"no 2xx within {RECOVERY_BOUND_SECONDS} s of the database"
    assert 0 <= recovered <= RECOVERY_BOUND_SECONDS
    assert record.statuses[503] > 0, record.statuses
    assert not [s for s in record.statuses if s >= 500 and s != 503], record.statuses
    assert record.unavailable_without_retry_after == 0
    assert record.wrong_503_bodies == []
    assert record.transport_errors == 0  # every refusal was an answer, not a reset
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert all(line.startswith("{") for line in lines), [
        line for line in lines if not line.startswith("{")
    ][:5]
    events = [json.loads(line)["event"] for line in lines]
    assert "unhandled_error" not in events

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, status FROM scans")).all()
    engine.dispose()
    status = dict(rows)
    lost = [scan for scan in record.finished if status.get(scan) != "FINISHED"]
    assert lost == [], f"results answered 200 but not durable: {lost[:10]}"
    print(
        f"outage {OUTAGE_SECONDS:.0f} s: statuses {dict(record.statuses)}, "
        f"{len(record.finished)} results accepted, 0 lost, recovered in {recovered:.2f} s"
    )
