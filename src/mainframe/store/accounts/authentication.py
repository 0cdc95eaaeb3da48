"""Who a presented token speaks for, and when it was last used. Secrets are never stored: a
token is its prefix and 32 random bytes, kept as its SHA-256 digest, found by one probe of
the unique digest (and the endpoint's key).

A credential's last use is kept coarse so that no request writes for it: the request only
notes the digest it presented (a set, in memory), and a periodic flush writes the noted ones
in one transaction, each at most every ten seconds (`COARSE_US`): fresh enough for a poll
to tell whether another worker of its endpoint is asking (lifecycle/elsewhere.py). A digest
that names no token updates nothing; the set is bounded, so a flood of made-up tokens costs a
fixed amount of memory and drops only last-use notes, never a request.

Endpoint names are read once per process (`EndpointNames`): a name never changes once its
endpoint exists, so principals, records and events carry it without a join in every hot
statement."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from mainframe.store.engine.database import (
    Database,
    Sql,
    Tx,
    Unauthorized,
    first,
    transact,
    value,
)
from mainframe.store.engine.statements import statement

TOKEN_PREFIX = {"owner": "mfo_", "worker": "mfw_", "source": "mfs_"}
COARSE_US = 10_000_000  # a credential's last use is as fresh as this, at best
MAX_NOTED = 10_000  # digests noted between two flushes at most

AUTHENTICATE = statement("authenticate")
TOUCH = statement("touch_token")

ENDPOINT_NAME = statement("endpoint_name")


@dataclass(frozen=True, slots=True)
class Presented:
    """A token as a request presented it, not yet checked: its sha256 digest. The hot
    statements check it themselves, in the same round trip as their work."""

    digest: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a token speaks for: an owner, or a worker or source of one endpoint."""

    role: str  # owner | worker | source
    name: str
    owner_id: int | None
    endpoint_id: int | None
    endpoint: str | None
    digest: str = ""  # of the token it was read from, so store calls can check it again
    token_id: int | None = None  # the credential's id, as its owner lists and deletes it


class EndpointNames:
    """Endpoint names by id, kept for the life of the process."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    async def of(self, tx: Tx, endpoint_id: int) -> str:
        """The endpoint's name, read once per process."""
        name = self._names.get(endpoint_id)
        if name is None:
            name = str(await value(tx, ENDPOINT_NAME, {"endpoint": endpoint_id}))
            self._names[endpoint_id] = name
        return name


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
    if row is None:
        return None
    if row["revoked_at"] is not None:
        return None
    return Principal(
        role=row["role"],
        name=row["principal"],
        owner_id=row["owner_id"],
        endpoint_id=row["endpoint_id"],
        endpoint=row["endpoint"],
        digest=secret_digest,
        token_id=row["token_id"],
    )


async def worker_of(tx: Tx, caller: Presented | Principal) -> Principal:
    """The worker behind a presented token, checked in `tx`; Unauthorized for anything else."""
    found = await authenticate(tx, caller.digest)
    if found is None:
        raise Unauthorized("unknown token, or its endpoint is revoked")
    if found.role != "worker":
        raise Unauthorized(f"this route takes a worker token, not a {found.role} token")
    return found


class NotedDigests:
    """Token digests this process's requests noted since the last flush, written by the
    flush with `statement` in one transaction. The set is bounded, so a flood of made-up
    tokens costs a fixed amount of memory; a flush that fails keeps its notes for the next."""

    def __init__(self, db: Database, statement: Sql) -> None:
        self.db = db
        self._statement = statement
        self._noted: set[str] = set()

    def note(self, presented: str) -> None:
        """Note a digest, to be written by the next `flush`."""
        if len(self._noted) < MAX_NOTED:
            self._noted.add(presented)

    async def flush(self) -> int:
        """Write the noted digests; how many were noted."""
        if not self._noted:
            return 0
        noted, self._noted = self._noted, set()
        params = [{"digest": d, "coarse": COARSE_US} for d in sorted(noted)]
        try:
            await transact(self.db, lambda tx: tx.many(self._statement, params))
        except BaseException:
            self._noted |= noted  # at most twice MAX_NOTED until the next flush empties it
            raise
        return len(noted)


class Authentication(NotedDigests):
    """A token's principal outside any other work (the routes that take any role), and the
    digests this process's requests presented since the last flush (their last use)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, TOUCH)

    async def authenticate(self, secret: str) -> Principal | None:
        async with self.db.lookup() as tx:
            return await authenticate(tx, digest(secret))

    async def worker(self, caller: Presented) -> Principal:
        """The live worker a presented token speaks for; Unauthorized for anything else."""
        async with self.db.lookup() as tx:
            found = await authenticate(tx, caller.digest)
        if found is None or found.role != "worker":
            raise Unauthorized("unknown token, or not a worker's, or its endpoint is revoked")
        return found
