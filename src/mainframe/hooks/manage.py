"""Managing hooks, shared by the API and the CLI: check the URL, mint the secret, call the
store, and shape what an owner sees. The secret is returned here and never stored in clear."""

from __future__ import annotations

from typing import Any

from mainframe.clock import rfc3339
from mainframe.hooks import signing
from mainframe.hooks.addresses import AddressPolicy
from mainframe.hooks.targets import url_problem
from mainframe.parsers import parse_cidrs
from mainframe.settings import Settings
from mainframe.store.audit import Origin
from mainframe.store.errors import Invalid
from mainframe.store.hooks import Hooks, HookView, Rotation


def address_policy(settings: Settings) -> AddressPolicy:
    """The refused ranges less MAINFRAME_HOOKS_ALLOW_CIDRS."""
    return AddressPolicy(parse_cidrs(settings.hooks_allow_cidrs))


def check_url(settings: Settings, url: str) -> None:
    """Invalid("body.url") when the URL could never be delivered to."""
    problem = url_problem(
        url, allow_http=settings.hooks_allow_http, policy=address_policy(settings)
    )
    if problem is not None:
        raise Invalid("body.url", problem)


async def create(
    hooks: Hooks,
    settings: Settings,
    owner_id: int | None,
    endpoint: str,
    *,
    url: str,
    queue: str | None,
    rate_per_minute: int,
    origin: Origin,
) -> tuple[HookView, str]:
    """A new hook and its secret (shown once)."""
    check_url(settings, url)
    secret = signing.new_secret()
    view = await hooks.create(
        owner_id, endpoint, url=url, queue=queue, rate_per_minute=rate_per_minute, secret=secret,
        origin=origin,
    )  # fmt: skip
    return view, secret


async def rotate(
    hooks: Hooks, owner_id: int | None, endpoint: str, hook_id: int, *, origin: Origin
) -> Rotation:
    """A new secret for a hook; the old one keeps signing through the grace period."""
    return await hooks.rotate(
        owner_id, endpoint, hook_id, secret=signing.new_secret(), origin=origin
    )


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
