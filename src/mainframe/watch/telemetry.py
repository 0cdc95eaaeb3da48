"""The watcher's own metrics, on their own registry and their own port, so a scrape of the
watcher never mixes with Mainframe's. Each poll class and delivery outcome is its own
series, primed at zero, so a rate over any of them exists from the first scrape.

Labels are bounded: `source` and `sink` are configured names, `class`, `outcome` and
`table` come from fixed sets. Windows, counts and errors stay in the logs. Every series about
a source carries its name, so a rule says which source a watcher is blind to."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    start_http_server,
)

from mainframe.clock import MICROS
from mainframe.watch.observations import CURRENT, PollClass
from mainframe.watch.retention import TABLES
from mainframe.watch.windows import Window

# What the relay reports per attempt to deliver one alert to one sink: an outbox row
# (delivered | failed) or the periodic re-send of a firing alert (resent | resend_failed).
DELIVERY_OUTCOMES = ("delivered", "failed", "resent", "resend_failed")

# As for Mainframe's own metrics: *_created would double every counter and no rule reads it.
disable_created_metrics()  # type: ignore[no-untyped-call]


class MetricsServer:
    """A running /metrics listener; `stop()` closes its socket and joins its thread."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class PrometheusTelemetry:
    """Telemetry on a private CollectorRegistry (see module doc for the series)."""

    def __init__(
        self,
        *,
        sources: Sequence[str],
        sinks: Sequence[str],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self._polls = Counter(
            "mainframe_watch_polls",
            "Polls of a window's counts, by source and outcome class.",
            ["source", "class"],
            registry=self.registry,
        )
        self._incomplete = Gauge(
            "mainframe_watch_incomplete_windows",
            "Newest closed windows in a row of a source still without a complete observation.",
            ["source"],
            registry=self.registry,
        )
        self._newest = Gauge(
            "mainframe_watch_newest_completed_window_timestamp_seconds",
            "End of a source's newest completed window in the shared checkpoint (0 before the "
            "first).",
            ["source"],
            registry=self.registry,
        )
        self._outbox = Gauge(
            "mainframe_watch_outbox_oldest_age_seconds",
            "Age of a source's oldest undelivered alert in the outbox (0 when there is none).",
            ["source"],
            registry=self.registry,
        )
        self._deliveries = Counter(
            "mainframe_watch_alert_deliveries",
            "Alert deliveries to a sink, by outcome.",
            ["sink", "outcome"],
            registry=self.registry,
        )
        self._pruned = Counter(
            "mainframe_watch_pruned_rows",
            "Rows the watcher forgot past their retention: windows, their polls, delivered "
            "alerts of the outbox.",
            ["table"],
            registry=self.registry,
        )
        self._quota_waits = Counter(
            "mainframe_watch_quota_waits",
            "Polls of a source held back by its shared quota: the rate budget, the concurrency "
            "limit or the not-before time (never a failed poll).",
            ["source"],
            registry=self.registry,
        )
        self._not_before = Gauge(
            "mainframe_watch_not_before_timestamp_seconds",
            "Until when no watcher asks the source anything, after a Retry-After (0: no hold).",
            ["source"],
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._newest_us: dict[str, int] = {}
        for source in sources:
            for poll_class in CURRENT:
                self._polls.labels(source, poll_class.value)
            for gauge in (self._incomplete, self._newest, self._outbox, self._not_before):
                gauge.labels(source)
            self._quota_waits.labels(source)
        for sink in sinks:
            for outcome in DELIVERY_OUTCOMES:
                self._deliveries.labels(sink, outcome)
        for table in TABLES:
            self._pruned.labels(table)

    def poll(self, source: str, poll_class: PollClass) -> None:
        self._polls.labels(source, poll_class.value).inc()

    def window_completed(self, source: str, window: Window) -> None:
        self.checkpoint(source, window.end_us)

    def checkpoint(self, source: str, end_us: int | None) -> None:
        """The source's newest completed window ends at `end_us` (whoever completed it:
        several watchers share the checkpoint). Never moves backwards."""
        # A delayed window completing after a newer one must not make visibility look older.
        with self._lock:
            if end_us is not None and end_us > self._newest_us.get(source, 0):
                self._newest_us[source] = end_us
                self._newest.labels(source).set(end_us / MICROS)

    def incomplete_streak(self, source: str, count: int) -> None:
        self._incomplete.labels(source).set(count)

    def outbox_oldest_age(self, source: str, seconds: float) -> None:
        self._outbox.labels(source).set(max(0.0, seconds))

    def delivery(self, sink: str, outcome: str) -> None:
        self._deliveries.labels(sink, outcome).inc()

    def pruned(self, table: str, count: int) -> None:
        self._pruned.labels(table).inc(count)

    def quota_wait(self, source: str) -> None:
        self._quota_waits.labels(source).inc()

    def not_before(self, source: str, until_us: int) -> None:
        self._not_before.labels(source).set(max(0, until_us) / MICROS)

    def serve(self, host: str, port: int) -> MetricsServer:
        """Serve /metrics on (host, port) in a daemon thread; port 0 picks a free one."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        return MetricsServer(server, thread)
