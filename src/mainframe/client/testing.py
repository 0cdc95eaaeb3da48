"""An in-memory fake of the server's job API, for testing workers without a server.

`FakeMainframe.handle` answers requests as the job API of one endpoint would, so a `Client`
built on `httpx.MockTransport(fake.handle)` (or by `fake.client()`) leases, heartbeats and
reports against it. Leases run on real time; every request is recorded for assertions.

Results take `?next=N` as the server does (complete-and-fetch): an accepted result leases up to
N more scans in the same answer, and a repeat of a result (same scan, attempt and assignment
id) gets the first answer again, with the jobs that answer leased that are still held and
unexpired, and leases nothing new; the same assignment with other content is refused with
409 `result_conflict`, as the server refuses it. The fake serves one worker, so "the same
worker" always holds.
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
from pydantic import BaseModel

from mainframe.client.sdk import Client
from mainframe.clock import rfc3339, to_us
from mainframe.contract.limits import JOBS_PATH, MAX_LEASE_BATCH, MAX_NEXT
from mainframe.contract.schemas import (
    AcceptedResult,
    ErrorBody,
    ItemStatus,
    JobPublic,
    LeaseDeadline,
    ResultPublic,
)
from mainframe.lifecycle.rules import is_replay, result_digest, settle

BASE_URL = "http://mainframe.test"  # where the fake pretends to live
TOKEN = "worker-token"  # the one bearer token the fake accepts
SCAN_ACTION = re.compile(rf"^{JOBS_PATH}/(\d+)/(result|heartbeat|wait|resume)$")
NEXT_COUNT = re.compile(r"[0-9]+")  # ASCII digits only, as the server reads every integer

JobRef = tuple[int, int, str]  # (scan_id, attempt, assignment_id): one lease handed out


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
    available_us: int | None = None  # a retry waiting out its backoff is due then

    def public(self) -> dict[str, Any]:
        """The server's reply to an accepted result."""
        terminal = self.status in ("FINISHED", "FAILED")
        return _answer(
            ResultPublic(
                scan_id=self.scan_id,
                status=self.status,
                attempt_count=self.attempt,
                available_at=rfc3339(self.available_us) if self.status == "QUEUED" else None,
                finished_at=rfc3339(self.settled_us) if terminal else None,
                dead_lettered_at=rfc3339(self.settled_us) if self.dead_lettered else None,
                fail_reason=self.fail_reason,
            )
        )

    def deadline(self) -> dict[str, Any]:
        """The server's reply to a heartbeat, a wait or a resume."""
        expires_at = rfc3339(to_us(self.lease_expires))
        assert expires_at is not None
        return _answer(LeaseDeadline(scan_id=self.scan_id, lease_expires_at=expires_at))


@dataclass
class _Accepted:
    """An accepted result, kept so that a repeat of its request is answered as it was."""

    public: dict[str, Any]  # the reply body, as it was when the result was accepted
    digest: str  # of the accepted result's content
    outcome: str
    jobs: list[JobRef] = field(default_factory=list)  # leased with it (`?next=`)
    accepted_at: float = field(default_factory=time.time)

    def conflict(self) -> dict[str, Any]:
        """The 409 body for other content under the same assignment."""
        accepted = AcceptedResult.model_validate(
            {
                "outcome": self.outcome,
                "status": self.public["status"],
                "fail_reason": self.public["fail_reason"],
                "accepted_at": rfc3339(to_us(self.accepted_at)),
            }
        )
        detail = "a different result already closed this assignment; nothing was changed"
        return _answer(ErrorBody(error="result_conflict", detail=detail, accepted=accepted))


