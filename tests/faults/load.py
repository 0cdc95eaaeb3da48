"""A fleet of workers for the fault tests: lease and finish scans through whichever server
answers, recording every assignment handed out and every result acknowledged."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.serverproc import cli

SCANS = 600


@dataclass
class Fleet:
    """The servers in rotation and what the workers saw."""

    urls: list[str]
    statuses: Counter[int] = field(default_factory=Counter)
    by_server: Counter[tuple[str, int]] = field(default_factory=Counter)  # (url, status)
    handed: Counter[tuple[int, int]] = field(default_factory=Counter)
    through: dict[tuple[int, int], str] = field(default_factory=dict)  # lease -> its server
    holding: Counter[str] = field(default_factory=Counter)  # url -> leases awaiting an answer
    acknowledged: dict[int, int] = field(default_factory=dict)  # scan -> attempt
    acknowledged_twice: list[int] = field(default_factory=list)
    transport_errors: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # url -> its transport errors
    latencies: list[float] = field(default_factory=list)  # seconds per poll
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, turn: int) -> str:
        with self.lock:
            return self.urls[turn % len(self.urls)]


def worker_loop(
    fleet: Fleet,
    token: str,
    stop: threading.Event,
    number: int,
    *,
    timeout: float = 10.0,
    scan_seconds: float = 0.0,
) -> None:
    """Lease and finish scans until stopped, moving to the next server when one dies or
    stops answering within `timeout` seconds; each scan takes `scan_seconds` to run."""
    headers = {"Authorization": f"Bearer {token}"}
    for turn in itertools.count(number):
        if stop.is_set():
            return
        url = fleet.url(turn)
        try:
            # trust_env=False: the fleet talks to its servers directly, never through a proxy.
            with httpx.Client(
                base_url=url, headers=headers, timeout=timeout, trust_env=False
            ) as http:
                _work(http, url, fleet, stop, scan_seconds)
        except httpx.TransportError:
            with fleet.lock:
                fleet.transport_errors += 1
                fleet.dropped[url] += 1
            time.sleep(0.1)  # the server died or went silent under us: go to the next one


def _work(
    http: httpx.Client, url: str, fleet: Fleet, stop: threading.Event, scan_seconds: float
) -> None:
    while not stop.is_set():
        polled = http.post("/api/v1/jobs?batch=5")
        with fleet.lock:
            fleet.statuses[polled.status_code] += 1
            fleet.by_server[url, polled.status_code] += 1
            fleet.latencies.append(polled.elapsed.total_seconds())
        jobs = polled.json() if polled.status_code == 200 else []
        if not jobs:
            time.sleep(0.05)
            continue
        with fleet.lock:
            leases = [(job["scan_id"], job["attempt"]) for job in jobs]
            fleet.handed.update(leases)
            fleet.through.update(dict.fromkeys(leases, url))
            fleet.holding[url] += len(jobs)
        for job in jobs:
            time.sleep(scan_seconds)
            echo = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
            done = http.post(
                f"/api/v1/jobs/{job['scan_id']}/result", json={"outcome": "finished", **echo}
            )
            with fleet.lock:
                fleet.statuses[done.status_code] += 1
                fleet.by_server[url, done.status_code] += 1
                fleet.holding[url] -= 1
                if done.status_code == 200:
                    if job["scan_id"] in fleet.acknowledged:
                        fleet.acknowledged_twice.append(job["scan_id"])
                    fleet.acknowledged[job["scan_id"]] = job["attempt"]


def provision(url: str) -> tuple[str, str]:
    cli(url, "db", "upgrade")  # as an operator would, before any other command
    cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    worker = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "w")
    source = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    return worker, source


def fill(url: str, source: str, count: int = SCANS, *, start: int = 0) -> None:
    """Submit `count` new scans (pkg<start>, ...) through the bulk route, 1,000 a request."""
    end = start + count
    for first in range(start, end, 1000):
        names = range(first, min(end, first + 1000))
        scans = [{"name": f"pkg{i}", "version": "1"} for i in names]
        response = httpx.post(
            f"{url}/api/v1/scans/batch",
            json={"scans": scans},
            headers={"Authorization": f"Bearer {source}"},
            timeout=30,
            trust_env=False,
        )
        assert response.status_code == 200
        assert all(item["status"] == 201 for item in response.json()["results"])
