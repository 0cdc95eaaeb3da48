"""Who a presented token speaks for: one probe of the unique token digest (and the
endpoint's key), on every request that carries a token. Secrets are never stored: a token is
its prefix and 32 random bytes, kept as its SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

from mainframe.store.database import Database, Tx, first
from mainframe.store.errors import Unauthorized
from mainframe.store.records import Presented, Principal
from mainframe.store.sql import Sql

TOKEN_PREFIX = {"owner": "mfo_", "worker": "mfw_", "source": "mfs_"}

# One probe of the unique token_hash index and the endpoint's primary key.
AUTHENTICATE = Sql(
    "authenticate",
    """
    SELECT tokens.role, tokens.principal, tokens.owner_id, tokens.endpoint_id,
           endpoints.name, endpoints.revoked_at, tokens.id
    FROM tokens LEFT JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest
    """,
)


def digest(secret: str) -> str:
    """What is stored of a secret, and what a presented one is looked up by."""
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_secret(role: str) -> str:
    """A new secret for a credential of `role`, its prefix naming the role."""
    return TOKEN_PREFIX[role] + secrets.token_urlsafe(32)


async def authenticate(tx: Tx, secret_digest: str) -> Principal | None:
    """The principal behind a token digest, or None if unknown, deleted, or its endpoint
    revoked."""
    row = await first(tx, AUTHENTICATE, {"digest": secret_digest})
    if row is None or row[5] is not None:
        return None
    return Principal(row[0], row[1], row[2], row[3], row[4], secret_digest, row[6])


class Authentication:
    """A token's principal, outside any other work (the routes that take any role)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def authenticate(self, secret: str) -> Principal | None:
        async with self.db.single() if self.db.dialect != "sqlite" else self.db.read() as tx:
            return await authenticate(tx, digest(secret))

    async def worker(self, caller: Presented) -> Principal:
        """The live worker a presented token speaks for; Unauthorized for anything else."""
        async with self.db.single() if self.db.dialect != "sqlite" else self.db.read() as tx:
            found = await authenticate(tx, caller.digest)
        if found is None or found.role != "worker":
            raise Unauthorized("unknown token, or not a worker's, or its endpoint is revoked")
        return found
