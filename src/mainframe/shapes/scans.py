"""Scan records as the contract's replies: each function builds the model the route returns,
which is the reply (the route's `response_model` serialises it)."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from mainframe.clock import rfc3339
from mainframe.contract.schemas import (
    AttemptPublic,
    ItemStatus,
    JobPublic,
    LeaseDeadline,
    ResultPublic,
    ScanPublic,
    SubmitStatus,
)
from mainframe.shapes.refusals import refusal
from mainframe.store import Closed, Invalid, ItemOutcome, Job, ScanRecord, Submitted


def stored_value(text: str | None) -> Any:
    """A sender's value (a payload, a result) from the JSON text it is stored as."""
    return None if text is None else orjson.loads(text)


def job(record: Job) -> JobPublic:
    return JobPublic(
        scan_id=record.scan_id,
        name=record.name,
        version=record.version,
        kind=record.kind,
        queue=record.queue,
        payload=stored_value(record.payload),
        attempt=record.attempt,
        assignment_id=record.assignment_id,
        lease_expires_at=rfc3339(record.lease_expires_at),
    )


def jobs(records: list[Job], asked: int | None) -> list[JobPublic] | None:
    """The `next` of a reply: the jobs leased with it, when `?next` asked for any."""
    return None if asked is None else [job(record) for record in records]


def scan(record: ScanRecord, *, with_attempts: bool = False) -> ScanPublic:
    return ScanPublic(
        scan_id=record.id,
        endpoint=record.endpoint,
        queue=record.queue,
        name=record.name,
        version=record.version,
        kind=record.kind,
        status=record.status.value,
        verified=record.verified,
        source=record.source,
        payload=stored_value(record.payload),
        attempt_count=record.attempt_count,
        worker=record.worker,
        leased_at=rfc3339(record.leased_at),
        lease_expires_at=rfc3339(record.lease_expires_at),
        waiting=record.wait_reason,
        created_at=rfc3339(record.created_at),
        updated_at=rfc3339(record.updated_at),
        finished_at=rfc3339(record.finished_at),
        dead_lettered_at=rfc3339(record.dead_lettered_at),
        fail_reason=record.fail_reason,
        available_at=rfc3339(record.available_at),
        result=stored_value(record.result),
        attempts=[
            AttemptPublic(
                seq=a.seq,
                attempt=a.attempt,
                worker=a.worker,
                leased_at=rfc3339(a.leased_at),
                closed_at=rfc3339(a.closed_at),
                outcome=a.outcome,
                summary=a.summary,
                artifact=a.artifact,
            )
            for a in record.attempts
        ]
        if with_attempts
        else None,
    )


def closed(record: Closed, next_jobs: list[JobPublic] | None = None) -> ResultPublic:
    """The answer to a result that closed its attempt, with the jobs leased with it."""
    return ResultPublic(
        scan_id=record.scan_id,
        status=record.status.value,
        attempt_count=record.attempt,
        available_at=rfc3339(record.available_at),
        finished_at=rfc3339(record.finished_at),
        dead_lettered_at=rfc3339(record.dead_lettered_at),
        fail_reason=record.fail_reason,
        next=next_jobs,
    )


def item_status(outcome: ItemOutcome) -> ItemStatus:
    """One item of a batch of results: the closed scan, or what the single route refuses."""
    if outcome.error is None:
        assert outcome.closed is not None
        return ItemStatus(scan_id=outcome.scan_id, status=200, scan=closed(outcome.closed))
    status, body = refusal(outcome.error)
    return ItemStatus(
        scan_id=outcome.scan_id,
        status=status,
        error=body.error,
        detail=body.detail,
        accepted=body.accepted,
    )


def deadline(scan_id: int, until: int) -> LeaseDeadline:
    return LeaseDeadline(scan_id=scan_id, lease_expires_at=rfc3339(until))


def submitted(item: Submitted) -> SubmitStatus:
    assert item.scan is not None
    return SubmitStatus(status=201 if item.created else 200, scan_id=item.scan.id)


def refused(exc: Invalid) -> SubmitStatus:
    status, body = refusal(exc)
    return SubmitStatus(status=status, error=body.error, detail=body.detail)


def invalid_item(index: int, exc: ValidationError) -> SubmitStatus:
    """A bulk submission's item its model refused, each problem named by its field."""
    detail = [
        {
            "field": ".".join(str(p) for p in ("body", "scans", index, *e["loc"])),
            "message": e["msg"],
        }
        for e in exc.errors()
    ]
    return SubmitStatus(status=422, error="invalid_request", detail=detail)
