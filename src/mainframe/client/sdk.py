"""A typed HTTP client for Mainframe's worker API: lease scans, heartbeat, wait, resume, report.

Every call about an assignment echoes its attempt and assignment id, so the server can turn
away a worker that lost its lease (a 409, raised as StaleAssignment). `complete` reports a
result and leases the next scans in the same request (`?next=N`). Leases and completions are
retried on transport errors: the server answers a repeated completion as it answered the first,
with the same jobs. A plain `report` is never resent blindly, because the server answers a
repeated one with 409 `already_terminal`.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self

import httpx
from pydantic import BaseModel, ValidationError

from mainframe import __version__
from mainframe.contract import schemas
from mainframe.contract.limits import JOBS_PATH, MAX_LEASE_BATCH, MAX_NEXT, MAX_REPORTS
from mainframe.contract.schemas import JobPublic
from mainframe.lifecycle.backoff import EQUAL_JITTER, Backoff

LEASE_ATTEMPTS = 4  # tries of a poll or a completion on transport errors; both are safe to repeat
# The first lease retry waits 0.25-0.5 s, about twice as long each time up to 4-8 s; equal
# jitter, so clients cut off together do not retry in lockstep (docs/reliability.md).
LEASE_BACKOFF = Backoff(base=0.5, cap=8.0, jitter=EQUAL_JITTER)

Outcome = Literal["finished", "failed"]


class MainframeError(Exception):
    """The server answered with an unexpected status or a body the client cannot read;
    `words` is the refusal as an operator reads it (`refusal_words`)."""

    def __init__(self, status: int, body: Any) -> None:
        self.words = refusal_words(status, body)
        super().__init__(f"Mainframe answered {status}: {self.words}")
        self.status = status
        self.body = body


# A 422's field is named from the body down (`body.scans.3.name`); the item's own field is
# what an operator can act on, the request and the item are known from where it is printed.
_FIELD_PREFIX = re.compile(r"^body\.(?:scans\.\d+\.|results\.\d+\.)?")
_SHOWN_BODY_CHARS = 300  # of a body that is not the contract's error shape


def refusal_words(status: int, body: Any) -> str:
    """A refusal in words: `<detail> (<error>)` for the contract's error body, each invalid
    field of a 422 named; any other body shortened to one line after its status."""
    if isinstance(body, dict) and "error" in body and "detail" in body:
        return f"{_detail_words(body['detail'])} ({body['error']})"
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    return f"HTTP {status}: {' '.join(text.split())[:_SHOWN_BODY_CHARS]}"


def _detail_words(detail: Any) -> str:
    if isinstance(detail, list) and all(
        isinstance(item, dict) and {"field", "message"} <= item.keys() for item in detail
    ):
        return "; ".join(
            f"{_FIELD_PREFIX.sub('', str(item['field']))}: {item['message']}" for item in detail
        )
    return detail if isinstance(detail, str) else json.dumps(detail, default=str)


class StaleAssignment(MainframeError):
    """A 409: the assignment is no longer this worker's (`code` says why). For
    `result_conflict`, `accepted` is the other result that closed it (AcceptedResult)."""

    def __init__(self, code: str, detail: str, accepted: dict[str, Any] | None = None) -> None:
        body = {"error": code, "detail": detail}
        super().__init__(409, body if accepted is None else body | {"accepted": accepted})
        self.code = code
        self.detail = detail
        self.accepted = accepted


def parse_timestamp(text: str) -> datetime:
    """Parse an RFC 3339 time from the server; a time without an offset is taken as UTC."""
    stamp = datetime.fromisoformat(text)
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Job:
    """One leased scan, as handed to a worker: the contract's JobPublic as a plain value
    (a test holds the two to the same fields)."""

    scan_id: int
    name: str
    version: str
    kind: str
    queue: str
    payload: Any
    attempt: int
    assignment_id: str
    lease_expires_at: str

    @classmethod
    def from_json(cls, item: Any) -> Job:
        """Build a Job from one item of a lease response, read by the contract's model."""
        try:
            job = cls(**dict(JobPublic.model_validate(item)))
            parse_timestamp(job.lease_expires_at)
        except ValueError as exc:  # pydantic's ValidationError is one
            raise MainframeError(200, item) from exc
        return job

    def assignment(self) -> dict[str, Any]:
        """The fields that prove which assignment a request is about."""
        return {"attempt": self.attempt, "assignment_id": self.assignment_id}


