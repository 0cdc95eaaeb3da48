"""Hooks: announce scan.ready and scan.dead_lettered to the matching hooks of an endpoint.
`build_dispatcher` is the entry point; the Dispatcher it returns is what effects.wire feeds."""

from __future__ import annotations

from typing import Any

import httpcore

from mainframe.clock import Clock
from mainframe.hooks.dispatcher import DeliveryConfig, Dispatcher, HookBook
from mainframe.hooks.manage import address_policy
from mainframe.hooks.transport import PinnedTransport, Resolver, trust_store
from mainframe.logs import get_logger
from mainframe.metrics.hooks import HookMetrics
from mainframe.parsers import parse_backoff
from mainframe.settings import Settings

__all__ = [
    "DeliveryConfig",
    "Dispatcher",
    "address_policy",
    "build_dispatcher",
    "log_hook_settings",
]


def build_dispatcher(
    settings: Settings,
    book: HookBook,
    *,
    metrics: HookMetrics,
    clock: Clock,
    log: Any = None,
    resolver: Resolver | None = None,
    network: httpcore.AsyncNetworkBackend | None = None,
) -> Dispatcher:
    """The server's dispatcher; tests inject a resolver and a network backend."""
    addresses = address_policy(settings)
    context = trust_store()

    def transport() -> PinnedTransport:
        return PinnedTransport(
            policy=addresses, resolver=resolver, ssl_context=context, network=network
        )

    config = DeliveryConfig(
        enabled=settings.notify_hooks_enabled,
        backoff=parse_backoff(settings.hooks_backoff_seconds),
        queue_size=settings.hooks_queue_size,
    )
    return Dispatcher(
        book, transport=transport, metrics=metrics, clock=clock, config=config, log=log
    )


def log_hook_settings(settings: Settings, *, keyed: bool, log: Any = None) -> None:
    """Say at start-up what the hooks will do, loudly when an address range is exempt."""
    logger = log or get_logger()
    if not keyed:
        logger.warning("hooks_unavailable", reason="no MAINFRAME_SECRET_KEY to open hook secrets")
    if not settings.notify_hooks_enabled:
        logger.warning("hooks_disabled", setting="MAINFRAME_NOTIFY_HOOKS_ENABLED=false")
    if settings.hooks_allow_cidrs.strip():
        logger.warning("hooks_allow_cidrs", exempt=settings.hooks_allow_cidrs)
    if settings.hooks_allow_http:
        logger.warning("hooks_allow_http", setting="MAINFRAME_HOOKS_ALLOW_HTTP=true")
