"""The shipped Prometheus rules, unit-tested by promtool; the Grafana dashboard parses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mainframe.lifecycle.quiet import QUIET_AFTER_SECONDS
from mainframe.metrics import Metrics
from mainframe.settings import Settings
from tests.tools import promtool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_alert_rules_are_valid() -> None:
    stdout = promtool("check", "rules", str(DEPLOY / "prometheus" / "alerts.yml"))
    assert "5 rules found" in stdout


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
def test_alert_rules_fire_and_stay_silent_as_specified() -> None:
    stdout = promtool("test", "rules", "alerts_test.yml", cwd=DEPLOY / "prometheus")
    assert "SUCCESS" in stdout


def test_every_alert_has_a_runbook_section() -> None:
    rules = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    runbook = (DEPLOY.parent / "docs" / "runbook.md").read_text().lower()
    anchors = [
        line.split("#", 1)[1].strip().strip('"')
        for line in rules.splitlines()
        if "runbook_url" in line
    ]
    assert len(anchors) == 5
    for anchor in anchors:
        assert f"## {anchor}" in runbook, anchor


def test_the_quiet_source_rule_and_the_boards_mark_share_one_threshold() -> None:
    """The number docs/observability.md says to edit is the one the rule compares with, the
    default of MAINFRAME_QUIET_SOURCE_SECONDS, over a gauge the server exports."""
    rules = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    rule = rules.split("- alert: MainframeSourceQuiet", 1)[1]
    expr = re.search(r"expr: (.*)", rule)
    assert expr is not None
    threshold = re.fullmatch(r"time\(\) - max by \(endpoint, source\) \((\w+)\) > (\d+)", expr[1])
    assert threshold is not None, expr[1]
    assert float(threshold[2]) == QUIET_AFTER_SECONDS == Settings().quiet_source_seconds
    exported = {family.name for family in Metrics().registry.collect()}
    assert threshold[1] in exported
    assert re.search(r"^\s+for: \d+m$", rule, re.M), "a for: keeps a blip from paging"


def test_grafana_dashboard_is_valid_json_over_our_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "mainframe.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    joined = " ".join(exprs)
    for metric in (
        "packages_queue",
        "packages_scan_outcomes",
        "packages_dead_lettered_total",
        "performance_snapshot_timestamp_seconds",
    ):
        assert metric in joined, metric
    assert all(p.get("title") for p in dashboard["panels"])
