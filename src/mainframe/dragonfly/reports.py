"""The two bodies of a dragonfly worker's `PUT /package`, read into the store's Report. A
success finishes the scan with its score, inspector URL, matched rules and rules commit as
the result; a failure (`reason`) is a retryable failure, since a worker's reasons are mostly
transient (a download that timed out). Keys the worker adds are ignored; a body that is not
JSON, lacks a field or has one of the wrong type is refused with 422 naming the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticError

from mainframe.store import Invalid, Report

# The bounds of Mainframe's own result route (contract/schemas.py), for the same columns.
MAX_SUMMARY = 8192
MAX_ARTIFACT = 2048
MAX_RESULT_BYTES = 262_144
I64 = 2**63


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL and SQLite would; refuse it on both alike.
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


Name = Annotated[str, StringConstraints(min_length=1, max_length=300), AfterValidator(_no_nul)]
Version = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_nul)]


class Keyed(BaseModel):
    """What both bodies carry: the package, and the assignment a newer worker echoes."""

    model_config = ConfigDict(extra="ignore", strict=True)

    name: Name
    version: Version
    attempt: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    assignment_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None


class Success(Keyed):
    score: Annotated[int, Field(ge=-I64, le=I64 - 1)]
    inspector_url: str | None = None
    rules_matched: list[str]
    commit: str


class Failure(Keyed):
    reason: str


@dataclass(frozen=True, slots=True)
class PackageReport:
    """A result keyed by package, as the store takes it."""

    name: str
    version: str
    report: Report


def read_report(raw: bytes) -> PackageReport:
    """The body as a Report; Invalid (422) naming the field for anything else."""
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Invalid("body", "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise Invalid("body", "the body must be a JSON object")
    failed = value.get("reason") is not None
    try:
        body = Failure.model_validate(value) if failed else Success.model_validate(value)
    except PydanticError as exc:
        problem = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in ("body", *problem["loc"]))
        raise Invalid(field, problem["msg"]) from None
    if (body.attempt is None) != (body.assignment_id is None):
        missing = "body.assignment_id" if body.assignment_id is None else "body.attempt"
        raise Invalid(missing, "attempt and assignment_id must be sent together, or both omitted")
    report = _failure(body) if isinstance(body, Failure) else _success(body)
    return PackageReport(body.name, body.version, report)


def _failure(body: Failure) -> Report:
    # The worker never sends a refused result again, so its reason is kept, cleaned and cut
    # to the bound, rather than refused.
    summary = body.reason.replace("\x00", "\ufffd")[:MAX_SUMMARY]
    return Report("failed", True, body.attempt, body.assignment_id, summary, None, None)


def _success(body: Success) -> Report:
    result = orjson.dumps(
        {
            "score": body.score,
            "inspector_url": body.inspector_url,
            "rules_matched": body.rules_matched,
            "commit": body.commit,
        }
    )
    if len(result) > MAX_RESULT_BYTES:
        raise Invalid("body", f"the result is limited to {MAX_RESULT_BYTES} bytes of JSON")
    url = body.inspector_url
    artifact = url if url is not None and len(url) <= MAX_ARTIFACT and "\x00" not in url else None
    return Report(
        "finished", False, body.attempt, body.assignment_id, None, artifact, result.decode()
    )
