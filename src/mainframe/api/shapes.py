"""Records to JSON-ready dicts. Stored JSON text is embedded as is, never re-parsed."""

from __future__ import annotations

from typing import Any

import orjson

from mainframe.clock import rfc3339
from mainframe.store import Closed, Job, ScanRecord


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
