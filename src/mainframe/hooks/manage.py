"""Managing hooks, shared by the API and the CLI: check the URL, mint the secret, call the
store. The secret is returned here and never stored in clear; mainframe.shapes.hooks shapes
what an owner sees."""

from __future__ import annotations

from mainframe.hooks import signing
from mainframe.hooks.addresses import AddressPolicy
from mainframe.hooks.targets import url_problem
from mainframe.parsers import parse_cidrs
from mainframe.settings import Settings
from mainframe.store import Hooks, HookView, Invalid, Origin, Rotation


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
