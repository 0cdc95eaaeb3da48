"""The hook dispatcher's series. Labels are bounded classes: event type, outcome, result
class, reason, cause; never a hook, an endpoint or a URL."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

EVENT_TYPES = ("scan.ready", "scan.dead_lettered")
NOTIFICATION_OUTCOMES = ("delivered", "failed", "dropped", "refused")
ATTEMPT_RESULTS = (
    "2xx",
    "3xx",
    "4xx",
    "5xx",
    "ratelimited",
    "timeout",
    "connect_error",
    "transport_error",
    "refused",
)
DISABLE_REASONS = ("consecutive_failures", "secret_unreadable")
DROP_CAUSES = ("queue_full", "rate_limited", "stopped")


class HookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.notifications = Counter(
            "mainframe_hook_notifications",
            "Hook notifications by event type and how they ended (one per event and hook; "
            "a full queue drops an event before it is matched, counted once).",
            ["type", "outcome"],
            registry=registry,
        )
        self.attempts = Counter(
            "mainframe_hook_attempts",
            "Hook delivery attempts by result class.",
            ["result"],
            registry=registry,
        )
        self.disabled = Counter(
            "mainframe_hooks_disabled",
            "Hooks this process disabled, by reason.",
            ["reason"],
            registry=registry,
        )
        self.dropped = Counter(
            "mainframe_hook_dropped",
            "Notifications dropped undelivered, by cause.",
            ["cause"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "mainframe_hook_queue_depth",
            "Events waiting in this process's in-memory hook queue.",
            registry=registry,
        )
        for kind in EVENT_TYPES:
            for outcome in NOTIFICATION_OUTCOMES:
                self.notifications.labels(kind, outcome)
        for result in ATTEMPT_RESULTS:
            self.attempts.labels(result)
        for reason in DISABLE_REASONS:
            self.disabled.labels(reason)
        for cause in DROP_CAUSES:
            self.dropped.labels(cause)
