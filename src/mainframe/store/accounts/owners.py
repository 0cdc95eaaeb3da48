"""Owners and what they administer: their endpoints and the endpoints' worker and source
credentials, for the CLI, the API and the board alike. Secrets are stored only as sha256
digests; credentials are read on every request (never cached), so a deleted token or a
revoked endpoint is refused from the next request in every process. Each change of an
endpoint or a credential writes its audit row in its own transaction."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, NamedTuple, TypeAlias

from mainframe.contract.names import name_problem
from mainframe.store.accounts import audit, totals
from mainframe.store.accounts.audit import Action, Origin
from mainframe.store.accounts.authentication import digest, issue_secret
from mainframe.store.engine.database import (
    Conflict,
    Database,
    Invalid,
    NotFound,
    Row,
    Tx,
    first,
    record,
    transact,
    value,
)
from mainframe.store.engine.statements import statement


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    id: int
    name: str
    owner_id: int
    open_intake: bool
    revoked_at: int | None


OWNER_ID = statement("owner_id")
ANY_OWNER = statement("any_owner")
INSERT_OWNER = statement("insert_owner")
ENDPOINT_BY_NAME = statement("endpoint_by_name")
ENDPOINT_BY_ID = statement("endpoint_by_id")
OWNED_ENDPOINTS = statement("owned_endpoints")
INSERT_ENDPOINT = statement("insert_endpoint")
INSERT_TOKEN = statement("insert_token")
ENDPOINT_TOKENS = statement("endpoint_tokens")
DELETE_TOKEN = statement("delete_token")
LOCK_ENDPOINT = statement("lock_endpoint_for_token")
DELETE_OWNER_TOKENS = statement("delete_owner_tokens")
END_OWNER_SESSIONS = statement("end_owner_sessions")
OWNER_NAMES = statement("owner_names")
TOKEN_NAMED = statement("token_named")


@dataclass(frozen=True, slots=True)
class TokenView:
    """A credential as its owner sees it: never the secret."""

    id: int
    name: str
    kind: str  # worker | source
    created_at: int
    last_used_at: int | None = (
        None  # to about 15 s (store/accounts/authentication.py); None: never since
    )


@dataclass(frozen=True, slots=True)
class EndpointView:
    """An endpoint as its owner sees it."""

    id: int
    name: str
    open_intake: bool
    created_at: int
    revoked_at: int | None


class NameTaken(Conflict):
    """An owner or endpoint with that name already exists (409 over the API)."""


class UnknownName(NotFound):
    """No owner has that name."""


class _Operator(Enum):
    OPERATOR = "operator"


# Who acts on an endpoint: an owner's id (the API, the board; only its own endpoints), or the
# operator at the database (the CLI), who may act on any owner's.
OPERATOR = _Operator.OPERATOR
Acting: TypeAlias = int | Literal[_Operator.OPERATOR]


class EndpointRow(NamedTuple):
    """A row of ENDPOINT_BY_NAME, ENDPOINT_BY_ID, OWNED_ENDPOINTS and INSERT_ENDPOINT."""

    id: int
    name: str
    owner_id: int
    open_intake: bool
    revoked_at: int | None
    created_at: int

    @classmethod
    def of(cls, row: Row) -> EndpointRow:
        """The endpoint of a row, by column name."""
        return record(cls, row)

    def record(self) -> EndpointRecord:
        return EndpointRecord(self.id, self.name, self.owner_id, bool(self.open_intake),
                              self.revoked_at)  # fmt: skip

    def view(self) -> EndpointView:
        return EndpointView(self.id, self.name, bool(self.open_intake), self.created_at,
                            self.revoked_at)  # fmt: skip


class TokenRow(NamedTuple):
    """A row of ENDPOINT_TOKENS and INSERT_TOKEN."""

    id: int
    principal: str
    role: str
    created_at: int
    last_used_at: int | None

    @classmethod
    def of(cls, row: Row) -> TokenRow:
        """The credential of a row, by column name."""
        return record(cls, row)

    def view(self) -> TokenView:
        return TokenView(self.id, self.principal, self.role, self.created_at, self.last_used_at)


def _endpoint(row: Row | None) -> EndpointRecord | None:
    return None if row is None else EndpointRow.of(row).record()


async def endpoint_by_name(tx: Tx, name: str) -> EndpointRecord | None:
    return _endpoint(await first(tx, ENDPOINT_BY_NAME, {"name": name}))


async def endpoint_by_id(tx: Tx, endpoint_id: int) -> EndpointRecord | None:
    return _endpoint(await first(tx, ENDPOINT_BY_ID, {"endpoint": endpoint_id}))


async def owned_endpoints(tx: Tx, owner_id: int) -> dict[int, str]:
    """The owner's endpoints by id, in name order."""
    rows = await tx.rows(OWNED_ENDPOINTS, {"owner": owner_id})
    return {found.id: found.name for found in map(EndpointRow.of, rows)}


