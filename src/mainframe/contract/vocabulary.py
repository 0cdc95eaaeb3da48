"""Words of the contract that the store keeps too: where an operator's change came from, what
an audit entry records, and the bounds of an operator's search."""

from __future__ import annotations

from collections.abc import Sequence
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


# A redrive's audit entry names the first this many scans it requeued, in the order it
# requeued them, beside how many it requeued in all: enough to open and check a sample, and
# a row of a few kilobytes however many were requeued (docs/board.md).
REQUEUED_IDS_KEPT = 100


def requeued_detail(ids: Sequence[int], requeued: int) -> dict[str, object]:
    """A redrive's audit detail, one shape whether by ids, by filter or by cause: the first
    REQUEUED_IDS_KEPT ids it requeued (`requeued_ids`) and how many in all (`requeued`)."""
    return {"requeued_ids": list(ids[:REQUEUED_IDS_KEPT]), "requeued": requeued}
