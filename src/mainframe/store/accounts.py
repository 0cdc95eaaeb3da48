"""Owners, endpoints and their credentials. Secrets are stored only as sha256 digests."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import Connection, insert, select

from mainframe.store import totals
from mainframe.store.errors import Conflict, NotFound
from mainframe.store.records import EndpointRecord, Principal
from mainframe.store.revoke import revoke_endpoint
from mainframe.store.schema import endpoints, owners, tokens
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx, UnitOfWork

TOKEN_PREFIX = {"owner": "mfo_", "worker": "mfw_", "source": "mfs_"}


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


def authenticate(conn: Connection, secret: str) -> Principal | None:
    """The principal behind a secret, or None if unknown or its endpoint is revoked."""
    query = (
        select(
            tokens.c.role,
            tokens.c.principal,
            tokens.c.owner_id,
            tokens.c.endpoint_id,
            endpoints.c.name.label("endpoint"),
            endpoints.c.revoked_at,
        )
        .select_from(tokens.outerjoin(endpoints, endpoints.c.id == tokens.c.endpoint_id))
        .where(tokens.c.token_hash == digest(secret))
    )
    row = conn.execute(query).first()
    if row is None or row.revoked_at is not None:
        return None
    return Principal(row.role, row.principal, row.owner_id, row.endpoint_id, row.endpoint)


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
        with self.uow.read() as tx:
            return authenticate(tx.conn, secret)

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
