"""Bodies of the operator's routes: dead letters, redrive, audit, overview, endpoints and
their credentials."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from mainframe.contract.limits import MAX_QUERY_LENGTH, MAX_REDRIVE_IDS
from mainframe.contract.names import Name
from mainframe.contract.schemas import Label, ScanId, ScanPublic, Strict
from mainframe.contract.vocabulary import REQUEUED_IDS_KEPT, Action
from mainframe.lifecycle.rules import DeadLetterReason

# Search terms and names in a query carry no control character: PostgreSQL refuses a NUL.
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
SearchTerm = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_LENGTH, pattern=PRINTABLE)]


class FinalAttemptPublic(BaseModel):
    seq: int | None
    outcome: str | None
    summary: str | None
    artifact: str | None
    worker: str | None
    at: str | None


class CauseNamePublic(BaseModel):
    cause: str = Field(description="The key: `?cause=` of the dead-letter list and redrive.")
    pattern: str = Field(
        description="The failure's meaningful line, varying parts as <n>, <path>, <url>, ..."
    )


class DeadLetterPublic(ScanPublic):
    redriven_at: str | None
    redrive_count: int
    final_attempt: FinalAttemptPublic
    cause: CauseNamePublic | None = Field(
        description="What killed it, as `GET /api/v1/dead-letters/causes` groups dead letters."
    )


# A time as RFC 3339 text with its offset; a bare number (which pydantic would read as Unix
# time) or a time without an offset is refused, as the document says.
RFC3339 = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
Rfc3339 = Annotated[str, Field(pattern=RFC3339, description="RFC 3339 with an offset")]


class DeadLetterPage(BaseModel):
    scans: list[DeadLetterPublic]
    next_cursor: str | None
    count: int = Field(description="Every dead letter the filter matches, across all pages.")


# A cause's key (lifecycle/causes.py): 16 hex digits.
CAUSE_KEY = r"^[0-9a-f]{16}$"
CauseKey = Annotated[str, Field(pattern=CAUSE_KEY, description="A cause's `cause` key.")]


class RedriveFilter(Strict):
    q: SearchTerm | None = None
    endpoint: Annotated[str, Field(max_length=200, pattern=PRINTABLE)] | None = None
    queue: Label | None = None
    cause: CauseKey | None = None
    # Lax for the enum: JSON spells it as a string.
    reason: Annotated[DeadLetterReason, Field(strict=False)] | None = None
    since: Rfc3339 | None = None


class FacetPublic(BaseModel):
    endpoint: str = Field(description="The endpoint whose queue, kind or worker this is.")
    value: str
    dead_letters: int = Field(description="Dead letters of the cause in it now.")


class CausePublic(CauseNamePublic):
    count: int = Field(description="Dead letters of this cause now.")
    first_seen_at: str = Field(description="When the oldest of them was dead-lettered.")
    last_seen_at: str = Field(description="When the newest of them was dead-lettered.")
    example_scan_id: int = Field(description="One of them (the newest on its endpoint).")
    queues: list[FacetPublic]
    kinds: list[FacetPublic]
    workers: list[FacetPublic]
    last_24_hours: list[int] = Field(
        description="Dead letters of this cause per hour, the oldest of the last 24 first."
    )


class CausePage(BaseModel):
    causes: list[CausePublic]
    next_cursor: str | None


class RedriveBody(Strict):
    """Either `scan_ids`, or a `filter` with `confirm`: how many it matched on screen."""

    scan_ids: Annotated[list[ScanId], Field(min_length=1, max_length=MAX_REDRIVE_IDS)] | None = None
    filter: RedriveFilter | None = None
    confirm: Annotated[int, Field(ge=0, le=10**9)] | None = None

    @model_validator(mode="after")
    def one_way(self) -> RedriveBody:
        if (self.scan_ids is None) == (self.filter is None):
            raise ValueError("give either scan_ids or filter (with confirm)")
        if self.filter is not None and self.confirm is None:
            raise ValueError("a filter redrive needs confirm: the count the operator saw")
        if self.scan_ids is not None and self.confirm is not None:
            raise ValueError("confirm goes with a filter, not with scan_ids")
        return self


class SkippedPublic(BaseModel):
    scan_id: int
    reason: str


class RedrivePublic(BaseModel):
    redriven: int
    skipped: list[SkippedPublic]
    audit_id: int | None


# Where an owner's change came from; `unknown` for redrives recorded before origins were.
Origin = Literal["board", "api", "cli", "unknown"]


class AuditPublic(BaseModel):
    """One change an owner made: who, when, what (action and target) and from where."""

    audit_id: int = Field(description="Also the keyset: a page's last one is its next_cursor.")
    at: str = Field(description="When, by the database's clock: RFC 3339, UTC.")
    owner: str = Field(description="Who: the owner the change was made for.")
    action: Action
    target: str = Field(
        description="What the action touched, as one line: the endpoint, the token's id and "
        "name, the hook's id and URL, or how many scans a redrive requeued."
    )
    origin: Origin = Field(
        description="Where the change came from; `unknown` for redrives recorded before "
        "origins were."
    )
    endpoint: str | None = Field(description="The endpoint changed, by name.")
    count: int | None = Field(
        description="Scans requeued by a redrive, or dead-lettered by a revocation."
    )
    scan_ids: list[int] | None = Field(description="A redrive by ids: the ids asked for.")
    filter: dict[str, object] | None = Field(description="A redrive by filter: the filter.")
    detail: dict[str, object] | None = Field(
        description=f"A redrive's `requeued_ids` (the first {REQUEUED_IDS_KEPT} scans it "
        "requeued, in order) "
        "and `requeued` (how many in all), by ids, filter or cause alike; a token's "
        "`token_id`, `name` and `kind`; a hook's `hook_id` and `url`; a new endpoint's "
        "`open_intake`."
    )


class AuditPage(BaseModel):
    """The owner's audit trail newest first; the next page is `?cursor=<next_cursor>`."""

    entries: list[AuditPublic]
    next_cursor: str | None


