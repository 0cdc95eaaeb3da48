"""The worker's hot routes read their token and body themselves: FastAPI's dependency solving
and body parsing cost more per request than the store call behind them (py-spy, batch 1).
The token is not looked up here: the store's hot statements check it in the same round trip
as their work (`Presented`). The contract is unchanged: the same models validate the body
(pydantic-core parses the JSON in one pass), the same error bodies come back, and the
OpenAPI document still names the body's schema through `body_doc`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mainframe.api.deps import Runtime
from mainframe.store import Presented, Unauthorized
from mainframe.web import bearer

M = TypeVar("M", bound=BaseModel)


class BadJson(Exception):
    """The body is not JSON at all (400), as opposed to JSON that fails validation (422)."""


class BodyInvalid(Exception):
    """The body failed validation; `detail` names each field as `body.<path>`."""

    def __init__(self, detail: list[dict[str, str]]) -> None:
        super().__init__("invalid body")
        self.detail = detail


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` declaring `model` as the required JSON body of a route."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }


def presented(request: Request, role: str = "worker") -> tuple[Runtime, Presented]:
    """The runtime and the bearer token as presented (checked by the store's statement)."""
    rt: Runtime = request.app.state.runtime
    found = bearer(request)
    if found is None:
        raise Unauthorized(f"send 'Authorization: Bearer <{role} token>'")
    rt.store.usage.note(found.digest)  # the credential's last use, flushed coarsely later
    return rt, found


def optional_presented(request: Request) -> tuple[Runtime, Presented | None]:
    """The runtime and the bearer token if one was sent (intake takes none on an endpoint
    with open intake)."""
    if "authorization" not in request.headers:
        return request.app.state.runtime, None
    return presented(request, "source or owner")


async def json_body(request: Request, model: type[M]) -> M:
    """Parse and validate the body with `model` (strict, extra fields refused)."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        problems = exc.errors(include_url=False)
        if not any(p["type"] == "json_invalid" for p in problems):
            raise _invalid(problems) from None
    # pydantic-core refuses lone surrogates and deep nesting as JSON itself; Python's parser
    # reads them, so the field's own check can name what cannot be stored (a 422, not a 400).
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadJson from None
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _invalid(exc.errors(include_url=False)) from None


def _invalid(problems: Sequence[ErrorDetails]) -> BodyInvalid:
    return BodyInvalid(
        [
            {"field": ".".join(str(part) for part in ("body", *p["loc"])), "message": p["msg"]}
            for p in problems
        ]
    )
