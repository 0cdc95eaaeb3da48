"""The bot's suppressions under `/dragonfly/packages/{name}`: a package version's alerts kept
quiet for some rules (or all), each addressable by id, on the caller's endpoint only. Names
are compared as PEP 503 normalises them, as upstream did."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends
from pydantic import TypeAdapter
from starlette.requests import Request

from mainframe.clock import rfc3339
from mainframe.contract.dragonfly_schemas import Deleted, SuppressionPublic, SuppressionRules
from mainframe.dragonfly.deployment import read_body
from mainframe.dragonfly.packages import normalized
from mainframe.dragonfly.surface import Surface, surface_of
from mainframe.store import NotFound, Principal
from mainframe.store.dragonfly.records import Suppression, SuppressionKey
from mainframe.web import BearerDep, Reply

router = APIRouter(prefix="/dragonfly/packages/{name}", include_in_schema=False)
VERSION = "/versions/{version}/suppressions"
_RULES: TypeAdapter[SuppressionRules] = TypeAdapter(SuppressionRules)


def public(found: Suppression) -> SuppressionPublic:
    return SuppressionPublic(
        suppression_id=found.id,
        package_name=found.name,
        package_version=found.version,
        rules=found.rules,
        created_at=rfc3339(found.created_at),
        created_by=found.created_by,
        updated_at=rfc3339(found.updated_at),
        updated_by=found.updated_by,
    )


def _key(caller: Principal, name: str, version: str, suppression: str | None) -> SuppressionKey:
    assert caller.endpoint_id is not None
    if suppression is not None:
        try:
            suppression = str(UUID(suppression))
        except ValueError:
            raise NotFound("no such suppression") from None
    return SuppressionKey(caller.endpoint_id, normalized(name), version, suppression)


def _found(found: Suppression | None) -> SuppressionPublic:
    if found is None:
        raise NotFound("no such suppression")
    return public(found)


@router.get("/suppressions")
async def list_suppressions(
    request: Request, bearer: BearerDep, name: str
) -> list[SuppressionPublic]:
    """Every suppression of the package, by version, oldest first."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    assert caller.endpoint_id is not None
    found = await surface.store.dragonfly.suppressions(caller.endpoint_id, normalized(name))
    return [public(one) for one in found]


@router.post(VERSION)
async def suppress(request: Request, bearer: BearerDep, name: str, version: str) -> Reply:
    """A new suppression of the version (201); without `rules` it quiets every rule."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    body = await read_body(request, _RULES)
    key = _key(caller, name, version, None)._replace(id=str(uuid4()))
    found = await surface.store.dragonfly.suppress(key, body.rules, by=caller.name)
    return Reply(public(found), status_code=201)


@router.delete(VERSION)
async def unsuppress_version(
    request: Request, bearer: BearerDep, name: str, version: str
) -> Deleted:
    """Every suppression of the version deleted: how many."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    deleted = await surface.store.dragonfly.unsuppress(_key(caller, name, version, None))
    return Deleted(deleted=deleted)


async def _addressed(
    request: Request, bearer: BearerDep, name: str, version: str, suppression: str
) -> tuple[Surface, Principal, SuppressionKey]:
    """The caller of a route about one suppression, and the suppression's address."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    return surface, caller, _key(caller, name, version, suppression)


Addressed = Annotated[tuple[Surface, Principal, SuppressionKey], Depends(_addressed)]


@router.get(VERSION + "/{suppression}")
async def get_suppression(addressed: Addressed) -> SuppressionPublic:
    surface, _, key = addressed
    return _found(await surface.store.dragonfly.suppression(key))


@router.patch(VERSION + "/{suppression}")
async def update_suppression(request: Request, addressed: Addressed) -> SuppressionPublic:
    """The suppression's rules replaced."""
    surface, caller, key = addressed
    body = await read_body(request, _RULES)
    found = await surface.store.dragonfly.update_suppression(key, body.rules, by=caller.name)
    return _found(found)


@router.delete(VERSION + "/{suppression}")
async def delete_suppression(addressed: Addressed) -> Deleted:
    surface, _, key = addressed
    if not await surface.store.dragonfly.unsuppress(key):
        raise NotFound("no such suppression")
    return Deleted(deleted=1)
