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
    handed: Counter[tuple[int, int]] = field(default_factory=Counter)
    acknowledged: dict[int, int] = field(default_factory=dict)  # scan -> attempt
    transport_errors: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds per poll
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, turn: int) -> str:
        with self.lock:
            return self.urls[turn % len(self.urls)]


def worker_loop(fleet: Fleet, token: str, stop: threading.Event, number: int) -> None:
    """Lease and finish scans until stopped, moving to the next server when one dies."""
    headers = {"Authorization": f"Bearer {token}"}
    for turn in itertools.count(number):
        if stop.is_set():
            return
        try:
            with httpx.Client(base_url=fleet.url(turn), headers=headers, timeout=10) as http:
                _work(http, fleet, stop)
        except httpx.TransportError:
            with fleet.lock:
                fleet.transport_errors += 1
            time.sleep(0.1)  # the server died under us: go to the next one


def _work(http: httpx.Client, fleet: Fleet, stop: threading.Event) -> None:
    while not stop.is_set():
        polled = http.post("/api/v1/jobs?batch=5")
        with fleet.lock:
            fleet.statuses[polled.status_code] += 1
            fleet.latencies.append(polled.elapsed.total_seconds())
        jobs = polled.json() if polled.status_code == 200 else []
        if not jobs:
            time.sleep(0.05)
            continue
        with fleet.lock:
            fleet.handed.update((job["scan_id"], job["attempt"]) for job in jobs)
        for job in jobs:
            echo = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
            done = http.post(
                f"/api/v1/jobs/{job['scan_id']}/result", json={"outcome": "finished", **echo}
            )
            with fleet.lock:
                fleet.statuses[done.status_code] += 1
                if done.status_code == 200:
                    fleet.acknowledged[job["scan_id"]] = job["attempt"]


def provision(url: str) -> tuple[str, str]:
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
        )
        assert response.status_code == 200
        assert all(item["status"] == 201 for item in response.json()["results"])
