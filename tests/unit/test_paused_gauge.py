"""`mainframe_queue_paused` in one process: set at once from the committed pause or resume
(effects.py), and a reconciliation that read the database before that set leaves it alone
(metrics/reconcile.py), so a queue paused and resumed within one refresh period shows 1, then
0, and never the older of the two."""

from __future__ import annotations

from typing import Any

from mainframe.effects import wire
from mainframe.lifecycle.scans import QueuePaused, QueueResumed
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import apply_paused


class Log:
    """A logger that keeps what it was told, as (event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def gauge(metrics: Metrics, endpoint: str = "pypi", queue: str = "slow") -> float | None:
    return metrics.registry.get_sample_value(
        "mainframe_queue_paused", {"endpoint": endpoint, "queue": queue}
    )


def test_a_pause_and_a_resume_show_at_once_in_the_process_that_made_them() -> None:
    metrics, log = Metrics(), Log()
    publish = wire(metrics, log)
    assert gauge(metrics) is None, "a queue never paused is absent"
    publish([QueuePaused("pypi", "slow", "alice")])
    assert gauge(metrics) == 1
    publish([QueueResumed("pypi", "slow", "alice")])
    assert gauge(metrics) == 0
    assert [event for event, _ in log.lines] == ["queue_paused", "queue_resumed"]


def test_a_reconciliation_read_before_a_local_change_does_not_undo_it() -> None:
    metrics = Metrics()
    read_after = metrics.paused_sets  # a reconciliation starts reading the database
    metrics.set_paused("pypi", "slow", paused=True)  # meanwhile this process pauses
    apply_paused(metrics, {("npm", "fast")}, read_after=read_after)  # what it read: not yet
    assert gauge(metrics) == 1, "the pause committed after the read stands"
    assert gauge(metrics, "npm", "fast") == 1, "another process's pause is reconciled"
    # The next reconciliation reads after the set: the database is the truth again (another
    # process resumed both).
    apply_paused(metrics, set(), read_after=metrics.paused_sets)
    assert (gauge(metrics), gauge(metrics, "npm", "fast")) == (0, 0)
