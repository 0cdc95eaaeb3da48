"""The shipped Prometheus rules, unit-tested by promtool; the Grafana dashboard parses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tools import promtool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_alert_rules_are_valid() -> None:
    stdout = promtool("check", "rules", str(DEPLOY / "prometheus" / "alerts.yml"))
    assert "4 rules found" in stdout


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
    assert len(anchors) == 4
    for anchor in anchors:
        assert f"## {anchor}" in runbook, anchor


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
