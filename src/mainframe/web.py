"""What the HTTP shells (api/, dragonfly/) read from a request and send back, below both so
neither imports the other: the bearer token, integer path and query parameters, a JSON body
validated by its contract model, a sender's free-form JSON value as stored text, and the JSON
reply. The hot routes read their input with these instead of FastAPI's dependency solving
and body parsing, which cost more per request than the store call behind them (py-spy,
batch 1); the contract is unchanged: the same models validate, the same error bodies come
back, and the OpenAPI document names what each route reads (`body_doc`, `documented`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import parse_qsl

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from mainframe.store import Invalid, Presented, Unauthorized
from mainframe.store.authentication import digest

if TYPE_CHECKING:
    from mainframe.wiring import Runtime

M = TypeVar("M", bound=BaseModel)
_BEARER = "bearer "
MAX_DIGITS = 20  # more than any bound of an integer parameter has
MAX_DEPTH = 254  # orjson's own bound on nesting; a deeper value cannot be serialized at all


class JSON(Response):
    """A reply rendered by orjson, which writes stored JSON text (`orjson.Fragment`) as is."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def bearer(request: HTTPConnection) -> Presented | None:
    """The token of an `Authorization: Bearer` header as its digest (the store checks it), or
    None when the request sends no such header."""
    header = request.headers.get("authorization", "")
    if header[: len(_BEARER)].lower() != _BEARER:
        return None
    return Presented(digest(header[len(_BEARER) :].strip()))


def presented(request: Request, role: str = "worker") -> tuple[Runtime, Presented]:
    """The runtime and the bearer token as presented; the store's statement checks it."""
    rt: Runtime = request.app.state.runtime
    found = bearer(request)
    if found is None:
        raise Unauthorized(f"send 'Authorization: Bearer <{role} token>'")
    rt.store.authentication.note(found.digest)  # its last use, flushed coarsely later
    return rt, found


def optional_presented(request: Request) -> tuple[Runtime, Presented | None]:
    """The runtime and the bearer token if one was sent (intake takes none on an endpoint
    with open intake)."""
    if "authorization" not in request.headers:
        return request.app.state.runtime, None
    return presented(request, "source or owner")


@dataclass(frozen=True, slots=True)
class IntParam:
    """An integer in the path or the query string, bounded, in ASCII digits; a value that is
    not is a 422 naming `path.<name>` or `query.<name>`."""

    name: str
    where: Literal["path", "query"]
    minimum: int
    maximum: int
    description: str
    default: int | None = None

    def value(self, request: Request) -> int:
        """The value, or the default of an absent query parameter; Invalid when it is
        required and absent, or not a whole number in range."""
        found = self.read(request)
        if found is None:
            raise Invalid(f"{self.where}.{self.name}", "is required")
        return found

    def read(self, request: Request) -> int | None:
        """The value, or the default (None without one) when a query parameter is absent;
        Invalid when it is not a whole number in range."""
        if self.where == "path":
            raw = request.path_params.get(self.name)
        else:
            raw = query_value(request.scope["query_string"], self.name)
        if raw is None:
            return self.default
        # str.isdigit() also admits '²' and '٣', which int() refuses or reads as another number;
        # and int() refuses a string of over 4,300 digits with an error of its own.
        digits = raw.isascii() and raw.isdigit() and len(raw) <= MAX_DIGITS
        if not digits or not self.minimum <= int(raw) <= self.maximum:
            raise Invalid(
                f"{self.where}.{self.name}",
                f"must be a whole number from {self.minimum} to {self.maximum} (ASCII digits)",
            )
        return int(raw)

    def doc(self) -> dict[str, Any]:
        """The parameter's OpenAPI entry."""
        schema: dict[str, Any] = {"type": "integer", "minimum": self.minimum}
        schema["maximum"] = self.maximum
        if self.default is not None:
            schema["default"] = self.default
        return {
            "name": self.name,
            "in": self.where,
            "required": self.where == "path",
            "schema": schema,
            "description": self.description,
        }


def query_value(query: bytes, name: str) -> str | None:
    """The value of `name` in a raw query string as Starlette's QueryParams reads it: the
    standard library's parser over the same decoding, the last value winning."""
    return dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True)).get(name)


def documented(*params: IntParam) -> dict[str, Any]:
    """`openapi_extra` naming the parameters a route reads itself."""
    return {"parameters": [param.doc() for param in params]}


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` declaring `model` as the required JSON body of a route."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }


class BadJson(Exception):
    """The body is not JSON at all (400), as opposed to JSON that fails validation (422)."""


class BodyInvalid(Exception):
    """The body failed validation; `detail` names each field as `body.<path>`."""

    def __init__(self, detail: list[dict[str, str]]) -> None:
        super().__init__("invalid body")
        self.detail = detail


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


def stored(value: Any, *, field: str, limit: int) -> str | None:
    """A sender's free-form value (a scan's payload, a result) as compact JSON text of at
    most `limit` bytes, stored only if it reads back as the same value: NaN, infinities,
    integers beyond 64 bits, lone surrogates and too deep nesting are a 422 naming `field`.
    None stays None."""
    if value is None:
        return None
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise Invalid(field, _unstorable(str(exc))) from None
    # orjson writes a non-finite float as null: look for one only when a null was written.
    if b"null" in text and _has_non_finite(value):
        raise Invalid(field, "NaN and infinite numbers cannot be stored as JSON")
    if len(text) > limit:
        raise Invalid(field, f"JSON is limited to {limit} bytes")
    return text.decode()


def _unstorable(message: str) -> str:
    if "Recursion" in message:
        return f"JSON nested deeper than {MAX_DEPTH} levels cannot be stored"
    if "64-bit" in message or "Integer" in message:
        return "integers must fit in 64 bits (use a string for larger numbers)"
    if "surrogate" in message or "UTF-8" in message:
        return "strings must be valid Unicode (no lone surrogates)"
    return f"cannot be stored as JSON: {message}"


def _has_non_finite(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
