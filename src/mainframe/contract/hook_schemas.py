"""Bodies of the hook routes and of the delivery statistics the watcher reads."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mainframe.contract.limits import MAX_URL_LENGTH
from mainframe.contract.schemas import Label, Strict


class HookCreate(Strict):
    url: Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH)]
    queue: Label | None = Field(default=None, description="Only this queue; null for every one.")
    rate_per_minute: Annotated[int, Field(ge=1, le=6000)] = 120


class HookFields(BaseModel):
    """What every answer about one hook carries."""

    hook_id: int
    endpoint: str
    url: str
    queue: str | None
    rate_per_minute: int
    enabled: bool
    disabled_reason: str | None
    created_at: str


class HookPublic(HookFields):
    consecutive_failures: int
    last_delivery_at: str | None


class HookCreated(HookFields):
    secret: str = Field(description="whsec_…: shown only here and in the rotate reply.")


class HookList(BaseModel):
    hooks: list[HookPublic]


class HookRotated(BaseModel):
    hook_id: int
    secret: str
    previous_valid_until: str


class DeliveryStats(BaseModel):
    start: str
    end: str
    attempts: int
    failures: int
    complete: bool
