"""The watcher's observer-health rules, unit-tested by promtool, each with a runbook section."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mainframe.watch.observations import CURRENT, PollClass
from mainframe.watch.retention import TABLES
from mainframe.watch.telemetry import DELIVERY_OUTCOMES, PrometheusTelemetry
from mainframe.watch.windows import Window
from tests.tools import promtool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "watcher_alerts.yml"
ALERTS = 6


def test_watcher_rules_are_valid() -> None:
    stdout = promtool("check", "rules", str(RULES))
    assert f"{ALERTS} rules found" in stdout


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
def test_watcher_rules_fire_and_stay_silent_at_their_boundaries() -> None:
    stdout = promtool("test", "rules", "watcher_alerts_test.yml", cwd=RULES.parent)
    assert "SUCCESS" in stdout


def test_every_watcher_alert_has_a_runbook_section_and_a_test() -> None:
    rules = RULES.read_text()
    tests = (RULES.parent / "watcher_alerts_test.yml").read_text()
    doc = (ROOT / "docs" / "watch.md").read_text().lower()
    names = re.findall(r"- alert: (\w+)", rules)
    anchors = re.findall(r'runbook_url: "docs/watch\.md#([a-z]+)"', rules)
    assert len(names) == len(anchors) == ALERTS
    for name, anchor in zip(names, anchors, strict=True):
        assert anchor == name.lower()
        assert f"### {name.lower()}" in doc, name
        assert f"alertname: {name}" in tests, name


def test_watcher_rules_use_only_series_the_watcher_exports() -> None:
    exported = {
        m.name for m in PrometheusTelemetry(sources=["default"], sinks=["am"]).registry.collect()
    }
    exported |= {f"{name}_total" for name in exported}
    used = set(re.findall(r"\b(mainframe_watch_\w+)", RULES.read_text()))
    assert used, "the rules name no watcher series"
    assert used <= exported, used - exported


def test_telemetry_is_served_primed_on_its_own_port_and_stops() -> None:
    telemetry = PrometheusTelemetry(sources=["eu", "us"], sinks=["am", "hook"])
    server = telemetry.serve("127.0.0.1", 0)
    try:
        telemetry.poll("eu", PollClass.THROTTLED)
        telemetry.window_completed("eu", Window.from_key("2026-09-27T10:14:00Z/60s"))
        # Late and older: the checkpoint never moves back.
        telemetry.window_completed("eu", Window.from_key("2026-09-27T10:12:00Z/60s"))
        telemetry.outbox_oldest_age("eu", 12.5)
        telemetry.incomplete_streak("eu", 2)
        telemetry.delivery("am", "failed")
        telemetry.pruned("polls", 3)
        telemetry.quota_wait("us")
        telemetry.not_before("us", 1_790_000_000_000_000)
        body = httpx.get(f"http://127.0.0.1:{server.port}/metrics").text
    finally:
        server.stop()

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }
    for source in ("eu", "us"):
        for poll_class in CURRENT:
            key = (
                "mainframe_watch_polls_total",
                (("class", poll_class.value), ("source", source)),
            )
            hit = (source, poll_class) == ("eu", PollClass.THROTTLED)
            assert samples[key] == (1.0 if hit else 0.0)
    legacy = ("mainframe_watch_polls_total", (("class", "transport_error"), ("source", "eu")))
    assert legacy not in samples, "a class no poll produces any more is not primed"
    for sink in ("am", "hook"):
        for outcome in DELIVERY_OUTCOMES:
            key = ("mainframe_watch_alert_deliveries_total", (("outcome", outcome), ("sink", sink)))
            assert samples[key] == (1.0 if (sink, outcome) == ("am", "failed") else 0.0)
    for table in TABLES:
        key = ("mainframe_watch_pruned_rows_total", (("table", table),))
        assert samples[key] == (3.0 if table == "polls" else 0.0)
    end = Window.from_key("2026-09-27T10:14:00Z/60s").end_us / 1e6
    eu, us = (("source", "eu"),), (("source", "us"),)
    assert samples[("mainframe_watch_newest_completed_window_timestamp_seconds", eu)] == end
    assert samples[("mainframe_watch_newest_completed_window_timestamp_seconds", us)] == 0
    assert samples[("mainframe_watch_outbox_oldest_age_seconds", eu)] == 12.5
    assert samples[("mainframe_watch_incomplete_windows", eu)] == 2.0
    assert samples[("mainframe_watch_quota_waits_total", us)] == 1.0
    assert samples[("mainframe_watch_quota_waits_total", eu)] == 0.0
    assert samples[("mainframe_watch_not_before_timestamp_seconds", us)] == 1_790_000_000
    assert "packages_" not in body  # its own registry, not Mainframe's
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=1)
