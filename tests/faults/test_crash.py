"""kill -9 of a server under load (docs/reliability.md): on PostgreSQL with two server processes,
and on SQLite with one, restarted on the same file.

Workers lease and report through whichever server answers, recording every assignment they
were handed and every result that got a 200. Afterwards, from that record and the database:
every scan ends in exactly one terminal state, no (scan, attempt) went to two workers, every
acknowledged result is durable, attempt history has no gaps, and no answer was a 500."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.faults.load import SCANS, Fleet, fill, provision, worker_loop
from tests.serverproc import ServerProcess

WORKERS = 6
SETTLE_BOUND_S = 90.0
ENV = {
    "MAINFRAME_JOB_TIMEOUT": "2",
    "MAINFRAME_MAX_JOB_ATTEMPTS": "10",
    "MAINFRAME_SWEEP_SECONDS": "0.5",
}


def _kill(server: ServerProcess) -> None:
    server.proc.kill()  # SIGKILL: no shutdown, no flush, mid-transaction
    server.proc.wait()
    server.stop()


def _run(url: str, servers: list[ServerProcess], tmp_path: Path, token: str) -> Fleet:
    """Load the fleet, kill -9 the first server mid-run, restart it, wait until all settle."""
    fleet, stop = Fleet([s.url for s in servers]), threading.Event()
    threads = [
        threading.Thread(target=worker_loop, args=(fleet, token, stop, n)) for n in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    try:
        while len(fleet.acknowledged) < SCANS // 4:
            time.sleep(0.05)
        _kill(servers[0])
        with fleet.lock:
            fleet.urls = [s.url for s in servers[1:]] or fleet.urls
        time.sleep(1.0)
        servers[0] = ServerProcess(url, tmp_path, **ENV)
        with fleet.lock:
            fleet.urls = [s.url for s in servers]
        deadline = time.monotonic() + SETTLE_BOUND_S
        while _live(url) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        for server in servers:
            server.stop()
    return fleet


def _engine_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _live(url: str) -> int:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM scans WHERE status NOT IN ('FINISHED', 'FAILED')")
            ).scalar()
            return int(found or 0)
    finally:
        engine.dispose()


def _check(url: str, fleet: Fleet) -> None:
    assert not [s for s in fleet.statuses if s >= 500], fleet.statuses
    doubled = [key for key, count in fleet.handed.items() if count > 1]
    assert doubled == [], f"(scan, attempt) handed to two workers: {doubled[:5]}"
    engine = create_engine(_engine_url(url))
    with engine.connect() as conn:
        statuses = dict(conn.execute(text("SELECT id, status FROM scans")).all())
        history = conn.execute(
            text("SELECT scan_id, seq, attempt, outcome FROM attempts ORDER BY scan_id, seq")
        ).all()
    engine.dispose()
    assert len(statuses) == SCANS
    assert set(statuses.values()) <= {"FINISHED", "FAILED"}, Counter(statuses.values())
    by_scan: dict[int, list[tuple[int, int, str]]] = {}
    for scan_id, seq, attempt, outcome in history:
        by_scan.setdefault(scan_id, []).append((seq, attempt, outcome))
    for scan_id, rows in by_scan.items():
        assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1)), (scan_id, rows)
    for scan_id, attempt in fleet.acknowledged.items():
        assert statuses[scan_id] == "FINISHED", scan_id
        assert (attempt, "finished") in {(a, o) for _, a, o in by_scan[scan_id]}, scan_id
    print(
        f"kill -9 under load: {SCANS} scans, {sum(fleet.handed.values())} assignments, "
        f"{len(fleet.acknowledged)} results acknowledged, 0 lost, 0 handed twice, "
        f"statuses {dict(fleet.statuses)}, {fleet.transport_errors} dropped connections"
    )


@pytest.mark.slow
def test_kill_9_of_one_of_two_servers_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    worker, source = provision(pg_url)
    servers = [ServerProcess(pg_url, tmp_path, **ENV) for _ in range(2)]
    fill(servers[1].url, source)
    fleet = _run(pg_url, servers, tmp_path, worker)
    _check(pg_url, fleet)


@pytest.mark.slow
def test_kill_9_of_the_server_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "mainframe.db"
    url = f"sqlite:///{path}"
    worker, source = provision(url)
    servers = [ServerProcess(url, tmp_path, **ENV)]
    fill(servers[0].url, source)
    fleet = _run(url, servers, tmp_path, worker)
    _check(url, fleet)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