async def owner_id_by_name(tx: Tx, name: str) -> int:
    found = await value(tx, OWNER_ID, {"name": name})
    if found is None:
        raise UnknownName(f"no owner named {name!r}")
    return int(found)


async def insert_owner(tx: Tx, name: str) -> tuple[int, str]:
    """Create an owner and its first token; return (owner id, secret)."""
    if await value(tx, OWNER_ID, {"name": name}) is not None:
        raise NameTaken("owner_exists", f"owner {name!r} already exists")
    owner_id = int(await value(tx, INSERT_OWNER, {"name": name}))
    secret = await issue_token(
        tx, role="owner", principal=name, owner_id=owner_id, endpoint_id=None
    )
    return owner_id, secret


async def insert_endpoint(
    tx: Tx, *, name: str, owner_id: int, open_intake: bool, origin: Origin
) -> EndpointView:
    """A new endpoint with zeroed outcome totals, audited."""
    _check_name("name", name)
    if await first(tx, ENDPOINT_BY_NAME, {"name": name}) is not None:
        raise NameTaken("endpoint_exists", f"endpoint {name!r} already exists")
    params = {"name": name, "owner": owner_id, "open_intake": open_intake}
    row = await first(tx, INSERT_ENDPOINT, params)
    assert row is not None
    created = EndpointRow.of(row)
    await totals.create_rows(tx, created.id)
    await audit.record(
        tx, owner_id, Action.ENDPOINT_CREATED, origin=origin, endpoint=name,
        detail={"open_intake": open_intake},
    )  # fmt: skip
    return created.view()


def token_detail(token_id: int, name: str, kind: str) -> dict[str, Any]:
    """What an audit row keeps of a credential: never its secret."""
    return {"token_id": token_id, "name": name, "kind": kind}


async def issue_endpoint_token(
    tx: Tx, found: EndpointRecord, *, role: str, principal: str, origin: Origin
) -> tuple[TokenView, str]:
    """A worker or source credential of an endpoint, audited; returns it and its secret."""
    secret = issue_secret(role)
    view = await issue_token_row(
        tx, secret, role=role, principal=principal, owner_id=found.owner_id, endpoint_id=found.id
    )
    await audit.record(
        tx, found.owner_id, Action.TOKEN_CREATED, origin=origin, endpoint=found.name,
        detail=token_detail(view.id, view.name, view.kind),
    )  # fmt: skip
    return view, secret


async def delete_endpoint_token(
    tx: Tx, found: EndpointRecord, token_id: int, *, origin: Origin
) -> None:
    """Delete an endpoint's credential, audited; NotFound when it has no such token."""
    row = await first(tx, DELETE_TOKEN, {"token": token_id, "endpoint": found.id})
    if row is None:
        raise NotFound(f"no token {token_id} on endpoint {found.name!r}")
    await audit.record(
        tx, found.owner_id, Action.TOKEN_DELETED, origin=origin, endpoint=found.name,
        detail=token_detail(token_id, row["principal"], row["role"]),
    )  # fmt: skip


async def issue_token(
    tx: Tx, *, role: str, principal: str, owner_id: int | None, endpoint_id: int | None
) -> str:
    secret = issue_secret(role)
    await issue_token_row(
        tx, secret, role=role, principal=principal, owner_id=owner_id, endpoint_id=endpoint_id
    )
    return secret


async def issue_token_row(
    tx: Tx,
    secret: str,
    *,
    role: str,
    principal: str,
    owner_id: int | None,
    endpoint_id: int | None,
) -> TokenView:
    if endpoint_id is not None:
        await _check_credential_name(tx, endpoint_id, principal)
    params = {
        "digest": digest(secret),
        "role": role,
        "owner": owner_id,
        "endpoint": endpoint_id,
        "principal": principal,
    }
    row = await first(tx, INSERT_TOKEN, params)
    assert row is not None
    return TokenRow.of(row).view()


def _check_name(field: str, name: str) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise Invalid(field, problem)


async def _check_credential_name(tx: Tx, endpoint_id: int, name: str) -> None:
    """A credential's name follows the name rule and is unique on its endpoint, so a worker
    is one name in the logs, the board and the dragonfly handshake."""
    _check_name("name", name)
    await first(tx, LOCK_ENDPOINT, {"endpoint": endpoint_id})
    if await value(tx, TOKEN_NAMED, {"endpoint": endpoint_id, "principal": name}) is not None:
        raise Conflict("name_taken", f"a credential named {name!r} exists on this endpoint")


