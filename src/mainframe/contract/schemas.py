"""Request and response bodies, named by role (ScanCreate, ScanPublic, ...). The replies of a
worker's routes are built from the core's records by their model (`JobPublic.of`,
`ResultPublic.of`, `LeaseDeadline.of`); the other replies by `shapes/`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

from mainframe.clock import rfc3339
from mainframe.contract.limits import (
    MAX_ARTIFACT,
    MAX_ASSIGNMENT_ID,
    MAX_ATTEMPT,
    MAX_ID,
    MAX_INTAKE_BATCH,
    MAX_LEASE_BATCH,
    MAX_NEXT,
    MAX_REPORTS,
    MAX_SUMMARY,
)
from mainframe.contract.names import Name
from mainframe.lifecycle.scans import Closed, Job


def _ascii_digits(value: object) -> object:
    # Path and query integers: int() would also read ' 1', '1 ' and other scripts' digits.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("use ASCII digits only")
    return value


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL and SQLite would; refuse it on both alike.
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


AsciiInt = BeforeValidator(_ascii_digits)
NoNul = AfterValidator(_no_nul)

# Bounds on sender-written fields; every one is stored, so every one is bounded.
Label = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
]
PackageName = Annotated[str, StringConstraints(min_length=1, max_length=300), NoNul]
PackageVersion = Annotated[str, StringConstraints(min_length=1, max_length=200), NoNul]
Summary = Annotated[str, StringConstraints(max_length=MAX_SUMMARY), NoNul]
Artifact = Annotated[str, StringConstraints(max_length=MAX_ARTIFACT), NoNul]
AssignmentId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ASSIGNMENT_ID), NoNul]
Attempt = Annotated[int, Field(ge=1, le=MAX_ATTEMPT)]
ScanId = Annotated[int, Field(ge=1, le=MAX_ID)]
# A page cursor is the id a previous page ended on.
CURSOR_PATTERN = r"^[0-9]{1,18}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def stored_value(text: str | None) -> Any:
    """A sender's value (a payload, a result) from the JSON text it is stored as."""
    return None if text is None else orjson.loads(text)


def _absent(value: object) -> bool:
    return value is None


def omitted(description: str | None = None) -> Any:
    """A reply field left out of the JSON, not sent as null, while it has nothing to say."""
    return Field(default=None, exclude_if=_absent, description=description)


EndpointName = Annotated[
    Label | None,
    Field(
        description="Required for owners and "
        "anonymous (open-intake) submissions; implied for sources.",
    ),
]


# The path and query parameters of a worker's route, read as one model: a value that is not
# one is a 422 naming `path.<name>` or `query.<name>`.
ScanIdParam = Annotated[int, Field(ge=1, le=MAX_ID, description="The scan's id."), AsciiInt]
NextParam = Annotated[
    int | None,
    Field(
        ge=0,
        le=MAX_NEXT,
        description="Also lease up to this many next jobs in the same transaction, returned "
        "as `next` (complete-and-fetch); a replayed request gets the same jobs back.",
    ),
    AsciiInt,
]


class PollParams(BaseModel):
    batch: Annotated[
        int, Field(ge=1, le=MAX_LEASE_BATCH, description="Scans to lease at most."), AsciiInt
    ] = 1


class ScanParams(BaseModel):
    scan_id: ScanIdParam


class ResultParams(ScanParams):
    next: NextParam = None


class ResultsParams(BaseModel):
    next: NextParam = None


class ScanItem(Strict):
    name: PackageName
    version: PackageVersion
    queue: Name = "default"
    kind: Label = "scan"
    payload: Any = None


class ScanCreate(ScanItem):
    endpoint: EndpointName = None


class ScanBatch(Strict):
    """Items are validated one by one, so one bad item does not refuse the others."""

    endpoint: EndpointName = None
    scans: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_INTAKE_BATCH)


class SubmitStatus(BaseModel):
    status: int
    scan_id: int | None = omitted()
    error: str | None = omitted()
    detail: Any = omitted()


class BatchSubmitted(BaseModel):
    results: list[SubmitStatus]


class Echo(Strict):
    attempt: Attempt | None = None
    assignment_id: AssignmentId | None = None


# What a worker says of an attempt.
Outcome = Literal["finished", "failed"]


class ResultBody(Echo):
    outcome: Outcome
    retryable: bool = True
    summary: Summary | None = None
    artifact: Artifact | None = None
    result: Any = None
    retry_after_seconds: float | None = Field(
        default=None,
        ge=0,
        le=86400,
        allow_inf_nan=False,
        description="For a retryable failure: wait this long before the next attempt, "
        "instead of the server's backoff.",
    )


