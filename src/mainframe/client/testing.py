"""An in-memory fake of the server's job API, for testing workers without a server.

`FakeMainframe.handle` answers requests as the job API of one endpoint would, so a `Client`
built on `httpx.MockTransport(fake.handle)` (or by `fake.client()`) leases, heartbeats and
reports against it. Leases run on real time; every request is recorded for assertions.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from mainframe.client.sdk import Client
from mainframe.clock import rfc3339, to_us
from mainframe.lifecycle.rules import settle

BASE_URL = "http://mainframe.test"  # where the fake pretends to live
TOKEN = "worker-token"  # the one bearer token the fake accepts
SCAN_ACTION = re.compile(r"^/api/v1/jobs/(\d+)/(result|heartbeat|wait|resume)$")


@dataclass
class FakeScan:
    scan_id: int
    name: str
    version: str
    kind: str = "malware"
    queue: str = "default"
    payload: Any = None
    status: str = "QUEUED"
    attempt: int = 0
    assignment_id: str | None = None
    lease_expires: float = 0.0  # time.time() at which the current lease lapses
    lapsed: bool = False  # a request about the lease arrived after it had lapsed
    waiting: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)  # accepted results
    settled_us: int | None = None  # when the last accepted result arrived (µs since epoch)
    fail_reason: str | None = None
    dead_lettered: bool = False

    def public(self) -> dict[str, Any]:
        """The server's reply to an accepted result (ResultPublic)."""
        terminal = self.status in ("FINISHED", "FAILED")
        return {
            "scan_id": self.scan_id,
            "status": self.status,
            "attempt_count": self.attempt,
            "available_at": None,
            "finished_at": rfc3339(self.settled_us) if terminal else None,
            "dead_lettered_at": rfc3339(self.settled_us) if self.dead_lettered else None,
            "fail_reason": self.fail_reason,
        }