class Owners:
    """Owners, their endpoints and credentials: the one administration the CLI, the API and
    the board share. An endpoint's operations take who acts (`Acting`: an owner's id, or
    `OPERATOR`, the CLI at the database) and the origin its audit row records."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create_owner(self, name: str) -> str:
        """A new owner and its first token; returns the token's secret."""

        async def create(tx: Tx) -> str:
            return (await insert_owner(tx, name))[1]

        return await transact(self.db, create)

    async def rotate_owner_token(self, name: str, *, origin: Origin) -> tuple[str, int]:
        """A new token for owner `name`, its old ones revoked and its board sessions ended,
        audited; returns the secret and how many tokens it replaced."""

        async def rotate(tx: Tx) -> tuple[str, int]:
            owner_id = await owner_id_by_name(tx, name)
            revoked = len(await tx.rows(DELETE_OWNER_TOKENS, {"owner": owner_id}))
            await tx.run(END_OWNER_SESSIONS, {"owner": owner_id})
            secret = await issue_token(
                tx, role="owner", principal=name, owner_id=owner_id, endpoint_id=None
            )
            await audit.record(
                tx, owner_id, Action.OWNER_TOKEN_ROTATED, origin=origin, count=revoked
            )
            return secret, revoked

        return await transact(self.db, rotate)

    async def owner_names(self, limit: int = 2) -> list[str]:
        """The first `limit` owners' names, by name."""
        async with self.db.read() as tx:
            return [str(row["name"]) for row in await tx.rows(OWNER_NAMES, {"limit": limit})]

    async def has_owners(self) -> bool:
        async with self.db.read() as tx:
            return await value(tx, ANY_OWNER) is not None

    async def owner_id(self, name: str) -> int:
        """An owner's id by name (UnknownName if there is none)."""
        async with self.db.read() as tx:
            return await owner_id_by_name(tx, name)

    async def create_endpoint(
        self, owner_id: int, name: str, *, open_intake: bool, origin: Origin
    ) -> EndpointView:
        """A new endpoint of the owner; NameTaken (409 `endpoint_exists`) if the name is."""

        async def create(tx: Tx) -> EndpointView:
            return await insert_endpoint(
                tx, name=name, owner_id=owner_id, open_intake=open_intake, origin=origin
            )

        return await transact(self.db, create)

    async def endpoints(self, owner_id: int) -> list[EndpointView]:
        """The owner's endpoints, in name order."""
        async with self.db.read() as tx:
            rows = await tx.rows(OWNED_ENDPOINTS, {"owner": owner_id})
        return [EndpointRow.of(row).view() for row in rows]

    async def owned_endpoints(self, owner_id: int) -> dict[int, str]:
        """The owner's endpoint names by id, in name order."""
        async with self.db.read() as tx:
            return await owned_endpoints(tx, owner_id)

    async def create_token(
        self, acting: Acting, endpoint: str, *, role: str, principal: str, origin: Origin
    ) -> tuple[TokenView, str]:
        """A worker or source credential; the secret is returned here and never again."""

        async def issue(tx: Tx) -> tuple[TokenView, str]:
            found = await _acted_on(tx, acting, endpoint)
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is revoked")
            return await issue_endpoint_token(
                tx, found, role=role, principal=principal, origin=origin
            )

        return await transact(self.db, issue)

    async def tokens(self, acting: Acting, endpoint: str) -> list[TokenView]:
        """An endpoint's credentials, never a secret."""
        async with self.db.read() as tx:
            found = await _acted_on(tx, acting, endpoint)
            rows = await tx.rows(ENDPOINT_TOKENS, {"endpoint": found.id})
        return [TokenRow.of(row).view() for row in rows]

    async def delete_token(
        self, acting: Acting, endpoint: str, token_id: int, *, origin: Origin
    ) -> None:
        """Delete a credential: every server reads tokens per request, so it stops at once."""

        async def delete(tx: Tx) -> None:
            found = await _acted_on(tx, acting, endpoint)
            await delete_endpoint_token(tx, found, token_id, origin=origin)

        await transact(self.db, delete)


async def _acted_on(tx: Tx, acting: Acting, endpoint: str) -> EndpointRecord:
    """The endpoint named, if the one acting may see it: another owner's is as absent as
    one that does not exist."""
    found = await endpoint_by_name(tx, endpoint)
    if found is None or (acting is not OPERATOR and found.owner_id != acting):
        raise NotFound(f"no endpoint named {endpoint!r}")
    return found
