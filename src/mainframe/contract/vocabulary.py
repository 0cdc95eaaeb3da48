"""Words of the contract that the store keeps too: where an operator's change came from, what
an audit entry records, and the bounds of an operator's search."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Origin = Literal["board", "api", "cli"]
ORIGINS: tuple[Origin, ...] = ("board", "api", "cli")
BOARD: Origin = "board"
API: Origin = "api"
CLI: Origin = "cli"


class Action(StrEnum):
    """What an audit entry records."""

    REDRIVE = "redrive"
    ENDPOINT_CREATED = "endpoint_created"
    ENDPOINT_REVOKED = "endpoint_revoked"
    TOKEN_CREATED = "token_created"
    TOKEN_DELETED = "token_deleted"
    HOOK_CREATED = "hook_created"
    HOOK_ENABLED = "hook_enabled"
    HOOK_SECRET_ROTATED = "hook_secret_rotated"
    HOOK_DELETED = "hook_deleted"
    SIGNED_IN = "signed_in"
    OWNER_TOKEN_ROTATED = "owner_token_rotated"
    QUEUE_PAUSED = "queue_paused"
    QUEUE_RESUMED = "queue_resumed"
