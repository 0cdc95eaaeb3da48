"""The revocation cascade: an operator kills an endpoint and everything it still held, in
one transaction: its credentials stop working, its open attempts are closed, and every live
scan becomes a dead letter with reason `endpoint_revoked` (`Revocations.revoke`, audited)."""

from __future__ import annotations

from mainframe.lifecycle.causes import cause_of, named
from mainframe.lifecycle.rules import AttemptOutcome
from mainframe.lifecycle.scans import EndpointRevoked, increments
from mainframe.store.accounts import audit
from mainframe.store.accounts.audit import Action, Origin
from mainframe.store.accounts.owners import endpoint_by_name
from mainframe.store.engine.database import Conflict, Database, NotFound, Tx, transact
from mainframe.store.engine.statements import statement

BUMP = statement("bump_totals")
NAME_CAUSE = statement("name_cause")
REVOKE_ENDPOINT = statement("revoke_endpoint")
LOCK_LIVE = statement("lock_revoked_scans")
CLOSE_HELD_ATTEMPTS = statement("close_revoked_attempts")
DEAD_LETTER_LIVE = statement("dead_letter_revoked")


async def revoke_endpoint(tx: Tx, *, endpoint_id: int, endpoint: str) -> EndpointRevoked:
    """Dead-letter every live scan of the endpoint and refuse its credentials, atomically."""
    revoked = cause_of(AttemptOutcome.ENDPOINT_REVOKED.value, None)
    await tx.many(NAME_CAUSE, named([revoked]))
    params = {"endpoint": endpoint_id}
    await tx.run(REVOKE_ENDPOINT, params)
    await tx.run(LOCK_LIVE, params)
    await tx.run(CLOSE_HELD_ATTEMPTS, params | {"cause": revoked.key})
    ended = await tx.run(DEAD_LETTER_LIVE, params | {"cause": revoked.key})
    return EndpointRevoked(endpoint_id, endpoint, ended)


class Revocations:
    """An owner revoking one of its endpoints, over the API."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def revoke(self, owner_id: int, endpoint: str, *, origin: Origin) -> int:
        """The silent cascade, audited with its count; returns how many scans it
        dead-lettered."""

        async def revoke(tx: Tx) -> int:
            found = await endpoint_by_name(tx, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is already revoked")
            event = await revoke_endpoint(tx, endpoint_id=found.id, endpoint=endpoint)
            tx.events.append(event)
            await tx.many(BUMP, increments([event], tx.spread))
            await audit.record(
                tx, owner_id, Action.ENDPOINT_REVOKED, origin=origin, endpoint=endpoint,
                count=event.dead_lettered,
            )  # fmt: skip
            return event.dead_lettered

        # Every live scan of the endpoint in one transaction: it may take a while.
        return await transact(self.db, revoke, lasting=True)