class HookHealthPublic(BaseModel):
    hook_id: int
    url: str
    queue: str | None
    enabled: bool
    disabled_reason: str | None
    consecutive_failures: int
    last_delivery_at: str | None


class EndpointCardPublic(BaseModel):
    endpoint: str
    open_intake: bool
    revoked_at: str | None
    counts: dict[str, int]
    oldest_queued_at: str | None
    oldest_queued_age_seconds: float | None
    hooks: list[HookHealthPublic]


class OverviewPublic(BaseModel):
    taken_at: str
    endpoints: list[EndpointCardPublic]
    totals: dict[str, int]


class RevokedPublic(BaseModel):
    endpoint: str
    revoked: bool
    dead_lettered: int = Field(description="Live scans dead-lettered by the revocation.")


class EndpointCreate(Strict):
    name: Name
    open_intake: bool = False


class EndpointPublic(BaseModel):
    endpoint: str
    open_intake: bool
    created_at: str
    revoked_at: str | None


class EndpointList(BaseModel):
    endpoints: list[EndpointPublic]


class PausedQueuePublic(BaseModel):
    queue: str
    paused_at: str
    paused_by: str = Field(description="The owner who paused it.")


class EndpointDetail(EndpointPublic):
    paused_queues: list[PausedQueuePublic] = Field(
        description="Queues whose scans are not leased until resumed; intake goes on."
    )


class HourPublic(BaseModel):
    finished: int
    failed: int = Field(description="Failed attempts, a dead letter's last included.")
    lapsed: int = Field(description="Leases and waits that ran out.")


class WorkerPublic(BaseModel):
    worker: str
    token_id: int | None = Field(description="Its credential; null once deleted.")
    last_used_at: str | None = Field(description="The credential's last request, to about 15 s.")
    leases_held: int = Field(description="Scans it holds now (a lapsed lease until reaped).")
    last_hour: HourPublic
    failure_share: float | None = Field(description="Failed and lapsed over what it closed.")
    stands_out: bool = Field(
        description="Its failure share is far above the rest of the endpoint's "
        "(at least twice, and 25 points more, over at least 10 attempts)."
    )


class WorkersPublic(BaseModel):
    endpoint: str
    failure_share: float | None = Field(description="The whole endpoint's, last hour.")
    workers: list[WorkerPublic]


class QueueChangePublic(BaseModel):
    endpoint: str
    queue: str
    paused: bool = Field(description="Whether the queue is paused now.")
    changed: bool = Field(description="False when it already was (or was not) paused.")
    scans: int = Field(
        description="Scans the pause parked, or the resume made due again in their order."
    )


class TokenCreate(Strict):
    """Exactly one of `worker` (a worker that leases scans) or `source` (a producer)."""

    worker: Name | None = None
    source: Name | None = None

    @model_validator(mode="after")
    def one_role(self) -> TokenCreate:
        if (self.worker is None) == (self.source is None):
            raise ValueError("give exactly one of worker or source")
        return self


class TokenPublic(BaseModel):
    token_id: int
    name: str
    kind: str
    created_at: str
    last_used_at: str | None = Field(
        description="The last request that presented it, to about 15 s; null: none yet."
    )


class TokenCreated(TokenPublic):
    secret: str = Field(description="Shown only here; only its digest is stored.")


class TokenList(BaseModel):
    tokens: list[TokenPublic]