@dataclass(frozen=True)
class ResultReport:
    """What a worker says about its attempt; `retryable` only matters for a failure."""

    outcome: Outcome
    retryable: bool = True
    summary: str | None = None
    artifact: str | None = None
    result: Any = None
    # For a retryable failure: wait this long before the next attempt (the server's backoff
    # otherwise), e.g. what the registry's own Retry-After said.
    retry_after_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The result fields of a request body, leaving out the ones not set."""
        body: dict[str, Any] = {"outcome": self.outcome}
        if self.outcome == "failed":
            body["retryable"] = self.retryable
        for key in ("summary", "artifact", "result", "retry_after_seconds"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return body


@dataclass(frozen=True)
class ItemStatus:
    """The server's answer to one result of a batch report."""

    scan_id: int
    status: int
    error: str | None = None
    detail: str | None = None
    # Where an accepted result sent the scan (status, available_at, dead_lettered_at, ...);
    # the answer's facts, not what makes two statuses the same.
    scan: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def accepted(self) -> bool:
        return self.status == 200

    @classmethod
    def refused(cls, scan_id: int, exc: MainframeError) -> ItemStatus:
        """The status a batch report gives a result the single endpoint refused with `exc`."""
        body = exc.body if isinstance(exc.body, dict) else {"detail": exc.body}
        error, detail = body.get("error"), body.get("detail")
        return cls(
            scan_id,
            exc.status,
            None if error is None else str(error),
            None if detail is None else str(detail),
        )


@dataclass(frozen=True)
class Completion:
    """The answer to a result reported with complete(): where the scan went and the jobs
    leased with it (already held by this worker: run or abandon them)."""

    scan: dict[str, Any]  # what report() returns: status, attempt_count, available_at, ...
    jobs: list[Job]


@dataclass(frozen=True)
class BatchCompletion:
    """The answer to results reported with complete_many(): each result's status in order, and
    the jobs leased with them."""

    statuses: list[ItemStatus]
    jobs: list[Job]


