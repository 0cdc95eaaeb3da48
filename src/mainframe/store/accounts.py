"""Owners, endpoints and their credentials. Secrets are stored only as sha256 digests."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import Connection, insert, select, update

from mainframe.store import totals
from mainframe.store.records import EndpointRecord, Principal
from mainframe.store.schema import endpoints, owners, tokens

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


def endpoint_is_revoked(conn: Connection, endpoint_id: int) -> bool:
    revoked = conn.scalar(select(endpoints.c.revoked_at).where(endpoints.c.id == endpoint_id))
    return revoked is not None


def mark_revoked(conn: Connection, *, endpoint_id: int, now: int) -> None:
    conn.execute(update(endpoints).where(endpoints.c.id == endpoint_id).values(revoked_at=now))
