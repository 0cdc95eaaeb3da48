"""Request-scoped dependencies: the runtime, and who the bearer token speaks for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from mainframe.hooks import Dispatcher
from mainframe.metrics import Metrics
from mainframe.ratelimit import TokenBucket
from mainframe.settings import Settings
from mainframe.store import Principal, Store, Unauthorized


@dataclass
class Runtime:
    settings: Settings
    store: Store
    metrics: Metrics
    stats_limiter: TokenBucket
    sign_in_limiter: TokenBucket
    dispatcher: Dispatcher | None = None
    ready: bool = False

    async def principal(self, secret: str) -> Principal | None:
        # Read on every request, never cached: a deleted credential or a revoked endpoint
        # must stop working at once in every server process (one unique-index probe).
        found = await self.store.accounts.authenticate(secret)
        if found is not None:
            self.store.usage.note(found.digest)
        return found


async def runtime(request: Request) -> Runtime:
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a hop
    # that cost more than the rest of a request.
    found: Runtime = request.app.state.runtime
    return found


RuntimeDep = Annotated[Runtime, Depends(runtime)]
_bearer = HTTPBearer(auto_error=False, description="An owner, worker or source token.")
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


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


WorkerDep = Annotated[Principal, Depends(_require("worker"))]
OwnerDep = Annotated[Principal, Depends(_require("owner"))]


def owner_id(principal: Principal) -> int:
    assert principal.owner_id is not None
    return principal.owner_id
