"""The watcher's edges as small interfaces: where counts come from (Source), where alerts go
(Sink), and what the watcher says about itself (Telemetry, with a no-op default)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from mainframe.watch.observations import Observation, PollClass
from mainframe.watch.windows import Window

# What a single `[source]` table is called, and the source of a database from before names.
DEFAULT_SOURCE = "default"


class Source(Protocol):
    name: str  # the configured name: a label value and a key in every watcher table
    requests_per_poll: int  # HTTP requests one fetch sends, each a unit of the quota
    timeout_s: float  # the bound of one request

    def fetch(self, window: Window) -> Observation:
        """One poll of a closed window, classified. Never raises for trouble on the wire:
        that is an Observation of class TIMEOUT or CONNECTION_ERROR."""
        ...


@dataclass(frozen=True, slots=True)
class AlertMessage:
    """One alert state change (or periodic re-send) to deliver to every sink."""

    alert: str  # bounded name: "delivery_failure", "observer_stale_checkpoint", ...
    policy_version: str
    firing: bool
    window_key: str  # the window whose evaluation produced this state
    starts_at_us: int  # when the alert began firing
    ends_at_us: int | None  # set when resolved
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    source: str = DEFAULT_SOURCE  # the configured source the alert is about

    @property
    def idempotency_key(self) -> str:
        state = "firing" if self.firing else "resolved"
        return f"{self.source}/{self.alert}/{self.policy_version}/{self.window_key}/{state}"


class DeliveryError(Exception):
    """A sink did not accept the message; the outbox keeps it for the next relay pass."""


class Sink(Protocol):
    name: str

    def deliver(self, message: AlertMessage) -> None:
        """Deliver or raise DeliveryError. Must be safe to repeat (receivers deduplicate by
        labels or the idempotency key)."""
        ...


class Telemetry(Protocol):
    def poll(self, source: str, poll_class: PollClass) -> None: ...
    def window_completed(self, source: str, window: Window) -> None: ...
    def incomplete_streak(self, source: str, count: int) -> None: ...
    def outbox_oldest_age(self, source: str, seconds: float) -> None: ...
    def delivery(self, sink: str, outcome: str) -> None: ...
    def pruned(self, table: str, count: int) -> None: ...
    def quota_wait(self, source: str) -> None: ...
    def not_before(self, source: str, until_us: int) -> None: ...


class NoTelemetry:
    def poll(self, source: str, poll_class: PollClass) -> None:
        return None

    def window_completed(self, source: str, window: Window) -> None:
        return None

    def incomplete_streak(self, source: str, count: int) -> None:
        return None

    def outbox_oldest_age(self, source: str, seconds: float) -> None:
        return None

    def quota_wait(self, source: str) -> None:
        return None

    def not_before(self, source: str, until_us: int) -> None:
        return None

    def delivery(self, sink: str, outcome: str) -> None:
        return None

    def pruned(self, table: str, count: int) -> None:
        return None
