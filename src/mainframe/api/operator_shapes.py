"""Operator records to JSON-ready dicts, and the dead-letter listing's cursor."""

from __future__ import annotations

from typing import Any

from mainframe.api import shapes
from mainframe.clock import rfc3339
from mainframe.store import Invalid
from mainframe.store.audit import AuditEntry
from mainframe.store.dead_letters import DeadLetter
from mainframe.store.overview import EndpointCard, Overview

NO_ATTEMPT = {"seq": None, "outcome": None, "summary": None, "artifact": None, "worker": None}


def dead_letter(item: DeadLetter) -> dict[str, Any]:
    body = shapes.scan(item.scan)
    body["redriven_at"] = rfc3339(item.scan.redriven_at)
    body["redrive_count"] = item.scan.redrive_count
    a = item.final_attempt
    body["final_attempt"] = (
        {**NO_ATTEMPT, "at": None}
        if a is None
        else {
            "seq": a.seq,
            "outcome": a.outcome,
            "summary": a.summary,
            "artifact": a.artifact,
            "worker": a.worker,
            "at": rfc3339(a.closed_at),
        }
    )
    return body


def cursor(keyset: tuple[int, int] | None) -> str | None:
    return None if keyset is None else f"{keyset[0]}-{keyset[1]}"


def parse_cursor(text: str | None, *, field: str = "query.cursor") -> tuple[int, int] | None:
    """The keyset a next_cursor names; 422 naming the field for anything else."""
    if text is None:
        return None
    at, _, scan_id = text.partition("-")
    if not (at.isdigit() and scan_id.isdigit() and len(at) <= 18 and len(scan_id) <= 18):
        raise Invalid(field, "use the next_cursor of a previous page")
    return int(at), int(scan_id)


def audit_entry(entry: AuditEntry) -> dict[str, Any]:
    return {
        "audit_id": entry.id,
        "at": rfc3339(entry.at),
        "action": entry.action,
        "count": entry.count,
        "scan_ids": entry.scan_ids,
        "filter": entry.filter,
    }


def card(c: EndpointCard, now: int) -> dict[str, Any]:
    age = None if c.oldest_queued_at is None else round((now - c.oldest_queued_at) / 1e6, 3)
    return {
        "endpoint": c.name,
        "open_intake": c.open_intake,
        "revoked_at": rfc3339(c.revoked_at),
        "counts": c.counts,
        "oldest_queued_at": rfc3339(c.oldest_queued_at),
        "oldest_queued_age_seconds": age,
        "hooks": [
            {
                "hook_id": h.hook_id,
                "url": h.url,
                "queue": h.queue,
                "enabled": h.enabled,
                "disabled_reason": h.disabled_reason,
                "consecutive_failures": h.consecutive_failures,
                "last_delivery_at": rfc3339(h.last_delivery_at),
            }
            for h in c.hooks
        ],
    }


def overview(o: Overview) -> dict[str, Any]:
    return {
        "taken_at": rfc3339(o.taken_at),
        "endpoints": [card(c, o.taken_at) for c in o.endpoints],
        "totals": o.totals,
    }
