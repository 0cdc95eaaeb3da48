"""Request-scoped dependencies: who the bearer token speaks for (the runtime is
mainframe.wiring's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from mainframe.store import Principal, Unauthorized
from mainframe.web import BearerDep, RuntimeDep
from mainframe.wiring import Runtime

__all__ = ["BearerDep", "OwnerDep", "Runtime", "RuntimeDep", "owner_id"]


async def optional_principal(rt: RuntimeDep, bearer: BearerDep) -> Principal | None:
    if bearer is None:
        return None
    found = await rt.principal(bearer.credentials)
    if found is None:
        raise Unauthorized("unknown token, or its endpoint is revoked")
    return found


OptionalPrincipalDep = Annotated[Principal | None, Depends(optional_principal)]


def _require(role: str) -> object:
    async def dependency(found: OptionalPrincipalDep) -> Principal:
        if found is None:
            raise Unauthorized(f"send 'Authorization: Bearer <{role} token>'")
        if found.role != role:
            raise Unauthorized(f"this route takes a {role} token, not a {found.role} token")
        return found

    return dependency


OwnerDep = Annotated[Principal, Depends(_require("owner"))]


def owner_id(principal: Principal) -> int:
    assert principal.owner_id is not None
    return principal.owner_id