class FakeMainframe:
    """The job API of one endpoint, in memory and real time: enough to drive one worker."""

    def __init__(self, *, lease_seconds: float = 30.0, max_attempts: int = 3) -> None:
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.lose_on_heartbeat: set[int] = set()  # scans reassigned at their first heartbeat
        self.scans: dict[int, FakeScan] = {}
        self.requests: list[tuple[str, Any]] = []  # (path, JSON body) of every request
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def submit(self, name: str, version: str = "1.0", **fields: Any) -> FakeScan:
        scan = FakeScan(next(self._ids), name, version, **fields)
        self.scans[scan.scan_id] = scan
        return scan

    def reassign(self, scan_id: int) -> None:
        """Hand the scan to another worker, as a lease after a lapse would."""
        scan = self.scans[scan_id]
        scan.attempt += 1
        scan.assignment_id = uuid.uuid4().hex
        scan.lease_expires = time.time() + 60

    def client(self, token: str = TOKEN, **kwargs: Any) -> Client:
        return Client(BASE_URL, token, transport=httpx.MockTransport(self.handle), **kwargs)

    def posted(self, suffix: str) -> list[Any]:
        return [body for path, body in self.requests if path.endswith(suffix)]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        with self._lock:
            self.requests.append((request.url.path, body))
            if request.headers.get("authorization") != f"Bearer {TOKEN}":
                return httpx.Response(401, json={"error": "unauthorized"})
            status, answer = self._route(request, body)
        return httpx.Response(status, json=answer)

    def _route(self, request: httpx.Request, body: Any) -> tuple[int, Any]:
        path = request.url.path
        if path == "/api/v1/jobs":
            return self._lease(int(request.url.params["batch"]))
        if path == "/api/v1/jobs/results":
            return 200, {"results": [self._batch_item(item) for item in body["results"]]}
        match = SCAN_ACTION.match(path)
        if match is None:
            return 404, {"error": "not_found"}
        scan = self.scans.get(int(match[1]))
        if scan is None:
            return 404, {"error": "not_found", "detail": "no such scan"}
        action = getattr(self, f"_{match[2]}")
        answer: tuple[int, Any] = action(scan, body)
        return answer

    def _lease(self, batch: int) -> tuple[int, Any]:
        if not 1 <= batch <= 100:
            return 422, _invalid("query.batch", "must be between 1 and 100")
        now = time.time()
        for scan in self.scans.values():
            if scan.status == "PENDING" and scan.lease_expires < now:
                self._reap(scan)
        eligible = [scan for scan in self.scans.values() if scan.status == "QUEUED"]
        jobs = []
        for scan in eligible[:batch]:
            scan.status, scan.attempt = "PENDING", scan.attempt + 1
            scan.assignment_id = uuid.uuid4().hex
            scan.lease_expires = now + self.lease_seconds
            jobs.append(
                {
                    "scan_id": scan.scan_id,
                    "name": scan.name,
                    "version": scan.version,
                    "kind": scan.kind,
                    "queue": scan.queue,
                    "payload": scan.payload,
                    "attempt": scan.attempt,
                    "assignment_id": scan.assignment_id,
                    "lease_expires_at": rfc3339(to_us(scan.lease_expires)),
                }
            )
        return 200, jobs

    def _reap(self, scan: FakeScan) -> None:
        # As the server does: a lapsed lease below the cap goes back to the queue; at the cap
        # the scan is dead-lettered, never leased again.
        if scan.attempt < self.max_attempts:
            scan.status = "QUEUED"
            return
        scan.status, scan.dead_lettered = "FAILED", True
        scan.fail_reason = "interrupt_expired" if scan.waiting else "lease_expired"
        scan.settled_us = time.time_ns() // 1000

    def _conflict(self, scan: FakeScan, body: Any) -> tuple[int, Any] | None:
        if scan.status in ("FINISHED", "FAILED"):
            return 409, {"error": "already_terminal", "detail": scan.status}
        echoed = (body.get("attempt"), body.get("assignment_id"))
        if scan.status != "PENDING" or echoed != (scan.attempt, scan.assignment_id):
            return 409, {"error": "stale_assignment", "detail": "not the current assignment"}
        if time.time() > scan.lease_expires:
            scan.lapsed = True
        return None

    def _result(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        if body.get("outcome") not in ("finished", "failed") or "attempt" not in body:
            return 422, _invalid("body.outcome", "finished or failed, with the echoed attempt")
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.results.append(body)
        scan.settled_us = time.time_ns() // 1000
        # The server's own rule, so the fake can never drift from where a result sends a scan.
        settled = settle(
            outcome=body["outcome"],
            retryable=bool(body.get("retryable", True)),
            attempt=scan.attempt,
            max_attempts=self.max_attempts,
        )
        scan.status = settled.status.value
        scan.fail_reason = settled.fail_reason
        scan.dead_lettered = settled.dead_letter_reason is not None
        return 200, scan.public()

    def _batch_item(self, item: dict[str, Any]) -> dict[str, Any]:
        scan = self.scans.get(item["scan_id"])
        status, answer = (404, {"error": "not_found"}) if scan is None else self._result(scan, item)
        entry = {"scan_id": item["scan_id"], "status": status}
        return entry if status == 200 else {**entry, **answer}

    def _heartbeat(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        if scan.scan_id in self.lose_on_heartbeat:
            self.lose_on_heartbeat.discard(scan.scan_id)
            self.reassign(scan.scan_id)
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.lease_expires = time.time() + self.lease_seconds
        return 200, {"lease_expires_at": rfc3339(to_us(scan.lease_expires))}

    def _wait(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.waiting = True
        scan.lease_expires = time.time() + body["seconds"]
        return 200, scan.public()

    def _resume(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.waiting = False
        return 200, scan.public()


def _invalid(field: str, message: str) -> dict[str, Any]:
    """The server's 422 body."""
    return {"error": "invalid_request", "detail": [{"field": field, "message": message}]}