class _Refused(Exception):
    """A request refused before it reaches a scan (a bad query)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class FakeMainframe:
    """The job API of one endpoint, in memory and real time: enough to drive one worker."""

    def __init__(
        self, *, lease_seconds: float = 30.0, max_attempts: int = 3, retry_seconds: float = 0.0
    ) -> None:
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        # How long a retryable failure waits before it is due again (the server's backoff,
        # without its jitter); 0: due at once.
        self.retry_seconds = retry_seconds
        self.lose_on_heartbeat: set[int] = set()  # scans reassigned at their first heartbeat
        self.scans: dict[int, FakeScan] = {}
        self.requests: list[tuple[str, Any]] = []  # (path, JSON body) of every request
        self._accepted: dict[tuple[int, Any, Any], _Accepted] = {}  # by (scan, attempt, id)
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
            try:
                status, answer = self._route(request, body)
            except _Refused as refused:
                status, answer = refused.status, refused.body
        return httpx.Response(status, json=answer)

    def _route(self, request: httpx.Request, body: Any) -> tuple[int, Any]:
        path = request.url.path
        if path == JOBS_PATH:
            return self._lease(int(request.url.params["batch"]))
        if path == f"{JOBS_PATH}/results":
            return self._results(body["results"], _next_count(request))
        match = SCAN_ACTION.match(path)
        if match is None:
            return 404, _error("not_found", "no such route")
        fetch = _next_count(request) if match[2] == "result" else None
        scan = self.scans.get(int(match[1]))
        if scan is None:
            return 404, _error("not_found", "no such scan")
        if match[2] == "result":
            return self._result_and_next(scan, body, fetch)
        action = getattr(self, f"_{match[2]}")
        answer: tuple[int, Any] = action(scan, body)
        return answer

    def _lease(self, batch: int) -> tuple[int, Any]:
        if not 1 <= batch <= MAX_LEASE_BATCH:
            return 422, _invalid("query.batch", f"must be between 1 and {MAX_LEASE_BATCH}")
        return 200, [_job(scan) for scan in self._lease_scans(batch)]

    def _lease_scans(self, batch: int) -> list[FakeScan]:
        now = time.time()
        for scan in self.scans.values():
            if scan.status == "PENDING" and scan.lease_expires < now:
                self._reap(scan)
        due_us = to_us(now)
        eligible = [
            scan
            for scan in self.scans.values()
            if scan.status == "QUEUED" and (scan.available_us or 0) <= due_us
        ]
        for scan in eligible[:batch]:
            scan.status, scan.attempt = "PENDING", scan.attempt + 1
            scan.assignment_id = uuid.uuid4().hex
            scan.lease_expires = now + self.lease_seconds
        return eligible[:batch]

    def _lease_refs(self, count: int) -> list[JobRef]:
        return [_ref(scan) for scan in self._lease_scans(count)] if count else []

    def _live_jobs(self, refs: list[JobRef]) -> list[dict[str, Any]]:
        """The jobs of `refs` whose lease is still held and unexpired, as a poll shows them."""
        now = time.time()
        live = []
        for ref in dict.fromkeys(refs):  # recorded with several items of a batch: listed once
            scan = self.scans[ref[0]]
            if scan.status == "PENDING" and _ref(scan) == ref and scan.lease_expires >= now:
                live.append(_job(scan))
        return live

    def _replayed(self, scan_id: int, body: Any) -> _Accepted | None:
        return self._accepted.get(_result_key(scan_id, body))

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
            return 409, _error("already_terminal", scan.status)
        echoed = (body.get("attempt"), body.get("assignment_id"))
        if scan.status != "PENDING" or echoed != (scan.attempt, scan.assignment_id):
            return 409, _error("stale_assignment", "not the current assignment")
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
        if scan.status == "QUEUED" and self.retry_seconds:
            scan.available_us = to_us(time.time() + self.retry_seconds)
        scan.dead_lettered = settled.dead_letter_reason is not None
        accepted = _Accepted(scan.public(), _digest(body), body["outcome"])
        self._accepted[_result_key(scan.scan_id, body)] = accepted
        return 200, scan.public()

    def _result_and_next(self, scan: FakeScan, body: Any, fetch: int | None) -> tuple[int, Any]:
        """The single result route: the result, then (only if accepted) the next jobs."""
        replay = self._replayed(scan.scan_id, body)
        if replay is not None and not is_replay(replay.digest, _digest(body)):
            return 409, replay.conflict()
        if replay is not None:
            if fetch is None:
                return 200, replay.public
            return 200, {**replay.public, "next": self._live_jobs(replay.jobs)}
        status, answer = self._result(scan, body)
        if status != 200 or fetch is None:
            return status, answer
        accepted = self._accepted[_result_key(scan.scan_id, body)]
        accepted.jobs = self._lease_refs(fetch)
        return 200, {**answer, "next": self._live_jobs(accepted.jobs)}

    def _results(self, items: list[dict[str, Any]], fetch: int | None) -> tuple[int, Any]:
        """The batch route: each item as the single route would answer it, then the next jobs,
        leased only if some item was accepted and none was a repeat."""
        answers: list[dict[str, Any]] = []
        replayed: list[JobRef] = []
        fresh: list[_Accepted] = []
        any_replay = False
        for item in items:
            replay = self._replayed(item["scan_id"], item)
            if replay is not None and not is_replay(replay.digest, _digest(item)):
                any_replay = True  # as the server: an item that closed before takes no leases
                answers.append(_item(item["scan_id"], 409, **replay.conflict()))
                continue
            if replay is not None:
                any_replay = True
                replayed.extend(replay.jobs)
                answers.append(_item(item["scan_id"], 200, scan=replay.public))
                continue
            answers.append(self._batch_item(item))
            if answers[-1]["status"] == 200:
                fresh.append(self._accepted[_result_key(item["scan_id"], item)])
        if fetch is None:
            return 200, {"results": answers}
        jobs = replayed if any_replay else self._lease_refs(fetch if fresh else 0)
        for accepted in fresh:
            accepted.jobs = jobs
        return 200, {"results": answers, "next": self._live_jobs(jobs)}

    def _batch_item(self, item: dict[str, Any]) -> dict[str, Any]:
        scan = self.scans.get(item["scan_id"])
        if scan is None:
            return _item(item["scan_id"], 404, **_error("not_found", "no such scan"))
        status, answer = self._result(scan, item)
        if status == 200:
            return _item(item["scan_id"], status, scan=answer)
        return _item(item["scan_id"], status, **answer)

    def _heartbeat(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        if scan.scan_id in self.lose_on_heartbeat:
            self.lose_on_heartbeat.discard(scan.scan_id)
            self.reassign(scan.scan_id)
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.lease_expires = time.time() + self.lease_seconds
        return 200, scan.deadline()

    def _wait(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.waiting = True
        scan.lease_expires = time.time() + body["seconds"]
        return 200, scan.deadline()

    def _resume(self, scan: FakeScan, body: Any) -> tuple[int, Any]:
        conflict = self._conflict(scan, body)
        if conflict is not None:
            return conflict
        scan.waiting = False
        scan.lease_expires = time.time() + self.lease_seconds
        return 200, scan.deadline()


def _job(scan: FakeScan) -> dict[str, Any]:
    """A leased scan as the job poll shows it."""
    deadline = scan.deadline()
    assert scan.assignment_id is not None
    job = JobPublic(
        scan_id=scan.scan_id,
        name=scan.name,
        version=scan.version,
        kind=scan.kind,
        queue=scan.queue,
        payload=scan.payload,
        attempt=scan.attempt,
        assignment_id=scan.assignment_id,
        lease_expires_at=deadline["lease_expires_at"],
    )
    return _answer(job)


def _ref(scan: FakeScan) -> JobRef:
    assert scan.assignment_id is not None
    return (scan.scan_id, scan.attempt, scan.assignment_id)


def _result_key(scan_id: int, body: Any) -> tuple[int, Any, Any]:
    """What makes a result request a repeat of an accepted one (the fake has one worker)."""
    return (scan_id, body.get("attempt"), body.get("assignment_id"))


def _digest(body: Any) -> str:
    """The content digest of a result body, as the server computes it."""
    result = body.get("result")
    return result_digest(
        outcome=body["outcome"],
        retryable=bool(body.get("retryable", True)),
        summary=body.get("summary"),
        artifact=body.get("artifact"),
        result=None if result is None else json.dumps(result),
        retry_after=body.get("retry_after_seconds"),
    )


def _next_count(request: httpx.Request) -> int | None:
    """The `next` query parameter: None when absent; a 422 naming it when not 0 to 100."""
    if "next" not in request.url.params:
        return None
    text = request.url.params["next"]
    if NEXT_COUNT.fullmatch(text) is None or int(text) > MAX_NEXT:
        raise _Refused(422, _invalid("query.next", f"must be between 0 and {MAX_NEXT}"))
    return int(text)


def _answer(model: BaseModel) -> dict[str, Any]:
    """A reply built as the contract's model, with only the fields the server would send."""
    return model.model_dump(mode="json", exclude_unset=True)


def _item(scan_id: int, status: int, **fields: Any) -> dict[str, Any]:
    return _answer(ItemStatus(scan_id=scan_id, status=status, **fields))


def _error(code: str, detail: Any) -> dict[str, Any]:
    return _answer(ErrorBody(error=code, detail=detail))


def _invalid(field: str, message: str) -> dict[str, Any]:
    """The server's 422 body."""
    return _error("invalid_request", [{"field": field, "message": message}])
