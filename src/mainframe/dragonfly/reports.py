"""The two bodies of a dragonfly worker's `PUT /package` (contract/dragonfly_schemas.py), read
into the store's Report. A success finishes the scan with its score, inspector URL, matched
rules and rules commit as the result; a failure (`reason`) is a retryable failure, since a
worker's reasons are mostly transient (a download that timed out). A body that is not JSON,
lacks a field or has one of the wrong type is refused with 422 naming the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError

from mainframe.contract.dragonfly_schemas import PackageFailure, PackageSuccess
from mainframe.contract.limits import MAX_RESULT_BYTES, MAX_SUMMARY
from mainframe.contract.schemas import Artifact
from mainframe.lifecycle.rules import EchoError, require_echo_pair
from mainframe.store import Invalid, Report

_ARTIFACT: TypeAdapter[str] = TypeAdapter(Artifact)


@dataclass(frozen=True, slots=True)
class PackageReport:
    """A result keyed by package, as the store takes it."""

    name: str
    version: str
    report: Report


def json_body(raw: bytes) -> Any:
    """A dragonfly body as JSON, whatever its content type; 422 when it is not JSON (the
    dragonfly server's answer, where Mainframe's own API says 400)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Invalid("body", "the body is not valid JSON") from None


def invalid(exc: PydanticError) -> Invalid:
    """A model's refusal of a body as a 422 naming the first field at fault."""
    problem = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in ("body", *problem["loc"]))
    return Invalid(field, problem["msg"])


def read_report(raw: bytes) -> PackageReport:
    """The body as a Report; Invalid (422) naming the field for anything else."""
    value = json_body(raw)
    if not isinstance(value, dict):
        raise Invalid("body", "the body must be a JSON object")
    model = PackageSuccess if value.get("reason") is None else PackageFailure
    try:
        body = model.model_validate(value)
        require_echo_pair(body.attempt, body.assignment_id)
    except PydanticError as exc:
        raise invalid(exc) from None
    except EchoError as exc:
        raise Invalid(f"body.{exc.missing}", str(exc)) from None
    report = _failure(body) if isinstance(body, PackageFailure) else _success(body)
    return PackageReport(body.name, body.version, report)


def _failure(body: PackageFailure) -> Report:
    # The worker never sends a refused result again, so its reason is kept, cleaned and cut
    # to the bound, rather than refused.
    summary = body.reason.replace("\x00", "\ufffd")[:MAX_SUMMARY]
    return Report("failed", True, body.attempt, body.assignment_id, summary, None, None)


def _success(body: PackageSuccess) -> Report:
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
    return Report(
        "finished",
        False,
        body.attempt,
        body.assignment_id,
        None,
        _artifact(body.inspector_url),
        result.decode(),
    )


def _artifact(url: str | None) -> str | None:
    # The inspector URL is the attempt's artifact when Mainframe's own bound and NUL check
    # admit it; otherwise it is dropped rather than the result refused (it stays in `result`).
    if url is None:
        return None
    try:
        return _ARTIFACT.validate_python(url)
    except PydanticError:
        return None
