"""The hot routes (a worker's poll, results, heartbeats, waits and resumes, and a source's
intake) as Starlette routes, one per path. FastAPI's dependency solving, body handling,
exception layer and exit stack cost more per request than the statement behind them
(docs/performance.md), so a hot route reads its inputs through its contract models with
pydantic-core alone (its path and query parameters as one model, its body with
`validate_json`), serialises its reply from its model, and is served by `HotFront`, ahead of
FastAPI's layers.

A hot route is declared once, by its function's signature: `(rt, token, params, body) ->
Reply`, where `token` is a `Presented` (a worker's token, required) or `Presented | None`
(intake, which takes none on an open endpoint), and `params` and `body` are present only
when the route takes them. The same declaration answers the request and writes the route's
entry in the OpenAPI document (`api/docs.py::document`). A store refusal gets the answer every
shell gives it (`web.py::refused`), and invalid input, raised as FastAPI's own
`RequestValidationError`, the app's own handler of it (`api/errors.py`), so every route's
refusals get the one answer. The worker's routes are declared here; intake's in
api/scans.py."""

from __future__ import annotations

import functools
import json
import math
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints
from urllib.parse import parse_qsl

import orjson
from fastapi.exceptions import RequestValidationError
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mainframe.api import errors
from mainframe.contract.limits import JOBS_PATH, MAX_RESULT_BYTES
from mainframe.contract.schemas import (
    BatchResults,
    BatchStatuses,
    Echo,
    ItemStatus,
    JobPublic,
    LeaseDeadline,
    PollParams,
    ResultBody,
    ResultParams,
    ResultPublic,
    ResultsParams,
    ScanParams,
    WaitBody,
    next_jobs,
)
from mainframe.lifecycle.rules import EchoError, require_echo_pair
from mainframe.shapes import scans as shapes
from mainframe.store import (
    Invalid,
    ItemOutcome,
    Presented,
    Report,
    StoreError,
    Unauthorized,
    digest,
)
from mainframe.web import refused
from mainframe.wiring import Runtime

Endpoint = Callable[..., Awaitable[Any]]
MAX_DEPTH = 254  # orjson's own bound on nesting; a deeper value cannot be serialized at all
# A token the route needs; intake's may be absent (an endpoint with open intake).
NEEDS_TOKEN = "send 'Authorization: Bearer <{role} token>'"
# The refusal of a body that is not JSON at all (a 400), in FastAPI's own words.
NOT_JSON = {"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error", "input": {}}
SHORT_QUERY = 32  # bytes; longer than any query string a worker or a source sends


