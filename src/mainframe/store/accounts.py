"""Owners, endpoints and their credentials. Secrets are stored only as sha256 digests."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select

from mainframe.store import totals
from mainframe.store.errors import Conflict, NotFound
from mainframe.store.records import EndpointRecord, Principal
from mainframe.store.revoke import revoke_endpoint
from mainframe.store.schema import endpoints, owners, tokens
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx, UnitOfWork

TOKEN_PREFIX = {"owner": "mfo_", "worker": "mfw_", "source": "mfs_"}


@dataclass(frozen=True, slots=True)
class TokenView:
    """A credential as its owner sees it: never the secret."""

    id: int
    name: str
    kind: str  # worker | source
    created_at: int


@dataclass(frozen=True, slots=True)
class EndpointView:
    name: str
    open_intake: bool
    created_at: int
    revoked_at: int | None


class NameTaken(ValueError):
    """An owner or endpoint with that name already exists."""


class UnknownName(LookupError):
    """No owner or endpoint has that name."""


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(role: str) -> str:
    return TOKEN_PREFIX[role] + secrets.token_urlsafe(32)


def create_owner(conn: Connection, *, name: str, now: int) -> tuple[int, str]:
    """Create an owner and its first token; return (owner id, secret)."""
    if conn.scalar(select(owners.c.id).where(owners.c.name == name)) is not None:
        raise NameTaken(f"owner {name!r} already exists")
    owner_id = conn.execute(insert(owners).values(name=name, created_at=now)).inserted_primary_key
    assert owner_id is not None
    return owner_id[0], issue_token(
        conn, role="owner", principal=name, owner_id=owner_id[0], endpoint_id=None, now=now
    )


def owner_id_by_name(conn: Connection, name: str) -> int:
    found = conn.scalar(select(owners.c.id).where(owners.c.name == name))
    if found is None:
        raise UnknownName(f"no owner named {name!r}")
    return int(found)


def count_owners(conn: Connection) -> int:
    return len(conn.execute(select(owners.c.id).limit(1)).all())


def create_endpoint(
    conn: Connection, *, name: str, owner: str, open_intake: bool, now: int
) -> EndpointRecord:
    owner_id = owner_id_by_name(conn, owner)
    if conn.scalar(select(endpoints.c.id).where(endpoints.c.name == name)) is not None:
        raise NameTaken(f"endpoint {name!r} already exists")
    values = {"name": name, "owner_id": owner_id, "open_intake": open_intake, "created_at": now}
    new_id = conn.execute(insert(endpoints).values(**values)).inserted_primary_key
    assert new_id is not None
    totals.create_rows(conn, new_id[0])
    return EndpointRecord(new_id[0], name, owner_id, open_intake, None)


def endpoint_by_name(conn: Connection, name: str) -> EndpointRecord | None:
    row = conn.execute(select(endpoints).where(endpoints.c.name == name)).first()
    if row is None:
        return None
    return EndpointRecord(row.id, row.name, row.owner_id, bool(row.open_intake), row.revoked_at)


def endpoint_by_id(conn: Connection, endpoint_id: int) -> EndpointRecord | None:
    row = conn.execute(select(endpoints).where(endpoints.c.id == endpoint_id)).first()
    if row is None:
        return None
    return EndpointRecord(row.id, row.name, row.owner_id, bool(row.open_intake), row.revoked_at)


def owned_endpoints(conn: Connection, owner_id: int) -> dict[int, str]:
    rows = conn.execute(
        select(endpoints.c.id, endpoints.c.name).where(endpoints.c.owner_id == owner_id)
    )
    return {row.id: row.name for row in rows}


def issue_token(
    conn: Connection,
    *,
    role: str,
    principal: str,
    owner_id: int | None,
    endpoint_id: int | None,
    now: int,
) -> str:
    secret = new_secret(role)
    conn.execute(
        insert(tokens).values(
            token_hash=digest(secret),
            role=role,
            principal=principal,
            owner_id=owner_id,
            endpoint_id=endpoint_id,
            created_at=now,
        )
    )
    return secret


def create_endpoint_token(
    conn: Connection, *, endpoint: str, role: str, principal: str, now: int
) -> str:
    """A worker or source credential for one endpoint."""
    record = endpoint_by_name(conn, endpoint)
    if record is None:
        raise UnknownName(f"no endpoint named {endpoint!r}")
    if record.revoked_at is not None:
        raise NameTaken(f"endpoint {endpoint!r} is revoked")
    return issue_token(
        conn,
        role=role,
        principal=principal,
        owner_id=record.owner_id,
        endpoint_id=record.id,
        now=now,
    )


# Every request reads its token (no cache), so this is fixed SQL: one probe of the unique
# token_hash index and the endpoint's primary key.
AUTHENTICATE = Sql(
    "authenticate",
    "SELECT tokens.role, tokens.principal, tokens.owner_id, tokens.endpoint_id, "
    "endpoints.name, endpoints.revoked_at FROM tokens "
    "LEFT OUTER JOIN endpoints ON endpoints.id = tokens.endpoint_id "
    "WHERE tokens.token_hash = :digest",
)


def authenticate(tx: Tx, secret: str) -> Principal | None:
    """The principal behind a secret, or None if unknown, deleted, or its endpoint revoked."""
    row = tx.first(AUTHENTICATE, {"digest": digest(secret)})
    if row is None or row[5] is not None:
        return None
    return Principal(row[0], row[1], row[2], row[3], row[4])


ENDPOINT_BY_ID = Sql(
    "endpoint_by_id",
    "SELECT id, name, owner_id, open_intake, revoked_at FROM endpoints WHERE id = :id",
)


def endpoint_by_id_fast(tx: Tx, endpoint_id: int) -> EndpointRecord | None:
    """endpoint_by_id through the driver, for intake and the job poll."""
    row = tx.first(ENDPOINT_BY_ID, {"id": endpoint_id})
    if row is None:
        return None
    return EndpointRecord(row[0], row[1], row[2], bool(row[3]), row[4])


def endpoint_is_revoked(tx: Tx, endpoint_id: int) -> bool:
    found = endpoint_by_id_fast(tx, endpoint_id)
    return found is None or found.revoked_at is not None


class Accounts:
    """Owners, endpoints, credentials and the revocation cascade."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def create_owner(self, name: str) -> str:
        with self.uow.write() as tx:
            return create_owner(tx.conn, name=name, now=self.uow.now())[1]

    def has_owners(self) -> bool:
        with self.uow.read() as tx:
            return count_owners(tx.conn) > 0

    def create_endpoint(self, name: str, *, owner: str, open_intake: bool) -> EndpointRecord:
        with self.uow.write() as tx:
            return create_endpoint(
                tx.conn, name=name, owner=owner, open_intake=open_intake, now=self.uow.now()
            )

    def create_token(self, *, endpoint: str, role: str, principal: str) -> str:
        with self.uow.write() as tx:
            return create_endpoint_token(
                tx.conn, endpoint=endpoint, role=role, principal=principal, now=self.uow.now()
            )

    def authenticate(self, secret: str) -> Principal | None:
        # Autocommit on PostgreSQL saves BEGIN and COMMIT; SQLite reads in a deferred BEGIN.
        with self.uow.read() if self.uow.sqlite else self.uow.single() as tx:
            return authenticate(tx, secret)

    def owned_endpoints(self, owner_id: int) -> dict[int, str]:
        with self.uow.read() as tx:
            return owned_endpoints(tx.conn, owner_id)

    def revoke(self, owner_id: int, endpoint: str) -> int:
        """The silent cascade; returns how many scans it dead-lettered."""
        with self.uow.write() as tx:
            found = endpoint_by_name(tx.conn, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is already revoked")
            now = self.uow.now()
            event = revoke_endpoint(tx.conn, endpoint_id=found.id, endpoint=endpoint, now=now)
            tx.events.append(event)
            totals.record(tx, [event], rng=self.uow.rng)
        return event.dead_lettered


class Credentials:
    """An owner's own endpoints and their worker and source credentials, over the API."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def create_endpoint(self, owner_id: int, name: str, *, open_intake: bool) -> EndpointView:
        with self.uow.write() as tx:
            owner = tx.conn.scalar(select(owners.c.name).where(owners.c.id == owner_id))
            try:
                created = create_endpoint(
                    tx.conn, name=name, owner=str(owner), open_intake=open_intake,
                    now=self.uow.now(),
                )  # fmt: skip
            except NameTaken as exc:
                raise Conflict("endpoint_exists", str(exc)) from exc
            return EndpointView(created.name, created.open_intake, self.uow.now(), None)

    def endpoints(self, owner_id: int) -> list[EndpointView]:
        with self.uow.read() as tx:
            rows = tx.conn.execute(
                select(endpoints).where(endpoints.c.owner_id == owner_id).order_by(endpoints.c.name)
            )
            return [
                EndpointView(r.name, bool(r.open_intake), r.created_at, r.revoked_at) for r in rows
            ]

    def _owned(self, conn: Connection, owner_id: int, endpoint: str) -> EndpointRecord:
        found = endpoint_by_name(conn, endpoint)
        if found is None or found.owner_id != owner_id:
            raise NotFound(f"no endpoint named {endpoint!r}")
        return found

    def create_token(
        self, owner_id: int, endpoint: str, *, role: str, principal: str
    ) -> tuple[TokenView, str]:
        """A worker or source credential; the secret is returned here and never again."""
        with self.uow.write() as tx:
            found = self._owned(tx.conn, owner_id, endpoint)
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is revoked")
            now = self.uow.now()
            secret = issue_token(
                tx.conn, role=role, principal=principal, owner_id=owner_id,
                endpoint_id=found.id, now=now,
            )  # fmt: skip
            token_id = tx.conn.scalar(
                select(tokens.c.id).where(tokens.c.token_hash == digest(secret))
            )
            return TokenView(int(token_id or 0), principal, role, now), secret

    def tokens(self, owner_id: int, endpoint: str) -> list[TokenView]:
        with self.uow.read() as tx:
            found = self._owned(tx.conn, owner_id, endpoint)
            rows = tx.conn.execute(
                select(tokens).where(tokens.c.endpoint_id == found.id).order_by(tokens.c.id)
            )
            return [TokenView(r.id, r.principal, r.role, r.created_at) for r in rows]

    def delete_token(self, owner_id: int, endpoint: str, token_id: int) -> None:
        """Delete a credential: every server reads tokens per request, so it stops at once."""
        with self.uow.write() as tx:
            found = self._owned(tx.conn, owner_id, endpoint)
            gone = tx.conn.execute(
                delete(tokens).where(tokens.c.id == token_id, tokens.c.endpoint_id == found.id)
            )
            if gone.rowcount == 0:
                raise NotFound(f"no token {token_id} on endpoint {endpoint!r}")
