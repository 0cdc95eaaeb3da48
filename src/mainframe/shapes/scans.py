"""Scan records as the contract's replies: each function builds the model the route returns,
which is the reply (the route's `response_model` serialises it)."""

from __future__ import annotations

from pydantic import ValidationError

from mainframe.clock import rfc3339
from mainframe.contract.schemas import (
    AttemptPublic,
    ItemStatus,
    ResultPublic,
    ScanPublic,
    SubmitStatus,
    stored_value,
)
from mainframe.store import Invalid, ItemOutcome, ScanRecord, Submitted
from mainframe.web import refusal


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


def item_status(outcome: ItemOutcome) -> ItemStatus:
    """One item of a batch of results: the closed scan, or what the single route refuses."""
    if outcome.error is None:
        assert outcome.closed is not None
        return ItemStatus(scan_id=outcome.scan_id, status=200, scan=ResultPublic.of(outcome.closed))
    status, body = refusal(outcome.error)
    return ItemStatus(
        scan_id=outcome.scan_id,
        status=status,
        error=body.error,
        detail=body.detail,
        accepted=body.accepted,
    )


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
