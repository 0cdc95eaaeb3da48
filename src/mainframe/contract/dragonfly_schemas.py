"""The bodies of the dragonfly worker's protocol (docs/dragonfly.md), as Mainframe reads and
answers them under `/dragonfly`. The two result bodies take the bounds and the NUL check of
Mainframe's own models; unlike them they ignore keys they do not know, as dragonfly's server
did. A result's reply is the closed scan of `/api/v1`, `schemas.ResultPublic`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from mainframe.contract.limits import MAX_ARTIFACT, MAX_SUMMARY
from mainframe.contract.schemas import (
    AssignmentId,
    Attempt,
    NoNul,
    PackageName,
    PackageVersion,
)

# The worker's score is a Rust i64.
I64 = 2**63


class PackageKeyed(BaseModel):
    """What both result bodies carry: the package, and the assignment a newer worker echoes."""

    model_config = ConfigDict(extra="ignore", strict=True)

    name: PackageName
    version: PackageVersion
    attempt: Attempt | None = None
    assignment_id: AssignmentId | None = None


class PackageSuccess(PackageKeyed):
    score: Annotated[int, Field(ge=-I64, le=I64 - 1)]
    inspector_url: str | None = None
    rules_matched: list[str]
    commit: str


class PackageFailure(PackageKeyed):
    reason: str


class SessionPublic(BaseModel):
    """The handshake's reply: the worker reads the cookie, a person reads this."""

    common_name: str
    exp: int
    expires_at: str


class RulesPublic(BaseModel):
    hash: str
    rules: dict[str, str]


class DragonflyJob(BaseModel):
    """A leased scan as the worker reads it; it ignores `attempt`, `assignment_id`, `scan_id`."""

    name: str
    version: str
    distributions: list[str]
    hash: str
    attempt: int
    assignment_id: str
    scan_id: int


# The loader's and the bot's bodies and replies (docs/dragonfly.md, "The whole deployment").
# Bodies ignore keys they do not know, as dragonfly-mainframe's did.
RuleName = Annotated[str, StringConstraints(min_length=1, max_length=300), NoNul]
Url = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ARTIFACT), NoNul]
# A queued package per loader request at most: a minute of PyPI's updates is far fewer.
MAX_BATCH_PACKAGES = 1000


class PackageSpec(BaseModel):
    """A package to queue: an item of the loader's batch, or the bot's queue command."""

    model_config = ConfigDict(extra="ignore")

    name: PackageName
    version: PackageVersion


class ReportBody(BaseModel):
    """The bot's report of a package: `inspector_url` must be sent, though it may be null."""

    model_config = ConfigDict(extra="ignore")

    name: PackageName
    version: PackageVersion
    inspector_url: Url | None
    additional_information: Annotated[str, StringConstraints(max_length=MAX_SUMMARY), NoNul]


class PackagePublic(BaseModel):
    """A scan as the bot's Package model reads it: every key present, times in Unix seconds."""

    scan_id: str
    name: str
    version: str
    status: str | None
    score: int | None
    inspector_url: str | None
    rules: list[str]
    download_urls: list[str]
    queued_at: int | None
    queued_by: str | None
    reported_at: int | None
    reported_by: str | None
    report_summary: str | None
    pending_at: int | None
    pending_by: str | None
    attempt_count: int
    dead_lettered_at: int | None
    finished_at: int | None
    finished_by: str | None
    commit_hash: str | None


class PackagePage(BaseModel):
    items: list[PackagePublic]
    total: int
    page: int
    size: int
    pages: int


class Queued(BaseModel):
    id: str


class QueueStatusPublic(BaseModel):
    queued: int
    in_progress: int
    retryable: int
    exhausted: int
    stranded: int
    total_backlog: int
    oldest_queued_at: int | None
    oldest_age_seconds: int | None
    sampled_at: int


class AlertingPublic(BaseModel):
    production_score_threshold: int
    updated_at: str | None  # RFC 3339; None while the default was never changed
    updated_by: str | None


class AlertingUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    production_score_threshold: Annotated[int, Field(ge=0, le=I64 - 1)]


class SuppressionRules(BaseModel):
    """A suppression's rules: distinct names, or null for every rule."""

    model_config = ConfigDict(extra="ignore")

    rules: Annotated[list[RuleName], Field(max_length=1000)] | None = None

    @field_validator("rules")
    @classmethod
    def _distinct(cls, rules: list[str] | None) -> list[str] | None:
        if rules is not None and len(rules) != len(set(rules)):
            raise ValueError("rules must not contain duplicates")
        return rules


class SuppressionPublic(BaseModel):
    suppression_id: str
    package_name: str
    package_version: str
    rules: list[str] | None
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str


class Deleted(BaseModel):
    deleted: int