class HotRoute(Route):
    """One hot route: a POST path served by its declared function."""

    def __init__(self, path: str, declared: Endpoint, *, tag: str, answers: dict[int, str]):
        super().__init__(path, declared, methods=["POST"], name=declared.__name__)
        self.app = self.answer  # an ASGI app, reached from `HotFront` or FastAPI's router alike
        hints = get_type_hints(declared)
        self.declared, self.tag, self.answers = declared, tag, answers
        self.status = next(iter(answers))  # the first answer's status, unless it returns one
        self.optional_token = _is_optional(hints["token"])
        self.params: type[BaseModel] | None = hints.get("params")
        self.body: type[BaseModel] | None = hints.get("body")
        self.reply_type: Any = _reply_type(hints["return"])
        self._params = None if self.params is None else TypeAdapter(self.params)
        self._body = None if self.body is None else TypeAdapter(self.body)
        self._reply = TypeAdapter(self.reply_type).serializer

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match != Match.NONE:
            child["route"] = self  # the template the request metrics are filed under, as FastAPI's
        return match, child

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request; a refusal is answered as on every other route."""
        try:
            response = await self.serve(scope, receive)
        except StoreError as exc:
            response = refused(exc)
        except Exception as exc:
            response = await errors.answer(Request(scope, receive), exc)
        await response(scope, receive, send)

    async def serve(self, scope: Scope, receive: Receive) -> Response:
        rt: Runtime = scope["app"].state.runtime
        token = self._token(rt, scope)  # a missing token is a 401 before any 422
        inputs: dict[str, Any] = {}
        if self._params is not None:
            inputs["params"] = self._read_params(scope, self._params)
        if self._body is not None:
            inputs["body"] = _read_json(await _body(receive), self._body)
        reply = await self.declared(rt, token, **inputs)
        if isinstance(reply, Response):
            return reply
        content = self._reply.to_json(reply)
        return Response(content, status_code=self.status, media_type="application/json")

    def _token(self, rt: Runtime, scope: Scope) -> Presented | None:
        header = _authorization(scope)
        # What FastAPI's HTTPBearer reads, with its own function, without building a Request.
        scheme, credentials = get_authorization_scheme_param(header)
        if not (scheme and credentials) or scheme.lower() != "bearer":
            if self.optional_token and header is None:
                return None
            role = "source or owner" if self.optional_token else "worker"
            raise Unauthorized(NEEDS_TOKEN.format(role=role))
        found = Presented(digest(credentials))  # checked by the store's statement
        rt.store.authentication.note(found.digest)  # its last use, flushed coarsely later
        return found

    def _read_params(self, scope: Scope, adapter: TypeAdapter[Any]) -> Any:
        try:
            given = {**_query(scope["query_string"]), **scope["path_params"]}
            return adapter.validator.validate_python(given)
        except ValidationError as exc:
            raise RequestValidationError(
                [self._located(p) for p in exc.errors(include_url=False)]
            ) from None

    def _located(self, problem: ErrorDetails) -> ErrorDetails:
        name = problem["loc"][0] if problem["loc"] else ""
        where = "path" if name in self.param_convertors else "query"
        return {**problem, "loc": (where, *problem["loc"])}


class HotFront:
    """Serves a request that a hot route matches whole ahead of FastAPI's exception layer,
    exit stack and router, which cost more per request than the route itself
    (docs/performance.md); every other request goes on to them, and a hot path asked with
    another method gets the router's 405."""

    def __init__(self, app: ASGIApp, *, routes: list[HotRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            for route in self.routes:
                match, child = route.matches(scope)
                if match == Match.FULL:
                    scope.update(child)
                    await route.answer(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _authorization(scope: Scope) -> str | None:
    """The first Authorization header, as Starlette's `Headers.get` finds it."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            found: str = value.decode("latin-1")
            return found
    return None


def _query(query: bytes) -> dict[str, str]:
    """A query string's values as Starlette's QueryParams reads them, the last of a name
    winning. A worker's are few, short and repeated (`batch=10`, `next=1`): those are parsed
    once, and no long one is kept."""
    return _short_query(query) if len(query) <= SHORT_QUERY else _parse_query(query)


def _parse_query(query: bytes) -> dict[str, str]:
    return dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True))


_short_query = functools.lru_cache(maxsize=256)(_parse_query)


async def _body(receive: Receive) -> bytes:
    """The request's body, its messages joined as Starlette's `Request.body` joins them,
    without the asynchronous generator that costs that 2 µs a request."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _read_json(raw: bytes, adapter: TypeAdapter[Any]) -> Any:
    """The body through its model, parsed by pydantic-core; Python's parser only reads what
    pydantic-core refuses as JSON (lone surrogates, deep nesting), so that the field's own
    check can name what cannot be stored (a 422, not a 400)."""
    try:
        return adapter.validator.validate_json(raw or b"null")
    except ValidationError as exc:
        problems = exc.errors(include_url=False)
        if not any(p["type"] == "json_invalid" for p in problems):
            raise _invalid(problems) from None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise RequestValidationError([NOT_JSON]) from None
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise _invalid(exc.errors(include_url=False)) from None


def _invalid(problems: list[ErrorDetails]) -> RequestValidationError:
    return RequestValidationError([{**p, "loc": ("body", *p["loc"])} for p in problems])


def _is_optional(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def _reply_type(hint: Any) -> Any:
    """The model of a reply: the return annotation, less a Response the route may return
    instead (a status of its own)."""
    if get_origin(hint) not in (Union, types.UnionType):
        return hint
    [model] = [a for a in get_args(hint) if not (isinstance(a, type) and issubclass(a, Response))]
    return model


@dataclass
class HotRoutes:
    """The hot routes of one part of the API, under one prefix and tag."""

    prefix: str
    tag: str
    routes: list[HotRoute] = field(default_factory=list)

    def post(
        self, path: str, *, answers: dict[int, str] | None = None
    ) -> Callable[[Endpoint], Endpoint]:
        """Declare the decorated function the POST route of `path`. `answers` are its
        successful statuses with what each means, the first the one it answers with unless
        it returns a reply of its own (200 by default)."""

        def declare(declared: Endpoint) -> Endpoint:
            found = answers or {200: "Successful Response"}
            self.routes.append(HotRoute(self.prefix + path, declared, tag=self.tag, answers=found))
            return declared

        return declare


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


# The worker's routes: the job poll, results (single and batch), heartbeats, waits, resumes,
# each declared once by its signature. Intake's are in api/scans.py.
worker = HotRoutes(JOBS_PATH, "worker")


@worker.post("")
async def lease_jobs(rt: Runtime, token: Presented, params: PollParams) -> list[JobPublic]:
    """The job poll: reaps this endpoint's lapsed leases when one may be due, then leases up
    to `batch` due scans, oldest first."""
    return [JobPublic.of(job) for job in await rt.store.leasing.lease(token, params.batch)]


def _report(body: ResultBody) -> Report:
    _echo(body)
    result = stored(body.result, field="body.result", limit=MAX_RESULT_BYTES)
    return Report(
        body.outcome,
        body.retryable,
        body.attempt,
        body.assignment_id,
        body.summary,
        body.artifact,
        result,
        body.retry_after_seconds,
    )


@worker.post("/{scan_id}/result")
async def report_result(
    rt: Runtime, token: Presented, params: ResultParams, body: ResultBody
) -> ResultPublic:
    """Close the current attempt. Stale results are refused with 409 and change nothing; the
    same result sent again is answered as the first time. With `next`, also the worker's next
    jobs, leased in the same transaction."""
    report = [(params.scan_id, _report(body))]
    done = await rt.store.results.complete(token, report, fetch=params.next or 0)
    [outcome] = done.outcomes
    if outcome.error is not None:
        raise outcome.error
    assert outcome.closed is not None
    return ResultPublic.of(outcome.closed, next_jobs(done.jobs, params.next))


@worker.post("/results")
async def report_results(
    rt: Runtime, token: Presented, params: ResultsParams, body: BatchResults
) -> BatchStatuses:
    """Up to 100 independent results; each item gets the status the single route would give.
    With `next`, also the worker's next jobs."""
    statuses: list[ItemStatus | None] = []
    valid: list[tuple[int, Report]] = []
    for item in body.results:
        try:
            valid.append((item.scan_id, _report(item)))
            statuses.append(None)
        except Invalid as exc:
            statuses.append(shapes.item_status(ItemOutcome(item.scan_id, None, exc)))
    done = await rt.store.results.complete(token, valid, fetch=params.next or 0)
    applied = iter(done.outcomes)
    return BatchStatuses(
        results=[status or shapes.item_status(next(applied)) for status in statuses],
        next=next_jobs(done.jobs, params.next),
    )


def _echo(body: Echo) -> tuple[int | None, str | None]:
    try:
        require_echo_pair(body.attempt, body.assignment_id)
    except EchoError as exc:
        raise Invalid(f"body.{exc.missing}", str(exc)) from None
    return body.attempt, body.assignment_id


@worker.post("/{scan_id}/heartbeat")
async def heartbeat(rt: Runtime, token: Presented, params: ScanParams, body: Echo) -> LeaseDeadline:
    """Extend the lease of the current assignment by the job timeout."""
    attempt, assignment = _echo(body)
    until = await rt.store.assignments.heartbeat(
        token, params.scan_id, attempt=attempt, assignment_id=assignment
    )
    return LeaseDeadline.of(params.scan_id, until)


@worker.post("/{scan_id}/wait")
async def wait(rt: Runtime, token: Presented, params: ScanParams, body: WaitBody) -> LeaseDeadline:
    """Park the scan while it waits on something outside, for at most `seconds`."""
    attempt, assignment = _echo(body)
    if body.seconds > rt.settings.max_wait_seconds:
        raise Invalid(
            "body.seconds", f"a wait lasts at most {rt.settings.max_wait_seconds} seconds"
        )
    until = await rt.store.assignments.wait(
        token,
        params.scan_id,
        attempt=attempt,
        assignment_id=assignment,
        seconds=body.seconds,
        reason=body.reason,
    )
    return LeaseDeadline.of(params.scan_id, until)


@worker.post("/{scan_id}/resume")
async def resume(rt: Runtime, token: Presented, params: ScanParams, body: Echo) -> LeaseDeadline:
    """End a wait; the scan is back under an ordinary lease."""
    attempt, assignment = _echo(body)
    until = await rt.store.assignments.resume(
        token, params.scan_id, attempt=attempt, assignment_id=assignment
    )
    return LeaseDeadline.of(params.scan_id, until)
