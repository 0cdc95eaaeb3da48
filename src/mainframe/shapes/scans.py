"""Records to JSON-ready dicts. Stored JSON text is embedded as is, never re-parsed."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from mainframe.clock import rfc3339
from mainframe.shapes.refusals import refusal_fields, store_error_body
from mainframe.store import Closed, Invalid, ItemOutcome, Job, ScanRecord, Submitted


def _json(text: str | None) -> Any:
    return None if text is None else orjson.Fragment(text)


def job(record: Job) -> dict[str, Any]:
    return {
        "scan_id": record.scan_id,
        "name": record.name,
        "version": record.version,
        "kind": record.kind,
        "queue": record.queue,
        "payload": _json(record.payload),
        "attempt": record.attempt,
        "assignment_id": record.assignment_id,
        "lease_expires_at": rfc3339(record.lease_expires_at),
    }


def scan(record: ScanRecord, *, with_attempts: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scan_id": record.id,
        "endpoint": record.endpoint,
        "queue": record.queue,
        "name": record.name,
        "version": record.version,
        "kind": record.kind,
        "status": record.status.value,
        "verified": record.verified,
        "source": record.source,
        "payload": _json(record.payload),
        "attempt_count": record.attempt_count,
        "worker": record.worker,
        "leased_at": rfc3339(record.leased_at),
        "lease_expires_at": rfc3339(record.lease_expires_at),
        "waiting": record.wait_reason,
        "created_at": rfc3339(record.created_at),
        "updated_at": rfc3339(record.updated_at),
        "finished_at": rfc3339(record.finished_at),
        "dead_lettered_at": rfc3339(record.dead_lettered_at),
        "fail_reason": record.fail_reason,
        "available_at": rfc3339(record.available_at),
        "result": _json(record.result),
    }
    if with_attempts:
        body["attempts"] = [
            {
                "seq": a.seq,
                "attempt": a.attempt,
                "worker": a.worker,
                "leased_at": rfc3339(a.leased_at),
                "closed_at": rfc3339(a.closed_at),
                "outcome": a.outcome,
                "summary": a.summary,
                "artifact": a.artifact,
            }
            for a in record.attempts
        ]
    return body


def closed(record: Closed) -> dict[str, Any]:
    return {
        "scan_id": record.scan_id,
        "status": record.status.value,
        "attempt_count": record.attempt,
        "available_at": rfc3339(record.available_at),
        "finished_at": rfc3339(record.finished_at),
        "dead_lettered_at": rfc3339(record.dead_lettered_at),
        "fail_reason": record.fail_reason,
    }


def item_status(outcome: ItemOutcome) -> dict[str, Any]:
    if outcome.error is None:
        assert outcome.closed is not None
        return {"scan_id": outcome.scan_id, "status": 200, "scan": closed(outcome.closed)}
    status, code, detail = store_error_body(outcome.error)
    fields = refusal_fields(outcome.error)
    return {"scan_id": outcome.scan_id, "status": status, "error": code, "detail": detail} | fields


def deadline(scan_id: int, until: int) -> dict[str, Any]:
    return {"scan_id": scan_id, "lease_expires_at": rfc3339(until)}


def submitted(item: Submitted) -> dict[str, Any]:
    assert item.scan is not None
    return {"status": 201 if item.created else 200, "scan_id": item.scan.id}


def refused(exc: Invalid) -> dict[str, Any]:
    status, code, detail = store_error_body(exc)
    return {"status": status, "error": code, "detail": detail}


def invalid_item(index: int, exc: ValidationError) -> dict[str, Any]:
    detail = [
        {
            "field": ".".join(str(p) for p in ("body", "scans", index, *e["loc"])),
            "message": e["msg"],
        }
        for e in exc.errors()
    ]
    return {"status": 422, "error": "invalid_request", "detail": detail}
