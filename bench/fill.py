"""Bringing the backlog to a size through the public API only: new scans through the bulk
route `POST /api/v1/scans/batch` (or, while a server does not answer it, the single route),
and surplus scans leased and finished through the worker routes (a drain)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import measure
from measure import Window
from servers import Credentials, Stack, log, queued_count

# Items per bulk request: the route's limit.
BULK_ITEMS = 1_000
# Bulk requests in flight per server: one being parsed while one is written.
BULK_IN_FLIGHT_PER_SERVER = 2
# Requests in flight when the single route has to do the filling.
SINGLE_IN_FLIGHT = 32
# A drain leases and finishes this many per poll (the routes' maximum) with these workers.
DRAIN_BATCH = 100
DRAIN_WORKERS = 4
PROBE_SECONDS = 60.0


@dataclass(frozen=True)
class Intake:
    """How new scans get in: the bulk route when every server answers it, else the single."""

    bulk: bool
    note: str = ""

    @property
    def route(self) -> str:
        return "bulk intake" if self.bulk else "intake (single route, filling)"


def probe_bulk(stack: Stack, source_token: str, label: str) -> Intake:
    """Submit one scan through the bulk route of each server; fall back on 404 or 405."""
    for index, url in enumerate(stack.urls):
        body = {"scans": [{"name": f"{label}-{index}", "version": "1.0.0"}]}
        request = urllib.request.Request(
            url + "/api/v1/scans/batch",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {source_token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=PROBE_SECONDS) as response:
                statuses = [item["status"] for item in json.load(response)["results"]]
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            if exc.code not in (404, 405):
                raise RuntimeError(f"the bulk route answered {exc.code}: {detail}") from None
            return Intake(
                bulk=False,
                note=f"POST /api/v1/scans/batch answered {exc.code} (not served yet): the "
                "backlog was filled through POST /api/v1/scans, one scan per request, "
                f"{SINGLE_IN_FLIGHT} in flight; no bulk figure",
            )
        if statuses != [201]:
            raise RuntimeError(f"the bulk route's probe item answered {statuses}, not [201]")
    return Intake(bulk=True)


def fill(
    stack: Stack,
    creds: Credentials,
    intake: Intake,
    *,
    count: int,
    label: str,
    procs: int,
    limit: float,
    profile: Path | None = None,
) -> Window:
    """Submit `count` new scans; gives up after `limit` seconds."""
    plans = measure.split(
        "fill",
        stack,
        procs=procs,
        concurrency=fill_in_flight(stack, intake),
        tokens=creds.sources,
        batch=BULK_ITEMS if intake.bulk else 1,
        count=count,
        label=label,
        limit=limit,
    )
    return measure.run(stack, plans, profile=profile)


def fill_in_flight(stack: Stack, intake: Intake) -> int:
    return BULK_IN_FLIGHT_PER_SERVER * len(stack.servers) if intake.bulk else SINGLE_IN_FLIGHT


def drain(stack: Stack, creds: Credentials, *, count: int, procs: int, limit: float) -> Window:
    """Lease and finish `count` queued scans (the oldest) through the worker routes."""
    plans = measure.split(
        "loop",
        stack,
        procs=procs,
        concurrency=min(DRAIN_WORKERS, len(creds.workers)),
        tokens=creds.workers,
        batch=DRAIN_BATCH,
        count=count,
        limit=limit,
    )
    return measure.run(stack, plans)


def settle(
    stack: Stack,
    creds: Credentials,
    intake: Intake,
    *,
    size: int,
    tolerance: int,
    label: str,
    procs: int,
    limit: float,
) -> int:
    """Bring QUEUED into [size, size + tolerance]; return the count `mainframe stats` reads."""
    queued = queued_count(stack.database_url)
    if queued > size + tolerance:
        started = time.monotonic()
        window = drain(stack, creds, count=queued - size, procs=procs, limit=limit)
        log(f"  drained {window.stats.leased_total:,} in {time.monotonic() - started:.1f}s")
        queued = queued_count(stack.database_url)
    if queued < size:
        started = time.monotonic()
        window = fill(
            stack, creds, intake, count=size - queued, label=label, procs=procs, limit=limit
        )
        log(f"  topped up {window.stats.items_total:,} in {time.monotonic() - started:.1f}s")
        queued = queued_count(stack.database_url)
    return queued