# The words of a scan's end, the same in every reply that carries them (README.md, "Reading
# `mainframe stats`").
ScanStatus = Annotated[
    str,
    Field(
        description="QUARANTINED, QUEUED, PENDING, FINISHED or FAILED. A dead letter is FAILED "
        "with `dead_lettered_at` set; the board and the CLI show it as DEAD."
    ),
]
DeadLetteredAt = Annotated[
    str | None,
    Field(
        description="When the scan became a dead letter (failed for good once its attempts "
        "were spent, or its endpoint was revoked); null for any other scan."
    ),
]
FailReason = Annotated[
    str | None,
    Field(
        description="Why it failed: `failed` is a permanent failure (a result with "
        "`retryable: false`); `attempts_exhausted`, `lease_expired`, `interrupt_expired` and "
        "`endpoint_revoked` are a dead letter's reasons."
    ),
]


class ResultPublic(BaseModel):
    """What a worker needs back after closing an attempt."""

    scan_id: int
    status: ScanStatus
    attempt_count: int
    available_at: str | None
    finished_at: str | None
    dead_lettered_at: DeadLetteredAt
    fail_reason: FailReason
    next: list[JobPublic] | None = omitted(
        "With ?next=N only: the jobs leased in the same transaction (complete-and-fetch)."
    )

    @classmethod
    def of(cls, record: Closed, next_jobs: list[JobPublic] | None = None) -> ResultPublic:
        """The answer to a result that closed its attempt, with the jobs leased with it."""
        return cls(
            scan_id=record.scan_id,
            status=record.status.value,
            attempt_count=record.attempt,
            available_at=rfc3339(record.available_at),
            finished_at=rfc3339(record.finished_at),
            dead_lettered_at=rfc3339(record.dead_lettered_at),
            fail_reason=record.fail_reason,
            next=next_jobs,
        )


class BatchItem(ResultBody):
    scan_id: ScanId


class BatchResults(Strict):
    results: list[BatchItem] = Field(min_length=1, max_length=MAX_REPORTS)


class WaitBody(Echo):
    seconds: float = Field(gt=0, allow_inf_nan=False)
    reason: Annotated[str, StringConstraints(min_length=1, max_length=500), NoNul]


class FailBody(Strict):
    retryable: bool = True
    summary: Summary | None = None


class JobPublic(BaseModel):
    scan_id: int
    name: str
    version: str
    kind: str
    queue: str
    payload: Any
    attempt: int
    assignment_id: str
    lease_expires_at: str

    @classmethod
    def of(cls, record: Job) -> JobPublic:
        return cls(
            scan_id=record.scan_id,
            name=record.name,
            version=record.version,
            kind=record.kind,
            queue=record.queue,
            payload=stored_value(record.payload),
            attempt=record.attempt,
            assignment_id=record.assignment_id,
            lease_expires_at=rfc3339(record.lease_expires_at),
        )


def next_jobs(records: list[Job], asked: int | None) -> list[JobPublic] | None:
    """The `next` of a reply: the jobs leased with it, when `?next` asked for any."""
    return None if asked is None else [JobPublic.of(record) for record in records]


class AttemptPublic(BaseModel):
    seq: int
    attempt: int
    worker: str | None
    leased_at: str | None
    closed_at: str | None
    outcome: str | None
    summary: str | None
    artifact: str | None


class ScanPublic(BaseModel):
    scan_id: int
    endpoint: str
    queue: str
    name: str
    version: str
    kind: str
    status: ScanStatus
    verified: bool
    source: str | None
    payload: Any
    attempt_count: int
    worker: str | None
    leased_at: str | None
    lease_expires_at: str | None
    waiting: str | None
    created_at: str
    updated_at: str
    finished_at: str | None
    dead_lettered_at: DeadLetteredAt
    fail_reason: FailReason
    available_at: str | None
    result: Any
    attempts: list[AttemptPublic] | None = omitted("One scan's view only: its attempt history.")


class ScanPage(BaseModel):
    scans: list[ScanPublic]
    next_cursor: str | None


class AcceptedResult(BaseModel):
    """With 409 `result_conflict`: the result that closed the assignment, which stands."""

    outcome: Outcome
    status: str = Field(description="Where the accepted result sent the scan.")
    fail_reason: str | None
    accepted_at: str


class ItemStatus(BaseModel):
    scan_id: int
    status: int
    error: str | None = omitted()
    detail: Any = omitted()
    accepted: AcceptedResult | None = omitted("Only with 409 `result_conflict`.")
    scan: ResultPublic | None = omitted("Only with 200: the closed scan.")


class BatchStatuses(BaseModel):
    results: list[ItemStatus]
    next: list[JobPublic] | None = omitted(
        "With ?next=N only: the jobs leased in the same transaction (complete-and-fetch)."
    )


class LeaseDeadline(BaseModel):
    scan_id: int
    lease_expires_at: str

    @classmethod
    def of(cls, scan_id: int, until: int) -> LeaseDeadline:
        return cls(scan_id=scan_id, lease_expires_at=rfc3339(until))


class ErrorBody(BaseModel):
    error: str
    detail: Any
    accepted: AcceptedResult | None = omitted("Only with 409 `result_conflict`.")


class HealthPublic(BaseModel):
    """A probe's answer."""

    status: Literal["ok", "starting", "ready"]
    version: str | None = omitted("The server's version, once it serves.")
