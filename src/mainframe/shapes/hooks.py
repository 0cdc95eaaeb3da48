"""A hook as its owner sees it: listed, just created (with its secret) and rotated."""

from __future__ import annotations

from typing import Any

from mainframe.clock import rfc3339
from mainframe.contract.hook_schemas import HookCreated, HookFields, HookPublic, HookRotated
from mainframe.store import HookView, Rotation


def public(view: HookView) -> HookPublic:
    """A hook as the listing shows it."""
    return HookPublic(
        **_fields(view),
        consecutive_failures=view.consecutive_failures,
        last_delivery_at=rfc3339(view.last_delivery_at),
    )


def created(view: HookView, secret: str) -> HookCreated:
    """The creation reply: the listing's fields less the failure bookkeeping, plus the secret."""
    return HookCreated(**_fields(view), secret=secret)


def _fields(view: HookView) -> dict[str, Any]:
    """What every answer about one hook carries."""
    fields = HookFields(
        hook_id=view.hook_id,
        endpoint=view.endpoint,
        url=view.url,
        queue=view.queue,
        rate_per_minute=view.rate_per_minute,
        enabled=view.enabled,
        disabled_reason=view.disabled_reason,
        created_at=rfc3339(view.created_at),
    )
    return fields.model_dump()


def rotation(done: Rotation) -> HookRotated:
    return HookRotated(
        hook_id=done.hook_id,
        secret=done.secret,
        previous_valid_until=rfc3339(done.previous_valid_until),
    )
