"""The outbox relay: delivers alert state changes to every sink and marks them delivered, and
re-sends alerts that are still firing (Alertmanager forgets a firing alert that is not re-sent
within its resolve_timeout). Delivery is at least once; sinks deduplicate by the message's
labels or idempotency key, so a repeat after a crash is harmless."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mainframe.clock import MICROS, Clock, to_us
from mainframe.watch.outbox import OutboxItem, Resend
from mainframe.watch.ports import DEFAULT_SOURCE, DeliveryError, NoTelemetry, Sink, Telemetry
from mainframe.watch.state import WatchStore

# How long a claimed batch is this relay's before another may retry it; longer than a pass
# over one batch with every sink at its HTTP timeout is expected to take.
CLAIM_SECONDS = 300.0
# Outbox rows claimed per pass.
BATCH_SIZE = 100


class Relay:
    """Drains the outbox into the sinks of each row's source. A row is delivered once every
    one of them accepted it; a sink that refuses keeps the row (and later changes of the
    same alert) for the next pass."""

    def __init__(
        self,
        store: WatchStore,
        sinks: Sequence[Sink],
        *,
        clock: Clock,
        resend_interval_s: float,
        telemetry: Telemetry = NoTelemetry(),
        claim_s: float = CLAIM_SECONDS,
        batch_size: int = BATCH_SIZE,
        routes: Mapping[str, Sequence[Sink]] | None = None,
        sources: Sequence[str] = (DEFAULT_SOURCE,),
    ) -> None:
        for routed in [sinks, *(routes or {}).values()]:
            names = [sink.name for sink in routed]
            if len(set(names)) != len(names):
                raise ValueError(f"sink names must be unique: {names}")
        self.store = store
        # `sinks` serve every source without a route of its own (and the alerts of a source
        # no longer configured, so they still reach someone).
        self.sinks = list(sinks)
        self.routes = {source: list(routed) for source, routed in (routes or {}).items()}
        self.sources = list(sources)
        self.clock = clock
        self.resend_interval_us = to_us(resend_interval_s)  # 0 or less: never re-send
        self.telemetry = telemetry
        self.claim_us = to_us(claim_s)
        self.batch_size = batch_size

    def sinks_of(self, source: str) -> list[Sink]:
        return self.routes.get(source, self.sinks)

    def run_once(self) -> int:
        """One pass: deliver claimed outbox rows, re-send due firing alerts. Returns how many
        outbox rows every sink accepted (re-sends are not counted)."""
        now = self.clock.now_us()
        items = self.store.claim_outbox(now_us=now, claim_us=self.claim_us, limit=self.batch_size)
        delivered = self._deliver(items)
        if self.resend_interval_us > 0:
            due = self.store.claim_resends(now_us=now, interval_us=self.resend_interval_us)
            self._resend(due, claimed_us=now)
        for source in self.sources:
            oldest = self.store.oldest_undelivered_us(source)
            age = 0.0 if oldest is None else max(0, self.clock.now_us() - oldest) / MICROS
            self.telemetry.outbox_oldest_age(source, age)
        return delivered

    def _deliver(self, items: Sequence[OutboxItem]) -> int:
        # (sink, source, alert) that refused a row this pass: a later change of the same
        # alert must not overtake it (a "resolved" arriving before its "firing").
        blocked: set[tuple[str, str, str]] = set()
        delivered = 0
        for item in items:
            error: str | None = None
            pending = False
            alert = (item.message.source, item.message.alert)
            for sink in self.sinks_of(item.message.source):
                if sink.name in item.accepted:
                    continue
                if (sink.name, *alert) in blocked:
                    pending = True
                    continue
                try:
                    sink.deliver(item.message)
                except DeliveryError as exc:
                    self.telemetry.delivery(sink.name, "failed")
                    blocked.add((sink.name, *alert))
                    error, pending = f"{sink.name}: {exc}", True
                    continue
                self.telemetry.delivery(sink.name, "delivered")
                self.store.accept(item.id, sink=sink.name, now_us=self.clock.now_us())
            if pending:
                self.store.mark_failed(item.id, error=error)
            else:
                self.store.mark_delivered(item.id, now_us=self.clock.now_us())
                delivered += 1
        return delivered

    def _resend(self, resends: Sequence[Resend], *, claimed_us: int) -> None:
        for resend in resends:
            accepted = True
            for sink in self.sinks_of(resend.message.source):
                try:
                    sink.deliver(resend.message)
                except DeliveryError:
                    self.telemetry.delivery(sink.name, "resend_failed")
                    accepted = False
                    continue
                self.telemetry.delivery(sink.name, "resent")
            if not accepted:
                self.store.release_resend(
                    resend.message.source,
                    resend.message.alert,
                    claimed_us=claimed_us,
                    previous_us=resend.previous_us,
                )
