"""The bodies of the dragonfly worker's protocol (docs/dragonfly.md), as Mainframe reads and
answers them under `/dragonfly`. The two result bodies take the bounds and the NUL check of
Mainframe's own models; unlike them they ignore keys they do not know, as dragonfly's server
did. A result's reply is the closed scan of `/api/v1`, `schemas.ResultPublic`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mainframe.contract.schemas import AssignmentId, Attempt, PackageName, PackageVersion

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
