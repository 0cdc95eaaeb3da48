"""The revocation cascade: an operator kills an endpoint and everything it still held."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select, update

from mainframe.lifecycle.events import EndpointRevoked
from mainframe.lifecycle.rules import LIVE, AttemptOutcome, DeadLetterReason, Status
from mainframe.store.schema import attempts, endpoints, scans


def revoke_endpoint(
    conn: Connection, *, endpoint_id: int, endpoint: str, now: int
) -> EndpointRevoked:
    """Dead-letter every live scan of the endpoint and refuse its credentials, atomically."""
    conn.execute(update(endpoints).where(endpoints.c.id == endpoint_id).values(revoked_at=now))
    held = conn.execute(
        select(
            scans.c.id,
            scans.c.attempt_base,
            scans.c.attempt_count,
            scans.c.assignment_id,
            scans.c.worker,
            scans.c.leased_at,
        )
        .where(scans.c.endpoint_id == endpoint_id, scans.c.status == Status.PENDING.value)
        .with_for_update()
    ).all()
    if held:
        conn.execute(
            insert(attempts),
            [
                {
                    "scan_id": r.id,
                    "seq": r.attempt_base + r.attempt_count,
                    "attempt": r.attempt_count,
                    "assignment_id": r.assignment_id,
                    "worker": r.worker,
                    "leased_at": r.leased_at,
                    "closed_at": now,
                    "outcome": AttemptOutcome.ENDPOINT_REVOKED.value,
                    "summary": None,
                    "artifact": None,
                }
                for r in held
            ],
        )
    result = conn.execute(
        update(scans)
        .where(
            scans.c.endpoint_id == endpoint_id,
            scans.c.status.in_([status.value for status in LIVE]),
        )
        .values(
            status=Status.FAILED.value,
            dead_lettered_at=now,
            finished_at=now,
            updated_at=now,
            lease_expires_at=None,
            wait_reason=None,
            fail_reason=DeadLetterReason.ENDPOINT_REVOKED.value,
        )
    )
    return EndpointRevoked(endpoint_id, endpoint, result.rowcount)
