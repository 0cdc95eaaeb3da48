"""A hook as its owner sees it: listed, just created (with its secret) and rotated."""

from __future__ import annotations

from typing import Any

from mainframe.clock import rfc3339
from mainframe.store.hooks import HookView, Rotation


def public(view: HookView) -> dict[str, Any]:
    """A hook as the listing shows it."""
    return {
        "hook_id": view.hook_id,
        "endpoint": view.endpoint,
        "url": view.url,
        "queue": view.queue,
        "rate_per_minute": view.rate_per_minute,
        "enabled": view.enabled,
        "disabled_reason": view.disabled_reason,
        "created_at": rfc3339(view.created_at),
        "consecutive_failures": view.consecutive_failures,
        "last_delivery_at": rfc3339(view.last_delivery_at),
    }


def created(view: HookView, secret: str) -> dict[str, Any]:
    """The creation reply: the listing's fields less the failure bookkeeping, plus the secret."""
    shown = public(view)
    del shown["consecutive_failures"], shown["last_delivery_at"]
    return {**shown, "secret": secret}


def rotation(done: Rotation) -> dict[str, Any]:
    return {
        "hook_id": done.hook_id,
        "secret": done.secret,
        "previous_valid_until": rfc3339(done.previous_valid_until),
    }
