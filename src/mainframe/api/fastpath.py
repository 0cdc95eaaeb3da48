"""The worker's hot routes read their token and body themselves: FastAPI's dependency solving
and body parsing cost more per request than the store call behind them (py-spy, batch 1).
The contract is unchanged: the same models validate the body (pydantic-core parses the JSON
in one pass), the same error bodies come back, and the OpenAPI document still names the
body's schema through `body_doc`."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from mainframe.api.deps import Runtime
from mainframe.store import Principal, Unauthorized

M = TypeVar("M", bound=BaseModel)
_PREFIX = "bearer "


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


async def worker_of(request: Request) -> tuple[Runtime, Principal]:
    """The runtime and the worker the bearer token speaks for; 401 otherwise."""
    rt: Runtime = request.app.state.runtime
    header = request.headers.get("authorization", "")
    if header[: len(_PREFIX)].lower() != _PREFIX:
        raise Unauthorized("send 'Authorization: Bearer <worker token>'")
    found = await rt.principal(header[len(_PREFIX) :].strip())
    if found is None:
        raise Unauthorized("unknown token, or its endpoint is revoked")
    if found.role != "worker":
        raise Unauthorized(f"this route takes a worker token, not a {found.role} token")
    return rt, found


async def json_body(request: Request, model: type[M]) -> M:
    """Parse and validate the body with `model` (strict, extra fields refused)."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        problems = exc.errors(include_url=False)
        if any(p["type"] == "json_invalid" for p in problems):
            raise BadJson from None
        raise BodyInvalid(
            [
                {"field": ".".join(str(part) for part in ("body", *p["loc"])), "message": p["msg"]}
                for p in problems
            ]
        ) from None