class Client:
    """A synchronous client for one worker token; use it as a context manager or close() it."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": f"mainframe-worker/{__version__}",
            },
            transport=transport,
            timeout=timeout,
        )
        self._sleep = sleep
        self._rng = rng or random.Random()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def lease(self, batch: int = 1) -> list[Job]:
        """Lease up to `batch` scans; an empty list means nothing is eligible right now."""
        if not 1 <= batch <= MAX_LEASE_BATCH:
            raise ValueError(f"batch must be between 1 and {MAX_LEASE_BATCH}, got {batch}")
        body = self._post_retrying(JOBS_PATH, params={"batch": batch})
        if not isinstance(body, list):
            raise MainframeError(200, body)
        return [Job.from_json(item) for item in body]

    def report(self, job: Job, report: ResultReport) -> dict[str, Any]:
        """Post the result of `job`'s attempt; the reply says where the scan went (status,
        attempt_count, available_at for a retry, finished_at, dead_lettered_at, fail_reason)."""
        body = {**job.assignment(), **report.to_json()}
        return _read(
            schemas.ResultPublic, self._post(f"{JOBS_PATH}/{job.scan_id}/result", json=body)
        )

    def report_many(self, reports: Sequence[tuple[Job, ResultReport]]) -> list[ItemStatus]:
        """Post several results in one request; a rejected item does not raise, it is returned."""
        if not reports:
            return []
        body = self._post(f"{JOBS_PATH}/results", json=_batch_body(reports))
        return _statuses(body, len(reports))

    def complete(self, job: Job, report: ResultReport, *, next: int = 1) -> Completion:
        """Post the result of `job`'s attempt and lease up to `next` more scans in one request;
        a transport error is retried, since the server answers a repeat as it did the first."""
        _check_next(next)
        body = {**job.assignment(), **report.to_json()}
        path = f"{JOBS_PATH}/{job.scan_id}/result"
        reply = _read(
            schemas.ResultPublic, self._post_retrying(path, json=body, params={"next": next})
        )
        jobs = _next_jobs(reply)
        return Completion({key: value for key, value in reply.items() if key != "next"}, jobs)

    def complete_many(
        self, reports: Sequence[tuple[Job, ResultReport]], *, next: int
    ) -> BatchCompletion:
        """Post several results and lease up to `next` more scans in one request (retried like
        complete()); a rejected item does not raise, it is returned."""
        _check_next(next)
        if not reports:
            return BatchCompletion([], [])
        path = f"{JOBS_PATH}/results"
        body = self._post_retrying(path, json=_batch_body(reports), params={"next": next})
        return BatchCompletion(_statuses(body, len(reports)), _next_jobs(body))

    def heartbeat(self, job: Job) -> str:
        """Extend `job`'s lease and return its new expiry (RFC 3339)."""
        body = self._post(f"{JOBS_PATH}/{job.scan_id}/heartbeat", json=job.assignment())
        expires_at = str(_read(schemas.LeaseDeadline, body)["lease_expires_at"])
        try:
            parse_timestamp(expires_at)
        except ValueError as exc:
            raise MainframeError(200, body) from exc
        return expires_at

    def wait(self, job: Job, seconds: float, reason: str) -> dict[str, Any]:
        """Park `job` for at most `seconds` while it waits on something outside the worker."""
        body = {**job.assignment(), "seconds": seconds, "reason": reason}
        return _read(
            schemas.LeaseDeadline, self._post(f"{JOBS_PATH}/{job.scan_id}/wait", json=body)
        )

    def resume(self, job: Job) -> dict[str, Any]:
        """End a wait begun with wait(); the scan is leased to this worker again."""
        body = job.assignment()
        return _read(
            schemas.LeaseDeadline, self._post(f"{JOBS_PATH}/{job.scan_id}/resume", json=body)
        )

    def _post_retrying(self, path: str, *, params: dict[str, Any], json: Any = None) -> Any:
        # Only for requests the server answers the same when repeated: a poll, a completion.
        for failures in range(1, LEASE_ATTEMPTS):
            try:
                return self._post(path, json=json, params=params)
            except httpx.TransportError:
                self._sleep(LEASE_BACKOFF.delay(failures, self._rng.random()))
        return self._post(path, json=json, params=params)

    def _post(self, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        response = self._http.post(path, json=json, params=params)
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text
        if response.status_code == 409:
            code, detail = _conflict(body)
            accepted = body.get("accepted") if isinstance(body, dict) else None
            raise StaleAssignment(code, detail, accepted if isinstance(accepted, dict) else None)
        if not response.is_success or isinstance(body, str):
            raise MainframeError(response.status_code, body)
        return body


def _conflict(body: Any) -> tuple[str, str]:
    if isinstance(body, dict):
        return str(body.get("error", "conflict")), str(body.get("detail", ""))
    return "conflict", str(body)


def _read(model: type[BaseModel], body: Any) -> dict[str, Any]:
    """`body` as the server sent it, once it has the contract's shape for the answer."""
    try:
        model.model_validate(body)
    except ValidationError as exc:
        raise MainframeError(200, body) from exc
    assert isinstance(body, dict)  # every answer the client reads is a JSON object
    return body


def _check_next(next: int) -> None:
    if not 0 <= next <= MAX_NEXT:
        raise ValueError(f"next must be between 0 and {MAX_NEXT}, got {next}")


def _batch_body(reports: Sequence[tuple[Job, ResultReport]]) -> dict[str, Any]:
    if len(reports) > MAX_REPORTS:
        raise ValueError(f"at most {MAX_REPORTS} results per batch, got {len(reports)}")
    items = [
        {"scan_id": job.scan_id, **job.assignment(), **report.to_json()} for job, report in reports
    ]
    return {"results": items}


def _statuses(body: Any, count: int) -> list[ItemStatus]:
    items = _read(schemas.BatchStatuses, body)["results"]
    if len(items) != count:
        raise MainframeError(200, body)
    return [_item_status(item) for item in items]


def _next_jobs(body: dict[str, Any]) -> list[Job]:
    # A server older than complete-and-fetch ignores `?next=` and leaves the key out: no jobs,
    # so the worker polls as it always did.
    return [Job.from_json(item) for item in body.get("next") or []]


def _item_status(item: dict[str, Any]) -> ItemStatus:
    error, detail = item.get("error"), item.get("detail")
    return ItemStatus(
        scan_id=item["scan_id"],
        status=item["status"],
        error=None if error is None else str(error),
        detail=None if detail is None else str(detail),
        scan=item.get("scan"),
    )
